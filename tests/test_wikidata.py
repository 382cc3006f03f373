"""The ``wikidata`` profile: golden compiled SPARQL, and execution on the embedded store over the
hand-written Wikidata-shaped graph ``fixtures/kb/wikidata_small.ttl`` (see its comments)."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest

from pyql import Program, Session
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


def test_property_paths_are_relations_of_the_wikidata_profile_only() -> None:
    from pyql.terms import RelationPath

    closure = WIKIDATA.relation("P131+")
    assert isinstance(closure, RelationPath) and closure.op == "+"
    assert [p.short for p in WIKIDATA.relation("P22|pq:P25").parts] == ["P22", "pq:P25"]
    assert WIKIDATA.relation("P22|P25") == WIKIDATA.relation("P22|P25")
    assert WIKIDATA.relation("P22|P25") != WIKIDATA.relation("P22")
    with pytest.raises(TermError):
        get_profile("freebase").relation("people.person.parents+")


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
#: (program, answers on the fixture); tests/wikidata/test_virtuoso.py runs them on Virtuoso too
EXECUTION = [
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
    # property paths: a closure, zero or more steps, alternatives
    ("add_fact(Q2581649, P279+, ?x)\nset_answer(?x)", {"Q3918", "Q2385804"}),
    ("add_fact(?c, P279*, Q3918)\nset_answer(?c)", {"Q3918", "Q2581649"}),
    ("add_fact(Q42, P69|P27, ?x)\nset_answer(?x)", {"Q4961791", "Q691283", "Q145"}),
]


@pytest.mark.parametrize(("program", "expected"), EXECUTION)
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
    assert step.values["?school"].values == ("Q691283 (St John's College)",)
    session.run("set_answer(?school)")
    assert session.run("execute()").answers == ("Q691283",)  # answers are ids


def test_ids_are_shown_with_their_english_labels(kb: OxigraphKB) -> None:
    session = Session(kb)
    shown = session.display([WIKIDATA.entity("Q183"), WIKIDATA.entity("Q999999"), Literal("x")])
    assert shown == ["Q183 (Germany)", "Q999999 (no label)", "x"]


def test_relations_are_shown_with_the_labels_of_their_properties(kb: OxigraphKB) -> None:
    session = Session(kb)
    step = session.run("get_relation(Q42)")
    assert step.relations.forward == ("p:P69", "P106", "P27", "P31", "P69")  # the data: ids
    text = step.text
    for shown in ("'p:P69 (educated at)'", "'P106 (occupation)'", "'P31 (instance of)'"):
        assert shown in text
    session.run("add_fact(Q42, p:P69, ?s)")
    text = session.run("get_relation(?s)").text
    assert "'pq:P580 (start time)'" in text and "'ps:P69 (educated at)'" in text
    before = kb.label_query_count
    session.run("get_relation(?s)")
    assert kb.label_query_count == before  # the labels are cached


def test_labelled_by() -> None:
    assert WIKIDATA.labelled_by("http://www.wikidata.org/prop/direct/P161") == \
        "http://www.wikidata.org/entity/P161"
    assert WIKIDATA.labelled_by("http://www.wikidata.org/entity/Q42") == \
        "http://www.wikidata.org/entity/Q42"
    assert WIKIDATA.labelled_by("http://www.w3.org/2000/01/rdf-schema#label") is None
    assert not get_profile("freebase").labelled_ids


# -- gold SPARQL -> program ------------------------------------------------------------------------
WD_PREFIXES = (
    "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: <http://www.wikidata.org/prop/direct/> "
    "PREFIX p: <http://www.wikidata.org/prop/> PREFIX ps: <http://www.wikidata.org/prop/statement/> "
    "PREFIX pq: <http://www.wikidata.org/prop/qualifier/> "
    "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> "
)

#: (gold query in the shapes of WikiWebQuestions train, the program it converts to; facts in the
#: order rdflib's algebra gives the pattern, grown along shared variables)
CONVERSIONS = [
    ("SELECT DISTINCT ?x WHERE { wd:Q34086 wdt:P3373 ?x. ?x wdt:P21 wd:Q6581097. }",
     "add_fact(?x, P21, Q6581097)\nadd_fact(Q34086, P3373, ?x)\nset_answer(?x)\nexecute()"),
    # the class path is add_type; a bare wdt:P31 stays a fact (no subclass closure)
    ("SELECT DISTINCT ?x WHERE { wd:Q76 wdt:P69 ?x. ?x wdt:P31/wdt:P279* wd:Q3918. }",
     "add_fact(Q76, P69, ?x)\nadd_type(?x, Q3918)\nset_answer(?x)\nexecute()"),
    ("SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q6256. }",
     "add_fact(?x, P31, Q6256)\nset_answer(?x)\nexecute()"),
    ("SELECT DISTINCT ?x WHERE { wd:Q127367 p:P161 ?p. ?p ps:P161 wd:Q152165; pq:P453 ?x. }",
     "add_fact(?p, ps:P161, Q152165)\nadd_fact(Q127367, p:P161, ?p)\nadd_fact(?p, pq:P453, ?x)\n"
     "set_answer(?x)\nexecute()"),
    ("SELECT DISTINCT ?x WHERE { wd:Q1035067 p:P1346 ?p. ?p ps:P1346 ?x; pq:P585 ?y. "
     'FILTER((?y < "2012-01-01T00:00:00Z"^^xsd:dateTime) && '
     '(?y >= "2011-01-01T00:00:00Z"^^xsd:dateTime)) }',
     "add_fact(Q1035067, p:P1346, ?p)\nadd_fact(?p, pq:P585, ?y)\nadd_fact(?p, ps:P1346, ?x)\n"
     'add_filter(?y, <, "2012-01-01T00:00:00Z"^^xsd:dateTime)\n'
     'add_filter(?y, >=, "2011-01-01T00:00:00Z"^^xsd:dateTime)\nset_answer(?x)\nexecute()'),
    ("SELECT DISTINCT ?x WHERE { wd:Q2263 p:P166 ?p. ?p ps:P166 ?x; pq:P585 ?z. } "
     "ORDER BY DESC(?z) LIMIT 1",
     "add_fact(Q2263, p:P166, ?p)\nadd_fact(?p, pq:P585, ?z)\nadd_fact(?p, ps:P166, ?x)\n"
     "add_max(?z)\nset_answer(?x)\nexecute()"),
    # property paths the DSL writes in a relation position
    ("SELECT DISTINCT ?x WHERE { wd:Q5419 wdt:P131+ ?x. ?x wdt:P31/wdt:P279* wd:Q107390. }",
     "add_fact(Q5419, P131+, ?x)\nadd_type(?x, Q107390)\nset_answer(?x)\nexecute()"),
    ("SELECT DISTINCT ?x WHERE { wd:Q9439 wdt:P22|wdt:P25 ?x. }",
     "add_fact(Q9439, P22|P25, ?x)\nset_answer(?x)\nexecute()"),
    ("SELECT DISTINCT ?x WHERE { ?x wdt:P279* wd:Q6607; wdt:P1535 wd:Q484030. }",
     "add_fact(?x, P279*, Q6607)\nadd_fact(?x, P1535, Q484030)\nset_answer(?x)\nexecute()"),
    # a malformed id (no Q) is kept as an IRI, never read as the number 40475
    ("SELECT DISTINCT ?x WHERE { wd:40475 wdt:P1050 ?x. }",
     "add_fact(<http://www.wikidata.org/entity/40475>, P1050, ?x)\nset_answer(?x)\nexecute()"),
]


@pytest.mark.parametrize(("gold", "program"), CONVERSIONS)
def test_gold_queries_convert_and_agree(gold: str, program: str) -> None:
    from pyql.datasets.sparql_fidelity import GoldQuery, check_query
    from pyql.sparql.from_sparql import from_sparql

    assert str(from_sparql(WD_PREFIXES + gold, "wikidata")) == program
    result = check_query(GoldQuery("t", WD_PREFIXES + gold), "wikidata")
    assert result.status == "agree", result
    assert result.gold  # the synthesized graph has a solution


def test_a_class_path_is_exercised_through_a_subclass_on_the_synthesized_graph() -> None:
    from pyql.datasets.sparql_fidelity import synthesize
    from pyql.sparql.from_sparql import read_query

    graph = synthesize(read_query(WD_PREFIXES + CONVERSIONS[1][0]))
    predicates = {str(p) for _s, p, _o in graph}
    assert {"http://www.wikidata.org/prop/direct/P31",
            "http://www.wikidata.org/prop/direct/P279"} <= predicates


@pytest.mark.parametrize(("gold", "construct"), [
    ("SELECT DISTINCT ?x WHERE { wd:Q5419 wdt:P131/wdt:P17 ?x. }", "property_path"),
    ("SELECT DISTINCT ?x WHERE { wd:Q9439 (wdt:P22|wdt:P25)+ ?x. }", "property_path"),
    ("SELECT DISTINCT ?x WHERE { ?x p:P39 ?p. ?p ps:P39 wd:Q4416090. "
     "FILTER NOT EXISTS { ?p pq:P582 ?z. } }", "not_exists"),
    ("SELECT DISTINCT ?x WHERE { wd:Q145 wdt:P150 ?x. } LIMIT 4", "limit"),
])
def test_blocking_constructs_are_named(gold: str, construct: str) -> None:
    from pyql.datasets.sparql_fidelity import GoldQuery, check_query, query_features

    result = check_query(GoldQuery("t", WD_PREFIXES + gold), "wikidata")
    assert (result.status, result.construct) == ("unsupported", construct)
    assert construct in query_features(WD_PREFIXES + gold, "wikidata") or construct == "property_path"


def test_query_features_name_statements_and_class_paths() -> None:
    from pyql.datasets.sparql_fidelity import query_features

    assert query_features(WD_PREFIXES + CONVERSIONS[3][0], "wikidata") == {"p:", "ps:", "pq:"}
    assert query_features(WD_PREFIXES + CONVERSIONS[1][0], "wikidata") == {"wdt:", "class_path"}
    assert "property_path" in query_features(WD_PREFIXES + "SELECT ?x WHERE { wd:Q1 wdt:P131+ ?x }",
                                             "wikidata")


def test_wwq_train_converts_and_agrees(pyql_data: Path) -> None:
    from pyql.datasets.sparql_fidelity import sparql_fidelity

    report = sparql_fidelity("wwq", data_dir=pyql_data, sample=150, seed=3)
    summary = report.summary()
    assert summary["coverage"] >= 0.9, report.format()
    assert summary["checked"] == summary["covered"]  # every converted query has a graph
    assert summary["agree"] == summary["checked"], report.format()
    assert summary["features"]["pq:"]["total"] > 0


def test_the_agent_sees_and_ranks_relations_by_their_labels(kb: OxigraphKB) -> None:
    from pyql.agent.grounding.ranking import BM25Ranker
    from pyql.agent.strategies.queryagent.prompts import render_observation

    session = Session(kb)
    obs = session.run("get_relation(Q42)")
    assert obs.relations.labels  # the data carries the labels beside the ids
    text = render_observation(obs, 1, question="where was he educated", ranker=BM25Ranker(),
                              top_k=2)
    # ranked on the labels: 'educated' matches P69's label only; the ids alone would tie
    assert "P69 (educated at)" in text and "P106" not in text
    for name in ("P69", "P106", "P31"):
        assert f"'{name}'" not in text  # never a bare id


def test_a_hint_lists_relations_with_their_labels(kb: OxigraphKB) -> None:
    session = Session(kb, entities={"Douglas Adams": "Q42"}, guidelines=True)
    session.run("get_relation(Q42)")
    step = session.run("add_fact(Q42, P19, ?x)")  # not a relation of Q42: an empty result
    assert step.hint is not None and step.hint.code == "KB201"
    assert "'P69 (educated at)'" in step.text and "'P69'" not in step.text
    # the ids the step wrote are named too: P19 has no label in this KB, Q42 has one
    assert step.hint.labels == (("Q42", "Douglas Adams"), ("P19", "no label"))
    assert step.text.endswith("(Q42: Douglas Adams; P19: no label)")
    from pyql.agent.strategies.queryagent.prompts import render_observation

    assert "(Q42: Douglas Adams; P19: no label)" in render_observation(step, 2)


def test_the_synthesized_graph_tells_a_bare_p31_from_the_class_path() -> None:
    from pyql.datasets.sparql_fidelity import (
        GoldQuery,
        _answers,
        _ox,
        check_query,
        synthesize,
        virtuoso_reading,
    )
    from pyql.sparql.from_sparql import read_query

    gold = WD_PREFIXES + "SELECT DISTINCT ?x WHERE { ?x wdt:P31 wd:Q6256. }"
    graph = synthesize(read_query(gold), profile="wikidata")
    store = ox.Store()
    store.bulk_extend(ox.Quad(_ox(s), _ox(p), _ox(o)) for s, p, o in graph)
    expected = _answers(store, virtuoso_reading(gold))
    wrong = Program.parse("add_type(?x, Q6256)\nset_answer(?x)").to_sparql(profile="wikidata")
    assert _answers(store, wrong) != expected  # add_type also finds the subclass's instance
    assert check_query(GoldQuery("t", gold), "wikidata").status == "agree"
