"""Fidelity of gold SPARQL -> PyQL without Freebase: coverage, the constructs in the way, and
equivalence on synthesized graphs.

For each gold query of WebQSP, CWQ or GrailQA, :func:`pyql.sparql.from_sparql.from_sparql`
either converts it to a program (*covered*) or names the construct in the way. A covered query is
then checked for **equivalence** on a small graph built from the gold query itself
(:func:`synthesize`), with no Freebase at all:

- the *solution*: every triple of the gold pattern with each variable a fresh node (or, for a
  variable compared with a literal, ordered by a superlative or tied to a time window, a literal
  that satisfies its comparisons);
- *distractors*: one more copy of the whole pattern (fresh nodes again, the query's constants
  shared) per constraint, violating just that constraint: each triple in turn with another
  relation (a copy that lacks one type or one edge), each comparison made false (the value on
  the wrong side of the bound, ``?x != ?c`` with ``?x`` and ``?c`` the same node), each time
  window missed on either side, and for a superlative a copy whose value is not the best;
  copies violating a triple carry a *better* superlative value than the solution, so a program
  that ranks before it filters picks the wrong one; a time window also gets a copy with no
  start and no end (a solution too: the window does not constrain an open period).

The gold SPARQL (its Virtuoso dialect standardized; date literals Virtuoso reads leniently,
``"1971"^^xsd:dateTime`` or ``"2015-08-10"^^xsd:dateTime``, written as the full
``xsd:dateTime`` Virtuoso reads them as, the start of that period) and the program's compiled
SPARQL then run on the graph in pyoxigraph; the answer sets must be equal. A query whose graph
cannot be built (a variable both a node and a literal, orders between variables no values meet)
is *unchecked*. Two variables compared with each other are dates unless known otherwise.

Figures (the full sample files; ``pyql fidelity sparql DATASET``) are in
``docs/freebase.md``.

Command line::

    pyql fidelity sparql webqsp|cwq|grailqa [--limit N] [--sample N] [--data-dir DIR] [--json]
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyql.datasets.paths import default_data_dir
from pyql.profiles import Profile, get_profile
from pyql.registry import UnknownNameError
from pyql.sparql.from_sparql import (
    CONSTRUCTS,
    Body,
    Cmp,
    Parsed,
    UnsupportedQuery,
    parse_algebra,
    read_query,
    simple_path_of,
    standardize,
    to_program,
    type_path_of,
)

__all__ = [
    "DATASETS",
    "DATASET_PROFILES",
    "GoldQuery",
    "ItemResult",
    "FidelityReport",
    "Unsynthesizable",
    "load_gold_queries",
    "synthesize",
    "gold_graph",
    "write_ntriples",
    "virtuoso_reading",
    "check_query",
    "query_features",
    "sparql_fidelity",
]

log = logging.getLogger(__name__)

DATASETS = ("webqsp", "cwq", "grailqa", "wwq")
#: the KB profile of each dataset's gold queries (Freebase unless named)
DATASET_PROFILES = {"wwq": "wikidata"}
_XSD = "http://www.w3.org/2001/XMLSchema#"
_FB = "http://rdf.freebase.com/ns/"
#: the relation a distractor copy uses in place of one of the pattern's
OTHER_RELATION = _FB + "pyql.synthetic.other_relation"
_DATE_TYPES = {_XSD + t for t in ("dateTime", "date", "gYear", "gYearMonth")}
_NUMBER_TYPES = {_XSD + t for t in ("integer", "int", "float", "double", "decimal", "long")}
_DATE = re.compile(r"(-?\d{4})(?:-(\d\d))?(?:-(\d\d))?(?:T[\d:.]+)?(Z|[+-]\d\d:\d\d)?$")


@dataclass(frozen=True)
class GoldQuery:
    id: str
    sparql: str
    #: GrailQA level, CWQ compositionality type; "" for WebQSP
    group: str = ""


def load_gold_queries(dataset: str, data_dir: Path | None = None) -> list[GoldQuery]:
    """The gold queries of a dataset's file in ``freebase_questions`` (see its SOURCE.md)."""
    root = (data_dir or default_data_dir()) / "freebase_questions"
    if dataset == "webqsp":
        rows = json.loads(gzip.open(root / "WebQSP_test_processed.json.gz").read())
        return [GoldQuery(r["qid"], r["sparql_query"]) for r in rows]
    if dataset == "cwq":
        rows = json.loads(gzip.open(root / "cwq_sample.json.gz").read())
        return [GoldQuery(r["ID"], r["sparql"], r["compositionality_type"]) for r in rows]
    if dataset == "grailqa":
        rows = json.loads(gzip.open(root / "grailqa_sample.json.gz").read())
        return [GoldQuery(str(r["qid"]), r["sparql_query"], r["level"]) for r in rows]
    if dataset == "wwq":  # WikiWebQuestions train (the dev and test splits are held out)
        rows = json.loads((data_dir or default_data_dir()).joinpath(
            "wikidata", "wwq", "train.json").read_text(encoding="utf-8"))
        return [GoldQuery(r["id"], r["sparql"]) for r in rows]
    raise UnknownNameError("dataset", dataset, DATASETS)


# -- Virtuoso's reading of the gold literals -----------------------------------------------------
_LENIENT_DATETIME = re.compile(
    r'"(\d{4})(?:-(\d\d))?(?:-(\d\d))?"\^\^(xsd:dateTime|<http://www\.w3\.org/2001/XMLSchema#dateTime>)'
)


def virtuoso_reading(text: str) -> str:
    """The gold query as standard SPARQL that means what Virtuoso makes of it.

    :func:`~pyql.sparql.from_sparql.standardize`, and partial ``xsd:dateTime`` literals
    (``"1971"``, ``"2015-08-10"``), which Virtuoso reads as the start of the period, written in
    full; prefixed names written as full IRIs.

    >>> virtuoso_reading('SELECT ?x WHERE { FILTER (?x < "1971"^^xsd:dateTime) }').splitlines()[-1]
    'SELECT ?x WHERE { FILTER (?x < "1971-01-01T00:00:00"^^<http://www.w3.org/2001/XMLSchema#dateTime>) }'
    """
    def full(m: re.Match[str]) -> str:
        return f'"{m.group(1)}-{m.group(2) or "01"}-{m.group(3) or "01"}T00:00:00"^^{m.group(4)}'

    return _expand_names(_LENIENT_DATETIME.sub(full, standardize(text)))


_NAME_TOKENS = re.compile(
    r'''("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|<[^<>"{}|^`\\\s]*>|#[^\n]*'''
    r'''|(?i:PREFIX)\s+[A-Za-z_]*:|(?<![\w?$:])([A-Za-z][\w-]*)?:([\w-](?:[\w.-]*[\w-])?))'''
)


def _expand_names(text: str) -> str:
    """Prefixed names as full IRIs: oxigraph rejects local names with two dots
    (``ns:location.country.languages_spoken``), which every Freebase relation has."""
    prefixes = {m.group(1): m.group(2)
                for m in re.finditer(r"(?i)PREFIX\s+([A-Za-z_]*):\s*<([^>]*)>", text)}

    def sub(m: re.Match[str]) -> str:
        if m.group(3) is None or (m.group(2) or "") not in prefixes:
            return m.group(0)
        return f"<{prefixes[m.group(2) or '']}{m.group(3)}>"

    return _NAME_TOKENS.sub(sub, text)


# -- synthesis -----------------------------------------------------------------------------------
class Unsynthesizable(Exception):
    """No graph can be built for this query by :func:`synthesize` (the reason is the message)."""


@dataclass
class _Kind:
    """How a literal-valued variable's values are written: a date, a number or a string."""

    kind: str  # "date" | "number" | "string"
    datatype: str | None = None
    tz: str = ""
    lang: str | None = None


def _is_var(term: Any) -> bool:
    from rdflib.term import Variable

    return isinstance(term, Variable)


def _is_literal(term: Any) -> bool:
    from rdflib.term import Literal

    return isinstance(term, Literal)


def _scale(lit: Any, kind: _Kind) -> float:
    """A literal's position on the variable's scale (days for dates)."""
    text = str(lit)
    if kind.kind == "date":
        m = _DATE.match(text)
        if not m:
            raise Unsynthesizable(f"not a date: {text!r}")
        return float(dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)).toordinal())
    try:
        return float(text)
    except ValueError:
        raise Unsynthesizable(f"not a number: {text!r}") from None


def _kind_of(lit: Any) -> _Kind:
    datatype = str(lit.datatype) if lit.datatype is not None else None
    if datatype in _DATE_TYPES or (datatype is None and _DATE.match(str(lit)) and "-" in str(lit)):
        m = _DATE.match(str(lit))
        return _Kind("date", datatype or _XSD + "dateTime", (m.group(4) or "") if m else "")
    if datatype in _NUMBER_TYPES:
        return _Kind("number", datatype)
    if datatype is None and not lit.language and re.fullmatch(r"-?\d+(\.\d+)?", str(lit)):
        return _Kind("number", _XSD + "integer")
    return _Kind("string", None, lang=lit.language)


def _literal(value: float, kind: _Kind) -> Any:
    from rdflib.term import Literal, URIRef

    if kind.kind == "date":
        day = dt.date.fromordinal(int(round(value)))
        if kind.datatype == _XSD + "gYear":
            lexical = f"{day.year:04d}{kind.tz}"
        elif kind.datatype == _XSD + "date":
            lexical = f"{day.isoformat()}{kind.tz}"
        else:
            lexical = f"{day.isoformat()}T00:00:00{kind.tz}"
        # normalize=False: rdflib would drop the timezone of an xsd:date ("1966-01-12-08:00")
        return Literal(lexical, datatype=URIRef(kind.datatype or _XSD + "dateTime"),
                       normalize=False)
    if kind.datatype in (_XSD + "integer", _XSD + "int", _XSD + "long"):
        return Literal(str(int(round(value))), datatype=URIRef(kind.datatype), normalize=False)
    return Literal(repr(float(value)), datatype=URIRef(kind.datatype or _XSD + "double"),
                   normalize=False)


_CAST_KIND = {
    _XSD + "dateTime": _Kind("date", _XSD + "dateTime"),
    _XSD + "date": _Kind("date", _XSD + "date"),
    _XSD + "integer": _Kind("number", _XSD + "integer"),
    _XSD + "int": _Kind("number", _XSD + "integer"),
    _XSD + "float": _Kind("number", _XSD + "float"),
    _XSD + "double": _Kind("number", _XSD + "double"),
    _XSD + "decimal": _Kind("number", _XSD + "decimal"),
}

_STEP = 40.0  # distance from a bound, in days or units


@dataclass
class _Plan:
    """The literal variables: their kind, their bounds and their value in the solution."""

    kinds: dict[Any, _Kind] = field(default_factory=dict)
    bounds: dict[Any, list[Cmp]] = field(default_factory=dict)
    values: dict[Any, float] = field(default_factory=dict)
    strings: dict[Any, Any] = field(default_factory=dict)
    #: comparisons between two literal variables (``?from < ?end``)
    orders: list[Cmp] = field(default_factory=list)


def _satisfies(value: float, cmps: Iterable[Cmp], kind: _Kind) -> bool:
    for c in cmps:
        bound = _scale(c.right, kind)
        ok = {
            "<": value < bound, "<=": value <= bound, ">": value > bound, ">=": value >= bound,
            "=": value == bound, "!=": value != bound,
        }[c.op]
        if not ok:
            return False
    return True


def _solve(cmps: Sequence[Cmp], kind: _Kind) -> float:
    """A value meeting every comparison, away from the bounds."""
    candidates = [730_000.0 if kind.kind == "date" else 500.0]
    for c in cmps:
        bound = _scale(c.right, kind)
        candidates += [bound, bound + _STEP, bound - _STEP, bound + 1, bound - 1]
    lows = [_scale(c.right, kind) for c in cmps if c.op in (">", ">=")]
    highs = [_scale(c.right, kind) for c in cmps if c.op in ("<", "<=")]
    if lows and highs:
        candidates.insert(0, (max(lows) + min(highs)) / 2)
    for value in candidates:
        if _satisfies(value, cmps, kind):
            return value
    raise Unsynthesizable("no value meets the comparisons")


def _plan(parsed: Parsed) -> _Plan:
    body = parsed.body
    plan = _Plan()
    subjects = {t[0] for t in body.triples}
    for c in body.comparisons:
        left, op, right = c.left, c.op, c.right
        if not _is_var(left):
            left, right = right, left
            op = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}[op]
        if _is_var(left) and _is_literal(right):
            if op == "!=" and left in subjects:
                continue  # a node differs from every literal (GrailQA's ?x0 != "1.078"^^float)
            kind = _kind_of(right)
            known = plan.kinds.setdefault(left, kind)
            if known.kind != kind.kind:
                raise Unsynthesizable(f"?{left} is compared with a {known.kind} and a {kind.kind}")
            if kind.kind == "string":
                if op not in ("=", "!="):
                    raise Unsynthesizable("an order on a string")
            plan.bounds.setdefault(left, []).append(Cmp(left, op, right))
        elif _is_var(left) and _is_var(right) and op not in ("=", "!="):
            plan.orders.append(Cmp(left, op, right))
    for c in plan.orders:  # two literals compared: dates, unless they are known to be numbers
        for var in (c.left, c.right):
            plan.kinds.setdefault(var, _Kind("date", _XSD + "dateTime"))
    for sup in body.superlatives:
        kind = _CAST_KIND.get(sup.cast or "", _Kind("number", _XSD + "integer"))
        plan.kinds.setdefault(sup.var, kind)
    for var, kind in plan.kinds.items():
        if var in subjects:
            raise Unsynthesizable(f"?{var} is both a subject and a literal")
        cmps = plan.bounds.get(var, [])
        if kind.kind == "string":
            eq = [c.right for c in cmps if c.op == "="]
            plan.strings[var] = eq[0] if eq else _other_string(cmps)
        else:
            plan.values[var] = _solve(cmps, kind)
    _order(plan)
    return plan


_HOLDS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
          ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _order(plan: _Plan) -> None:
    """Move values until every order between two variables holds (and their bounds still do)."""
    for _ in range(len(plan.orders) + 1):
        moved = False
        for c in plan.orders:
            a, b = plan.values[c.left], plan.values[c.right]
            if not _HOLDS[c.op](a, b):
                if c.op in ("<", "<="):
                    plan.values[c.right] = a + _STEP
                else:
                    plan.values[c.left] = b + _STEP
                moved = True
        if not moved:
            break
    for var, value in plan.values.items():
        if not _satisfies(value, plan.bounds.get(var, []), plan.kinds[var]) or any(
                not _HOLDS[c.op](plan.values[c.left], plan.values[c.right]) for c in plan.orders):
            raise Unsynthesizable("no values meet the orders between variables")


def _other_string(cmps: Sequence[Cmp]) -> Any:
    from rdflib.term import Literal

    taken = {str(c.right) for c in cmps}
    return Literal(next(f"pyql other {i}" for i in range(len(taken) + 1)
                        if f"pyql other {i}" not in taken), lang="en")


def synthesize(parsed: Parsed, stem: str = "syn", profile: str | Profile | None = None
               ) -> list[tuple[Any, Any, Any]]:
    """A graph (rdflib-term triples) holding a solution of ``parsed`` and one distractor per
    constraint; see the module docstring. Fresh nodes are named ``m.<stem>N_var`` (give each
    query its own stem to put several graphs in one store). With a ``profile`` whose classes
    have a subclass closure (Wikidata), each bare ``?x type C`` triple (``wdt:P31``, direct
    instances only) also gets a copy where ``?x`` is an instance of a subclass of ``C`` only: a
    program that reads it as ``add_type`` (``wdt:P31/wdt:P279*``) answers there, the gold does
    not. Raises :class:`Unsynthesizable`."""
    from rdflib.term import Literal, URIRef

    body = parsed.body
    plan = _plan(parsed)
    prof = get_profile(profile) if profile is not None else None
    subclass = prof.subclass_predicate if prof is not None else None
    time_vars = {h.var for h in body.time_halves}
    for var in time_vars:
        if not _is_var(var) or var in plan.kinds:
            raise Unsynthesizable("a time window on a literal")
    graph: list[tuple[Any, Any, Any]] = []
    copies = 0

    def copy(*, values: dict[Any, float] | None = None, strings: dict[Any, Any] | None = None,
             swap: int | None = None, same: tuple[Any, Any] | None = None,
             node_values: dict[Any, Any] | None = None,
             windows: Callable[[Any, Any], list[tuple[Any, Any]]] | None = None,
             via_subclass: int | None = None) -> None:
        nonlocal copies
        copies += 1
        n = copies
        vals = {**plan.values, **_worse(n), **(values or {})}
        strs = {**plan.strings, **(strings or {})}

        def term(t: Any) -> Any:
            if not _is_var(t):
                return t
            if node_values and t in node_values:
                return node_values[t]
            if same and t == same[1]:
                t = same[0]
            if t in plan.kinds:
                kind = plan.kinds[t]
                return strs[t] if kind.kind == "string" else _literal(vals[t], kind)
            return URIRef(f"{_FB}m.{stem}{n}_{_safe(str(t))}")

        for i, (s, p, o) in enumerate(body.triples):
            if i == swap:
                graph.append((term(s), URIRef(OTHER_RELATION), term(o)))
            elif i == via_subclass and subclass is not None:
                graph.extend(_edges(term(s), _class_path(p, subclass), term(o), f"{stem}{n}_{i}"))
            else:
                graph.extend(_edges(term(s), p, term(o), f"{stem}{n}_{i}"))
        for half_var in time_vars:
            node = term(half_var)
            start_end = windows(half_var, node) if windows else _window(body, half_var)
            for rel, value in start_end:
                if value is not None:
                    graph.append((node, rel, value))

    def _worse(n: int) -> dict[Any, float]:
        """Superlative values of copy ``n`` > 1: each a little worse than the solution's, so no
        copy that is a solution too ties with it."""
        out = {}
        for sup in body.superlatives:
            base = plan.values[sup.var]
            value = base - (n - 1) if sup.kind == "max" else base + (n - 1)
            if n > 1 and _satisfies(value, plan.bounds.get(sup.var, []), plan.kinds[sup.var]):
                out[sup.var] = value
        return out

    copy()  # the solution
    better = {}
    for sup in body.superlatives:
        kind = plan.kinds[sup.var]
        step = 15.0 if sup.kind == "max" else -15.0
        base = plan.values[sup.var]
        worse = next((base - s for s in (step, step / 15)
                      if _satisfies(base - s, plan.bounds.get(sup.var, []), kind)), None)
        if worse is not None:
            copy(values={sup.var: worse})
        better[sup.var] = (base + step, 1.0 if step > 0 else -1.0)
    for i in range(len(body.triples)):
        # each a different better value: a copy still a solution (its missing triple given by
        # another copy through a shared constant) must not tie with another
        values = {v: x + sign * i for v, (x, sign) in better.items()}
        copy(swap=i, values={v: x for v, x in values.items()
                             if _satisfies(x, plan.bounds.get(v, []), plan.kinds[v])})
    if subclass is not None:
        for i, (s, p, o) in enumerate(body.triples):
            if _is_var(s) and not _is_var(o) and str(p) == prof.type_predicate:  # type: ignore[union-attr]
                copy(via_subclass=i)
    for c in body.comparisons:
        left, right = (c.left, c.right) if _is_var(c.left) else (c.right, c.left)
        if left in plan.kinds and _is_literal(right):
            kind = plan.kinds[left]
            if kind.kind == "string":
                copy(strings={left: _other_string([c]) if c.op == "=" else right})
            else:
                bound = _scale(right, kind)
                # another year for a date (pyql compares dates at the constant's precision)
                away = 400.0 if kind.kind == "date" else _STEP
                bad = {"<": bound + _STEP, "<=": bound + _STEP, ">": bound - _STEP,
                       ">=": bound - _STEP, "=": bound + away, "!=": bound}[c.op]
                copy(values={left: bad})
        elif c in plan.orders:  # the order reversed
            low, high = (c.left, c.right) if c.op in ("<", "<=") else (c.right, c.left)
            copy(values={low: plan.values[high] + _STEP})
        elif c.op == "!=" and left not in plan.kinds:
            if _is_var(right) and right not in plan.kinds:
                copy(same=(left, right))
            elif not _is_var(right) and not _is_literal(right):
                copy(node_values={left: right})
    for var in time_vars:  # outside the window on one side; an open period (a solution too)
        for side in ("start", "end"):
            copy(windows=lambda v, node, side=side, var=var: _window(
                body, v, miss=side if v == var else None))
        copy(windows=lambda v, node, var=var: [] if v == var else _window(body, v))
    return [(s, p, o) for s, p, o in graph if not isinstance(s, Literal)]


def gold_graph(parsed: Parsed, answers: Sequence[str] = (), *, label: str | None = None,
               prefix: str = "gold") -> list[tuple[Any, Any, Any]]:
    """A graph on which the gold query returns the dataset's answers: one solution of the
    pattern per answer, the answer variable bound to it (a mid, or a literal value) and every
    other variable a fresh node (``m.<prefix>N_var``) or a planned literal. ``label`` (CWQ): one
    solution whose answer is a fresh node named ``label``. A count's gold (a number N) gets N
    solutions. Used to build end-to-end fixtures for ``pyql eval --llm gold``."""
    from rdflib.term import Literal, URIRef

    body = parsed.body
    plan = _plan(parsed)
    if label is not None:
        values: list[Any] = [URIRef(f"{_FB}m.{prefix}_answer")]
    elif parsed.count_var is not None:
        values = [None] * int(float(answers[0]) if answers else 0)
    else:
        values = [URIRef(_FB + a) if re.fullmatch(r"[mg]\.[0-9a-z_]+", a) else Literal(a)
                  for a in answers]
    graph: list[tuple[Any, Any, Any]] = []
    for n, value in enumerate(values, 1):
        def term(t: Any, n: int = n, value: Any = value) -> Any:
            if not _is_var(t):
                return t
            if t == parsed.answer and value is not None:
                return value
            if t in plan.kinds:
                kind = plan.kinds[t]
                return plan.strings[t] if kind.kind == "string" else _literal(plan.values[t], kind)
            return URIRef(f"{_FB}m.{prefix}{n}_{_safe(str(t))}")

        for i, (s, p, o) in enumerate(body.triples):
            graph += _edges(term(s), p, term(o), f"{prefix}{n}_{i}")
        for var in {h.var for h in body.time_halves}:
            graph += [(term(var), rel, v) for rel, v in _window(body, var)]
    if label is not None:
        graph.append((values[0], URIRef(_FB + "type.object.name"), Literal(label, lang="en")))
    return [(s, p, o) for s, p, o in graph if not isinstance(s, Literal)]


def _edges(s: Any, p: Any, o: Any, stem: str) -> list[tuple[Any, Any, Any]]:
    """The graph edges of one pattern triple: itself; for a class path ``type/subclass*``
    (Wikidata's ``wdt:P31/wdt:P279*``) an instance of a fresh class one ``subclass`` step
    below the class, so that the path's closure is exercised; for ``R+`` two ``R`` steps through
    a fresh node; for ``R*`` one step; for alternatives ``R1|R2`` the last one."""
    from rdflib.term import URIRef

    path = type_path_of(p)
    if path is not None:
        middle = URIRef(f"{_FB}m.{stem}_class")
        return [(s, URIRef(path[0]), middle), (middle, URIRef(path[1]), o)]
    simple = simple_path_of(p)
    if simple is None:
        return [(s, p, o)]
    op, iris = simple
    if op == "+":  # two steps: the closure is exercised
        middle = URIRef(f"{_FB}m.{stem}_step")
        return [(s, URIRef(iris[0]), middle), (middle, URIRef(iris[0]), o)]
    # one step of a "*" closure; the last alternative (a program reading only the first of
    # them misses it)
    return [(s, URIRef(iris[-1]), o)]


def _class_path(type_predicate: Any, subclass: str) -> Any:
    """The path ``type/subclass*`` (rdflib terms), for :func:`_edges` to spell out."""
    from rdflib.paths import MulPath, SequencePath
    from rdflib.term import URIRef

    return SequencePath(type_predicate, MulPath(URIRef(subclass), "*"))


def _safe(name: str) -> str:
    return re.sub(r"[^0-9a-z_]", "_", name.lower())


def _window(body: Body, var: Any, miss: str | None = None) -> list[tuple[Any, Any]]:
    """Start and end values of the CVT ``var``: inside every window, or outside on one side."""
    out = []
    for half in body.time_halves:
        if half.var != var:
            continue
        kind = _Kind("date", _XSD + "dateTime")
        bound = _scale(half.bound, kind)
        if half.op == "<=":  # the start relation: on or before the window's end
            value = bound + _STEP if miss == "start" else bound - _STEP
        else:  # the end relation: on or after the window's start
            value = bound - _STEP if miss == "end" else bound + _STEP
        out.append((half.relation, _literal(value, kind)))
    return out


# -- the constructs a query uses -----------------------------------------------------------------
_NODE_FEATURES = {
    "Filter": "filter", "OrderBy": "order_by", "Slice": "limit", "Union": "union",
    "LeftJoin": "optional", "Minus": "minus", "AggregateJoin": "aggregate",
    "Builtin_NOTEXISTS": "not_exists", "Builtin_EXISTS": "exists", "values": "values",
    "ServiceGraphPattern": "service", "Group": "group", "ToMultiSet": "subquery",
}


def query_features(text: str, profile: str | Profile = "freebase") -> frozenset[str]:
    """The constructs the gold query ``text`` uses, read from its algebra: the graph-pattern and
    solution operators (``filter``, ``order_by``, ``limit``, ``union``, ``not_exists``,
    ``aggregate`` ...), the namespace of each predicate as the profile prints it (Wikidata:
    ``wdt:``, ``p:``, ``ps:``, ``pq:``; the statement qualifiers are ``pq:``), ``class_path`` for
    the profile's ``type/subclass*`` path and ``property_path`` for any other path;
    ``unparseable`` alone when rdflib cannot read it."""
    from rdflib.paths import Path as RdfPath
    from rdflib.plugins.sparql.parserutils import CompValue
    from rdflib.term import URIRef

    prof = get_profile(profile)
    try:
        algebra = parse_algebra(text)
    except UnsupportedQuery:
        return frozenset({"unparseable"})
    out: set[str] = set()
    bases = sorted(((base, prefix) for prefix, base in prof.prefixes.items()),
                   key=lambda item: -len(item[0]))

    def predicate(p: Any) -> None:
        if isinstance(p, RdfPath):
            out.add("class_path" if type_path_of(p) == (prof.type_predicate,
                                                        prof.subclass_predicate)
                    else "property_path")
        elif isinstance(p, URIRef):
            out.add(next((f"{prefix}:" for base, prefix in bases if str(p).startswith(base)),
                         "<iri>"))

    def walk(node: Any) -> None:
        if isinstance(node, CompValue):
            feature = _NODE_FEATURES.get(node.name)
            if feature is not None:
                out.add(feature)
            if node.name == "BGP":
                for _s, p, _o in node.triples:
                    predicate(p)
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)

    walk(algebra)
    return frozenset(out)


# -- checking ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ItemResult:
    """One gold query: ``covered`` (converted), ``construct`` (else, what is in the way) and
    ``status``: ``agree``, ``disagree``, ``unchecked`` (no graph), ``error`` (a query failed on
    the graph) or ``unsupported``."""

    id: str
    group: str
    status: str
    construct: str = ""
    detail: str = ""
    gold: tuple[str, ...] = ()
    predicted: tuple[str, ...] = ()
    triples: int = 0
    #: the constructs the gold query uses (:func:`query_features`)
    features: tuple[str, ...] = ()


def _answers(store: Any, text: str) -> tuple[str, ...]:
    result = store.query(text)
    values = set()
    for row in result:
        term = row[0]
        if term is None:
            continue
        values.add(_number_text(term))
    return tuple(sorted(values))


def _number_text(term: Any) -> str:
    """Numbers by value (a count is ``2`` whatever its datatype), everything else as a term."""
    value = getattr(term, "value", str(term))
    datatype = getattr(getattr(term, "datatype", None), "value", "")
    if datatype in _NUMBER_TYPES:
        try:
            return repr(float(value))
        except ValueError:
            pass
    return str(term)


def check_query(gold: GoldQuery, profile: str | Profile = "freebase", *,
                graph_sink: list[tuple[Any, Any, Any]] | None = None) -> ItemResult:
    """Convert one gold query and compare both on its synthesized graph; with ``graph_sink``,
    the graph of a query that agrees is added to it (its nodes named after the query's id)."""
    import pyoxigraph as ox

    prof = get_profile(profile)
    features = tuple(sorted(query_features(gold.sparql, prof)))
    try:
        parsed = read_query(gold.sparql)
        program = to_program(parsed, prof)
    except UnsupportedQuery as exc:
        return ItemResult(gold.id, gold.group, "unsupported", exc.construct, exc.detail,
                          features=features)
    try:
        graph = synthesize(parsed, "syn" if graph_sink is None else f"{_safe(gold.id)}_s",
                           prof)
    except Unsynthesizable as exc:
        return ItemResult(gold.id, gold.group, "unchecked", detail=str(exc), features=features)
    store = ox.Store()
    store.bulk_extend(ox.Quad(_ox(s), _ox(p), _ox(o)) for s, p, o in graph)
    try:
        expected = _answers(store, virtuoso_reading(gold.sparql))
        got = _answers(store, program.to_sparql(prof))
    except (SyntaxError, OSError, ValueError) as exc:
        return ItemResult(gold.id, gold.group, "error", detail=str(exc)[:300], triples=len(graph),
                          features=features)
    status = "agree" if expected == got else "disagree"
    if graph_sink is not None and status == "agree":
        graph_sink.extend(graph)
    return ItemResult(gold.id, gold.group, status, gold=expected, predicted=got, triples=len(graph),
                      features=features)


def write_ntriples(graph: Iterable[tuple[Any, Any, Any]], path: str | Path) -> int:
    """Write rdflib-term triples as N-Triples (through pyoxigraph's serializer)."""
    import pyoxigraph as ox

    quads = [ox.Triple(_ox(s), _ox(p), _ox(o)) for s, p, o in graph]
    ox.serialize(quads, str(path), ox.RdfFormat.N_TRIPLES)
    return len(quads)


def _ox(term: Any) -> Any:
    import pyoxigraph as ox
    from rdflib.term import Literal, URIRef

    if isinstance(term, URIRef):
        return ox.NamedNode(str(term))
    if isinstance(term, Literal):
        if term.language:
            return ox.Literal(str(term), language=term.language)
        if term.datatype is not None:
            return ox.Literal(str(term), datatype=ox.NamedNode(str(term.datatype)))
        return ox.Literal(str(term))
    raise TypeError(f"not a ground term: {term!r}")


@dataclass
class FidelityReport:
    dataset: str
    items: list[ItemResult]
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return len(self.items)

    def count(self, status: str) -> int:
        return sum(1 for i in self.items if i.status == status)

    @property
    def covered(self) -> int:
        return self.total - self.count("unsupported")

    @property
    def checked(self) -> int:
        return self.count("agree") + self.count("disagree") + self.count("error")

    @property
    def constructs(self) -> Counter[str]:
        return Counter(i.construct for i in self.items if i.status == "unsupported")

    def by_group(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for item in self.items:
            row = out.setdefault(item.group or "all", {"total": 0, "covered": 0, "agree": 0,
                                                       "checked": 0})
            row["total"] += 1
            row["covered"] += item.status != "unsupported"
            row["agree"] += item.status == "agree"
            row["checked"] += item.status in ("agree", "disagree", "error")
        return out

    def by_feature(self) -> dict[str, dict[str, int]]:
        """Per construct the gold queries use: how many use it, convert, and agree."""
        out: dict[str, dict[str, int]] = {}
        for item in self.items:
            for feature in item.features:
                row = out.setdefault(feature, {"total": 0, "covered": 0, "agree": 0})
                row["total"] += 1
                row["covered"] += item.status != "unsupported"
                row["agree"] += item.status == "agree"
        return dict(sorted(out.items(), key=lambda kv: (-kv[1]["total"], kv[0])))

    def summary(self) -> dict[str, Any]:
        checked = self.checked
        return {
            "dataset": self.dataset,
            "total": self.total,
            "covered": self.covered,
            "coverage": self.covered / self.total if self.total else 0.0,
            "checked": checked,
            "agree": self.count("agree"),
            "agreement": self.count("agree") / checked if checked else 0.0,
            "disagree": self.count("disagree"),
            "error": self.count("error"),
            "unchecked": self.count("unchecked"),
            "constructs": dict(self.constructs.most_common()),
            "groups": self.by_group(),
            "features": self.by_feature(),
            "seconds": round(self.seconds, 1),
        }

    def format(self) -> str:
        s = self.summary()
        lines = [
            f"{self.dataset}: {s['covered']}/{s['total']} gold queries converted "
            f"({s['coverage']:.1%}); equivalence on synthesized graphs: {s['agree']}/{s['checked']} "
            f"agree ({s['agreement']:.1%}), {s['disagree']} disagree, {s['error']} errors, "
            f"{s['unchecked']} unchecked",
        ]
        if s["constructs"]:
            lines += ["", "| construct | queries | what |", "|---|---:|---|"]
            lines += [f"| {c} | {n} | {CONSTRUCTS.get(c, '')} |" for c, n in s["constructs"].items()]
        if s["features"]:
            lines += ["", "| construct used | queries | converted | agree |", "|---|---:|---:|---:|"]
            lines += [f"| {f} | {r['total']} | {r['covered']} ({r['covered'] / r['total']:.1%}) "
                      f"| {r['agree']} |" for f, r in s["features"].items()]
        groups = s["groups"]
        if len(groups) > 1:
            lines += ["", "| group | questions | converted | agree / checked |", "|---|---:|---:|---:|"]
            lines += [f"| {g} | {r['total']} | {r['covered']} | {r['agree']} / {r['checked']} |"
                      for g, r in sorted(groups.items())]
        bad = [i for i in self.items if i.status in ("disagree", "error")][:10]
        if bad:
            lines += ["", "Disagreements / errors (first 10):"]
            lines += [f"- {i.id}: {i.status} gold={list(i.gold)} program={list(i.predicted)} {i.detail}"
                      for i in bad]
        return "\n".join(lines)


def sparql_fidelity(
    dataset: str,
    *,
    data_dir: Path | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    slice_path: str | Path | None = None,
) -> FidelityReport:
    """Coverage and equivalence of a dataset's gold queries (see the module docstring).

    ``slice_path``: write the synthesized graphs of the queries that agree, together, as
    N-Triples there: a *synthesized slice* of the KB on which ``pyql eval --llm gold`` of the
    dataset scores at the ceiling the conversion allows (``pyql kb load`` it, then ``--kb``)."""
    queries = load_gold_queries(dataset, data_dir)
    if limit is not None:
        queries = queries[:limit]
    if sample is not None and sample < len(queries):
        queries = [queries[i] for i in sorted(random.Random(seed).sample(range(len(queries)), sample))]
    start = time.perf_counter()
    items = []
    sink: list[tuple[Any, Any, Any]] | None = [] if slice_path is not None else None
    for n, gold in enumerate(queries, 1):
        items.append(check_query(gold, DATASET_PROFILES.get(dataset, "freebase"),
                                 graph_sink=sink))
        if progress is not None:
            progress(n, len(queries))
    if slice_path is not None:
        write_ntriples(sink, slice_path)
    return FidelityReport(dataset, items, time.perf_counter() - start)
