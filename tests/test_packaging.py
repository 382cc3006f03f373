"""The distribution lists every package of the tree (the list in pyproject.toml is explicit:
a package missing from it imports in a checkout but not from a wheel)."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")


def test_every_package_directory_is_listed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    setup = config["tool"]["setuptools"]
    listed = set(setup["packages"])
    found = set()
    for package, directory in setup["package-dir"].items():
        root = REPO / directory
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root)
            found.add(".".join([package, *relative.parts]))
    assert found - listed == set(), "packages missing from pyproject.toml"
    assert listed - found == set(), "listed packages that do not exist"
