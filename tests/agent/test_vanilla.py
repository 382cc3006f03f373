"""One-call query generation (``vanilla``, ``vanilla-few``): the one query is untrusted text
that goes through the backends' guards, and whatever goes wrong with it is an outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

import pyql
from pyql.agent.evaluation.records import EvalItem
from pyql.agent.evaluation.standins import build_stand_in
from pyql.agent.llm.clients import ScriptedLLM
from pyql.agent.strategies.baselines.vanilla import Vanilla, VanillaFew, extract_query
from pyql.agent.strategy import StrategyConfig, build_strategy
from pyql.db import SqlDB
from pyql.kb import OxigraphKB
from tests.agent.conftest import ENTITIES, GOLD, QUESTION

DEMO_DB = Path(pyql.__file__).parent / "data" / "demo.sqlite"

E = "http://pyql.dev/metaqa/entity/"
R = "http://pyql.dev/metaqa/relation/"
GOLD_SPARQL = (f"```sparql\nSELECT DISTINCT ?d WHERE {{ ?m <{R}written_by> <{E}John_Godey> . "
               f"?m <{R}directed_by> ?d . }}\n```")


def _run(kb: OxigraphKB, reply: str, **kw: object):  # noqa: ANN202 - a Result
    return Vanilla(ScriptedLLM([reply]), kb, **kw).run(QUESTION, ENTITIES)  # type: ignore[arg-type]


def test_one_call_one_query_answers(kb: OxigraphKB) -> None:
    result = _run(kb, GOLD_SPARQL)
    assert set(result.answers) == GOLD
    assert result.finished and result.stop_reason == "ok"
    assert [s.kind for s in result.steps] == ["prompt", "generate", "execute"]
    assert result.usage.llm_calls == 1 and result.usage.kb_queries == 1
    assert result.steps[2].data["outcome"] == "ok" and result.steps[2].data["answer_count"] == 3


@pytest.mark.parametrize(("reply", "outcome", "status"), [
    # an update is refused by KB.select's read-only guard before the engine sees it
    (f"```sparql\nINSERT DATA {{ <{E}x> <{R}directed_by> <{E}y> }}\n```", "refused", "error"),
    ("```sparql\nSELECT ?x WHERE { ?x ?p }\n```", "query_error", "error"),
    (f"```sparql\nSELECT ?d WHERE {{ <{E}Nobody> <{R}directed_by> ?d }}\n```", "empty", "empty"),
    ("I do not know which query answers this.", "no_query", None),
])
def test_what_goes_wrong_with_the_query_is_an_outcome(kb: OxigraphKB, reply: str, outcome: str,
                                                      status: str | None) -> None:
    before = len(kb)
    result = _run(kb, reply)
    assert result.stop_reason == outcome and result.answers == ()
    assert result.finished is (outcome == "empty")
    assert len(kb) == before
    if status is None:  # no query: nothing ran
        assert [s.kind for s in result.steps] == ["prompt", "generate"]
        assert result.steps[1].format_issue == "no_query"
    else:
        execute = result.steps[-1]
        assert execute.data["outcome"] == outcome and execute.status == status
        assert execute.env_status != "backend_error"  # the model's query, not an outage
        assert (execute.error is None) is (outcome == "empty")


def test_the_prompt_shows_entities_and_relations_and_is_shared(kb: OxigraphKB) -> None:
    zero, few = ScriptedLLM([GOLD_SPARQL] * 2), ScriptedLLM([GOLD_SPARQL])
    agent = Vanilla(zero, kb)
    agent.run(QUESTION, ENTITIES)
    agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    VanillaFew(few, kb).run(QUESTION, ENTITIES)
    first, second = (call["messages"] for call in zero.calls)
    assert first[0] == second[0]  # the system message is the same for every question
    assert f"<{R}directed_by>" in first[0]["content"] and "Examples:" not in first[0]["content"]
    assert first[1]["content"].endswith(f"John Godey: <{E}John_Godey>")
    few_system = few.calls[0]["messages"][0]["content"]
    assert "Examples:" in few_system and "John_Godey" in few_system


def test_sql_query_through_the_guard() -> None:
    db = SqlDB.sqlite(DEMO_DB)
    llm = ScriptedLLM(["```sql\nSELECT nationality FROM players WHERE name = 'Ada Okafor'\n```"])
    result = Vanilla(llm, db).run("what nationality is Ada Okafor", table="players")
    assert result.answers == ("Nigeria",) and result.trajectory.tools == "sql"
    system, user = llm.calls[0]["messages"]
    assert "SQLite" in system["content"] and '"nationality"' in user["content"]


@pytest.mark.parametrize(("sql", "outcome"), [
    ("DROP TABLE players", "refused"),
    ("SELECT 1; DELETE FROM players", "refused"),
    ("SELECT nope FROM players", "query_error"),
])
def test_sql_writes_are_refused_and_errors_are_outcomes(sql: str, outcome: str) -> None:
    db = SqlDB.sqlite(DEMO_DB)
    result = Vanilla(ScriptedLLM([f"```sql\n{sql}\n```"]), db).run("q", table="players")
    assert result.stop_reason == outcome and not result.finished
    assert db.execute("SELECT COUNT(*) FROM players").rows[0][0] > 0


def test_registered_and_configured(kb: OxigraphKB) -> None:
    config = StrategyConfig(options={"shots": "few"})
    agent = build_strategy("vanilla", ScriptedLLM([]), kb, config)
    assert isinstance(agent, Vanilla) and agent.shots == "few"
    assert build_strategy("vanilla-few", ScriptedLLM([]), kb).shots == "few"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="shots"):
        Vanilla(ScriptedLLM([]), kb, shots=3)


def test_extract_query_prefers_the_code_block() -> None:
    text = "Thought: join.\n```sql\nSELECT a FROM t\n```\nThen SELECT b FROM u."
    assert extract_query(text, "sql") == "SELECT a FROM t"
    assert extract_query("PREFIX ns: <x:> SELECT ?a WHERE {}", "sparql").startswith("PREFIX")


@pytest.mark.parametrize("family", ["metaqa", "freebase", "wikisql", "spider"])
def test_the_worked_examples_are_valid_queries(family: str) -> None:
    import re

    import pyoxigraph
    import sqlglot

    from pyql.agent.strategies.queryagent.prompts import read_prompt

    text = read_prompt(f"vanilla_shots_{family}.md")
    blocks = re.findall(r"```(sparql|sql)\n(.*?)```", text, re.DOTALL)
    assert len(blocks) >= 2
    for language, query in blocks:
        if language == "sparql":  # parsed and run by the embedded engine (syntax included)
            store = pyoxigraph.Store()
            list(store.query("PREFIX ns: <http://rdf.freebase.com/ns/>\n" + query))
        else:
            sqlglot.parse_one(query, read="sqlite")


def test_freebase_queries_run_on_the_embedded_store() -> None:
    fb = "http://rdf.freebase.com/ns/"
    kb = OxigraphKB(profile="freebase")
    kb.load_bytes(f"<{fb}m.03_r3> <{fb}location.country.languages_spoken> <{fb}m.04ygk0> .\n"
                  .encode(), format="ntriples")
    item = EvalItem(id="WebQTest-0", question="what does jamaican people speak",
                    entities={"Jamaica": "m.03_r3"}, answers=("m.04ygk0",),
                    program="add_fact(m.03_r3, location.country.languages_spoken, ?x)\n"
                            "set_answer(?x)\nexecute()")
    result = Vanilla(build_stand_in("vanilla", "gold", item), kb).run(item.question, item.entities)
    assert result.answers == ("m.04ygk0",)
    llm = ScriptedLLM(["```sparql\nSELECT ?x WHERE { ns:m.03_r3 "
                       f"<{fb}location.country.languages_spoken> ?x }}\n```"])
    agent = Vanilla(llm, kb)
    assert agent.run(item.question, item.entities).answers == ("m.04ygk0",)  # ns: declared
    system = llm.calls[0]["messages"][0]["content"]
    assert f"PREFIX ns: <{fb}>" in system and f"<{fb}people.person.spouse_s>" in system
