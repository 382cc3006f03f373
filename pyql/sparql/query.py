"""The immutable SPARQL query tree.

Every builder method returns a new :class:`Sparql`; the receiver is never modified, so keeping
the previous value is a complete rollback. Arguments may be terms or text; text is parsed with
:func:`pyql.resolve.parse_term` against the query's profile (and optional entity table).

>>> q = Sparql().add_fact("m.0crbvqz", "meteorology.tropical_cyclone.category", "?c").set_answer("?c")
>>> print(q.to_sparql())
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?c
WHERE {
  ns:m.0crbvqz <http://rdf.freebase.com/ns/meteorology.tropical_cyclone.category> ?c .
  FILTER (!isLiteral(?c) || lang(?c) = "" || langMatches(lang(?c), "en"))
}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Literal as TypingLiteral

from pyql.errors import QueryError, TermError
from pyql.profiles import Profile, get_profile
from pyql.program import COMPARISON_OPS
from pyql.resolve import Context, Slot, parse_term
from pyql.terms import Entity, Literal, Node, Relation, Term, Var

__all__ = [
    "Sparql",
    "Triple",
    "TypeConstraint",
    "Filter",
    "TimeConstraint",
    "Extremum",
    "Aggregate",
]

ExtremumMode = TypingLiteral["ties", "limit"]
#: which variables differ from the linked entities (the original environment's silent filters)
ExcludeTopic = TypingLiteral["off", "answer", "nodes"]
EXCLUDE_TOPIC = ("off", "answer", "nodes")


@dataclass(frozen=True)
class Triple:
    head: Node
    relation: Relation
    tail: Node


@dataclass(frozen=True)
class TypeConstraint:
    var: Var
    type: Relation


@dataclass(frozen=True)
class Filter:
    left: Node
    op: str
    right: Node


@dataclass(frozen=True)
class TimeConstraint:
    """``var`` has a period [start_relation, end_relation] overlapping [window_start, window_end]."""

    var: Var
    start_relation: Relation
    end_relation: Relation
    window_end: Literal
    window_start: Literal


@dataclass(frozen=True)
class Extremum:
    var: Var
    kind: TypingLiteral["max", "min"]


@dataclass(frozen=True)
class Aggregate:
    func: TypingLiteral["count", "sum", "avg"]
    var: Var
    new_var: Var


def _as_var(value: Var | str, ctx: Context, what: str) -> Var:
    if isinstance(value, Var):
        return value
    term = parse_term(value, Slot.VAR, ctx)
    assert isinstance(term, Var)
    return term


@dataclass(frozen=True)
class Sparql:
    """An immutable SPARQL SELECT under construction. See the module docstring."""

    profile: Profile = field(default_factory=lambda: get_profile("freebase"))
    triples: tuple[Triple, ...] = ()
    types: tuple[TypeConstraint, ...] = ()
    filters: tuple[Filter, ...] = ()
    time_constraints: tuple[TimeConstraint, ...] = ()
    extrema: tuple[Extremum, ...] = ()
    aggregate: Aggregate | None = None
    answer: Var | None = None
    #: "ties": argmax/argmin keep every tied solution; "limit": ORDER BY ... LIMIT 1 (paper's)
    extremum_mode: ExtremumMode = "ties"
    #: ``off``; ``answer``: the answer variable is none of the linked entities (the original's
    #: set_answer on Freebase, ag_src/grail_src/wikienv.py:516-522); ``nodes``: no variable is
    #: a linked entity (the original MetaQA walk drops the topic entity at every hop,
    #: ag_src/meta_src/wikienv_meta.py:129). Compiled as ``FILTER (?v != entity)``.
    exclude_topic: ExcludeTopic = "off"
    #: mention -> KB id, used when builder methods get text
    entities: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.profile, str):
            object.__setattr__(self, "profile", get_profile(self.profile))
        if self.extremum_mode not in ("ties", "limit"):
            raise ValueError(f"extremum_mode must be 'ties' or 'limit', not {self.extremum_mode!r}")
        if self.exclude_topic not in EXCLUDE_TOPIC:
            raise ValueError(f"exclude_topic must be one of {', '.join(EXCLUDE_TOPIC)}, not "
                             f"{self.exclude_topic!r}")

    # -- helpers --------------------------------------------------------------------------------
    def _evolve(self, **changes: object) -> Sparql:
        """A copy with ``changes`` (fields only, already valid): what every builder returns.

        ``dataclasses.replace`` would run ``__init__`` and ``__post_init__`` again; a builder
        only ever adds a validated part, and the copy must not inherit the compiled text and
        the other values cached on this tree.
        """
        new = object.__new__(type(self))
        state = new.__dict__
        for name in _FIELDS:
            state[name] = self.__dict__[name]
        state.update(changes)
        return new

    @property
    def context(self) -> Context:
        return Context(self.profile, dict(self.entities))

    @cached_property
    def topic_entities(self) -> tuple[Entity, ...]:
        """The linked entities that are KB entities (not literal values), in table order."""
        profile = self.profile
        out: dict[Entity, None] = {}
        for kb_id in self.entities.values():
            if profile.entity_id_pattern is not None and not profile.is_entity_id(kb_id):
                continue
            try:
                out[profile.entity(kb_id)] = None
            except TermError:  # not an entity of this profile (a value)
                continue
        return tuple(out)

    @property
    def excluded(self) -> tuple[Var, ...]:
        """The variables ``exclude_topic`` keeps apart from :attr:`topic_entities`."""
        if self.exclude_topic == "answer":
            return (self.answer,) if self.answer is not None and self.aggregate is None else ()
        if self.exclude_topic == "nodes":
            bound = self.bound_variables
            return tuple(v for v in self.variables if v in bound)
        return ()

    def _term(self, value: Term | str, slot: Slot) -> Term:
        if isinstance(value, str):
            return parse_term(value, slot, self.context)
        return value

    @cached_property
    def variables(self) -> tuple[Var, ...]:
        """Variables of the query in order of first appearance (aggregate results included)."""
        seen: dict[Var, None] = {}
        for t in self.triples:
            for node in (t.head, t.tail):
                if isinstance(node, Var):
                    seen.setdefault(node, None)
        for tc in self.types:
            seen.setdefault(tc.var, None)
        for f in self.filters:
            for node in (f.left, f.right):
                if isinstance(node, Var):
                    seen.setdefault(node, None)
        if self.aggregate is not None:
            seen.setdefault(self.aggregate.new_var, None)
        return tuple(seen)

    @cached_property
    def bound_variables(self) -> frozenset[Var]:
        """Variables that occur in a triple or type pattern (so have values)."""
        out: set[Var] = set()
        for t in self.triples:
            out.update(n for n in (t.head, t.tail) if isinstance(n, Var))
        out.update(tc.var for tc in self.types)
        return frozenset(out)

    @property
    def is_empty(self) -> bool:
        return not (self.triples or self.types)

    def _require_bound(self, var: Var, function: str) -> None:
        if var not in self.bound_variables and not (
            self.aggregate is not None and var == self.aggregate.new_var
        ):
            existing = ", ".join(str(v) for v in self.variables) or "none yet"
            raise QueryError(
                f"{function}: {var} is not a variable of the query (existing: {existing})",
                code="unknown_variable",
                suggestions=[str(v) for v in self.variables],
            )

    # -- builders -------------------------------------------------------------------------------
    def add_fact(self, head: Node | str, relation: Relation | str, tail: Node | str) -> Sparql:
        """Add the triple pattern (head, relation, tail).

        >>> Sparql().add_fact("m.0x", "people.person.spouse_s", "?y").triples[0].tail
        Var(name='y')
        """
        h = self._term(head, Slot.NODE)
        r = self._term(relation, Slot.RELATION)
        t = self._term(tail, Slot.NODE)
        if not isinstance(r, Relation):
            raise TermError(f"expected a relation, got {relation!r}", text=str(relation))
        return self._evolve(triples=(*self.triples, Triple(h, r, t)))  # type: ignore[arg-type]

    def add_type(self, var: Var | str, type_: Relation | str) -> Sparql:
        """Constrain ``var`` to instances of ``type_`` (``rdf:type`` or the profile's predicate)."""
        v = _as_var(var, self.context, "add_type")
        cls = self._term(type_, Slot.CLASS)
        assert isinstance(cls, Relation)
        return self._evolve(types=(*self.types, TypeConstraint(v, cls)))

    def add_filter(self, left: Node | str, op: str, right: Node | str) -> Sparql:
        """Add ``FILTER(left op right)``; ``op`` is one of ``= != > < >= <=``.

        Coercions (see :mod:`pyql.sparql.compile`): a plain string compares with ``STR()`` of the
        variable (language tags ignored); dates compare as ISO-8601 text at the coarser precision
        of the two sides (so ``"1859"`` is within ``1859-01-01 .. 1859-12-31``); numbers compare
        numerically; entities and variables compare as RDF terms.
        """
        op = "!=" if op.strip() == "<>" else op.strip()
        if op not in COMPARISON_OPS:
            raise QueryError(
                f"add_filter: invalid operator {op!r}; use one of {', '.join(COMPARISON_OPS)}",
                code="invalid_operator",
                suggestions=list(COMPARISON_OPS),
            )
        a = self._term(left, Slot.VALUE)
        b = self._term(right, Slot.VALUE)
        if not isinstance(a, Var) and not isinstance(b, Var):
            raise QueryError("add_filter: at least one side must be a variable", code="no_variable")
        return self._evolve(filters=(*self.filters, Filter(a, op, b)))  # type: ignore[arg-type]

    def add_time_constrain(
        self,
        var: Var | str,
        start_relation: Relation | str,
        end_relation: Relation | str,
        window_end: Literal | str,
        window_start: Literal | str,
    ) -> Sparql:
        """Keep ``var`` whose period overlaps the window (WebQSP gold semantics).

        The period of ``var`` is given by ``start_relation``/``end_relation``; it overlaps when
        (no start, or start <= window_end) and (no end, or end >= window_start). The argument
        order is the original PyQL's: the end of the window comes first.
        """
        v = _as_var(var, self.context, "add_time_constrain")
        sr = self._term(start_relation, Slot.RELATION)
        er = self._term(end_relation, Slot.RELATION)
        we = self._term(window_end, Slot.LITERAL)
        ws = self._term(window_start, Slot.LITERAL)
        assert isinstance(sr, Relation) and isinstance(er, Relation)
        for name, lit in (("window_end", we), ("window_start", ws)):
            if not isinstance(lit, Literal):
                raise TermError(f"add_time_constrain: {name} must be a date literal", text=str(lit))
        tc = TimeConstraint(v, sr, er, we, ws)  # type: ignore[arg-type]
        return self._evolve(time_constraints=(*self.time_constraints, tc))

    def _extremum(self, var: Var | str, kind: TypingLiteral["max", "min"]) -> Sparql:
        v = _as_var(var, self.context, f"add_{kind}")
        self._require_bound(v, f"add_{kind}")
        return self._evolve(extrema=(*self.extrema, Extremum(v, kind)))

    def add_max(self, var: Var | str) -> Sparql:
        """Keep the solutions where ``var`` is largest (all ties, unless extremum_mode='limit')."""
        return self._extremum(var, "max")

    def add_min(self, var: Var | str) -> Sparql:
        """Keep the solutions where ``var`` is smallest (all ties, unless extremum_mode='limit')."""
        return self._extremum(var, "min")

    def _aggregate(self, func: TypingLiteral["count", "sum", "avg"], var: Var | str,
                   new_var: Var | str | None) -> Sparql:
        v = _as_var(var, self.context, f"add_{func}")
        self._require_bound(v, f"add_{func}")
        nv = _as_var(new_var, self.context, f"add_{func}") if new_var is not None else Var(func)
        if nv in self.bound_variables:
            raise QueryError(f"add_{func}: {nv} is already a variable of the query; pick a new name",
                             code="variable_exists")
        if self.aggregate is not None:
            raise QueryError(f"add_{func}: the query already has an aggregate ({self.aggregate.func})",
                             code="aggregate_exists")
        return self._evolve(aggregate=Aggregate(func, v, nv), answer=nv)

    def add_count(self, var: Var | str, new_var: Var | str | None = None) -> Sparql:
        """Count the distinct values of ``var`` into ``new_var`` (default ``?count``); the count
        becomes the answer."""
        return self._aggregate("count", var, new_var)

    def add_sum(self, var: Var | str, new_var: Var | str | None = None) -> Sparql:
        """Sum the values of ``var`` over distinct solutions into ``new_var`` (default ``?sum``)."""
        return self._aggregate("sum", var, new_var)

    def add_avg(self, var: Var | str, new_var: Var | str | None = None) -> Sparql:
        """Average ``var`` over distinct solutions into ``new_var`` (default ``?avg``)."""
        return self._aggregate("avg", var, new_var)

    def set_answer(self, var: Var | str) -> Sparql:
        """Return only ``var`` (an existing variable)."""
        v = _as_var(var, self.context, "set_answer")
        self._require_bound(v, "set_answer")
        return self._evolve(answer=v)

    # -- output ---------------------------------------------------------------------------------
    def to_sparql(self, *, select: tuple[Var, ...] | None = None, limit: int | None = None) -> str:
        """Compile to SPARQL text (a pure function of the tree)."""
        from pyql.sparql.compile import compile_query

        if select is not None or limit is not None:
            return compile_query(self, select=select, limit=limit)
        # the tree is frozen, so its default compilation never changes: compile it once
        cached = self.__dict__.get("_sparql")
        if cached is None:
            cached = compile_query(self)
            object.__setattr__(self, "_sparql", cached)
        return cached

    def __str__(self) -> str:
        return self.to_sparql()


_FIELDS = tuple(f.name for f in fields(Sparql))
