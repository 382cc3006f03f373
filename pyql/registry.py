"""Look a name up in a registry of named things (profiles, toolsets, relation filters...).

>>> lookup({"sparql": 1, "sql": 2}, "sql", "toolset")
2
>>> lookup({"sparql": 1, "sql": 2}, "cypher", "toolset")
Traceback (most recent call last):
ValueError: unknown toolset 'cypher'; known: sparql, sql
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["lookup"]

T = TypeVar("T")


def lookup(
    registry: Mapping[str, T], name: str, what: str, error: type[Exception] = ValueError
) -> T:
    """``registry[name]``; an unknown name raises ``error`` naming ``what`` and the known names."""
    try:
        return registry[name]
    except KeyError:
        raise error(f"unknown {what} {name!r}; known: {', '.join(sorted(registry))}") from None
