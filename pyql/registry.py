"""Look a name up in a registry of named things (profiles, toolsets, strategies, datasets...).

One error for every such lookup, :class:`UnknownNameError`, with the fields ``what`` (the kind of
thing), ``name`` (what was asked for) and ``known`` (the names there are), so callers decide on
fields and every "unknown X" reads the same. A layer that has its own error family subclasses it
(``class UnknownDatasetError(UnknownNameError, DatasetError)``) and passes it as ``error``.

>>> lookup({"sparql": 1, "sql": 2}, "sql", "toolset")
2
>>> lookup({"sparql": 1, "sql": 2}, "cypher", "toolset")
Traceback (most recent call last):
pyql.registry.UnknownNameError: unknown toolset 'cypher'; known: sparql, sql
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from pyql.errors import PyqlError

__all__ = ["UnknownNameError", "lookup"]

T = TypeVar("T")


class UnknownNameError(PyqlError, LookupError, ValueError):
    """A name that is not in its registry: ``what`` kind of thing, the ``name`` asked for and
    the ``known`` names (sorted). A LookupError, and a ValueError for the callers that caught the
    ValueError the hand-written messages raised before."""

    def __init__(self, what: str, name: str, known: Iterable[str]) -> None:
        self.what = what
        self.name = name
        self.known = tuple(sorted(known))
        super().__init__(f"unknown {what} {name!r}; known: {', '.join(self.known) or 'none'}")


def lookup(
    registry: Mapping[str, T], name: str, what: str,
    error: type[UnknownNameError] = UnknownNameError,
) -> T:
    """``registry[name]``; an unknown name raises ``error`` (an :class:`UnknownNameError`)
    naming ``what`` and the known names."""
    try:
        return registry[name]
    except KeyError:
        raise error(what, name, registry) from None
