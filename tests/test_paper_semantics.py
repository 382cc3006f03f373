"""What the original QueryAgent environment applied silently, as Session options (off by
default, on in the ``paper`` preset): the topic-entity exclusion and the relation filter."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyql import Program, Session
from pyql.errors import ProfileError
from pyql.kb import OxigraphKB
from pyql.profiles import RELATION_FILTERS, get_relation_filter
from pyql.sparql import Sparql
from tests.support.metaqa import metaqa_kb

KB_FILE = Path(__file__).parent / "fixtures" / "kb" / "freebase_small.ttl"
KIM = {"Kim Example": "m.0kim", "1990": "1990"}  # a linked value is not an entity
SPOUSES = ["add_fact(m.0kim, people.person.spouse_s, ?m)", "add_fact(?m, people.marriage.spouse, ?s)",
           "set_answer(?s)"]

FILMS = """\
The Green Mile|written_by|Stephen King
The Green Mile|starred_actors|Tom Hanks
The Shawshank Redemption|written_by|Stephen King
The Shawshank Redemption|starred_actors|Tim Robbins
"""
WALK = ["relate(written_by)", "relate(written_by)", "relate(starred_actors)", "execute()"]


@pytest.fixture(scope="module")
def freebase() -> OxigraphKB:
    return OxigraphKB.from_file(KB_FILE, profile="freebase")


@pytest.fixture(scope="module")
def metaqa() -> OxigraphKB:
    return metaqa_kb(FILMS)


def answers(session: Session, actions: list[str]) -> set[str]:
    for action in actions:
        obs = session.run(action)
        assert obs.error is None, (action, obs.text)
    return set(session.run("execute()").answers or ()) if actions[-1] != "execute()" \
        else set(obs.answers or ())


# -- exclude_topic ---------------------------------------------------------------------------------

def test_answer_exclusion_is_the_original_set_answer_filter(freebase: OxigraphKB) -> None:
    # every marriage has both spouses: without the filter Kim is one of Kim's spouses
    assert "m.0kim" in answers(Session(freebase, KIM), SPOUSES)
    session = Session(freebase, KIM, exclude_topic="answer")
    found = answers(session, SPOUSES)
    assert found and "m.0kim" not in found
    assert "FILTER (?s != ns:m.0kim)" in session.to_query()
    assert "1990" not in session.to_query()  # only entities are excluded


def test_answer_exclusion_spares_intermediate_variables_and_aggregates() -> None:
    q = Sparql(entities=KIM, exclude_topic="answer").add_fact("m.0kim", "people.person.spouse_s", "?m")
    assert "!=" not in q.to_sparql()  # no answer yet
    counted = q.add_count("?m")
    assert "!=" not in counted.to_sparql()  # the count is the answer (as the original on COUNT)


def test_node_exclusion_drops_the_topic_at_every_hop(metaqa: OxigraphKB) -> None:
    topic = {"The Green Mile": "The Green Mile"}
    walk = Session(metaqa, topic)
    assert answers(walk, WALK) == {"Tom Hanks", "Tim Robbins"}
    walk = Session(metaqa, topic, exclude_topic="nodes")
    assert answers(walk, WALK) == {"Tim Robbins"}  # the Green Mile is not "another film"
    # the recorded program replays with the same option
    query = Program.parse(str(walk.program)).to_query("metaqa", topic, exclude_topic="nodes")
    assert {row[0].short for row in metaqa.select(query.to_sparql()).rows} == {"Tim Robbins"}


def test_exclude_topic_is_checked() -> None:
    with pytest.raises(ValueError, match="exclude_topic"):
        Sparql(exclude_topic="everything")  # type: ignore[arg-type]


# -- relation_filter -------------------------------------------------------------------------------

def test_relation_filters_are_the_original_lists() -> None:
    webqsp, grailqa = RELATION_FILTERS["webqsp"], RELATION_FILTERS["grailqa"]
    assert webqsp.hides("type.object.type") and webqsp.hides("common.topic.notable_types")
    assert webqsp.hides("freebase.valuenotation.is_reviewed") and webqsp.hides("owl#sameAs")
    assert not webqsp.hides("type.type.instance")  # WebQSP hides only type.object.{type,name}
    assert grailqa.hides("type.type.instance")  # GrailQA hides all of type.*
    assert not grailqa.hides("location.country.languages_spoken")
    graphq = RELATION_FILTERS["graphq"]
    assert (graphq.exact, graphq.prefixes, graphq.contains) == (
        webqsp.exact, webqsp.prefixes, webqsp.contains)  # the original's two lists are equal
    assert all(f.source.startswith("ag_src/agent_utils/ag_utils.py:") for f in
               RELATION_FILTERS.values())
    with pytest.raises(ProfileError, match="known: grailqa, graphq, webqsp"):
        get_relation_filter("nope")


def test_get_relation_hides_the_filtered_relations(freebase: OxigraphKB) -> None:
    shown = Session(freebase, KIM).run("get_relation(m.03_r3)").relations
    assert "type.object.type" in shown.forward
    filtered = Session(freebase, KIM, relation_filter="webqsp").run("get_relation(m.03_r3)")
    assert "type.object.type" not in filtered.relations.forward
    assert set(filtered.relations.forward) == set(shown.forward) - {"type.object.type"}


# -- QPQ as the paper counts it ----------------------------------------------------------------------

def test_label_lookups_are_counted_apart(freebase: OxigraphKB) -> None:
    from pyql.agent import QueryAgent, ScriptedLLM

    queries, labels = freebase.query_count, freebase.label_query_count
    session = Session(freebase, KIM)
    session.run("add_fact(m.03_r3, location.country.languages_spoken, ?l)")  # shows names
    assert freebase.label_query_count - labels == 1
    assert freebase.query_count - queries == 2  # the observation and its labels
    llm = ScriptedLLM(["Thought 1 : t\nAction 1 : add_fact(m.03_r3, location.country."
                       "languages_spoken, ?l)", "Thought 2 : t\nAction 2 : execute()"])
    result = QueryAgent(llm, freebase, guidelines=None, ranker="bm25").run("q", KIM)
    assert result.usage.label_queries >= 1
    assert result.usage.kb_queries > result.usage.label_queries


def test_the_graphq_cvt_note_on_a_lone_compound_variable(freebase: OxigraphKB) -> None:
    """The original GraphQ environment's note (wikienv_graphq.py:273-276): a result whose only
    variable holds unnamed compound nodes suggests get_relation on it; the step stands."""
    noted = Session(freebase, KIM, cvt_note=True)
    obs = noted.run(SPOUSES[0])
    assert obs.ok
    assert obs.text.endswith("It seems that ?m is CVT node, you may use get_relation(?m) to "
                             "further constrain the query.")
    # a named second variable: no note (the original's test counts the variables shown)
    assert "CVT node" not in noted.run(SPOUSES[1]).text
    plain = Session(freebase, KIM).run(SPOUSES[0])
    assert "CVT node" not in plain.text
    from pyql.agent.strategies.queryagent.presets import get_preset

    assert get_preset("paper", "graphq").cvt_note
    assert not get_preset("paper", "webqsp").cvt_note


DIRECTORS = """\
Kismet|directed_by|William Dieterle
Juarez|directed_by|William Dieterle
Kismet|written_by|Edward Knoblock
"""


def test_fact_fallback_silently_reverses_an_empty_fact() -> None:
    kb = metaqa_kb(DIRECTORS)
    session = Session(kb, {"Kismet": "Kismet"}, fact_fallback=True)
    obs = session.run("add_fact(?d, directed_by, Kismet)")
    assert obs.ok and obs.text == "The value of variable ?d is ['William Dieterle']"
    # the program records the fact that ran, so that it replays
    assert str(session.program) == "add_fact(Kismet, directed_by, ?d)"
    plain = Session(kb, {"Kismet": "Kismet"})
    assert plain.run("add_fact(?d, directed_by, Kismet)").status == "empty"


def test_fact_fallback_then_runs_the_fact_alone() -> None:
    kb = metaqa_kb(DIRECTORS)
    session = Session(kb, {"Kismet": "Kismet", "Juarez": "Juarez"}, fact_fallback=True)
    session.run("add_fact(Juarez, directed_by, ?d)")
    # empty with ?d = the director, reversed too; alone it has a result: the query restarts
    obs = session.run("add_fact(Kismet, written_by, ?d)")
    assert obs.ok and obs.text == "The value of variable ?d is ['Edward Knoblock']"
    assert str(session.program) == "add_fact(Kismet, written_by, ?d)"
    replay = Session(kb, session.entities)
    replay.run_program(session.program)
    assert replay.query.to_sparql() == session.query.to_sparql()


def test_fact_fallback_keeps_two_variables_in_the_query() -> None:
    kb = metaqa_kb(DIRECTORS)
    session = Session(kb, {"Kismet": "Kismet"}, fact_fallback=True)
    session.run("add_fact(Kismet, directed_by, ?d)")
    # both ends variables: no fact-alone retry, the empty result stands
    obs = session.run("add_fact(?d, written_by, ?w)")
    assert obs.status == "empty"
    assert str(session.program) == "add_fact(Kismet, directed_by, ?d)\nadd_fact(?d, written_by, ?w)"
