"""The SPARQL compiler: pure functions from a :class:`~pyql.sparql.query.Sparql` tree to text.

Terms render through :func:`render_term`, which only ever emits a validated IRI in ``<...>``, a
prefixed name whose local part is checked against SPARQL's ``PN_LOCAL`` subset, a variable
whose name is ``\\w+``, or an escaped literal. No user text is concatenated into the query
unescaped.

Comparison coercions used by ``add_filter`` and ``add_time_constrain``:

- **dates** (``xsd:date``, ``xsd:dateTime``, ``xsd:gYear`` ... or a bare ``2015-08-10``): both
  sides compare as ISO-8601 *text* truncated to the shorter of the two, so a value of ``"1859"``
  (year precision) is ``>= "1859-01-01"`` and ``<= "1859-12-31"``. This is what the WebQSP gold
  queries rely on Virtuoso's lenient ``xsd:datetime()`` cast for, done portably.
- **plain strings**: ``STR(?v) op "text"``, so language tags and string datatypes don't matter.
- **numbers**: compared numerically as typed literals (``?v > 10``).
- **entities / variables**: compared as RDF terms (``?x != ns:m.0x``, ``?x != ?y``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyql.terms import BlankNode, Entity, Literal, Relation, RelationPath, Term, Var

if TYPE_CHECKING:
    from pyql.profiles import Profile
    from pyql.sparql.query import Filter, Sparql, TimeConstraint, Triple

__all__ = [
    "CompiledSparql",
    "compile_query",
    "render_term",
    "where_lines",
    "compile_relations",
    "compile_counts",
    "compile_labels",
    "compile_label_lookup",
    "compile_label_scan",
    "compile_entity_scan",
    "prologue",
    "type_path",
]

# A conservative subset of PN_LOCAL: at most one inner dot. Oxigraph (0.5) rejects valid local
# names with two dots (ns:a.bc.d), so relation names like people.person.spouse_s go as full IRIs.
_PN_LOCAL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)?")
_INDENT = "  "
_FORWARD, _BACKWARD = str(Literal("forward")), str(Literal("backward"))


class CompiledSparql(str):
    """SPARQL text this compiler built: a read query (SELECT/ASK) in which every term went
    through :func:`render_term` (validated IRIs, checked names, escaped literals).

    The backends' read-only check (:func:`pyql.kb.base.ensure_read_only`) is for text from
    anywhere else; the compiler vouches for its own output, which ``tests/test_injection.py``
    holds to that check with hostile text in every argument position. Any string operation
    on it gives a plain ``str`` again, checked as usual.
    """

    __slots__ = ()


def _display_prefixes(profile: Profile) -> tuple[str, ...]:
    head = (profile.display_prefix,) if profile.display_prefix is not None else ()
    return head + tuple(p for p in profile.display_prefixes if p != profile.display_prefix)


def render_term(term: Term, profile: Profile) -> str:
    """SPARQL text of ``term``, using the profile's display prefixes where it is safe (the
    longest namespace that holds the IRI: ``wds:`` before ``wd:``); a property path as its
    parts joined (``wdt:P22|wdt:P25``, ``wdt:P131+``)."""
    if isinstance(term, RelationPath):
        if term.op == "|":
            return "|".join(render_term(part, profile) for part in term.parts)
        return f"{render_term(term.parts[0], profile)}{term.op}"
    if isinstance(term, (Entity, Relation)):
        best: tuple[int, str] | None = None
        for prefix in _display_prefixes(profile):
            base = profile.prefixes[prefix]
            if term.iri.startswith(base) and (best is None or len(base) > best[0]):
                local = term.iri[len(base):]
                if _PN_LOCAL.fullmatch(local):
                    best = (len(base), f"{prefix}:{local}")
        if best is not None:
            return best[1]
        return str(term)
    if isinstance(term, (Var, Literal, BlankNode)):
        return str(term)
    raise TypeError(f"not a term: {term!r}")


def prologue(profile: Profile) -> list[str]:
    return [f"PREFIX {prefix}: <{profile.prefixes[prefix]}>" for prefix in _display_prefixes(profile)]


def type_path(profile: Profile) -> str:
    """The predicate (or property path) of class membership: ``ns:type.object.type``, or
    ``wdt:P31/wdt:P279*`` for a profile with a subclass predicate."""
    type_pred = render_term(Relation(profile.type_predicate), profile)
    if profile.subclass_predicate is None:
        return type_pred
    return f"{type_pred}/{render_term(Relation(profile.subclass_predicate), profile)}*"


class _Fresh:
    """Fresh variable names that cannot collide with the query's own."""

    def __init__(self, query: Sparql) -> None:
        self.query = query
        self.taken: set[str] | None = None  # read from the query on the first fresh name
        self.n = 0

    def __call__(self, stem: str) -> Var:
        if self.taken is None:
            self.taken = {v.name for v in self.query.variables}
        while True:
            self.n += 1
            name = f"pyql_{stem}{self.n}"
            if name not in self.taken:
                self.taken.add(name)
                return Var(name)


def _temporal_compare(value: str, op: str, lit: Literal) -> str:
    """Compare ``value`` (an expression) with a date literal at the coarser precision."""
    lex = lit.lexical
    n = len(lex)
    text = f"STR({value})"
    length = f"IF(STRLEN({text}) < {n}, STRLEN({text}), {n})"
    return f"SUBSTR({text}, 1, {length}) {op} SUBSTR({Literal(lex)}, 1, {length})"


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}


def _filter_expr(f: Filter, profile: Profile) -> str:
    left, op, right = f.left, f.op, f.right
    if isinstance(left, Literal) and isinstance(right, Var):
        left, right, op = right, left, _FLIP[op]
    if isinstance(right, Literal) and isinstance(left, Var):
        if right.is_temporal:
            return _temporal_compare(str(left), op, right)
        if right.datatype is None and right.lang is None:
            return f"STR({left}) {op} {right}"
    return f"{render_term(left, profile)} {op} {render_term(right, profile)}"


def _time_lines(tc: TimeConstraint, profile: Profile, fresh: _Fresh) -> list[str]:
    v = str(tc.var)
    out = []
    for rel, op, bound in (
        (tc.start_relation, "<=", tc.window_end),
        (tc.end_relation, ">=", tc.window_start),
    ):
        r = render_term(rel, profile)
        absent, present = fresh("t"), fresh("t")
        out.append(
            f"FILTER (NOT EXISTS {{ {v} {r} {absent} }} || "
            f"EXISTS {{ {v} {r} {present} . FILTER ({_temporal_compare(str(present), op, bound)}) }})"
        )
    return out


def _triple_line(t: Triple, profile: Profile) -> str:
    # A tree shares its parts with the trees built from it: render each triple once per profile
    cached = t.__dict__.get("_line")
    if cached is not None and cached[0] is profile:
        return cached[1]  # type: ignore[no-any-return]
    line = (f"{render_term(t.head, profile)} {render_term(t.relation, profile)} "
            f"{render_term(t.tail, profile)} .")
    object.__setattr__(t, "_line", (profile, line))
    return line


def _filter_line(f: Filter, profile: Profile) -> str:
    cached = f.__dict__.get("_line")  # shared by the trees built from this one, as triples are
    if cached is not None and cached[0] is profile:
        return cached[1]  # type: ignore[no-any-return]
    line = f"FILTER ({_filter_expr(f, profile)})"
    object.__setattr__(f, "_line", (profile, line))
    return line


def _base_lines(query: Sparql, fresh: _Fresh) -> list[str]:
    profile = query.profile
    lines = [_triple_line(t, profile) for t in query.triples]
    if query.types:
        type_pred = type_path(profile)
        lines += [f"{tc.var} {type_pred} {render_term(tc.type, profile)} ." for tc in query.types]
    lines += [_filter_line(f, profile) for f in query.filters]
    for tc in query.time_constraints:
        lines += _time_lines(tc, profile, fresh)
    if query.exclude_topic != "off" and query.topic_entities:
        lines += [f"FILTER ({var} != {render_term(e, profile)})"
                  for var in query.excluded for e in query.topic_entities]
    return lines


def where_lines(query: Sparql, fresh: _Fresh | None = None) -> list[str]:
    """The WHERE-clause lines of ``query`` (without braces), extrema in 'ties' mode included."""
    fresh = fresh or _Fresh(query)
    lines = _base_lines(query, fresh)
    if query.extremum_mode == "ties":
        for ext in query.extrema:
            agg = fresh(ext.kind)
            inner = [_INDENT + line for line in lines]
            lines = [
                *lines,
                f"{{ SELECT ({ext.kind.upper()}({ext.var}) AS {agg}) WHERE {{",
                *inner,
                "} }",
                f"FILTER ({ext.var} = {agg})",
            ]
    return lines


def _body(query: Sparql) -> list[str]:
    """``where_lines(query)``, computed once per (frozen) tree: a Session compiles each new tree
    twice, the bounded observation query and the query text."""
    cached = query.__dict__.get("_where_lines")
    if cached is None:
        cached = tuple(where_lines(query))
        object.__setattr__(query, "_where_lines", cached)
    return list(cached)


def _body_text(query: Sparql) -> list[str]:
    """The WHERE lines of ``query`` indented and joined, computed once per (frozen) tree (the
    observation query and the query text share it); one item, or none for an empty body."""
    cached = query.__dict__.get("_where_text")
    if cached is None:
        cached = "\n".join(_INDENT + x for x in _body(query))
        object.__setattr__(query, "_where_text", cached)
    return [cached] if cached else []


def _lang_filter(var: Var, lang: str) -> str:
    return f'FILTER (!isLiteral({var}) || lang({var}) = "" || langMatches(lang({var}), {Literal(lang)}))'


def compile_query(
    query: Sparql, *, select: tuple[Var, ...] | None = None, limit: int | None = None
) -> CompiledSparql:
    """SPARQL text for ``query``.

    ``select`` overrides the projection (the Session uses it to show every variable); ``limit``
    adds a LIMIT (after the paper-mode ORDER BY ... LIMIT 1, if any, the smaller wins).
    """
    profile = query.profile
    head = prologue(profile)
    tail: list[str] = []

    # extremum_mode="limit": ORDER BY every extremum in turn (argmax of the first, then of the
    # next among its ties ...), keep one solution
    order_by = ""
    if query.extremum_mode == "limit" and query.extrema:
        order_by = "ORDER BY " + " ".join(
            f"{'DESC' if ext.kind == 'max' else 'ASC'}({ext.var})" for ext in query.extrema
        )

    if query.aggregate is not None:
        agg = query.aggregate
        body = _body(query)
        if agg.func == "count" and not order_by:
            projection = f"(COUNT(DISTINCT {agg.var}) AS {agg.new_var})"
            where = body
        else:
            bound = " ".join(str(v) for v in sorted(query.bound_variables, key=lambda v: v.name))
            func = "COUNT(DISTINCT " if agg.func == "count" else f"{agg.func.upper()}("
            projection = f"({func}{agg.var}) AS {agg.new_var})"
            close = f"}} {order_by} LIMIT 1 }}" if order_by else "} }"
            where = [f"{{ SELECT DISTINCT {bound} WHERE {{", *[_INDENT + x for x in body], close]
        lines = [*head, f"SELECT {projection}", "WHERE {", *[_INDENT + x for x in where], "}"]
        if limit is not None:
            lines.append(f"LIMIT {int(limit)}")
        return CompiledSparql("\n".join(lines))

    where = _body_text(query)
    if query.answer is not None and profile.answer_lang:
        # the answer's language restriction holds whatever is projected, so that what a step
        # shows is what execute() returns
        where.append(_INDENT + _lang_filter(query.answer, profile.answer_lang))
    if select is not None:
        variables = select
    elif query.answer is not None:
        variables = (query.answer,)
    else:
        variables = tuple(v for v in query.variables if v in query.bound_variables)
    projection = " ".join(str(v) for v in variables) if variables else "*"

    effective_limit = limit
    if order_by:
        tail.append(order_by)
        effective_limit = 1 if limit is None else min(1, int(limit))
    if effective_limit is not None:
        tail.append(f"LIMIT {int(effective_limit)}")
    lines = [*head, f"SELECT DISTINCT {projection}", "WHERE {", *where, "}", *tail]
    return CompiledSparql("\n".join(lines))


def compile_relations(
    query: Sparql, node: Entity | Var | Literal, direction: str, *, limit: int | None = None
) -> CompiledSparql:
    """``SELECT DISTINCT ?r`` of relations leaving (``forward``) or entering (``backward``) ``node``.

    ``both``: one query for the two directions, ``SELECT DISTINCT ?r ?d`` where ``?d`` is the
    string ``"forward"`` or ``"backward"`` (``limit`` then bounds the two together).
    For a variable, the current query's patterns constrain it (extrema and aggregates are
    ignored: they do not change which relations the variable's values have).
    """
    if direction not in ("forward", "backward", "both"):
        raise ValueError(f"direction must be forward, backward or both, not {direction!r}")
    profile = query.profile
    plain = query
    if query.extrema or query.aggregate or query.answer or query.time_constraints:
        plain = type(query)(profile=profile, triples=query.triples, types=query.types,
                            filters=query.filters, time_constraints=query.time_constraints,
                            exclude_topic=query.exclude_topic, entities=query.entities)
    fresh = _Fresh(plain)
    rel, other = fresh("r"), fresh("o")
    if not isinstance(node, Var):
        body: Sequence[str] = []
    elif plain is query:  # no fresh names inside (no time constraints): the cached lines
        body = _body(query)
    else:
        body = where_lines(plain, fresh)
    n = render_term(node, profile)
    forward, backward = f"{n} {rel} {other} .", f"{other} {rel} {n} ."
    projection = str(rel)
    if direction == "both":
        d = fresh("d")
        projection = f"{rel} {d}"
        pattern = (f"{{ {forward} BIND({_FORWARD} AS {d}) }} UNION "
                   f"{{ {backward} BIND({_BACKWARD} AS {d}) }}")
    else:
        pattern = forward if direction == "forward" else backward
    lines = [*prologue(profile), f"SELECT DISTINCT {projection}", "WHERE {",
             *[_INDENT + x for x in (*body, pattern)], "}"]
    if limit is not None:
        lines.append(f"LIMIT {int(limit)}")
    return CompiledSparql("\n".join(lines))


def compile_counts(query: Sparql, variables: Sequence[Var]) -> CompiledSparql:
    """``SELECT (COUNT(DISTINCT ?v) AS ?pyql_n_v) ...`` over ``query``'s patterns: how many
    distinct values each variable has (the Session's totals when a result was cut at its cap)."""
    counts = " ".join(f"(COUNT(DISTINCT {v}) AS ?pyql_n_{v.name})" for v in variables)
    return CompiledSparql("\n".join([*prologue(query.profile), f"SELECT {counts}", "WHERE {",
                                      *[_INDENT + x for x in where_lines(query)], "}"]))


def _values(var: str, terms: Sequence[str]) -> str:
    return f"VALUES {var} {{ {' '.join(terms)} }}"


def compile_labels(entities: Sequence[Entity], profile: Profile) -> CompiledSparql:
    """``SELECT ?e ?l``: the labels (``profile.label_predicates``) of the given entities, in one
    query. Raises ValueError when there is nothing to ask (no entity or no label predicate)."""
    if not entities or not profile.label_predicates:
        raise ValueError("compile_labels needs entities and a profile with label predicates")
    values = _values("?e", [render_term(e, profile) for e in entities])
    preds = _values("?p", [str(Relation(p)) for p in profile.label_predicates])
    return CompiledSparql("\n".join([*prologue(profile),
                                      f"SELECT ?e ?l WHERE {{ {values} {preds} ?e ?p ?l . }}"]))


def compile_label_lookup(labels: Sequence[str], profile: Profile, *,
                         any_language: bool = False) -> CompiledSparql:
    """``SELECT ?l ?e``: the entities whose label (``profile.label_predicates``) is one of
    ``labels``, in one query (the inverse of :func:`compile_labels`): a plain literal or one in
    the profile's language, read from the index; with ``any_language``, a label in any language
    (a scan of the labels: for embedded stores). ``?l`` is the label as given. Raises
    ValueError when there is nothing to ask."""
    if not labels or not profile.label_predicates:
        raise ValueError("compile_label_lookup needs labels and a profile with label predicates")
    texts = list(dict.fromkeys(labels))
    preds = _values("?p", [str(Relation(p)) for p in profile.label_predicates])
    if any_language:
        values = _values("?l", [str(Literal(text)) for text in texts])
        where = f"{values} {preds} ?e ?p ?label . FILTER(STR(?label) = ?l)"
    else:
        literals = [Literal(text) for text in texts]
        if profile.label_lang:
            literals += [Literal(text, lang=profile.label_lang) for text in texts]
        where = f"{_values('?l', [str(lit) for lit in literals])} {preds} ?e ?p ?l ."
    return CompiledSparql("\n".join([*prologue(profile), f"SELECT ?l ?e WHERE {{ {where} }}"]))


def _page(order: str, limit: int | None, offset: int | None) -> str:
    out = []
    if offset is not None:
        out.append(f"ORDER BY {order}")
    if limit is not None:
        out.append(f"LIMIT {int(limit)}")
    if offset is not None:
        out.append(f"OFFSET {int(offset)}")
    return "".join(" " + part for part in out)


def compile_label_scan(
    profile: Profile, *, limit: int | None = None, offset: int | None = None
) -> CompiledSparql:
    """``SELECT ?e ?l``: every (entity, label) pair of the KB, labels and aliases
    (``profile.alias_predicates``) in the profile's language (or untagged). With ``offset`` the
    rows are ordered (``?e ?l``) so that pages are stable."""
    predicates = profile.label_predicates
    if predicates:
        predicates = (*predicates, *(p for p in profile.alias_predicates if p not in predicates))
    if not predicates:
        raise ValueError(f"profile {profile.name!r} has no label predicates")
    if len(predicates) == 1:
        pattern = f"?e {Relation(predicates[0])} ?l ."
    else:
        pattern = _values("?p", [str(Relation(p)) for p in predicates]) + " ?e ?p ?l ."
    condition = "isIRI(?e) && isLiteral(?l)"
    if profile.label_lang:
        condition += (f' && (lang(?l) = "" || langMatches(lang(?l), '
                      f"{Literal(profile.label_lang)}))")
    return CompiledSparql(f"SELECT ?e ?l WHERE {{ {pattern} FILTER({condition}) }}"
                          + _page("?e ?l", limit, offset))


def compile_entity_scan(
    profile: Profile, *, limit: int | None = None, offset: int | None = None
) -> CompiledSparql:
    """``SELECT DISTINCT ?e``: every IRI under the profile's entity base that is a subject or
    an object (for profiles whose entity id is its label)."""
    base = Literal(str(profile.entity_base))
    return CompiledSparql("SELECT DISTINCT ?e WHERE { { ?e ?p ?o } UNION { ?s ?p ?e } "
                          f"FILTER(isIRI(?e) && STRSTARTS(STR(?e), {base})) }}"
                          + _page("?e", limit, offset))
