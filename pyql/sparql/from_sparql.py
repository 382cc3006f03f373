"""Gold SPARQL -> PyQL: rewrite a SPARQL query (a WebQSP, CWQ or GrailQA gold query) as the calls
an agent would make.

The SPARQL twin of :mod:`pyql.sql.from_sql`. :func:`from_sparql` parses the query with rdflib's
SPARQL parser, translates it to rdflib's SPARQL algebra and walks the algebra. Where the PyQL tool
set (:data:`pyql.program.SPARQL_TOOLS`) can express the query it returns the
:class:`~pyql.program.Program` that builds it: ``add_fact`` per triple (in an order that starts
from the query's constants and grows along shared variables), ``add_type`` per
``type.object.type`` triple on a variable, ``add_filter`` per comparison, ``add_time_constrain``
per WebQSP time window, ``add_max``/``add_min`` for a superlative, ``set_answer``, ``add_count``
for a count, and ``execute()``. Otherwise it raises :class:`UnsupportedQuery`, whose
``construct`` is a stable code of :data:`CONSTRUCTS`.

How the gold queries' constructs map:

- the gold queries are written for Virtuoso: ``OR``/``AND`` as operators, ``xsd:`` used without
  a ``PREFIX`` and Virtuoso's ``xsd:datetime(...)`` cast. :func:`standardize` rewrites exactly
  these tokens (outside strings, IRIs and comments) before parsing; nothing else is touched;
- ``FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))`` on the answer:
  dropped, since the Freebase profile's compiler adds the same filter to every answer;
- ``FILTER(NOT EXISTS {?y R ?a} || EXISTS {?y R ?b . FILTER(?b <= D)})`` and its ``>=`` twin
  on the end relation: one ``add_time_constrain(?y, R_start, R_end, D_end, D_start)``;
- ``VALUES ?v { ns:m.x }`` (one value): ``?v`` is replaced by the value everywhere;
- casts (``xsd:dateTime(?v)``, ``xsd:integer(?v)``, ``xsd:float(?v)`` ...) and ``str(?v)`` on the
  variable side of a comparison: the comparison on ``?v`` itself (``add_filter`` compares dates
  as dates, numbers as numbers and plain strings with ``STR``); a comparison of two constants
  (GrailQA's ``?x2 != ?x3`` once both are ``VALUES`` entities) is decided here: true is dropped;
- ``ORDER BY [DESC](?v) LIMIT 1``: ``add_max(?v)`` / ``add_min(?v)`` (which keeps every tie
  where the gold query keeps one of them: equal on a KB without ties); GrailQA's
  ``{ SELECT (MAX(?y2) AS ?x2) WHERE { P' } }`` where ``P'`` is the outer pattern with ``?x``
  renamed ``?y``: ``add_max(?x2)``; ``ORDER BY`` without ``LIMIT`` orders a set: ignored;
- ``SELECT (COUNT(?x) AS ?n) WHERE { SELECT DISTINCT ?x ... }`` (or ``COUNT(DISTINCT ?x)``):
  ``add_count(?x, ?n)``; GrailQA's ``SELECT (?x0 AS ?value) { SELECT DISTINCT ?x0 ... }``:
  the answer ``?x0``.

>>> p = from_sparql('''PREFIX ns: <http://rdf.freebase.com/ns/>
... SELECT DISTINCT ?x WHERE {
... FILTER (?x != ns:m.03_r3)
... FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))
... ns:m.03_r3 ns:location.country.languages_spoken ?x .
... }''')
>>> print(p)
add_fact(m.03_r3, location.country.languages_spoken, ?x)
add_filter(?x, !=, m.03_r3)
set_answer(?x)
execute()
>>> from_sparql("PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?x WHERE { { ?x ns:a.b ns:m.1 } "
...             "UNION { ?x ns:a.c ns:m.1 } }")
Traceback (most recent call last):
...
pyql.sparql.from_sparql.UnsupportedQuery: unsupported SPARQL construct 'union': UNION of graph patterns
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyql.errors import InputError, PyqlError
from pyql.logs import rerouted
from pyql.profiles import Profile, get_profile
from pyql.program import Call, Program

__all__ = [
    "from_sparql",
    "read_query",
    "to_program",
    "standardize",
    "parse_algebra",
    "Parsed",
    "Body",
    "Cmp",
    "TimeHalf",
    "Superlative",
    "UnsupportedQuery",
    "CONSTRUCTS",
    "type_path_of",
    "simple_path_of",
    "is_type_triple",
]

#: the constructs that stand in the way of a conversion, by stable code
CONSTRUCTS: dict[str, str] = {
    "unparseable": "text rdflib's SPARQL parser rejects",
    "not_select": "a query that is not a SELECT (ASK, CONSTRUCT, DESCRIBE)",
    "projection": "more than one selected variable, or a selected expression",
    "union": "UNION of graph patterns",
    "optional": "OPTIONAL",
    "minus": "MINUS",
    "bind": "BIND or an expression in SELECT other than a renamed answer or a count",
    "graph": "GRAPH / SERVICE",
    "subquery": "a sub-select other than GrailQA's answer wrapper and superlative",
    "values": "VALUES with more than one row or variable",
    "aggregate": "an aggregate other than a count of the answer or a superlative sub-select",
    "group_by": "GROUP BY / HAVING",
    "order": "ORDER BY with more than one key or on an expression",
    "limit": "LIMIT other than ORDER BY ... LIMIT 1, or OFFSET",
    "variable_predicate": "a variable in the predicate position",
    "property_path": "a property path other than the profile's class membership (Wikidata's "
                     "wdt:P31/wdt:P279* from a variable to a class), alternatives of relations "
                     "(P22|P25) or a closure of one (P131+, P279*)",
    "or": "a disjunction other than the answer-language and time-window filters",
    "not_exists": "EXISTS / NOT EXISTS other than a time window",
    "time_half": "one side of a time window without the other",
    "filter_expression": "a filter on an expression (arithmetic, a function) or IN",
    "lang_filter": "a language filter on a variable that is not the answer",
    "constant_filter": "a comparison of two constants that is not true",
    "extremum_subquery": "a MAX/MIN sub-select whose pattern is not the outer one",
    "builder": "the query builder refused the converted program",
}

_FB = "http://rdf.freebase.com/ns/"
_XSD = "http://www.w3.org/2001/XMLSchema#"
_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
#: casts that keep the order and equality of the values they wrap (on well-typed data)
_CASTS = frozenset(_XSD + t for t in (
    "dateTime", "date", "integer", "int", "float", "double", "decimal", "gYear", "string",
))
_OPS = ("=", "!=", "<", ">", "<=", ">=")
_FLIP = {"=": "=", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}

log = logging.getLogger(__name__)


class UnsupportedQuery(InputError):
    """The query uses a construct the PyQL tool set cannot express.

    ``construct`` is a code of :data:`CONSTRUCTS`; ``detail`` says where.
    """

    def __init__(self, construct: str, detail: str = "") -> None:
        self.construct = construct
        self.detail = detail
        text = f"unsupported SPARQL construct {construct!r}: {CONSTRUCTS.get(construct, construct)}"
        super().__init__(text + (f" ({detail})" if detail else ""))


# -- the Virtuoso dialect ----------------------------------------------------------------------
_TOKENS = re.compile(
    r'''("""(?:[^"\\]|\\.|"(?!""))*"""|'\'\'(?:[^'\\]|\\.|'(?!''))*\'\'\''''
    r'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|<[^<>"{}|^`\\\s]*>|#[^\n]*'''
    r'''|\b(?:OR|AND)\b|\bxsd:datetime\b)'''
)
_WORDS = {"OR": "||", "AND": "&&", "xsd:datetime": "xsd:dateTime"}
_STANDARD_PREFIXES = (("xsd", _XSD), ("rdf", _RDF), ("rdfs", _RDFS))


def standardize(text: str) -> str:
    """Rewrite the Virtuoso-isms of the gold queries as standard SPARQL 1.1.

    ``OR``/``AND`` become ``||``/``&&``, Virtuoso's ``xsd:datetime`` cast becomes
    ``xsd:dateTime``, and the ``xsd:``/``rdf:``/``rdfs:`` prefixes are declared when used
    undeclared. Strings, IRIs and comments are left alone.

    >>> print(standardize("SELECT ?x WHERE { FILTER(?x = 'OR' OR xsd:datetime(?x) > 1) }"))
    PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
    SELECT ?x WHERE { FILTER(?x = 'OR' || xsd:dateTime(?x) > 1) }
    """
    out = _TOKENS.sub(lambda m: _WORDS.get(m.group(0), m.group(0)), text)
    code = _TOKENS.sub(lambda m: " " if m.group(0)[0] in "\"'<#" else m.group(0), out)
    declared = {m.group(1) for m in re.finditer(r"(?i)\bPREFIX\s+(\w*)\s*:", code)}
    for prefix, iri in reversed(_STANDARD_PREFIXES):
        if prefix not in declared and re.search(rf"(?<![\w:]){prefix}:", code):
            out = f"PREFIX {prefix}: <{iri}>\n{out}"
    return out


def parse_algebra(text: str) -> Any:
    """rdflib's algebra of the (standardized) query; raises :class:`UnsupportedQuery`
    (``unparseable``) when the parser rejects it."""
    try:
        from pyparsing import ParseException
        from rdflib.plugins.sparql.algebra import translateQuery
        from rdflib.plugins.sparql.parser import parseQuery
    except ModuleNotFoundError as exc:  # rdflib is the optional extra "fidelity"
        raise ModuleNotFoundError(
            f"{exc.name} is needed to read SPARQL: pip install 'pyql-kbqa[fidelity]'",
            name=exc.name,
        ) from None

    try:
        return translateQuery(parseQuery(standardize(text))).algebra
    except ParseException as exc:
        raise UnsupportedQuery("unparseable", f"line {exc.lineno}, column {exc.col}") from None
    except Exception as exc:  # rdflib raises bare Exception for unknown prefixes and the like
        raise UnsupportedQuery("unparseable", str(exc)[:200]) from None


# -- the pattern -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cmp:
    """``left op right`` between variables and constants (casts and ``str()`` removed)."""

    left: Any
    op: str
    right: Any


@dataclass(frozen=True)
class TimeHalf:
    """One side of a WebQSP time window: ``var`` has no ``relation``, or one ``op bound``."""

    var: Any
    relation: Any
    op: str
    bound: Any


@dataclass(frozen=True)
class Superlative:
    kind: str  # "max" | "min"
    var: Any
    #: the cast the gold query orders by (``xsd:dateTime``, ``xsd:integer`` ...), if any
    cast: str | None = None


@dataclass
class Body:
    """A conjunctive pattern: triples, single-value bindings, comparisons, time windows,
    superlatives (sub-selects and ORDER BY ... LIMIT 1) and language filters."""

    triples: list[tuple[Any, Any, Any]] = field(default_factory=list)
    bindings: dict[Any, Any] = field(default_factory=dict)
    comparisons: list[Cmp] = field(default_factory=list)
    time_halves: list[TimeHalf] = field(default_factory=list)
    superlatives: list[Superlative] = field(default_factory=list)
    lang_vars: list[Any] = field(default_factory=list)
    #: (kind, inner aggregated var, outer var, inner body) of MAX/MIN sub-selects
    sub_extrema: list[tuple[str, Any, Any, Body]] = field(default_factory=list)


@dataclass
class Parsed:
    """What a gold SELECT says: its answer, its pattern and a count (the count's new variable)."""

    answer: Any
    body: Body
    count_var: Any = None


def _is_var(term: Any) -> bool:
    from rdflib.term import Variable

    return isinstance(term, Variable)


def _is_path(term: Any) -> bool:
    from rdflib.paths import Path

    return isinstance(term, Path)


def type_path_of(predicate: Any) -> tuple[str, str] | None:
    """``(type, subclass)`` of a ``type/subclass*`` property path (Wikidata's
    ``wdt:P31/wdt:P279*``), else None."""
    from rdflib.paths import MulPath, SequencePath
    from rdflib.term import URIRef

    if not isinstance(predicate, SequencePath) or len(predicate.args) != 2:
        return None
    first, rest = predicate.args
    if (isinstance(first, URIRef) and isinstance(rest, MulPath) and rest.mod == "*"
            and isinstance(rest.path, URIRef)):
        return str(first), str(rest.path)
    return None


def simple_path_of(predicate: Any) -> tuple[str, tuple[str, ...]] | None:
    """``(op, relation IRIs)`` of a path the DSL writes in a relation position
    (:class:`~pyql.terms.RelationPath`): alternatives of relations (``wdt:P22|wdt:P25``: ``"|"``)
    or a closure of one (``wdt:P131+``, ``wdt:P279*``), else None."""
    from rdflib.paths import AlternativePath, MulPath
    from rdflib.term import URIRef

    if isinstance(predicate, AlternativePath) and all(isinstance(a, URIRef)
                                                      for a in predicate.args):
        return "|", tuple(str(a) for a in predicate.args)
    if (isinstance(predicate, MulPath) and predicate.mod in ("+", "*")
            and isinstance(predicate.path, URIRef)):
        return predicate.mod, (str(predicate.path),)
    return None


def is_type_triple(triple: tuple[Any, Any, Any], profile: Profile) -> bool:
    """Is ``triple`` a class membership the profile's ``add_type`` compiles to: ``?x type C``,
    or ``?x type/subclass* C`` for a profile with a subclass predicate (Wikidata); a bare
    ``?x wdt:P31 C`` there is a fact."""
    s, p, o = triple
    if not _is_var(s) or _is_var(o):
        return False
    if profile.subclass_predicate is None:
        return not _is_path(p) and str(p) == profile.type_predicate
    return type_path_of(p) == (profile.type_predicate, profile.subclass_predicate)


def _name(node: Any) -> str:
    return getattr(node, "name", "")


def _collect(node: Any, body: Body) -> None:
    """Add the algebra ``node`` (a graph pattern) to ``body``."""
    name = _name(node)
    if name == "BGP":
        for s, p, o in node.triples:
            if _is_var(p):
                raise UnsupportedQuery("variable_predicate", f"?{p}")
            if _is_path(p) and type_path_of(p) is None and simple_path_of(p) is None:
                raise UnsupportedQuery("property_path", str(p)[:120])
            body.triples.append((s, p, o))
    elif name == "Join":
        _collect(node.p1, body)
        _collect(node.p2, body)
    elif name == "Filter":
        _collect(node.p, body)
        for conjunct in _operands(node.expr, "ConditionalAndExpression"):
            _condition(conjunct, body)
    elif name == "ToMultiSet":
        inner = node.p
        if _name(inner) == "values":
            _values(inner, body)
        else:
            _subselect(inner, body)
    elif name == "values":
        _values(node, body)
    elif name == "Union":
        raise UnsupportedQuery("union")
    elif name == "LeftJoin":
        raise UnsupportedQuery("optional")
    elif name == "Minus":
        raise UnsupportedQuery("minus")
    elif name == "Extend":
        raise UnsupportedQuery("bind", f"?{node.var}")
    elif name in ("Graph", "ServiceGraphPattern"):
        raise UnsupportedQuery("graph")
    elif name in ("Group", "AggregateJoin"):
        raise UnsupportedQuery("aggregate")
    elif name in ("Project", "Distinct", "Reduced", "Slice", "OrderBy"):
        raise UnsupportedQuery("subquery")
    else:
        raise UnsupportedQuery("filter_expression" if name.startswith("Builtin") else "subquery",
                               name)


def _values(node: Any, body: Body) -> None:
    rows = node.res
    if len(rows) != 1 or any(v is None for v in rows[0].values()):
        raise UnsupportedQuery("values", f"{len(rows)} rows")
    for var, value in rows[0].items():
        if var in body.bindings and body.bindings[var] != value:
            raise UnsupportedQuery("values", f"?{var} bound twice")
        body.bindings[var] = value


def _subselect(node: Any, body: Body) -> None:
    """GrailQA's superlative: ``{ SELECT (MAX(?y) AS ?x) WHERE { ... } }``."""
    if _name(node) != "Project" or len(node.PV) != 1:
        raise UnsupportedQuery("subquery")
    extend = node.p
    if _name(extend) != "Extend" or _name(extend.p) != "AggregateJoin":
        raise UnsupportedQuery("subquery")
    agg_join = extend.p
    if len(agg_join.A) != 1 or _name(agg_join.p) != "Group" or agg_join.p.expr is not None:
        raise UnsupportedQuery("aggregate")
    agg = agg_join.A[0]
    kind = {"Aggregate_Max": "max", "Aggregate_Min": "min"}.get(_name(agg))
    if kind is None or extend.expr != agg.res or not _is_var(agg.vars):
        raise UnsupportedQuery("aggregate", _name(agg))
    inner = Body()
    _collect(agg_join.p.p, inner)
    body.sub_extrema.append((kind, agg.vars, extend.var, inner))


def _operands(expr: Any, operator: str) -> list[Any]:
    """The operands of nested ``operator`` expressions (``ConditionalAndExpression``: the
    conjuncts, ``ConditionalOrExpression``: the disjuncts), flattened in order."""
    if _name(expr) == operator:
        out = _operands(expr.expr, operator)
        for other in expr.other or ():
            out += _operands(other, operator)
        return out
    return [expr]


def _operand(expr: Any, *, allow_str: bool = True) -> tuple[Any, bool]:
    """A comparison side as a term, and whether it was wrapped in ``str()``."""
    from rdflib.term import Literal, URIRef, Variable

    if isinstance(expr, (Variable, URIRef, Literal)):
        return expr, False
    name = _name(expr)
    if name == "Function" and str(expr.iri) in _CASTS and len(expr.expr) == 1 and not expr.distinct:
        inner, _ = _operand(expr.expr[0], allow_str=False)
        if _is_var(inner):
            return inner, False
    if name == "Builtin_STR" and allow_str and _is_var(expr.arg):
        return expr.arg, True
    raise UnsupportedQuery("filter_expression", name or type(expr).__name__)


def _condition(expr: Any, body: Body) -> None:
    name = _name(expr)
    if name == "RelationalExpression":
        if expr.op not in _OPS:
            raise UnsupportedQuery("filter_expression", expr.op)
        left, left_str = _operand(expr.expr)
        right, right_str = _operand(expr.other)
        if left_str or right_str:
            _check_str(left if right_str else right)
        body.comparisons.append(Cmp(left, expr.op, right))
    elif name == "ConditionalOrExpression":
        parts = _operands(expr, "ConditionalOrExpression")
        var = _lang_filter(parts)
        if var is not None:
            body.lang_vars.append(var)
        else:
            body.time_halves.append(_time_half(parts))
    elif name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
        raise UnsupportedQuery("not_exists")
    elif name == "ConditionalAndExpression":
        for conjunct in _operands(expr, "ConditionalAndExpression"):
            _condition(conjunct, body)
    else:
        raise UnsupportedQuery("filter_expression", name or type(expr).__name__)


def _check_str(other: Any) -> None:
    """``str(?v) op c`` is ``add_filter(?v, op, c)`` only for a plain string ``c``."""
    from rdflib.term import Literal

    if not (isinstance(other, Literal) and other.datatype is None and not other.language):
        raise UnsupportedQuery("filter_expression", "str() compared with a non-string")


def _lang_filter(parts: Sequence[Any]) -> Any:
    """The variable of ``!isLiteral(?v) || lang(?v) = '' || langMatches(lang(?v), 'en')``."""
    from rdflib.term import Literal

    if len(parts) != 3:
        return None
    not_lit, empty, matches = parts
    try:
        var = not_lit.expr.arg
        ok = (
            _name(not_lit) == "UnaryNot" and _name(not_lit.expr) == "Builtin_isLITERAL"
            and _name(empty) == "RelationalExpression" and empty.op == "="
            and _name(empty.expr) == "Builtin_LANG" and empty.expr.arg == var
            and empty.other == Literal("")
            and _name(matches) == "Builtin_LANGMATCHES" and _name(matches.arg1) == "Builtin_LANG"
            and matches.arg1.arg == var and str(matches.arg2).lower() == "en"
        )
    except AttributeError:
        return None
    return var if ok and _is_var(var) else None


def _single_triple(pattern: Any) -> tuple[tuple[Any, Any, Any], list[Cmp]]:
    body = Body()
    _collect(pattern, body)
    if len(body.triples) != 1 or body.bindings or body.time_halves or body.sub_extrema:
        raise UnsupportedQuery("not_exists")
    return body.triples[0], body.comparisons


def _time_half(parts: Sequence[Any]) -> TimeHalf:
    if len(parts) != 2 or [_name(p) for p in parts] != ["Builtin_NOTEXISTS", "Builtin_EXISTS"]:
        raise UnsupportedQuery("or")
    (s0, r0, o0), extra = _single_triple(parts[0].graph)
    (s1, r1, o1), comparisons = _single_triple(parts[1].graph)
    if extra or len(comparisons) != 1 or (s0, r0) != (s1, r1) or not _is_var(s0):
        raise UnsupportedQuery("not_exists")
    cmp = comparisons[0]
    if cmp.right == o1 and cmp.left != o1:
        cmp = Cmp(cmp.right, _FLIP[cmp.op], cmp.left)
    if cmp.left != o1 or _is_var(cmp.right) or cmp.op not in ("<=", ">="):
        raise UnsupportedQuery("not_exists", "time window comparison")
    return TimeHalf(s0, r0, cmp.op, cmp.right)


# -- the query ---------------------------------------------------------------------------------
def parse_select(algebra: Any) -> Parsed:
    """Read a gold SELECT's algebra into a :class:`Parsed`; raises :class:`UnsupportedQuery`."""
    if _name(algebra) != "SelectQuery":
        raise UnsupportedQuery("not_select", _name(algebra))
    return _select(algebra.p)


def _select(node: Any) -> Parsed:
    limit = None
    if _name(node) == "Slice":
        if node.start not in (None, 0):
            raise UnsupportedQuery("limit", "OFFSET")
        limit = node.length
        node = node.p
    if _name(node) in ("Distinct", "Reduced"):  # answers are compared as sets
        node = node.p
    if _name(node) != "Project":
        raise UnsupportedQuery("projection")
    if len(node.PV) != 1:
        raise UnsupportedQuery("projection", f"{len(node.PV)} variables")
    selected = node.PV[0]
    node = node.p
    order = None
    if _name(node) == "OrderBy":
        order = node.expr
        node = node.p
    renames: dict[Any, Any] = {}
    while _name(node) == "Extend":
        renames[node.var] = node.expr
        node = node.p
    count_of = None
    if _name(node) == "AggregateJoin":
        count_of, node = _count(node)
    if _name(node) == "ToMultiSet":  # SELECT ... WHERE { SELECT ... }
        if order is not None or limit is not None:
            raise UnsupportedQuery("subquery", "ORDER BY / LIMIT around a sub-select")
        inner = _select(node.p)
        return _outer(selected, renames, count_of, inner)
    body = Body()
    _collect(node, body)
    if order is not None:
        if limit == 1:
            body.superlatives.append(_superlative(order))
        elif limit is not None:
            raise UnsupportedQuery("limit", f"ORDER BY ... LIMIT {limit}")
        # ORDER BY alone orders an answer set: nothing to express
    elif limit is not None:
        raise UnsupportedQuery("limit", f"LIMIT {limit} without ORDER BY")
    if count_of is not None:
        res, counted, is_distinct = count_of
        if renames.get(selected) != res or renames.keys() - {selected}:
            raise UnsupportedQuery("projection", "an expression around a count")
        if not is_distinct:
            raise UnsupportedQuery("aggregate", "COUNT of solutions (not of DISTINCT values)")
        return Parsed(counted, body, count_var=selected)
    return Parsed(_answer(selected, renames), body)


def _count(node: Any) -> tuple[tuple[Any, Any, bool], Any]:
    if len(node.A) != 1 or _name(node.p) != "Group" or node.p.expr is not None:
        raise UnsupportedQuery("group_by")
    agg = node.A[0]
    if _name(agg) != "Aggregate_Count" or not _is_var(agg.vars):
        raise UnsupportedQuery("aggregate", _name(agg))
    return (agg.res, agg.vars, bool(agg.distinct)), node.p.p


def _answer(selected: Any, renames: dict[Any, Any]) -> Any:
    expr = renames.get(selected, selected)
    if not _is_var(expr) or renames.keys() - {selected}:
        raise UnsupportedQuery("bind" if _is_var(expr) else "projection")
    return expr


def _outer(selected: Any, renames: dict[Any, Any], count_of: Any, inner: Parsed) -> Parsed:
    expr = renames.get(selected, selected)
    if inner.count_var is not None:
        raise UnsupportedQuery("subquery", "a count inside a sub-select")
    if count_of is not None:
        res, counted, _distinct = count_of
        # COUNT(?v) over SELECT DISTINCT ?v counts distinct values: add_count's semantics
        if expr != res or counted != inner.answer or renames.keys() - {selected}:
            raise UnsupportedQuery("aggregate", "COUNT of a variable the sub-select does not return")
        return Parsed(inner.answer, inner.body, count_var=selected)
    if expr != inner.answer or renames.keys() - {selected}:
        raise UnsupportedQuery("projection", "an expression over a sub-select")
    return inner


def _superlative(order: Sequence[Any]) -> Superlative:
    if len(order) != 1:
        raise UnsupportedQuery("order", f"{len(order)} keys")
    cond = order[0]
    kind = "min"
    expr = cond
    if _name(cond) == "OrderCondition":
        kind = "max" if cond.order == "DESC" else "min"
        expr = cond.expr
    try:
        var, wrapped = _operand(expr, allow_str=False)
    except UnsupportedQuery:
        raise UnsupportedQuery("order", "an expression") from None
    if not _is_var(var) or wrapped:
        raise UnsupportedQuery("order", "a constant")
    cast = str(expr.iri) if _name(expr) == "Function" else None
    return Superlative(kind, var, cast)


# -- substitution and checks -------------------------------------------------------------------
def _subst(term: Any, bindings: dict[Any, Any]) -> Any:
    return bindings.get(term, term) if _is_var(term) else term


def resolve(parsed: Parsed) -> Parsed:
    """``parsed`` with single-value ``VALUES`` substituted and MAX/MIN sub-selects checked and
    turned into superlatives; constant comparisons decided."""
    body = parsed.body
    b = body.bindings
    out = Body(
        triples=[tuple(_subst(t, b) for t in triple) for triple in body.triples],  # type: ignore[misc]
        comparisons=[],
        time_halves=[TimeHalf(_subst(h.var, b), h.relation, h.op, h.bound) for h in body.time_halves],
        superlatives=[Superlative(s.kind, _subst(s.var, b), s.cast) for s in body.superlatives],
        lang_vars=list(body.lang_vars),
    )
    for cmp in body.comparisons:
        left, right = _subst(cmp.left, b), _subst(cmp.right, b)
        if not _is_var(left) and not _is_var(right):
            if _constant_truth(left, cmp.op, right):
                continue
            raise UnsupportedQuery("constant_filter", f"{left} {cmp.op} {right}")
        out.comparisons.append(Cmp(left, cmp.op, right))
    for kind, inner_var, outer_var, inner in body.sub_extrema:
        if outer_var in b or not _same_pattern(body, inner, inner_var, outer_var):
            raise UnsupportedQuery("extremum_subquery", f"?{outer_var}")
        out.superlatives.append(Superlative(kind, outer_var))
    for var in (parsed.answer, parsed.count_var):
        if var is not None and var in b:
            raise UnsupportedQuery("values", f"the answer ?{var} is bound by VALUES")
    _dates_as_filters(out)
    return Parsed(parsed.answer, out, parsed.count_var)


_TEMPORAL = frozenset(_XSD + t for t in ("dateTime", "date", "gYear", "gYearMonth"))


def _dates_as_filters(body: Body) -> None:
    """A date constant in a triple (``?c ns:...from "1961"^^xsd:dateTime``) becomes a variable
    and an equality filter: the filter compares at the constant's precision, so the year matches
    whatever precision and datatype the KB stores the date with (Virtuoso's lenient casts make
    the gold's constant match there; a triple pattern would need the exact term elsewhere)."""
    from rdflib.term import Literal, Variable

    taken = {str(t) for tr in body.triples for t in tr if _is_var(t)}
    for i, (s, p, o) in enumerate(body.triples):
        if isinstance(o, Literal) and o.datatype is not None and str(o.datatype) in _TEMPORAL:
            n = len(taken)
            while f"date{n}" in taken:
                n += 1
            var = Variable(f"date{n}")
            taken.add(str(var))
            body.triples[i] = (s, p, var)
            body.comparisons.append(Cmp(var, "=", o))


def _constant_truth(left: Any, op: str, right: Any) -> bool:
    from rdflib.term import Literal

    if op == "!=" and type(left) is not type(right):
        return True  # an IRI is never a literal
    if op in ("=", "!=") and not isinstance(left, Literal):
        return (left == right) == (op == "=")
    return False


def _same_pattern(outer: Body, inner: Body, inner_var: Any, outer_var: Any) -> bool:
    """Is ``inner`` the outer pattern with its variables renamed (``inner_var`` -> ``outer_var``)?

    GrailQA names them ``?yN`` / ``?xN``: the renaming maps each inner variable to the outer
    one with the same suffix, and must make the triples and comparisons (``VALUES``
    substituted) equal."""
    def variables(body: Body) -> set[Any]:
        return {t for tr in body.triples for t in tr if _is_var(t)} - body.bindings.keys()

    outer_vars = variables(outer)
    by_suffix = {str(v)[1:]: v for v in outer_vars}
    rename = {inner_var: outer_var}
    for v in variables(inner):
        if v not in rename:
            if str(v)[1:] not in by_suffix:
                return False
            rename[v] = by_suffix[str(v)[1:]]
    if len(set(rename.values())) != len(rename):
        return False

    def canon(body: Body, names: dict[Any, Any]) -> tuple[frozenset[Any], frozenset[Any]]:
        def term(t: Any) -> Any:
            t = _subst(t, body.bindings)
            return names.get(t, t)

        triples = frozenset(tuple(term(t) for t in tr) for tr in body.triples)
        cmps = frozenset((term(c.left), c.op, term(c.right)) for c in body.comparisons)
        return triples, cmps

    return canon(inner, rename) == canon(outer, {})


# -- the program -------------------------------------------------------------------------------
def _term_text(term: Any, profile: Profile, *, relation: bool = False) -> str:
    """The DSL text of an rdflib term: short ids for entities (and, in a relation or class
    position, short relation names), ``<iri>`` for other IRIs (a class in a node position)."""
    from rdflib.term import Literal, URIRef

    if _is_var(term):
        return f"?{term}"
    if isinstance(term, URIRef):
        iri = str(term)
        if profile.entity_base and iri.startswith(profile.entity_base):
            local = iri[len(profile.entity_base):]
            if profile.entity_id_pattern and re.fullmatch(profile.entity_id_pattern, local):
                return local
            if relation and profile.relation_pattern and re.fullmatch(profile.relation_pattern, local):
                return local
        if profile.display_prefixes:
            # a profile that prints several namespaces (Wikidata: P161, p:P39, pq:P580, Q42) is
            # written with them too, where the short form reads back as the same IRI
            short = profile.compact(iri)
            if not short.startswith("<") and _reads_back(short, iri, profile, relation):
                return short
        return f"<{iri}>"
    if isinstance(term, Literal):
        if term.datatype is not None and str(term.datatype) == _XSD + "integer" and re.fullmatch(
            r"-?\d+", str(term)
        ):
            return str(term)
        if term.datatype is not None and str(term.datatype).startswith(_XSD):
            return Literal(str(term)).n3() + "^^xsd:" + str(term.datatype)[len(_XSD):]
        return term.n3()
    raise UnsupportedQuery("filter_expression", repr(term))


def _path_text(predicate: Any, profile: Profile) -> str:
    """The DSL text of a simple property path (``P131+``, ``P22|P25``), when the profile writes
    paths (its relations are property ids) and each relation has a short name."""
    from rdflib.term import URIRef

    op, iris = simple_path_of(predicate)  # type: ignore[misc]
    names = [_term_text(URIRef(iri), profile, relation=True) for iri in iris]
    if not profile.property_bases or any(n.startswith("<") for n in names):
        raise UnsupportedQuery("property_path", f"{predicate} in the {profile.name} profile")
    return "|".join(names) if op == "|" else f"{names[0]}{op}"


def _reads_back(short: str, iri: str, profile: Profile, relation: bool) -> bool:
    """Does the program text ``short`` read back as ``iri`` in its argument position (a
    malformed id such as ``wd:40475`` would read as the number 40475)?"""
    from pyql.resolve import Context, Slot, parse_term

    try:
        term = parse_term(short, Slot.RELATION if relation else Slot.NODE, Context(profile))
    except PyqlError:
        return False
    return getattr(term, "iri", None) == iri


def _ordered(
    triples: Sequence[tuple[Any, Any, Any]], profile: Profile
) -> list[tuple[Any, Any, Any]]:
    """Triples from the entities outward: each next triple shares a variable with those before
    when one does (else one with an entity, else the first), so intermediate queries stay
    connected."""
    def entity(term: Any) -> bool:
        return _term_text(term, profile) == str(term)[len(profile.entity_base or ""):] \
            and not _is_var(term) and bool(profile.entity_base)

    left = list(triples)
    bound: set[Any] = set()
    out: list[tuple[Any, Any, Any]] = []
    while left:
        pick = next((t for t in left if t[0] in bound or t[2] in bound), None)
        if pick is None:
            pick = next((t for t in left if entity(t[0]) or entity(t[2])), left[0])
        left.remove(pick)
        out.append(pick)
        bound.update(t for t in (pick[0], pick[2]) if _is_var(t))
    return out


def _calls(parsed: Parsed, profile: Profile) -> list[Call]:
    body = parsed.body
    def text(term: Any) -> str:
        return _term_text(term, profile)

    def rel(term: Any) -> str:
        return _term_text(term, profile, relation=True)

    calls: list[Call] = []
    types = [t for t in body.triples if is_type_triple(t, profile)]
    facts = [t for t in body.triples if t not in types]
    for _s, p, _o in facts:
        if _is_path(p) and simple_path_of(p) is None:
            raise UnsupportedQuery("property_path", "a class path that is not the profile's "
                                   "add_type (from a variable to a class)")
    for s, p, o in _ordered(facts, profile):
        calls.append(Call.of("add_fact", text(s), _path_text(p, profile) if _is_path(p)
                             else rel(p), text(o)))
    for s, _p, o in types:
        calls.append(Call.of("add_type", text(s), rel(o)))
    for cmp in body.comparisons:
        left, op, right = cmp.left, cmp.op, cmp.right
        if not _is_var(left):
            left, op, right = right, _FLIP[op], left
        calls.append(Call.of("add_filter", text(left), op, text(right)))
    calls += _time_calls(body.time_halves, text, rel)
    answer = parsed.answer
    for var in body.lang_vars:
        if var != answer or parsed.count_var is not None or not profile.answer_lang:
            raise UnsupportedQuery("lang_filter", f"?{var}")
    for sup in body.superlatives:
        if not _is_var(sup.var):
            raise UnsupportedQuery("order", "a constant")
        calls.append(Call.of(f"add_{sup.kind}", text(sup.var)))
    calls.append(Call.of("set_answer", text(answer)))
    if parsed.count_var is not None:
        calls.append(Call.of("add_count", text(answer), text(parsed.count_var)))
    calls.append(Call.of("execute"))
    return calls


def _time_calls(halves: Iterable[TimeHalf], text: Any, rel: Any) -> list[Call]:
    starts: dict[Any, list[TimeHalf]] = {}
    ends: dict[Any, list[TimeHalf]] = {}
    for half in halves:
        (starts if half.op == "<=" else ends).setdefault(half.var, []).append(half)
    calls = []
    for var in list(dict.fromkeys([*starts, *ends])):
        s, e = starts.get(var, []), ends.get(var, [])
        if len(s) != len(e):
            raise UnsupportedQuery("time_half", f"?{var}")
        for start, end in zip(s, e):
            if not _is_var(var):
                raise UnsupportedQuery("not_exists", "a time window on a constant")
            calls.append(Call.of("add_time_constrain", text(var), rel(start.relation),
                                 rel(end.relation), text(start.bound), text(end.bound)))
    return calls


def read_query(text: str) -> Parsed:
    """What a gold SELECT says (answer, pattern, count), ``VALUES`` substituted and sub-select
    superlatives checked; raises :class:`UnsupportedQuery`."""
    return resolve(parse_select(parse_algebra(text)))


def from_sparql(text: str, profile: str | Profile = "freebase") -> Program:
    """The PyQL program that builds the same query as the SPARQL ``text``.

    Raises :class:`UnsupportedQuery` naming the first construct the tool set cannot express.
    rdflib's complaints about literals it cannot convert to Python values (a bare year typed
    ``xsd:dateTime``) go to the ``pyql.sparql`` log, not stderr.
    """
    with rerouted("rdflib.term", "pyql.sparql"):
        return to_program(read_query(text), profile)


def to_program(parsed: Parsed, profile: str | Profile = "freebase") -> Program:
    """The program of a :func:`read_query` result; raises :class:`UnsupportedQuery`."""
    prof = get_profile(profile)
    program = Program(calls=tuple(_calls(parsed, prof)))
    try:
        program.to_query(prof)
    except PyqlError as exc:
        raise UnsupportedQuery("builder", str(exc)[:200]) from None
    return program
