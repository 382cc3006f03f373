"""Readi's paper mode (``preset="paper"``): the LLM reader always answers, CVT ids in the
retrieved triples, TableQA as Appendix A (retrieval, only wrong columns are errors, a sampled
example row), a module's own model, and the preset's temperature."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.runner import _client_options
from pyql.agent.evaluation.standins.readi import ReadiStandIn
from pyql.agent.grounding.paths import (
    PathInstantiator,
    ReasoningPath,
    RelationBinder,
    RelationVocabulary,
)
from pyql.agent.grounding.paths.table import TablePath
from pyql.agent.llm.accounting import TokenCounter
from pyql.agent.llm.clients import OpenAIChat, ScriptedLLM
from pyql.agent.strategies.queryagent.presets import preset_temperature
from pyql.agent.strategies.readi import Readi
from pyql.agent.strategies.readi.strategy import ModuleLLMError
from pyql.agent.strategy import StrategyConfig, build_strategy
from pyql.agent.trajectory import Step
from pyql.db import SqlDB
from pyql.kb import OxigraphKB
from tests.agent.conftest import ENTITIES, GOLD, QUESTION
from tests.support.fake_openai import FakeOpenAI, Text

GOOD = 'Thought: two hops.\nPath: { "John Godey": [ John Godey → written_by → directed_by ] }'
COUNTER = TokenCounter(model="gpt-4o-mini")
FREEBASE = Path(__file__).parents[2] / "fixtures" / "kb" / "freebase_small.ttl"
PAPER = StrategyConfig(preset="paper", token_counter=COUNTER)


def test_paper_preset_answers_with_the_llm_reader(kb):
    llm = ScriptedLLM([GOOD, "So, the answer is {Walter Hill} {Jerry Paris} {Joseph Sargent}."])
    strategy = build_strategy("readi", llm, kb, PAPER)
    result = strategy.run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD
    assert result.usage.llm_calls == 2  # the paper's >= 2: generation, then QA reasoning
    assert result.steps[-1].data["source"] == "llm"
    assert "Knowledge Triplets:" in llm.calls[-1]["messages"][1]["content"]
    # options given one by one override the preset's
    own = build_strategy("readi", ScriptedLLM([GOOD]), kb, StrategyConfig(
        preset="paper", token_counter=COUNTER, options={"answer": "auto"}))
    assert own.run(QUESTION, ENTITIES).usage.llm_calls == 1


def test_cvt_ids_keep_compound_nodes_apart():
    kb = OxigraphKB.from_file(FREEBASE, profile="freebase")
    entities = {"Kim Example": "m.0kim"}
    path = ReasoningPath.of({"Kim Example": ["person spouse", "marriage spouse"]})
    binder = RelationBinder(RelationVocabulary.from_kb(kb))
    plain = PathInstantiator(kb, binder).instantiate(path, entities, "spouse")
    ids = PathInstantiator(kb, binder, cvt_ids=True).instantiate(path, entities, "spouse")
    assert {t[2] for t in plain.triples if t[1] == "people.person.spouse_s"} == {
        "<compound node>"}
    nodes = {t[2] for t in ids.triples if t[1] == "people.person.spouse_s"}
    assert len(nodes) > 1 and all(n.startswith("m.") for n in nodes)
    assert ids.answers == plain.answers


@pytest.fixture
def db() -> SqlDB:
    return SqlDB.sqlite_memory(lambda c: c.executescript(
        'CREATE TABLE players("Player" TEXT, "No." TEXT, "Position" TEXT, "Points" REAL);'
        "INSERT INTO players VALUES ('Terrence Ross', '31', 'Guard', 10.0),"
        "('Aleksandar Radojević', '25', 'Center', 4.0), ('Jose Calderon', '8', 'Guard', 7.5);"))


def test_table_retrieval_only_wrong_columns_are_errors(db):
    llm = ScriptedLLM([
        'Path: {"columns": ["Player", "Position"], "rows": [["Position", "=", "Forward"]], '
        '"answer": "Player"}',
        "No forward. So, the answer is {}."])
    result = build_strategy("readi", llm, db, StrategyConfig(
        preset="paper", table="players", token_counter=COUNTER)).run("which forwards")
    assert [s.kind for s in result.steps] == ["generate", "instantiate", "answer"]  # no edit
    shown = llm.calls[-1]["messages"][1]["content"]
    assert all(name in shown for name in ("Terrence Ross", "Aleksandar Radojević",
                                          "Jose Calderon"))  # every row of the columns
    assert result.steps[1].data["dropped"] == [["Position", "=", "Forward"]]
    # pyql's program route edits the same path
    own = Readi(ScriptedLLM(['Path: {"columns": ["Player"], "rows": [["Position", "=", '
                             '"Forward"]]}', 'Final Path: {"columns": ["Player"]}']),
                db, table="players", token_counter=COUNTER, max_edits=1)
    assert "edit" in [s.kind for s in own.run("which forwards").steps]


def test_table_retrieval_samples_the_example_row(db):
    rows = set()
    for seed in range(6):
        llm = ScriptedLLM(['Path: {"columns": ["Player"]}', "So, the answer is {x}."])
        Readi(llm, db, table="players", token_counter=COUNTER, table_mode="retrieval",
              answer="llm", seed=seed).run("who")
        prompt = llm.calls[0]["messages"][1]["content"]
        rows.add(next(ln for ln in prompt.splitlines() if ln.startswith("Example row:")))
    assert len(rows) > 1


def test_llm_answers_on_a_table_are_the_table_values(db):
    count = 'Path: {"columns": ["Player", "Position"], "rows": [["Position", "=", "Guard"]], ' \
            '"answer": "COUNT(Player)"}'
    result = Readi(ScriptedLLM([count, "Two guards. So, the answer is {2}."]), db,
                   table="players", token_counter=COUNTER, answer="llm").run("how many guards")
    assert result.answers == (2,)
    top = 'Path: {"columns": ["Points", "Player"], "answer": "MAX(Points)"}'
    result = Readi(ScriptedLLM([top, "So, the answer is {10} from {terrence ross}."]), db,
                   table="players", token_counter=COUNTER, answer="llm").run("most points")
    assert result.answers == (10.0, "Terrence Ross")


def test_stand_in_reader_counts_and_reads_without_case():
    gold = TablePath(("Player", "Position"), answer_column="Player", aggregation="COUNT")
    reader = ReadiStandIn(gold, answers=[2])
    ask = [{"role": "user", "content": "Q: q\nColumns: []\nRows:\nA:"}]
    reader.observe(Step(n=1, kind="instantiate", data={
        "columns": ["Player", "Position"],
        "shown_rows": [["Terrence Ross", "Guard"], ["Jose Calderon", "Guard"]],
        "instances": ["2"]}))
    assert reader.complete(ask).text.endswith("{2}.")
    reader = ReadiStandIn(TablePath(("Position",)), answers=["guard"])
    reader.observe(Step(n=1, kind="instantiate", data={
        "columns": ["Position"], "shown_rows": [["Center"]], "instances": ["guard"]}))
    assert reader.complete(ask).text.endswith("{}.")  # program answers are not shown
    reader.observe(Step(n=2, kind="instantiate", data={
        "columns": ["Position"], "shown_rows": [["Guard"]]}))
    assert reader.complete(ask).text.endswith("{Guard}.")


def test_a_module_runs_its_own_model(kb, fake_openai: FakeOpenAI):
    fake_openai.push(Text('Path: { "John Godey": [ John Godey → written_by → nothing ] }'),
                     Text("Final Path: John Godey → written_by → directed_by"))
    llm = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    strategy = build_strategy("readi", llm, kb, StrategyConfig(
        token_counter=COUNTER, options={"edit_model": "gpt-4o-mini"}))
    result = strategy.run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD
    assert [r.body["model"] for r in fake_openai.chat_requests[-2:]] == [
        "gpt-test", "gpt-4o-mini"]
    with pytest.raises(ModuleLLMError) as err:
        build_strategy("readi", ScriptedLLM([]), kb, StrategyConfig(
            options={"edit_model": "gpt-4o-mini"}))
    assert (err.value.module, err.value.model, err.value.client) == (
        "edit", "gpt-4o-mini", "ScriptedLLM")


def test_the_paper_preset_sets_the_papers_temperature():
    assert preset_temperature("paper", "readi") == preset_temperature("paper", "srp") == 0.3
    assert preset_temperature("paper", "queryagent") is None
    config = RunConfig(dataset="metaqa-1hop", llm="openai:m", strategy="readi", preset="paper")
    assert _client_options(config)["temperature"] == 0.3
    assert _client_options(config.model_copy(update={"temperature": 0.0}))["temperature"] == 0.0
    assert "temperature" not in _client_options(config.model_copy(update={"preset": None}))


def test_the_reader_sees_the_intersection_of_the_constraints():
    kb = OxigraphKB.from_file(FREEBASE, profile="freebase")
    entities = {"Jamaica": "m.03_r3", "North America": "m.0j0k"}
    path = ReasoningPath.of({"North America": ["countries within"],
                             "Jamaica": ["languages spoken", "languages spoken"]})
    binder = RelationBinder(RelationVocabulary.from_kb(kb))
    question = "which countries of North America speak a language of Jamaica"
    union = PathInstantiator(kb, binder).instantiate(path, entities, question)
    joined = PathInstantiator(kb, binder, intersection=True).instantiate(path, entities,
                                                                         question)
    assert joined.answers == union.answers and joined.complete
    def countries(inst):
        return {t[2] for t in inst.triples if t[0] == "North America"}

    # the union lists every country of North America; the intersection only those that also
    # share a language with Jamaica (the answers, and Jamaica itself: no topic filter here)
    assert "Atlantis" in countries(union)
    assert countries(joined) == {"United States of America", "Canada", "Jamaica"}


def test_table_8_features_per_question(kb):
    llm = ScriptedLLM(['Path: { "John Godey": [ John Godey → written_by → nothing ] }',
                       "So, the answer is {Walter Hill}."])
    result = Readi(llm, kb, token_counter=COUNTER, max_edits=0, answer="llm").run(
        QUESTION, ENTITIES)
    counts = result.steps[-1].data["counts"]
    assert (counts["lpp"], counts["lip"], counts["aip"], counts["cer"]) == (2.0, 1.0, 0.5, 0.0)
    assert counts["instantiated"] == 0.0 and counts["retrieved"] > 0


def test_the_temperature_reaches_the_request(fake_openai: FakeOpenAI):
    from pyql.agent.commands.ask import _make_llm

    fake_openai.push(Text("ok"), Text("ok"))
    llm = _make_llm("gpt-test", fake_openai.base_url, fake_openai.api_key, temperature=0.3)
    llm.complete([{"role": "user", "content": "q"}])
    assert fake_openai.chat_requests[-1].body["temperature"] == 0.3
    _make_llm("gpt-test", fake_openai.base_url, fake_openai.api_key).complete(
        [{"role": "user", "content": "q"}])
    assert fake_openai.chat_requests[-1].body["temperature"] == 0.0


def test_a_module_model_inside_the_evaluations_wrappers(fake_openai: FakeOpenAI, tmp_path):
    from pyql.agent.evaluation.caches import CachedLLM, LLMCache
    from pyql.agent.evaluation.specs import GatedLLM, RateGate
    from pyql.agent.strategies.readi.strategy import module_llm

    base = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    wrapped = CachedLLM(GatedLLM(base, RateGate()), LLMCache(tmp_path / "c.sqlite"))
    edit = module_llm(wrapped, "gpt-4o-mini")
    assert isinstance(edit, CachedLLM) and isinstance(edit.llm, GatedLLM)
    assert (edit.model, edit.llm.model, edit.llm.llm.model) == ("gpt-4o-mini",) * 3
    assert (wrapped.model, base.model) == ("gpt-test", "gpt-test")
    fake_openai.push(Text("ok"))
    edit.complete([{"role": "user", "content": "q"}])
    assert fake_openai.chat_requests[-1].body["model"] == "gpt-4o-mini"
