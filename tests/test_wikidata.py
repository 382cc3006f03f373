"""The ``wikidata`` profile: golden compiled SPARQL, and execution on the embedded store over the
hand-written Wikidata-shaped graph ``fixtures/kb/wikidata_small.ttl`` (see its comments)."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest

from pyql import Program, Session, Sparql
from pyql.errors import TermError
from pyql.kb import OxigraphKB
from pyql.profiles import WIKIDATA, get_profile
from pyql.terms import Entity, Literal

KB_FILE = Path(__file__).parent / "fixtures" / "kb" / "wikidata_small.ttl"
PROLOGUE = """PREFIX wd: <http://www.wikidata.org/entity/>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX p: <http://www.wikidata.org/prop/>
PREFIX ps: <http://www.wikidata.org/prop/statement/>
PREFIX pq: <http://www.wikidata.org/prop/qualifier/>
PREFIX psv: <http://www.wikidata.org/prop/statement/value/>
PREFIX pqv: <http://www.wikidata.org/prop/qualifier/value/>
PREFIX wds: <http://www.wikidata.org/entity/statement/>
"""
LANG = 'FILTER (!isLiteral(?{v}) || lang(?{v}) = "" || langMatches(lang(?{v}), "en"))'


@pytest.fixture(scope="module")
def kb() -> OxigraphKB:
    return OxigraphKB.from_file(KB_FILE, profile="wikidata")


def answers(kb: OxigraphKB, program: str) -> set[str]:
    query = Program.parse(program).to_query(WIKIDATA)
    out = set()
    for cell in kb.select(query.to_sparql()).column(0):
        out.add(cell.short if isinstance(cell, Entity) else cell.lexical)
    return out


# -- naming ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "iri", "short"), [
    ("P161", "http://www.wikidata.org/prop/direct/P161", "P161"),
    ("wdt:P161", "http://www.wikidata.org/prop/direct/P161", "wdt:P161"),
    ("p:P39", "http://www.wikidata.org/prop/P39", "p:P39"),
    ("ps:P39", "http://www.wikidata.org/prop/statement/P39", "ps:P39"),
    ("pq:P580", "http://www.wikidata.org/prop/qualifier/P580", "pq:P580"),
    ("psv:P569", "http://www.wikidata.org/prop/statement/value/P569", "psv:P569"),
    ("pqv:P580", "http://www.wikidata.org/prop/qualifier/value/P580", "pqv:P580"),
    ("Q5", "http://www.wikidata.org/entity/Q5", "Q5"),  # a class (add_type's second argument)
])
def test_relations_and_classes(text: str, iri: str, short: str) -> None:
    relation = WIKIDATA.relation(text)
    assert (relation.iri, relation.short) == (iri, short)


def test_entities_and_their_short_forms() -> None:
    assert get_profile("wikidata") is WIKIDATA
    assert WIKIDATA.entity("Q42").iri == "http://www.wikidata.org/entity/Q42"
    assert WIKIDATA.entity("wd:Q42").iri == "http://www.wikidata.org/entity/Q42"
    assert WIKIDATA.compact("http://www.wikidata.org/entity/Q42") == "Q42"
    assert WIKIDATA.compact("http://www.wikidata.org/prop/direct/P161") == "P161"
    assert WIKIDATA.compact("http://www.wikidata.org/prop/qualifier/P580") == "pq:P580"
    # statements keep their namespace, so the short form reads back as the same node
    statement = "http://www.wikidata.org/entity/statement/Q42-abc-1"
    assert WIKIDATA.compact(statement) == "wds:Q42-abc-1"
    assert WIKIDATA.entity(WIKIDATA.compact(statement)).iri == statement


def test_a_relation_that_is_not_a_property_id_is_a_typed_error() -> None:
    with pytest.raises(TermError) as info:
        WIKIDATA.relation("cast_member")
    assert "P161" in info.value.expected


# -- golden compiled text --------------------------------------------------------------------------
GOLDEN = [
    ("truthy fact and a class through P31/P279*",
     "add_fact(Q42, P69, ?x)\nadd_type(?x, Q3918)\nset_answer(?x)",
     "SELECT DISTINCT ?x\nWHERE {\n  wd:Q42 wdt:P69 ?x .\n  ?x wdt:P31/wdt:P279* wd:Q3918 .\n  "
     + LANG.format(v="x") + "\n}"),
    ("a statement with a qualifier",
     "add_fact(Q836821, p:P161, ?s)\nadd_fact(?s, ps:P161, ?actor)\nadd_fact(?s, pq:P453, Q1187733)"
     "\nset_answer(?actor)",
     "SELECT DISTINCT ?actor\nWHERE {\n  wd:Q836821 p:P161 ?s .\n  ?s ps:P161 ?actor .\n"
     "  ?s pq:P453 wd:Q1187733 .\n  " + LANG.format(v="actor") + "\n}"),
    ("a year filter on a qualifier's time",
     'add_fact(Q42, p:P69, ?s)\nadd_fact(?s, pq:P580, ?t)\nadd_filter(?t, =, "1971"^^xsd:gYear)'
     "\nset_answer(?s)",
     "SELECT DISTINCT ?s\nWHERE {\n  wd:Q42 p:P69 ?s .\n  ?s pq:P580 ?t .\n"
     '  FILTER (SUBSTR(STR(?t), 1, IF(STRLEN(STR(?t)) < 4, STRLEN(STR(?t)), 4)) = '
     'SUBSTR("1971", 1, IF(STRLEN(STR(?t)) < 4, STRLEN(STR(?t)), 4)))\n  '
     + LANG.format(v="s") + "\n}"),
    ("a count",
     "add_fact(?c, P31, Q6256)\nadd_count(?c, ?n)",
     "SELECT (COUNT(DISTINCT ?c) AS ?n)\nWHERE {\n  ?c wdt:P31 wd:Q6256 .\n}"),
]


@pytest.mark.parametrize(("case", "program", "sparql"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden(case: str, program: str, sparql: str) -> None:
    text = Program.parse(program).to_sparql(profile="wikidata")
    assert text == PROLOGUE + sparql
    ox.Store().query(text)  # valid SPARQL 1.1
    assert "SERVICE" not in text and "wikibase:label" not in text


# -- execution on the embedded store ---------------------------------------------------------------
@pytest.mark.parametrize(("program", "expected"), [
    ("add_fact(Q42, P69, ?x)\nset_answer(?x)", {"Q4961791", "Q691283"}),
    # St John's College is a constituent college, a subclass of university: P31/P279* finds it
    ("add_fact(Q42, P69, ?x)\nadd_type(?x, Q3918)\nset_answer(?x)", {"Q691283"}),
    ("add_fact(Q42, P69, ?x)\nadd_type(?x, Q2385804)\nset_answer(?x)", {"Q4961791", "Q691283"}),
    # the statement node is the CVT: fact and qualifier on the same statement
    ("add_fact(Q836821, p:P161, ?s)\nadd_fact(?s, ps:P161, ?a)\nadd_fact(?s, pq:P453, Q1267823)"
     "\nset_answer(?a)", {"Q223117"}),
    ("add_fact(Q836821, p:P161, ?s)\nadd_fact(?s, ps:P161, Q309486)\nadd_fact(?s, pq:P453, ?c)"
     "\nset_answer(?c)", {"Q1187733"}),
    ("add_fact(Q76, p:P39, ?s)\nadd_fact(?s, ps:P39, Q11696)\nadd_fact(?s, pq:P1366, ?x)"
     "\nset_answer(?x)", {"Q22686"}),
    # time windows over statement qualifiers; an open statement (no end) overlaps any window after
    # its start
    ('add_fact(?x, p:P39, ?s)\nadd_fact(?s, ps:P39, Q11696)\n'
     'add_time_constrain(?s, pq:P580, pq:P582, "2012-12-31", "2012-01-01")\nset_answer(?x)',
     {"Q76"}),
    ('add_fact(?x, p:P39, ?s)\nadd_fact(?s, ps:P39, Q11696)\n'
     'add_time_constrain(?s, pq:P580, pq:P582, "2024-12-31", "2024-01-01")\nset_answer(?x)',
     {"Q6279"}),
    # year filters compare at the year's precision
    ('add_fact(Q42, p:P69, ?s)\nadd_fact(?s, ps:P69, ?x)\nadd_fact(?s, pq:P582, ?t)\n'
     'add_filter(?t, <, "1972"^^xsd:gYear)\nset_answer(?x)', {"Q4961791"}),
    ('add_fact(Q42, p:P69, ?s)\nadd_fact(?s, ps:P69, ?x)\nadd_fact(?s, pq:P580, ?t)\n'
     'add_filter(?t, =, "1971"^^xsd:gYear)\nset_answer(?x)', {"Q691283"}),
    ("add_fact(?c, P31, Q6256)\nadd_fact(?c, P1082, ?n)\nadd_max(?n)\nset_answer(?c)", {"Q183"}),
    ("add_fact(?c, P31, Q6256)\nadd_fact(?c, P1082, ?n)\nadd_min(?n)\nset_answer(?c)", {"Q145"}),
    ("add_fact(?c, P31, Q6256)\nadd_count(?c, ?n)", {"3"}),
])
def test_execution(kb: OxigraphKB, program: str, expected: set[str]) -> None:
    assert answers(kb, program) == expected


def test_a_session_shows_labels_and_statements(kb: OxigraphKB) -> None:
    session = Session(kb)
    seen = session.run("get_relation(Q42)")
    assert seen.ok and "p:P69" in seen.relations.forward and "P69" in seen.relations.forward
    step = session.run("add_fact(Q42, p:P69, ?s)")
    assert step.ok
    assert sorted(step.values["?s"].values) == ["wds:Q42-brentwood", "wds:Q42-stjohns"]
    assert step.values["?s"].unnamed == 0  # statements are shown by their id, not as nameless
    session.run("add_fact(?s, ps:P69, ?school)")
    step = session.run("add_type(?school, Q3918)")
    assert step.values["?school"].values == ("St John's College",)
    session.run("set_answer(?school)")
    assert session.run("execute()").answers == ("Q691283",)  # answers are ids


def test_labels_are_english(kb: OxigraphKB) -> None:
    session = Session(kb)
    assert session.display([WIKIDATA.entity("Q183"), Literal("x")]) == ["Germany", "x"]
