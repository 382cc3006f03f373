"""Property tests: term parsing, program parsing and compiling never fail with anything but a
pyql error, and whatever compiles is SPARQL that pyoxigraph parses."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pyql import Program, Session, Sparql
from pyql.errors import PyqlError
from pyql.kb import OxigraphKB
from pyql.profiles import FREEBASE, GENERIC, METAQA
from pyql.program import COMPARISON_OPS, SPARQL_TOOLS, Param, ParamKind
from pyql.resolve import Context, Slot, parse_term
from pyql.sparql.apply import apply_call
from pyql.sparql.compile import compile_relations
from pyql.syntax import quote_string
from pyql.terms import Entity, Literal, Relation, Var
from tests.support.sparql import embed

STORE = ox.Store()
T = TypeVar("T")
#: PYQL_FUZZ_SCALE=20 runs twenty times the examples (a deeper run than CI's, same tests)
SCALE = float(os.environ.get("PYQL_FUZZ_SCALE", "1"))
FAST = settings(
    max_examples=int(250 * SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SLOW = settings(
    max_examples=int(100 * SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

CONTEXTS = [
    Context(FREEBASE, {"The Green Mile": "m.0green", "Kim": "m.0kim"}),
    Context(GENERIC.with_prefixes(ex="http://example.org/"), {"Kismet": "ex:kismet"}),
    Context(METAQA, {"Kismet": "Kismet", "The Green Mile": "The Green Mile"}),
]
SLOTS = [Slot.NODE, Slot.VAR, Slot.ENTITY, Slot.LITERAL, Slot.RELATION, Slot.CLASS, Slot.VALUE]

# -- strategies ---------------------------------------------------------------------------------

#: any text: unicode, control characters, lone surrogates
ANY_CHAR = st.one_of(
    st.characters(),
    st.sampled_from(list("\x00\n\r\t\x0b\x7f\u2028\ufeff\ufffe\ud800\udfff")),
    st.sampled_from(list("?$<>\"'(),;#{}|^`\\@:. -_")),
)
ANY_TEXT = st.text(ANY_CHAR, max_size=40)

#: fragments of the term syntax, glued together: far more often near-valid than random text
PIECES = st.sampled_from(
    [
        "?",
        "$",
        "x",
        "x0",
        "m.",
        "0crbvqz",
        "g.",
        "ns:",
        "xsd:",
        "ex:",
        "e:",
        "rdf:type",
        "<",
        ">",
        "http://",
        "example.org/",
        "a",
        "#",
        "%",
        "%20",
        "%zz",
        '"',
        "'",
        "\\",
        "\\u00e9",
        "\\n",
        "@",
        "en",
        "-",
        "GB",
        "^^",
        "float",
        "dateTime",
        "http://www.w3.org/2001/XMLSchema#float",
        "1",
        "2015",
        "-08-10",
        "T10:00:00",
        ".",
        "e3",
        "The Green Mile",
        "Kismet",
        "people.person",
        ".spouse_s",
        " ",
        ",",
        "(",
        ")",
        "true",
        "²",
        "é",
        "中",
        "\U0001f600",
        "}",
        "{",
        ";",
    ]
)
GLUED = st.lists(st.one_of(PIECES, ANY_TEXT), max_size=8).map("".join)

#: ``<IRI>`` references with arbitrary text inside, written where a relation or an entity goes
IRI_REFS = st.text(ANY_CHAR, max_size=12).map(lambda s: f"<http://example.org/{s}>")

#: well-formed terms of every kind, with arbitrary payloads where the syntax allows them
VARIABLE_POOL = st.sampled_from(["?x", "?y", "?z", "x0", "x1", "?count", "?été"])
VARIABLES = st.one_of(
    VARIABLE_POOL, st.text(ANY_CHAR, min_size=1, max_size=6).map(lambda s: "?" + s)
)
RELATIONS = st.one_of(
    st.sampled_from(
        [
            "people.person.spouse_s",
            "film.film.runtime",
            "ns:type.object.name",
            "directed_by",
            "ex:directed_by",
            "rdf:type",
            "<http://example.org/p>",
            '"film.film.directed_by"',
        ]
    ),
    st.from_regex(r"[a-z_]{1,8}\.[a-z_]{1,8}\.[a-z_]{1,8}", fullmatch=True),
    IRI_REFS,
)
ENTITIES = st.one_of(
    st.sampled_from(
        [
            "The Green Mile",
            '"The Green Mile"',
            "Kim",
            "Kismet",
            "m.0green",
            "ex:kismet",
            "e:Kismet",
            "<http://example.org/a>",
        ]
    ),
    st.from_regex(r"[mg]\.[0-9a-z_]{1,8}", fullmatch=True),
    IRI_REFS,
    st.text(ANY_CHAR, max_size=12).map(lambda s: f"ex:{s}"),
)


def _quoted(text: str, style: int) -> str:
    if style == 0:
        return quote_string(text)
    if style == 1:
        return f'"{text}"'
    return f"'{text}'"


LITERALS = st.one_of(
    st.builds(_quoted, ANY_TEXT, st.integers(0, 2)),
    st.builds(
        lambda t, lang: f"{quote_string(t)}@{lang}",
        ANY_TEXT,
        st.sampled_from(["en", "en-GB", "fr", "add", "x-abc", "en-a", "12"]),
    ),
    st.builds(
        lambda t, dt: f"{quote_string(t)}^^{dt}",
        st.one_of(ANY_TEXT, st.just("1.5")),
        st.sampled_from(
            [
                "xsd:float",
                "xsd:dateTime",
                "xsd:date",
                "xsd:gYear",
                "xsd:integer",
                "<http://example.org/dt>",
                "foo:bar",
            ]
        ),
    ),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.floats(0, 1e6).map(lambda f: f"{f}^^http://www.w3.org/2001/XMLSchema#float"),
    st.dates().map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: f'"{d.isoformat()}"^^xsd:dateTime'),
    st.sampled_from(["1859", '"1859"^^xsd:gYear', "true", "2015-08", "-0500"]),
)
NODES = st.one_of(VARIABLES, ENTITIES, LITERALS)
CLEAN_NODES = st.one_of(VARIABLE_POOL, ENTITIES, LITERALS)
TERM_TEXT = st.one_of(ANY_TEXT, GLUED, NODES, RELATIONS)


def _argument(draw: st.DrawFn, param: Param | None, clean: bool) -> str:
    if param is None:
        return draw(TERM_TEXT)
    if param.kind is ParamKind.OP:
        ops = st.sampled_from([*COMPARISON_OPS, "<>"])
        return draw(ops if clean else st.one_of(ops, TERM_TEXT))
    slot = param.slot or Slot.NODE
    if slot == Slot.VAR:
        choice = VARIABLE_POOL if clean else VARIABLES
    elif slot in (Slot.RELATION, Slot.CLASS):
        choice = RELATIONS
    elif slot == Slot.LITERAL:
        choice = LITERALS
    else:
        choice = CLEAN_NODES if clean else NODES
    return draw(choice if clean else st.one_of(choice, choice, choice, TERM_TEXT))


@st.composite
def call_text(draw: st.DrawFn, python: bool = False, clean: bool = False) -> str:
    """One call; ``clean``: a known function with a valid number of slot-appropriate arguments."""
    name = draw(st.sampled_from(list(SPARQL_TOOLS) if clean else [*SPARQL_TOOLS, "foo"]))
    sig = SPARQL_TOOLS.get(name)
    params: list[Param | None]
    if sig is not None and (clean or draw(st.integers(0, 9))):
        lo, hi = sig.arity
        params = list(sig.params[: draw(st.integers(lo, hi))])
    else:
        params = [None] * draw(st.integers(0, 6))
    args = [_argument(draw, p, clean) for p in params]
    if python:
        return f"a.{name}({', '.join(repr(a) for a in args)})"
    sep = draw(st.sampled_from([", ", ",", " , ", ",\n "]))
    return f"{name}({sep.join(args)})"


@st.composite
def program_text(draw: st.DrawFn, clean: bool = False) -> str:
    first = "add_fact(?x, <http://example.org/p>, ?y)"
    calls = [first, *draw(st.lists(call_text(clean=clean), max_size=5))]
    joiner = draw(st.sampled_from(["\n", "\n\n", "; ", "\r\n", "\n# comment\n"]))
    text = joiner.join(calls)
    if not clean and draw(st.booleans()):  # damage it
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(ANY_TEXT) + text[i:]
    return text


@st.composite
def python_program_text(draw: st.DrawFn, clean: bool = False) -> str:
    calls = draw(st.lists(call_text(python=True, clean=clean), max_size=5))
    return "\n".join(["a=PyQL()", "a.add_fact('x0', '<http://example.org/p>', 'x1')", *calls])


# -- helpers ------------------------------------------------------------------------------------


def unless_refused(build: Callable[..., T], *args: object) -> T | None:
    """What ``build(*args)`` returns, or None when pyql refuses the input with its own error
    (any other exception fails the test)."""
    try:
        return build(*args)
    except PyqlError:
        return None


def assert_sparql(query: str) -> None:
    try:
        STORE.query(query)
    except SyntaxError as exc:  # pragma: no cover - the failure message is the point
        raise AssertionError(f"pyql produced invalid SPARQL ({exc}):\n{query}") from None


def compile_program(program: Program, ctx: Context) -> int:
    """Replay call by call, skipping refused calls (as a Session rolls back); every query along
    the way must compile to SPARQL that parses. Only pyql errors may be raised. Returns how many
    calls were accepted."""
    query = Sparql(profile=ctx.profile, entities=ctx.entities)
    accepted = 0
    for call in program:
        try:
            query = apply_call(query, call, ctx)
        except PyqlError:
            continue
        accepted += 1
        assert_sparql(query.to_sparql())
    if query.variables:
        assert_sparql(query.to_sparql(select=query.variables[:1], limit=3))
        assert_sparql(compile_relations(query, query.variables[0], "forward", limit=10))
        assert_sparql(compile_relations(query, query.variables[-1], "backward"))
    limited = replace(query, extremum_mode="limit")
    assert_sparql(limited.to_sparql())
    return accepted


# -- terms --------------------------------------------------------------------------------------


@FAST
@given(text=TERM_TEXT, slot=st.sampled_from(SLOTS), ctx=st.sampled_from(CONTEXTS))
def test_parse_term_only_raises_pyql_errors(text: str, slot: Slot, ctx: Context) -> None:
    term = unless_refused(parse_term, text, slot, ctx)
    if term is not None:
        assert_sparql(embed(term))


@FAST
@given(text=st.text(ANY_CHAR, max_size=30))
def test_unknown_text_is_never_a_variable(text: str) -> None:
    term = unless_refused(parse_term, text, Slot.NODE, CONTEXTS[0])
    if isinstance(term, Var):
        stripped = text.strip()
        assert stripped.startswith("?") or re.fullmatch(r"x\d+", stripped)


@FAST
@given(
    value=st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
    lang=st.sampled_from([None, "en", "en-GB", "zh-Hant-TW"]),
)
def test_literals_render_escaped_and_exact(value: str, lang: str | None) -> None:
    lit = Literal(value, lang=lang)
    (row,) = list(STORE.query(f"SELECT ?v WHERE {{ BIND({lit} AS ?v) }}"))
    assert row["v"].value == value


@FAST
@given(iri=st.text(ANY_CHAR, max_size=30).map(lambda s: "http://example.org/" + s))
def test_entities_are_valid_or_refused(iri: str) -> None:
    entity = unless_refused(Entity, iri)
    if entity is not None:
        assert_sparql(embed(entity))
        assert_sparql(embed(Relation(iri)))


@FAST
@given(name=st.text(ANY_CHAR, max_size=12))
def test_variables_are_valid_or_refused(name: str) -> None:
    var = unless_refused(Var, name)
    if var is not None:
        assert_sparql(embed(var))


@FAST
@given(label=st.text(ANY_CHAR, min_size=1, max_size=30))
def test_metaqa_labels_encode_reversibly(label: str) -> None:
    # a label written as an IRI is taken as that IRI (METAQA.entity accepts ids and IRIs)
    assume(not label.startswith(("http://", "https://", "urn:")))
    assume(not (label.startswith("<") and label.endswith(">")))
    entity = unless_refused(METAQA.entity, label)
    if entity is not None:
        assert METAQA.compact(entity.iri) == label
        assert_sparql(embed(entity))


# -- programs -----------------------------------------------------------------------------------


def _check_program(text: str, ctx: Context) -> None:
    program = unless_refused(Program.parse, text)
    if program is None:
        return
    printed = str(program)
    again = Program.parse(printed)
    assert str(again) == printed
    if not text.startswith("a=PyQL()"):
        assert again == program  # agent-style text round-trips exactly
    compile_program(program, ctx)


@FAST
@given(
    text=st.one_of(ANY_TEXT, program_text(), python_program_text()), ctx=st.sampled_from(CONTEXTS)
)
def test_any_program_text(text: str, ctx: Context) -> None:
    _check_program(text, ctx)


@FAST
@given(
    text=st.one_of(program_text(clean=True), python_program_text(clean=True)),
    ctx=st.sampled_from(CONTEXTS),
)
def test_well_formed_programs(text: str, ctx: Context) -> None:
    _check_program(text, ctx)


@SLOW
@given(text=st.one_of(ANY_TEXT, program_text()))
def test_session_run_never_raises(text: str, session: Session) -> None:
    session.reset()
    for line in text.split("\n"):
        obs = session.run(line)
        assert obs.status in ("ok", "empty", "error", "hint")  # never backend_error: valid SPARQL
    obs = session.run("execute()")
    assert obs.status in ("ok", "empty", "error")


@pytest.fixture(scope="module")
def session() -> Session:
    kb = OxigraphKB.from_file(
        Path(__file__).parent / "fixtures" / "kb" / "freebase_small.ttl", profile="freebase"
    )
    return Session(kb, entities={"The Green Mile": "m.0green", "Kim": "m.0kim"})
