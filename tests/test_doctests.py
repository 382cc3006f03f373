"""Docstring examples of every pyql module run as tests.

Modules are found with :func:`pkgutil.walk_packages` over ``pyql`` and the packages installed
under it from other directories (``pyql.guidelines``, ``pyql.agent``, ``pyql.apps``). A module that cannot be
imported because an optional dependency is missing is skipped, not failed.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import pyql

PACKAGES = ("pyql", "pyql.guidelines", "pyql.agent", "pyql.apps")


def _module_names() -> list[str]:
    names: set[str] = set()
    for package_name in PACKAGES:
        try:
            package = importlib.import_module(package_name)
        except ImportError:
            continue
        names.add(package_name)
        path = getattr(package, "__path__", None) or pyql.__path__
        for info in pkgutil.walk_packages(path, f"{package_name}."):
            names.add(info.name)
    return sorted(names)


MODULES = _module_names()


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # an optional dependency (openai, psycopg, ...) is not installed
        pytest.skip(f"{name} needs an optional dependency: {exc}")


def test_the_core_modules_are_found() -> None:
    for name in (
        "pyql.terms",
        "pyql.syntax",
        "pyql.program",
        "pyql.sparql.query",
        "pyql.sparql.compile",
        "pyql.kb.base",
        "pyql.session",
        "pyql.profiles",
        "pyql.apps.web.workspace",
    ):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = _import(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctests failed in {name}"
