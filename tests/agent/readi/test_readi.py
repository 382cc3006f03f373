"""The Readi strategy: generation, the edit loop and its bounds, answering (program or LLM),
the table variant, the stand-ins, registration, and a run through the real OpenAI client against
the fake server."""

from __future__ import annotations

import pytest

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.evaluation.records import EvalItem
from pyql.agent.evaluation.standins import build_stand_in
from pyql.agent.evaluation.standins.readi import ReadiStandIn, corrupt_path, gold_path
from pyql.agent.llm.accounting import TokenCounter
from pyql.agent.llm.clients import OpenAIChat, ScriptedLLM
from pyql.agent.strategies.readi import Readi
from pyql.agent.strategies.readi.prompts import parse_answers, task_of
from pyql.agent.strategy import StrategyConfig, build_strategy, get_strategy
from pyql.agent.trajectory import Step, Trajectory
from pyql.db import SqlDB
from pyql.session import Session
from tests.agent.conftest import ENTITIES, GOLD, QUESTION
from tests.support.fake_openai import FakeOpenAI, Text

GOOD = 'Thought: two hops.\nPath: { "John Godey": [ John Godey → written_by → directed_by ] }'
COUNTER = TokenCounter(model="gpt-4o-mini")


def readi(llm, kb, **options) -> Readi:
    return Readi(llm, kb, token_counter=COUNTER, **options)


def test_generated_path_answers_with_its_program_in_one_call(kb):
    llm = ScriptedLLM([GOOD])
    result = readi(llm, kb).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.finished
    assert result.usage.llm_calls == 1 and result.stop_reason == "instantiated"
    kinds = [s.kind for s in result.steps]
    assert kinds == ["generate", "instantiate", "answer"]
    generate, instantiate, answer = result.steps
    assert generate.data["path"] == {"John Godey": ["written_by", "directed_by"]}
    assert generate.prompt_tokens > 0 and generate.reply_text == GOOD
    assert instantiate.data["complete"] and instantiate.kb_queries > 0
    assert answer.data["source"] == "program" and answer.prompt_tokens == 0
    # the result's program is the instantiated path, and it replays on a Session
    last = Session(kb, ENTITIES).run_program(result.program)[-1]
    assert set(last.answers) == GOLD and last.query == result.query
    assert result.usage.kb_queries == sum(s.kb_queries for s in result.steps)
    # the system prompt holds the MetaQA demonstrations, the user message the question
    sent = llm.calls[0]["messages"]
    assert "John Godey → written_by → directed_by" in sent[0]["content"]
    assert sent[1]["content"].startswith(f"Question: {QUESTION}")


def test_a_stuck_path_is_edited_with_the_error_message(kb):
    llm = ScriptedLLM([
        'Path: { "John Godey": [ John Godey → written_by → director ] }',
        "Goal: the directors.\nThought: directed_by is the right one.\n"
        "Final Path: John Godey → written_by → directed_by",
    ])
    result = readi(llm, kb).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.usage.llm_calls == 2
    assert [s.kind for s in result.steps] == ["generate", "instantiate", "edit", "instantiate",
                                              "answer"]
    edit = result.steps[2]
    assert edit.data["error"]["reason"] == "irrelevant_relation"
    assert edit.data["error"]["relation"] == "director" and edit.data["error"]["position"] == 1
    assert edit.data["path_before"] == {"John Godey": ["written_by", "director"]}
    assert edit.data["path"] == {"John Godey": ["written_by", "directed_by"]}
    prompt = llm.calls[1]["messages"][1]["content"]
    assert 'relation "director" not instantiated.' in prompt
    assert "Instantiate Paths: John Godey → written_by → " in prompt
    assert prompt.rstrip().endswith("Corrected Path")


def test_at_most_max_edits_then_the_llm_answers(kb):
    wrong = [f"Final Path: John Godey → written_by → wrong{i}" for i in range(5)]
    llm = ScriptedLLM(['Path: { "John Godey": [ John Godey → written_by → nothing ] }',
                       *wrong[:2], "Based on the triples, the answer is {Walter Hill}."])
    result = readi(llm, kb, max_edits=2).run(QUESTION, ENTITIES)
    assert [s.kind for s in result.steps].count("edit") == 2
    assert result.usage.llm_calls == 4 and llm.remaining == 0
    assert result.stop_reason == "max_edits" and not result.finished
    assert result.answers == ("Walter Hill",)
    answer = result.steps[-1]
    assert answer.data["source"] == "llm" and answer.data["retrieved"] > 0
    # the answer prompt lists the triples of the longest instantiated prefix
    assert "(Johnny Handsome, written_by, John Godey)" in llm.calls[-1]["messages"][1]["content"]


def test_without_edits_the_longest_prefix_is_kept(kb):
    llm = ScriptedLLM(['Path: { "John Godey": [ John Godey → written_by → nothing ] }',
                       "So, the answer is {Johnny Handsome}."])
    result = readi(llm, kb, max_edits=0).run(QUESTION, ENTITIES)
    assert result.stop_reason == "no_edit" and "edit" not in [s.kind for s in result.steps]
    assert "add_fact(?x1, written_by" in str(result.program)
    assert result.steps[-1].data["instances"]  # the prefix's instances (answer coverage)


def test_an_unchanged_edit_ends_the_loop(kb):
    llm = ScriptedLLM(['Path: { "John Godey": [ John Godey → nothing ] }',
                       "Final Path: John Godey → nothing", "{}"])
    result = readi(llm, kb, max_edits=3).run(QUESTION, ENTITIES)
    assert result.stop_reason == "edit_unchanged" and result.usage.llm_calls == 3


def test_malformed_generation_starts_from_an_empty_path(kb):
    llm = ScriptedLLM(["I do not know the path.", "Final Path: John Godey → written_by → "
                       "directed_by"])
    result = readi(llm, kb).run(QUESTION, ENTITIES)
    generate = result.steps[0]
    assert generate.format_issue == "no_path" and generate.data["path"] == {"John Godey": []}
    assert result.steps[2].data["error"]["reason"] == "empty_path"
    assert set(result.answers) == GOLD


def test_empty_and_corrupt_initial_paths_skip_generation(kb):
    llm = ScriptedLLM(["Final Path: John Godey → written_by → directed_by"])
    result = readi(llm, kb, initial_path="empty").run(QUESTION, ENTITIES)
    assert result.steps[0].data["source"] == "empty" and result.usage.llm_calls == 1
    assert set(result.answers) == GOLD
    first = readi(ScriptedLLM([]), kb, initial_path="corrupt", max_edits=0, answer="program"
                  ).run(QUESTION, ENTITIES)
    again = readi(ScriptedLLM([]), kb, initial_path="corrupt", max_edits=0, answer="program"
                  ).run(QUESTION, ENTITIES)
    assert first.steps[0].data["path"] == again.steps[0].data["path"]
    assert len(first.steps[0].data["path"]["John Godey"]) == 2


def test_trajectory_round_trips_with_the_path_history(kb, tmp_path):
    llm = ScriptedLLM(['Path: { "John Godey": [ John Godey → written_by → director ] }',
                       "Final Path: John Godey → written_by → directed_by"])
    result = readi(llm, kb).run(QUESTION, ENTITIES)
    loaded = Trajectory.load(result.trajectory.save(tmp_path / "t.jsonl"))
    assert loaded.strategy == "readi"
    assert [s.data.get("path") for s in loaded.steps if s.kind in ("generate", "edit")] == [
        {"John Godey": ["written_by", "director"]}, {"John Godey": ["written_by", "directed_by"]}]


def test_answer_parsing_and_task_detection():
    assert parse_answers("So, the answer is {De Smet}.") == ("De Smet",)
    assert parse_answers("no braces") == ()
    with pytest.raises(ValueError):
        task_of([{"role": "user", "content": "hello"}])


# -- stand-ins -----------------------------------------------------------------------------------
ITEM = EvalItem(id="2hop-dev-0", question=QUESTION, entities=ENTITIES, answers=tuple(GOLD),
                program="add_fact(?x1, written_by, John Godey)\nadd_fact(?x1, directed_by, ?x2)\n"
                        "set_answer(?x2)\nexecute()", meta={"qtype": "writer_to_movie_to_director"})


def test_gold_stand_in_needs_one_call(kb):
    assert gold_path(ITEM).as_dict() == {"John Godey": ["^written_by", "directed_by"]}
    result = readi(build_stand_in("readi", "gold", ITEM), kb).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.usage.llm_calls == 1


def test_noisy_stand_in_repairs_only_a_listed_relation(kb):
    import random

    gold = gold_path(ITEM)
    path, n = corrupt_path(gold, 1.0, ["has_genre"], random.Random(1))
    assert n == 2 and path.length <= 2
    repairer = ReadiStandIn(gold)

    class FirstPath:
        """Generates a given path; edits and answers as the stand-in (which observes)."""

        model = "test"

        def __init__(self, text):
            self.first = ScriptedLLM([text])
            self.observe = repairer.observe

        def complete(self, messages, **kw):
            if task_of(messages) == "generate":
                return self.first.complete(messages, **kw)
            return repairer.complete(messages, **kw)

    # has_genre connects from John Godey's movies: a complete, wrong path is not edited
    result = readi(FirstPath('Path: { "John Godey": [ John Godey → ^written_by → has_genre ] }'),
                   kb).run(QUESTION, ENTITIES)
    assert "edit" not in [s.kind for s in result.steps]
    # an irrelevant relation: the error lists directed_by, which the stand-in picks
    result = readi(FirstPath('Path: { "John Godey": [ John Godey → ^written_by → weather ] }'),
                   kb).run(QUESTION, ENTITIES)
    assert [s.kind for s in result.steps].count("edit") == 1 and set(result.answers) == GOLD
    # a candidate list without the gold relation: nothing repaired, the same path comes back
    stuck = {"entity": "John Godey", "relations": ["^written_by", "weather"], "position": 1,
             "candidates": ["release_year"]}
    repairer.observe(Step(n=1, kind="instantiate", data={"constraints": [{"stuck": stuck}]}))
    reply = repairer.complete([{"role": "user", "content": "Question: q\nCorrected Path"}])
    assert reply.text.endswith("Final Path: John Godey → ^written_by → weather")


def test_stand_in_answers_only_from_the_retrieved_instances():
    llm = ReadiStandIn(None, answers=["Walter Hill"])
    ask = [{"role": "user", "content": "Q: q\nKnowledge Triplets:\n(A, r, B)\nA:"}]
    llm.observe(Step(n=1, kind="instantiate", data={"instances": ["A", "Walter Hill"]}))
    assert llm.complete(ask).text.endswith("{Walter Hill}.")
    llm.observe(Step(n=2, kind="instantiate", data={"instances": ["Jerry Paris"]}))
    assert llm.complete(ask).text.endswith("{}.")
    with pytest.raises(LLMScriptExhaustedError):
        llm.complete([{"role": "user", "content": "Question: q\nThought:"}])


# -- registration and the real client ----------------------------------------------------------
def test_registered_as_a_strategy(kb):
    assert get_strategy("readi") is Readi
    strategy = build_strategy("readi", ScriptedLLM([]), kb, StrategyConfig(
        top_k=3, options={"max_edits": "0", "initial_path": "empty"}))
    assert isinstance(strategy, Readi) and strategy.max_edits == 0
    assert strategy.binder.top_k == 3


def test_a_run_through_the_openai_client(kb, fake_openai: FakeOpenAI):
    fake_openai.push(Text(GOOD, usage=(321, 12)))
    llm = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    result = Readi(llm, kb).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD
    assert result.usage.prompt_tokens == 321 and result.usage.completion_tokens == 12
    body = fake_openai.chat_requests[-1].body
    assert body["messages"][0]["role"] == "system"
    assert "Topic Entities: [\"John Godey\"]" in body["messages"][1]["content"]


# -- tables --------------------------------------------------------------------------------------
@pytest.fixture
def db() -> SqlDB:
    return SqlDB.sqlite_memory(lambda c: c.executescript(
        'CREATE TABLE players("Player" TEXT, "No." TEXT, "Nationality" TEXT, "Position" TEXT);'
        "INSERT INTO players VALUES ('Terrence Ross', '31', 'United States', 'Guard'),"
        "('Aleksandar Radojević', '25', 'Serbia', 'Center'), ('Jose Calderon', '8', 'Spain', "
        "'Guard');"))


def test_table_path_gives_a_sql_program(db):
    llm = ScriptedLLM(['Path: {"columns": ["Nationality", "Player"], '
                       '"rows": [["Player", "=", "Terrence Ross"]], "answer": "Nationality"}'])
    result = Readi(llm, db, table="players", token_counter=COUNTER).run(
        "What is terrence ross' nationality")
    assert result.answers == ("United States",) and result.usage.llm_calls == 1
    assert result.trajectory.tools == "sql" and "SELECT" in result.query
    assert str(result.program).startswith('add_condition("Player", =, "Terrence Ross")')
    prompt = llm.calls[0]["messages"][1]["content"]
    assert 'Columns: ["Player", "No.", "Nationality", "Position"]' in prompt
    assert "Example row: [" in prompt


def test_table_unknown_column_and_no_matching_row_are_edited(db):
    llm = ScriptedLLM([
        'Path: {"columns": ["Country"], "rows": [["Player", "=", "Terrence Ross"]], '
        '"answer": "Country"}',
        'Final Path: {"columns": ["Nationality"], "rows": [["Player", "=", "Terence Ross"]], '
        '"answer": "Nationality"}',
        'Final Path: {"columns": ["Nationality"], "rows": [["Player", "=", "Terrence Ross"]], '
        '"answer": "Nationality"}',
    ])
    result = Readi(llm, db, table="players", token_counter=COUNTER).run(
        "What is terrence ross' nationality")
    edits = [s for s in result.steps if s.kind == "edit"]
    assert [e.data["error"]["reason"] for e in edits] == ["unknown_column", "no_matching_row"]
    assert "Nationality" in edits[0].data["error"]["candidates"]
    assert "Terrence Ross" in edits[1].data["error"]["candidates"]
    assert result.answers == ("United States",)


def test_table_count_and_llm_answer_over_rows(db):
    llm = ScriptedLLM([
        'Path: {"columns": ["Player", "Position"], "rows": [["Position", "=", "Guard"]], '
        '"answer": "COUNT(Player)"}'])
    result = Readi(llm, db, table="players", token_counter=COUNTER).run("how many guards")
    assert result.answers == (2,)
    llm = ScriptedLLM(['Path: {"columns": ["Player"], "rows": [["Position", "=", "Forward"]]}',
                       "Nobody. So, the answer is {none}."])
    result = Readi(llm, db, table="players", token_counter=COUNTER, max_edits=0).run(
        "which forwards")
    assert result.steps[-1].data["source"] == "llm" and result.answers == ("none",)
    assert '["Terrence Ross"]' in llm.calls[-1]["messages"][1]["content"]


def test_evaluation_counts_from_the_step_records(kb):
    from pyql.agent.evaluation.metrics import aggregate, step_usage
    from pyql.agent.evaluation.records import QuestionResult

    llm = ScriptedLLM(['Path: { "John Godey": [ John Godey → written_by → nothing ] }',
                       "Final Path: John Godey → written_by → directed_by"])
    result = readi(llm, kb).run(QUESTION, ENTITIES)
    counts = step_usage(result.steps, GOLD)
    assert counts == {"llm_calls.generate": 1.0, "llm_calls.edit": 1.0, "edits": 1.0,
                      "instantiated": 1.0, "retrieved": counts["retrieved"],
                      "answer_coverage": 1.0, "lpp": 2.0, "lip": 2.0, "aip": 1.0, "cer": 0.0}
    assert counts["retrieved"] > 0
    assert step_usage(result.steps, ["Nobody"])["answer_coverage"] == 0.0
    rows = [QuestionResult(id="a", usage={"llm_calls": 2, **counts}),
            QuestionResult(id="b", usage={"llm_calls": 1, "llm_calls.generate": 1.0})]
    metrics = aggregate(rows)
    assert metrics["strategy"]["llm_calls.edit"] == 0.5
    assert metrics["strategy"]["llm_calls.generate"] == 1.0


def test_table_empty_path_is_stuck(db):
    llm = ScriptedLLM(['Final Path: {"columns": ["Nationality", "Player"], '
                       '"rows": [["Player", "=", "Jose Calderon"]], "answer": "Nationality"}'])
    result = Readi(llm, db, table="players", token_counter=COUNTER, initial_path="empty").run(
        "Where is Jose Calderon from")
    instantiate = result.steps[1]
    assert instantiate.data["stuck"]["reason"] == "empty_path"
    assert set(instantiate.data["stuck"]["candidates"]) == {"Player", "No.", "Nationality",
                                                           "Position"}
    assert result.answers == ("Spain",)


def test_forced_llm_answer_and_a_vocabulary_file(kb, tmp_path):
    vocab = tmp_path / "relations.txt"
    vocab.write_text("written_by\ndirected_by\n", encoding="utf-8")
    llm = ScriptedLLM([GOOD, "So, the answer is {Walter Hill}."])
    strategy = build_strategy("readi", llm, kb, StrategyConfig(
        token_counter=COUNTER, options={"answer": "llm", "relations": str(vocab)}))
    assert strategy.binder.vocabulary.relations == ("written_by", "directed_by")
    result = strategy.run(QUESTION, ENTITIES)
    assert result.answers == ("Walter Hill",) and result.finished  # complete, read by the LLM
    assert result.steps[-1].data["source"] == "llm" and result.usage.llm_calls == 2


# -- one loop for both kinds of path -----------------------------------------------------------
STUCK = {"kb": ('Path: { "John Godey": [ John Godey → nothing ] }',
                "Final Path: John Godey → nothing"),
         "table": ('Path: {"columns": ["Country"], "answer": "Country"}',
                   'Path: {"columns": ["Country"], "answer": "Country"}')}


def _on(kind, kb, db, llm, **options):
    if kind == "kb":
        return readi(llm, kb, **options).run(QUESTION, ENTITIES)
    return Readi(llm, db, table="players", token_counter=COUNTER, **options).run(
        "What is terrence ross' nationality")


@pytest.mark.parametrize("kind", ["kb", "table"])
def test_the_loop_stops_alike_on_both_kinds_of_path(kind, kb, db):
    first, same = STUCK[kind]
    unchanged = _on(kind, kb, db, ScriptedLLM([first, same, "{x}"]), max_edits=3)
    assert unchanged.stop_reason == "edit_unchanged" and unchanged.usage.llm_calls == 3
    assert [s.kind for s in unchanged.steps] == ["generate", "instantiate", "edit", "answer"]
    bounded = _on(kind, kb, db, ScriptedLLM([first, "{x}"]), max_edits=0)
    assert bounded.stop_reason == "no_edit" and bounded.usage.llm_calls == 2
    other = 'Path: {"columns": ["Place"]}' if kind == "table" else "Final Path: John Godey → x"
    spent = _on(kind, kb, db, ScriptedLLM([first, other, "{x}"]), max_edits=1)
    assert spent.stop_reason == "max_edits" and [s.kind for s in spent.steps] == [
        "generate", "instantiate", "edit", "instantiate", "answer"]


def test_rows_the_model_insists_on_are_instantiated_once_more_allowing_no_row(db):
    path = ('Path: {"columns": ["Nationality"], "rows": [["Player", "=", "Nobody"]], '
            '"answer": "COUNT(Nationality)"}')
    result = Readi(ScriptedLLM([path, path]), db, table="players", token_counter=COUNTER).run(
        "how many players are called Nobody")
    assert result.stop_reason == "insisted"
    assert [s.kind for s in result.steps] == ["generate", "instantiate", "edit", "instantiate",
                                              "answer"]
    assert result.steps[3].accepted and result.answers == (0,)


def test_a_question_without_topic_entities_ends_without_an_edit(kb):
    # nothing is stuck on an empty path over no entity: no error to show an editor
    result = readi(ScriptedLLM(["Path: {}", "So the answer is {none}"]), kb, max_edits=2).run(
        "who?", {})
    assert result.stop_reason == "no_edit" and [s.kind for s in result.steps] == [
        "generate", "instantiate", "answer"]
