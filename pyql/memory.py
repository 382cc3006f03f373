"""Reasoning memory: a typed, read-only view of a Session's history.

A :class:`Memory` is a frozen value; the Session replaces it after each accepted step and keeps
the old one when a step is rolled back (Algorithm 1, line 15), so guidelines can never change it.
What it remembers of the environment's answers are values of this module too:
:class:`Relations` (what ``get_relation`` listed) and :class:`VariableValues` (the values a step
showed).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyql.program import Call

__all__ = ["History", "Memory", "Relations", "VariableValues"]


def _as_tuple(value: Any, owner: object, name: str) -> None:
    """Store a sequence field as a tuple (values are frozen: a list given stays unshared)."""
    if type(value) is not tuple:
        object.__setattr__(owner, name, tuple(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class Relations:
    """The one-hop relations of a node, both directions (short names)."""

    forward: tuple[str, ...] = ()
    backward: tuple[str, ...] = ()
    #: ``(name, label)`` of relations whose names are opaque ids (Wikidata: ``("P161", "cast
    #: member")``), as a model is shown them (:meth:`shown`)
    labels: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        _as_tuple(self.forward, self, "forward")
        _as_tuple(self.backward, self, "backward")
        _as_tuple(self.labels, self, "labels")

    def shown(self, name: str) -> str:
        """``name`` as a model reads it: ``P161 (cast member)`` when it has a label, else as is.

        >>> Relations(forward=("P161",), labels=(("P161", "cast member"),)).shown("P161")
        'P161 (cast member)'
        """
        for known, label in self.labels:
            if known == name:
                return f"{name} ({label})"
        return name

    @property
    def all(self) -> tuple[str, ...]:
        return self.forward + tuple(r for r in self.backward if r not in self.forward)

    def __len__(self) -> int:
        return len(self.forward) + len(self.backward)

    def __contains__(self, relation: object) -> bool:
        return relation in self.forward or relation in self.backward


@dataclass(frozen=True, slots=True, kw_only=True)
class VariableValues:
    """Shown values of one variable (labels, bounded) and the total number of distinct values."""

    values: tuple[str, ...] = ()
    total: int = 0
    #: some values are compound nodes without a name (Freebase CVT / blank nodes)
    unnamed: int = 0

    def __post_init__(self) -> None:
        _as_tuple(self.values, self, "values")

    @property
    def all_unnamed(self) -> bool:
        return self.total > 0 and self.unnamed == self.total


class History(Sequence["Call"]):
    """The accepted calls of a session, oldest first: an immutable sequence whose
    :meth:`append` shares everything before the new call (a persistent list). Every step's
    :class:`Memory` keeps its own history, and each observation keeps the memory of its step:
    with shared histories that is one cell a step, not a copy of all calls so far (which grew
    with the square of the calls). It compares equal to a tuple or list of the same calls.

    >>> h = History(["a", "b"]).append("c")
    >>> len(h), h[-1], list(h), h == ("a", "b", "c"), list(reversed(h))[:1]
    (3, 'c', ['a', 'b', 'c'], True, ['c'])
    """

    __slots__ = ("_before", "_last", "_len")

    def __init__(self, items: Iterable[Call] = ()) -> None:
        self._before: History | None = None
        self._last: Any = None
        self._len = 0
        items = list(items)
        if items:
            before = History()
            for item in items[:-1]:
                before = before.append(item)
            self._before, self._last, self._len = before, items[-1], len(items)

    def append(self, call: Call) -> History:
        """This history and ``call``, sharing this one."""
        new = History.__new__(History)
        new._before, new._last, new._len = self, call, self._len + 1
        return new

    def extend(self, calls: Iterable[Call]) -> History:
        out = self
        for call in calls:
            out = out.append(call)
        return out

    def __len__(self) -> int:
        return self._len

    def __reversed__(self) -> Iterator[Call]:
        node: History | None = self
        while node is not None and node._len:
            yield node._last
            node = node._before

    def __iter__(self) -> Iterator[Call]:
        return iter(self._tuple())

    def _tuple(self) -> tuple[Call, ...]:
        out = list(reversed(self))
        out.reverse()
        return tuple(out)

    def __getitem__(self, index):  # type: ignore[no-untyped-def, override]
        if isinstance(index, int) and (index == -1 or index == self._len - 1) and self._len:
            return self._last
        return self._tuple()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (History, tuple, list)):
            return len(self) == len(other) and self._tuple() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        return f"History({list(self._tuple())!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # flat, not one nested object a call
        return (History, (self._tuple(),))


def _frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Memory:
    """What happened so far in a Session."""

    #: accepted calls, in order (a :class:`History`: steps share it)
    calls: History = field(default_factory=History)
    #: variables of the current query (``?x`` form), in order of appearance
    variables: tuple[str, ...] = ()
    #: variables that have values (occur in a triple/type pattern)
    bound_variables: tuple[str, ...] = ()
    #: node (short form: ``m.0x`` or ``?x``) -> its relations, for every get_relation done
    relations: Mapping[str, Relations] = field(default_factory=_frozen)
    #: linked entities of the question: mention -> KB id
    entities: Mapping[str, str] = field(default_factory=_frozen)
    #: values per variable of the last non-empty query result
    last_values: Mapping[str, VariableValues] = field(default_factory=_frozen)
    #: the answer variable (``?x``) if set_answer was called
    answer: str | None = None
    #: the SQL tables/columns known to the session (empty for KBs)
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if type(self.calls) is not History:
            object.__setattr__(self, "calls", History(self.calls))

    def called(self, function: str) -> bool:
        return any(c.name == function for c in self.calls)

    @property
    def fetched_nodes(self) -> tuple[str, ...]:
        return tuple(self.relations)

    def relations_of(self, node: str) -> Relations | None:
        return self.relations.get(node)

    def known_relations(self) -> frozenset[str]:
        """Every relation listed by any get_relation so far."""
        out: set[str] = set()
        for rels in self.relations.values():
            out.update(rels.forward)
            out.update(rels.backward)
        return frozenset(out)

    def nodes_listing(self, relation: str) -> tuple[str, ...]:
        """Nodes whose fetched relation lists contain ``relation``."""
        return tuple(n for n, rels in self.relations.items() if relation in rels)

    def with_(self, **changes: Any) -> Memory:
        """A copy with ``changes`` (the memory is frozen; this is how a step updates it)."""
        if not _FIELDS.issuperset(changes):
            unknown = changes.keys() - _FIELDS
            raise TypeError(f"Memory has no field(s) {', '.join(sorted(unknown))}")
        for key in _MAPPINGS.intersection(changes):
            if changes[key] is not getattr(self, key):
                changes[key] = _frozen(changes[key])
        if "calls" in changes and type(changes["calls"]) is not History:
            changes["calls"] = History(changes["calls"])
        new = object.__new__(Memory)
        new.__dict__.update(self.__dict__)  # every field is an immutable value: share them
        new.__dict__.update(changes)
        return new


_FIELDS = frozenset(f.name for f in fields(Memory))
#: the mapping fields, kept read-only (a copy behind a MappingProxyType)
_MAPPINGS = frozenset({"relations", "entities", "last_values"})
