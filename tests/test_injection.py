"""Injection: hostile text in every argument position either fails with a typed pyql error or stays
inside a literal/IRI, and the store holds exactly the same triples afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pyql import Session
from pyql.errors import ReadOnlyError
from pyql.kb import OxigraphKB
from pyql.kb.base import _check_blanked, _plainly_read_only, ensure_read_only
from pyql.program import SPARQL_TOOLS
from pyql.results import ResultSet
from pyql.sparql.compile import CompiledSparql
from pyql.syntax import quote_string
from pyql.terms import Entity, Literal, Relation

KB_FILE = Path(__file__).parent / "fixtures" / "kb" / "freebase_small.ttl"

PAYLOADS = [
    ">",
    "}",
    ";",
    "#",
    "\n",
    "\r\n",
    ".",
    "DELETE WHERE {?s ?p ?o}",
    "} ; DELETE WHERE { ?s ?p ?o } #",
    '"}; DROP ALL; #',
    "'}; DROP ALL; #",
    '"',
    "'",
    "\\",
    '\\"',
    "\\u0022) } DROP ALL #",
    '"""',
    "<http://x> } INSERT DATA { <http://a> <http://b> <http://c> } #",
    "> } INSERT DATA { <http://a> <http://b> <http://c> } #",
    "x> . } CLEAR ALL #",
    "a.b } LOAD <http://evil.example/data.ttl> #",
    ") , (",
    "?s ?p ?o",
    "@en } DROP DEFAULT",
    "^^<http://x> } ADD DEFAULT TO <http://g>",
    "é 中文 😀 \u2028 \u202e \ufeff",
    "\x00\x07\x1b\x7f",
]


def forms(payload: str) -> list[str]:
    """Ways an LLM might write the payload into one argument."""
    return [
        payload,  # bare
        quote_string(payload),  # a properly escaped string
        f'"{payload}"',  # naive strings
        f"'{payload}'",
        f"{quote_string(payload)}@en",
        f"{quote_string(payload)}^^<http://x.org/{payload}>",
        f"<http://x.org/{payload}>",
        f"?x{payload}",
        f"m.0x{payload}",
        f"ns:{payload}",
        f"people.person{payload}",
        f"1{payload}",
        f"2015-08-10{payload}",
        f"{quote_string(payload)}^^xsd:string",
    ]


SETUP = ["add_fact(m.0kim, people.person.spouse_s, ?m)", "add_fact(?m, people.marriage.spouse, ?s)"]
#: a valid call for every function; {} marks the argument position under attack
DEFAULTS = {
    "node": "m.0kim",
    "head": "?m",
    "relation": "people.marriage.spouse",
    "tail": "?s",
    "var": "?s",
    "type": "people.person",
    "ob1": "?s",
    "op": "!=",
    "ob2": "m.0kim",
    "start_relation": "people.marriage.from",
    "end_relation": "people.marriage.to",
    "window_end": "2015-08-10",
    "window_start": "2015-08-10",
    "max_var": "?s",
    "min_var": "?s",
    "count_var": "?s",
    "sum_var": "?s",
    "avg_var": "?s",
    "new_var": "?n",
    "answer_var": "?s",
}


def templates() -> list[tuple[str, int]]:
    """(call text with {} at the attacked argument, that argument's index)."""
    out = []
    for sig in SPARQL_TOOLS.values():
        for index in range(len(sig.params)):
            args = [DEFAULTS[p.name] if i != index else "{}" for i, p in enumerate(sig.params)]
            out.append((f"{sig.name}({', '.join(args)})", index))
    return out


TEMPLATES = templates()


def quads(store: ox.Store) -> set[ox.Quad]:
    return set(store.quads_for_pattern(None, None, None, None))


class RecordingKB(OxigraphKB):
    """The fixture store, keeping every query text that reached the engine."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.texts: list[str] = []

    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        self.texts.append(query)
        return super()._select(query, timeout=timeout)

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        self.texts.append(query)
        return super()._ask(query, timeout=timeout)


@pytest.fixture(scope="module")
def kb() -> RecordingKB:
    kb = RecordingKB(profile="freebase")
    kb.load(KB_FILE)
    return kb


@pytest.fixture(scope="module")
def before(kb: OxigraphKB) -> set[ox.Quad]:
    return quads(kb.store)


@pytest.fixture(scope="module")
def session(kb: OxigraphKB, before: set[ox.Quad]) -> Session:
    session = Session(kb, entities={"Kim Example": "m.0kim"})
    for action in SETUP:
        assert session.run(action).ok
    return session


def test_every_argument_position_is_attacked() -> None:
    functions = {t.split("(")[0] for t, _ in TEMPLATES}
    assert functions == set(SPARQL_TOOLS) - {"execute"}
    assert len(TEMPLATES) == sum(len(s.params) for s in SPARQL_TOOLS.values())


def _check_accepted(session: Session, payload: str, written: str, index: int) -> None:
    """An accepted step: the query is a read query that pyoxigraph parses, and the payload is
    inside a term (an escaped string keeps it verbatim)."""
    text = session.query.to_sparql()
    ensure_read_only(text)
    ox.Store().query(text)
    term = session.observations[-1].feedback.args[index]
    if written in (quote_string(payload), f"{quote_string(payload)}@en") and isinstance(
        term, Literal
    ):
        assert term.lexical == payload
    if isinstance(term, (Entity, Relation)):
        assert str(term) == f"<{term.iri}>"  # an IRI that validated


@pytest.mark.parametrize("payload", PAYLOADS, ids=[repr(p)[:40] for p in PAYLOADS])
def test_payload_in_every_position(
    kb: OxigraphKB, session: Session, before: set[ox.Quad], payload: str
) -> None:
    state = (session.query, session.program, session.memory)
    outcomes = {"ok": 0, "error": 0}
    for template, index in TEMPLATES:
        for written in forms(payload):
            session.query, session.program, session.memory = state
            action = template.replace("{}", written)
            obs = session.run(action)  # never raises
            assert obs.status in ("ok", "empty", "error"), (action, obs.status, obs.error)
            if obs.ok:
                outcomes["ok"] += 1
                _check_accepted(session, payload, written, index)
                done = session.run("execute()")
                assert done.status in ("ok", "empty", "error"), (action, done.error)
            else:
                outcomes["error"] += 1
                assert obs.feedback.python.error_type  # a typed pyql error
    session.query, session.program, session.memory = state
    assert outcomes["ok"] > 0  # some forms are harmless literals/IRIs and are accepted
    assert quads(kb.store) == before
    # the compiled text skips the backends' read-only check (CompiledSparql): it must pass it
    for text in kb.texts:
        assert type(text) is CompiledSparql
        ensure_read_only(text)
    kb.texts.clear()


def test_only_compiled_text_skips_the_read_only_check(kb: RecordingKB) -> None:
    text = Session(kb, entities={"Kim Example": "m.0kim"}).query.add_fact(
        "m.0kim", "people.person.spouse_s", "?m").to_sparql()
    assert type(text) is CompiledSparql
    assert type(text + " ") is str and type(text.replace("?m", "?n")) is str  # edits drop it
    forged = text.replace("SELECT DISTINCT ?m", "DELETE { ?s ?p ?o } WHERE { ?s ?p ?o } #")
    count = kb.query_count
    with pytest.raises(ReadOnlyError):
        kb.select(forged)
    assert kb.query_count == count
    assert kb.select(text).rows  # compiled: runs


def test_hostile_entity_table(kb: OxigraphKB, before: set[ox.Quad]) -> None:
    entities = {
        "Evil": "m.0x> } INSERT DATA { <http://a> <http://b> <http://c> } #",
        "Evil IRI": "http://x.org/a> . } DROP ALL #",
        "Evil prefixed": "ns:a } CLEAR ALL",
        '"}; DROP ALL; #': "m.0kim",  # a hostile mention of a harmless id
    }
    session = Session(kb, entities=entities)
    for mention in ("Evil", "Evil IRI", "Evil prefixed"):
        for action in (
            f"get_relation({mention})",
            f"add_fact({mention}, people.person.spouse_s, ?m)",
            f"add_fact(?m, people.marriage.spouse, {quote_string(mention)})",
        ):
            obs = session.run(action)
            assert obs.status == "error", action
            assert obs.feedback.python.status == "bad_term"
    obs = session.run(
        f"add_fact({quote_string(chr(34) + '}; DROP ALL; #')}, people.person.spouse_s, ?m)"
    )
    assert obs.ok and "ns:m.0kim" in session.query.to_sparql()
    assert quads(kb.store) == before


def test_hostile_labels_in_the_store_are_shown_not_run(
    kb: OxigraphKB, before: set[ox.Quad]
) -> None:
    # m.0quote's name is 'Say "hi" \ back, (then) }; DROP' and its alias has a newline
    session = Session(kb)
    obs = session.run("add_fact(m.0quote, type.object.name, ?n)")
    assert obs.values["?n"].values == ('Say "hi" \\ back, (then) }; DROP',)
    obs = session.run('add_filter(?n, =, "Say \\"hi\\" \\\\ back, (then) }; DROP")')
    assert obs.status == "ok"
    obs = session.run('add_fact(?x, common.topic.alias, "line one\\nline two")')
    assert obs.status == "ok"
    assert quads(kb.store) == before


UPDATES = [
    "DELETE WHERE { ?s ?p ?o }",
    "delete where { ?s ?p ?o }",
    "INSERT DATA { <http://a> <http://b> <http://c> }",
    "PREFIX ns: <http://rdf.freebase.com/ns/> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "DROP ALL",
    "CLEAR DEFAULT",
    "LOAD <http://example.org/data.ttl>",
    "CREATE GRAPH <http://g>",
    "COPY DEFAULT TO <http://g>",
    "MOVE DEFAULT TO <http://g>",
    "ADD DEFAULT TO <http://g>",
    "WITH <http://g> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "SELECT * WHERE { ?s ?p ?o } ; DELETE WHERE { ?s ?p ?o }",
    "# a comment\nDELETE WHERE { ?s ?p ?o }",
    'SELECT * WHERE { ?s ?p "x"@en } DROP ALL',
    "",
    "   ",
    "this is not a query",
    # codepoint escapes are decoded before parsing, as SPARQL does (issue 15)
    "\\u0049NSERT DATA { <http://a> <http://b> <http://c> }",
    "\\U00000044ELETE WHERE { ?s ?p ?o }",
    "SELECT * WHERE { ?s ?p ?o } ; \\u0044\\u0052\\u004F\\u0050 ALL",
]


@pytest.mark.parametrize("update", UPDATES, ids=[repr(u)[:40] for u in UPDATES])
def test_select_refuses_updates(kb: OxigraphKB, before: set[ox.Quad], update: str) -> None:
    count = kb.query_count
    with pytest.raises(ReadOnlyError):
        kb.select(update)
    with pytest.raises(ReadOnlyError):
        kb.ask(update)
    assert kb.query_count == count  # refused before reaching the engine
    assert quads(kb.store) == before


@pytest.mark.parametrize(
    "query",
    [
        'SELECT ?s WHERE { ?s ?p "DELETE WHERE { ?s ?p ?o }" }',
        "SELECT ?s WHERE { ?s <http://x.org/INSERT> ?o }",
        'SELECT ?s WHERE { ?s ?p "x"@add }',
        "SELECT ?delete WHERE { ?delete ?p ?o }",
        "PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?s WHERE { ?s ns:drop.all ?o }",
        "ASK { ?s ?p ?o }",
        'SELECT ?s WHERE { ?s ?p "\\u0049NSERT DATA" }',
    ],
)
def test_keywords_inside_terms_are_not_updates(kb: OxigraphKB, query: str) -> None:
    assert ensure_read_only(query) == query
    if query.startswith("ASK"):
        assert kb.ask(query) is True
    else:
        kb.select(query)


#: pieces of queries, hostile and ordinary, that the read-only check's two paths must agree on
_PIECES = [
    "PREFIX ns: <http://x.org/> ", "BASE <http://x.org/>", "SELECT", "select", "ASK", "CONSTRUCT",
    "DESCRIBE", " ", "\n", "#", "# c\n", '"', "'", '"""', "<", ">", "<http://x.org/a>", "?s",
    "{", "}", ".", "ns:p", "INSERT", "insert", "Delete", "LOAD", "clear", "CREATE", "drop",
    "COPY", "move", "ADD", "With", "@add", "\\u0049NSERT", "\\", "WHERE", "ſ", "İ", "é", "ad",
    "d", "ns:", ":", "-",
]


_STARTS = ["", "SELECT ", "ASK", "PREFIX ns: <http://x.org/> SELECT ", "# c\nDESCRIBE "]


@settings(max_examples=400)
@given(st.sampled_from(_STARTS), st.lists(st.sampled_from(_PIECES), max_size=10).map("".join))
@example("", "#ns:DESCRIBECONSTRUCT")  # a keyword inside a comment is no query form
def test_the_quick_path_passes_only_what_the_full_check_passes(start: str, rest: str) -> None:
    text = start + rest
    if _plainly_read_only(text):
        _check_blanked(text)  # raises ReadOnlyError if the quick path let an update through


@pytest.mark.parametrize("query", [
    "PREFIX ns: <http://x.org/>\nSELECT ?s WHERE { ?s ns:p ?o }",
    "# a comment\nBASE <http://x.org/> ASK { ?s ?p ?o }",
])
def test_usual_queries_take_the_quick_path(query: str) -> None:
    assert _plainly_read_only(query)
    assert ensure_read_only(query) == query
