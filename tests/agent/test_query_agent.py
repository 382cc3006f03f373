"""The QueryAgent loop (Algorithm 1): scripted runs, injected mistakes with and without ERASER,
tools mode, how runs end, the fake OpenAI server end to end, KB vs DB, and trajectories."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from pyql import Session
from pyql.agent import (
    LLMAuthError,
    LLMContextLengthError,
    LLMReplayMismatchError,
    OpenAIChat,
    QueryAgent,
    ReplayLLM,
    ScriptedLLM,
    TokenCounter,
    Trajectory,
    load_trajectories,
)
from pyql.agent.strategies.queryagent.prompts import RETRY_WORDING
from pyql.kb import OxigraphKB
from tests.agent.conftest import ENTITIES, GOLD, QUESTION
from tests.support.fake_openai import FakeOpenAI, Text, ToolCalls
from tests.support.metaqa import metaqa_kb

GOLD_STEPS = [
    "Thought 1 : Find what John Godey is linked by.\nAction 1 : get_relation(John Godey)",
    "Thought 2 : written_by is backward.\nAction 2 : add_fact(?movie, written_by, John Godey)",
    "Thought 3 : Now the directors.\nAction 3 : get_relation(?movie)",
    "Thought 4 : directed_by is forward.\nAction 4 : add_fact(?movie, directed_by, ?director)",
    "Thought 5 : ?director is the answer.\nAction 5 : set_answer(?director)",
    "Thought 6 : Execute it.\nAction 6 : execute()",
]

GOLD_TOOLS = [
    {"text": "Thought 1 : relations first", "tool_calls": [("get_relation", {"node": "John Godey"})]},
    [("add_fact", {"head": "?movie", "relation": "written_by", "tail": "John Godey"})],
    [("add_fact", {"head": "?movie", "relation": "directed_by", "tail": "?director"})],
    [("set_answer", {"answer_var": "?director"})],
    [("execute", {})],
]


def renumber(replies: list[str], start: int) -> list[str]:
    """The gold text replies numbered from ``start`` (after injected steps)."""
    out = []
    for i, reply in enumerate(replies):
        n = start + i
        out.append(reply.replace(f"Thought {i + 1} :", f"Thought {n} :")
                   .replace(f"Action {i + 1} :", f"Action {n} :"))
    return out


def guidelines_available() -> bool:
    try:
        module = importlib.import_module("pyql.guidelines")
    except ImportError:
        return False
    return hasattr(module, "default_registry")


needs_eraser = pytest.mark.skipif(not guidelines_available(),
                                  reason="ERASER (pyql.guidelines.default_registry) is not available")


# -- scripted runs ------------------------------------------------------------------------------


def test_scripted_run_reaches_the_gold_answers(kb: OxigraphKB) -> None:
    llm = ScriptedLLM(GOLD_STEPS)
    result = QueryAgent(llm, kb, guidelines=None).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD
    assert result.finished and result.stop_reason == "execute"
    assert [s.action for s in result.steps] == [r.split("Action ")[1].split(" : ", 1)[1]
                                                for r in GOLD_STEPS]
    assert all(s.accepted and s.hint is None for s in result.steps)
    assert result.steps[1].observation.startswith("The value of variable ?movie is [")
    assert "SELECT DISTINCT ?director" in result.query and "written_by" in result.query
    assert str(result.program).splitlines()[-2:] == ["set_answer(?director)", "execute()"]
    usage = result.usage
    assert usage.llm_calls == 6 and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.estimated_tokens  # ScriptedLLM reports no usage: counted locally
    assert usage.kb_queries > 0 and usage.seconds > 0
    assert sum(s.kb_queries for s in result.steps) == usage.kb_queries
    # Algorithm 1: each prompt is the previous one + thought + action + observation
    first, last = llm.calls[0]["messages"], llm.calls[-1]["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"] == f"Question : {QUESTION}\nEntity : {{John Godey: John Godey}}"
    assert last[:2] == first and len(last) == 2 + 2 * 5
    assert last[2] == {"role": "assistant", "content": GOLD_STEPS[0]}
    assert last[3]["content"] == "Observation 1 : {'forward': [], 'backward': ['written_by']}"
    assert llm.calls[0]["stop"] == ["\nObservation"] and llm.calls[0]["tools"] == []


def test_a_counter_without_estimates_leaves_unreported_tokens_uncounted(kb: OxigraphKB
                                                                        ) -> None:
    counted = QueryAgent(ScriptedLLM(GOLD_STEPS), kb, guidelines=None).run(QUESTION, ENTITIES)
    # each step's prompt count is the whole prompt, counted a new message at a time
    prompts = [s.prompt_tokens for s in counted.steps]
    assert prompts == sorted(prompts) and prompts[0] > 0
    assert counted.usage.prompt_tokens == sum(prompts)
    off = QueryAgent(ScriptedLLM(GOLD_STEPS), kb, guidelines=None,
                     token_counter=TokenCounter(estimates=False))
    result = off.run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.steps == tuple(
        s.model_copy(update={"prompt_tokens": 0, "completion_tokens": 0,
                             "estimated_tokens": False, "env_latency": r.env_latency})
        for s, r in zip(counted.steps, result.steps, strict=True))
    usage = result.usage
    assert (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens) == (6, 0, 0)
    assert not usage.estimated_tokens


def test_prefix_is_shared_across_questions(kb: OxigraphKB) -> None:
    llm = ScriptedLLM(["Action 1 : execute()", "Action 1 : execute()"])
    agent = QueryAgent(llm, kb, guidelines=None, max_steps=1)
    agent.run(QUESTION, ENTITIES)
    agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    a, b = (c["messages"] for c in llm.calls)
    assert a[0] == b[0] and a[1] != b[1]
    assert a[1]["content"].startswith("Question : ") and b[1]["content"].startswith("Question : ")


def test_mistakes_without_guidelines_show_the_raw_errors(kb: OxigraphKB) -> None:
    mistakes = [
        "Thought 1 : search it.\nAction 1 : search(John Godey)",
        "Thought 2 : two args.\nAction 2 : add_fact(?movie, written_by)",
        "Thought 3 : I am not sure what to do.",
        "Thought 4 : both.\nAction 4 : get_relation(John Godey)\nThought 5 : and\n"
        "Action 5 : get_relation(?movie)",
        "Thought 5 : prose.\nAction 5 : Since no relation fits, we try another approach.",
    ]
    llm = ScriptedLLM(mistakes + renumber(GOLD_STEPS, 6))
    result = QueryAgent(llm, kb, guidelines=None).run(QUESTION, ENTITIES)
    observations = [s.observation for s in result.steps[:5]]
    assert observations[0].startswith("Error: unknown function 'search'")
    assert observations[1] == "Error: add_fact(head, relation, tail) takes 3 arguments, got 2"
    assert observations[2] == "Error: expected one call, found 0"
    assert observations[3].startswith("Error: expected one call, found 2")
    assert observations[4].startswith("Error: expected '(' after 'Since'")
    assert [s.format_issue for s in result.steps[:5]] == [None, None, "no_action",
                                                           "multiple_actions", None]
    assert all(s.hint is None and not s.accepted and s.status == "error" for s in result.steps[:5])
    assert not any("re-generate" in o for o in observations)
    assert set(result.answers) == GOLD and result.finished  # errors were not kept
    assert result.usage.guideline_triggers == {}


def test_wrong_relation_without_guidelines_is_kept(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([
        "Thought 1 : x\nAction 1 : add_fact(?movie, directed_by, John Godey)",
        "Thought 2 : x\nAction 2 : set_answer(?movie)",
        "Thought 3 : x\nAction 3 : execute()",
    ])
    result = QueryAgent(llm, kb, guidelines=None).run(QUESTION, ENTITIES)
    assert result.steps[0].observation == "The query result is empty."
    assert result.steps[0].accepted and result.steps[0].status == "empty"
    assert result.finished and result.answers == ()


@needs_eraser
def test_mistakes_with_guidelines_give_hints(kb: OxigraphKB) -> None:
    mistakes = [
        "Thought 1 : search it.\nAction 1 : search(John Godey)",
        "Thought 2 : two args.\nAction 2 : add_fact(?movie, written_by)",
        "Thought 3 : I am not sure what to do.",
        "Thought 4 : both.\nAction 4 : get_relation(John Godey)\nAction 5 : get_relation(?movie)",
        "Thought 5 : look.\nAction 5 : get_relation(John Godey)",
        "Thought 6 : wrong relation.\nAction 6 : add_fact(?movie, directed_by, John Godey)",
    ]
    rest = renumber(GOLD_STEPS[1:], 7)
    llm = ScriptedLLM(mistakes + rest)
    result = QueryAgent(llm, kb, guidelines=True).run(QUESTION, ENTITIES)
    hinted = [s for s in result.steps if s.hint is not None]
    assert [s.n for s in hinted] == [1, 2, 3, 4, 6]
    for step in hinted:
        assert not step.accepted and step.status == "hint"
        assert step.observation.endswith(RETRY_WORDING.format(n=step.n + 1))
    assert set(result.answers) == GOLD and result.finished
    assert sum(result.usage.guideline_triggers.values()) == 5
    assert "directed_by" not in result.query.split("?director")[0]  # the wrong fact was rolled back
    # the observation the model reads next is the hint
    prompt = llm.calls[6]["messages"]
    assert prompt[-1]["content"].startswith("Observation 6 : ")
    assert prompt[-1]["content"].endswith("Please re-generate only Thought 7 and Action 7.")


# -- tools mode ---------------------------------------------------------------------------------


def test_tools_mode_reaches_the_gold_answers(kb: OxigraphKB) -> None:
    llm = ScriptedLLM(GOLD_TOOLS)
    result = QueryAgent(llm, kb, guidelines=None, mode="tools").run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.finished
    assert [s.action for s in result.steps] == [
        "get_relation(John Godey)", "add_fact(?movie, written_by, John Godey)",
        "add_fact(?movie, directed_by, ?director)", "set_answer(?director)", "execute()"]
    assert result.steps[0].thought == "relations first"
    tools = llm.calls[0]["tools"]
    assert [t["function"]["name"] for t in tools] == list(QueryAgent(
        llm, kb, guidelines=None, mode="tools").profile.functions)
    assert llm.calls[0]["stop"] == []
    messages = llm.calls[-1]["messages"]
    assistant, tool = messages[2], messages[3]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_relation"
    assert tool == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"],
                    "content": "{'forward': [], 'backward': ['written_by']}"}


@pytest.mark.parametrize("guidelines", [None, pytest.param(True, marks=needs_eraser)])
def test_bad_tool_calls_become_python_feedback(kb: OxigraphKB, guidelines: bool | None) -> None:
    llm = ScriptedLLM([
        [("get_relation", {"node": "John Godey"}), ("get_relation", {"node": "?x"})],
        [("add_fact", '{"head": "?movie", "relation": written_by')],  # malformed JSON
        [("add_fact", {"head": "?movie", "tail": "John Godey"})],  # a parameter missing
        [("add_fact", {"head": "?m", "relation": "r", "tail": "t", "weight": 2})],
        [("search", {"query": "John Godey"})],
        [("add-fact", {})],
        {"text": "Thought 7 : no tool this time, and no action either"},
        *GOLD_TOOLS,
    ])
    result = QueryAgent(llm, kb, guidelines=guidelines, mode="tools").run(QUESTION, ENTITIES)
    bad = result.steps[:7]
    assert [s.format_issue for s in bad] == ["multiple_actions", "bad_tool_call", "bad_tool_call",
                                             "bad_tool_call", None, "bad_tool_call", "no_action"]
    assert all(not s.accepted for s in bad)
    if guidelines is None:
        assert bad[0].observation.startswith("Error: expected one call, found 2")
        assert "not valid JSON" in bad[1].observation
        assert bad[2].observation == "Error: add_fact(head, relation, tail) takes 3 arguments, got 2"
        assert "unknown argument(s) weight" in bad[3].observation
        assert bad[4].observation.startswith("Error: unknown function 'search'")
        assert "not a function name" in bad[5].observation
        assert bad[6].observation == "Error: expected one call, found 0"
    else:
        assert all(s.hint is not None for s in bad)
    assert set(result.answers) == GOLD and result.finished
    # every tool call of the refused reply got its tool message
    messages = llm.calls[1]["messages"]
    ids = [c["id"] for c in messages[2]["tool_calls"]]
    assert [m["tool_call_id"] for m in messages[3:5]] == ids


# -- how a run ends -----------------------------------------------------------------------------


def test_max_steps_with_an_answer_executes_the_current_query(kb: OxigraphKB) -> None:
    llm = ScriptedLLM(GOLD_STEPS[:5])
    result = QueryAgent(llm, kb, guidelines=None, max_steps=5).run(QUESTION, ENTITIES)
    assert not result.finished and result.stop_reason == "max_steps"
    assert set(result.answers) == GOLD
    assert len(result.steps) == 5


def test_max_steps_without_an_answer_gives_nothing(kb: OxigraphKB) -> None:
    llm = ScriptedLLM(GOLD_STEPS[:4])
    result = QueryAgent(llm, kb, guidelines=None, max_steps=4).run(QUESTION, ENTITIES)
    assert not result.finished and result.answers == ()
    assert "?director" in result.query  # the query built so far is still reported


def test_context_length_ends_the_run(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([*GOLD_STEPS[:5], LLMContextLengthError("too long", model="scripted")])
    result = QueryAgent(llm, kb, guidelines=None).run(QUESTION, ENTITIES)
    assert result.stop_reason == "context_length" and not result.finished
    assert set(result.answers) == GOLD  # the answer variable was set: executed anyway


def test_framework_errors_are_raised(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([LLMAuthError("bad key", model="scripted", status=401)])
    with pytest.raises(LLMAuthError):
        QueryAgent(llm, kb, guidelines=None).run(QUESTION, ENTITIES)


def test_relation_lists_are_ranked_in_the_prompt() -> None:
    lines = "".join(f"Film|rel_{i}|Value {i}\n" for i in range(60)) + "Film|was_directed_by|X\n"
    kb = metaqa_kb(lines)
    llm = ScriptedLLM(["Action 1 : get_relation(Film)"])
    result = QueryAgent(llm, kb, guidelines=None, max_steps=1).run("who directed [Film]",
                                                                   {"Film": "Film"})
    observation = result.steps[0].observation
    assert observation.count("'rel_") == 39 and "'was_directed_by'" in observation
    plain = QueryAgent(ScriptedLLM(["Action 1 : get_relation(Film)"]), kb, guidelines=None,
                       max_steps=1, ranker=None).run("who directed [Film]", {"Film": "Film"})
    assert "was_directed_by" not in plain.steps[0].observation


def test_session_factory(kb: OxigraphKB) -> None:
    made: list[dict[str, Any]] = []

    def factory(*, entities: dict[str, str], guidelines: Any, table: str | None) -> Session:
        made.append({"entities": entities, "guidelines": guidelines, "table": table})
        return Session(kb, entities, guidelines=guidelines)

    result = QueryAgent(ScriptedLLM(GOLD_STEPS), factory, guidelines=None,
                        profile="metaqa").run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD
    assert made == [{"entities": ENTITIES, "guidelines": None, "table": None}]


def test_sql_backend_gets_a_sql_session() -> None:
    sqldb = pytest.importorskip("pyql.db")
    pytest.importorskip("pyql.sql.session")
    db = sqldb.SqlDB.sqlite_memory(lambda c: c.executescript(
        'CREATE TABLE players("Player" TEXT, "No." TEXT, "School/Club Team" TEXT);'
        "INSERT INTO players VALUES ('Martin Lewis', '32, 44', 'Butler CC (KS)'),"
        " ('Kyle Lowry', '3', 'Villanova');"))
    llm = ScriptedLLM([
        "Thought 1 : look.\nAction 1 : get_column(School/Club Team)",
        'Thought 2 : that one.\nAction 2 : add_condition(School/Club Team, =, "Butler CC (KS)")',
        "Thought 3 : the player.\nAction 3 : set_answer(Player, None)",
        "Thought 4 : done.\nAction 4 : execute()",
    ])
    agent = QueryAgent(llm, db, guidelines=None, table="players")
    assert agent.profile.name == "wikisql"
    result = agent.run("who played for butler cc (ks)?")
    assert result.answers == ("Martin Lewis",) and result.finished
    assert llm.calls[0]["messages"][1]["content"].endswith(
        "Table Header : ['Player', 'No.', 'School/Club Team']")
    assert result.query.startswith("SELECT") and "Butler CC (KS)" in result.query
    assert result.usage.kb_queries > 0


# -- through the fake OpenAI server ---------------------------------------------------------------


def test_text_mode_through_the_openai_client(kb: OxigraphKB, fake_openai: FakeOpenAI) -> None:
    fake_openai.push(*[Text(r + "\nObservation 9 : made up", usage=(1000, 50)) for r in GOLD_STEPS])
    llm = OpenAIChat("gpt-4o-mini", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    result = QueryAgent(llm, kb, guidelines=None).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.finished
    usage = result.usage
    assert (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens) == (6, 6000, 300)
    assert not usage.estimated_tokens
    assert usage.cost == pytest.approx(6 * (1000 * 0.15 + 50 * 0.60) / 1e6)
    requests = fake_openai.chat_requests
    assert requests[0].body["stop"] == ["\nObservation"] and "tools" not in requests[0].body
    assert [m["role"] for m in requests[-1].body["messages"]] == ["system", "user"] + [
        "assistant", "user"] * 5
    assert "made up" not in json.dumps(requests[-1].body)  # stop sequences applied


def test_tools_mode_through_the_openai_client(kb: OxigraphKB, fake_openai: FakeOpenAI) -> None:
    fake_openai.push(
        ToolCalls([("get_relation", {"node": "John Godey"})], content="Thought 1 : relations"),
        ToolCalls([("add_fact", '{"head": "?movie", "relation": "written_by", "tail": ')]),
        ToolCalls([("add_fact", {"head": "?movie", "relation": "written_by", "tail": "John Godey"})]),
        ToolCalls([("add_fact", {"head": "?movie", "relation": "directed_by", "tail": "?director"})]),
        ToolCalls([("set_answer", {"answer_var": "?director"})]),
        ToolCalls([("execute", {})]),
    )
    llm = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    result = QueryAgent(llm, kb, guidelines=None, mode="tools").run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.finished
    assert result.steps[1].format_issue == "bad_tool_call" and "not valid JSON" in result.steps[1].observation
    body = fake_openai.chat_requests[-1].body
    assert [t["function"]["name"] for t in body["tools"]][:2] == ["get_relation", "add_fact"]
    assert "stop" not in body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 5
    assert body["messages"][2]["content"] == "Thought 1 : relations"


# -- trajectories -------------------------------------------------------------------------------


def test_trajectory_save_load_replay(kb: OxigraphKB, tmp_path: Path) -> None:
    replies = ["Thought 1 : oops.\nAction 1 : add_fact(?movie, written_by)", *renumber(GOLD_STEPS, 2)]
    result = QueryAgent(ScriptedLLM(replies), kb, guidelines=None).run(
        QUESTION, ENTITIES, meta={"id": "dev-7"})
    path = result.trajectory.save(tmp_path / "run.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["record"] for r in records] == ["question"] + ["step"] * 7 + ["result"]
    loaded = Trajectory.load(path)
    assert loaded == result.trajectory
    assert loaded.meta == {"id": "dev-7"} and loaded.steps[0].status == "error"

    replayed = QueryAgent(ReplayLLM(path, check_prompts=True), kb, guidelines=None).run(
        QUESTION, ENTITIES, meta={"id": "dev-7"})
    strip = {"llm_latency", "env_latency"}
    assert [s.model_dump(exclude=strip) for s in replayed.steps] == [
        s.model_dump(exclude=strip) for s in loaded.steps]
    assert replayed.answers == loaded.answers and replayed.query == loaded.query

    with pytest.raises(LLMReplayMismatchError):
        QueryAgent(ReplayLLM(path, check_prompts=True), kb, guidelines=None).run(
            "another question", ENTITIES)


def test_trajectories_append_and_partial_runs(kb: OxigraphKB, tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    agent = QueryAgent(ScriptedLLM(GOLD_STEPS + GOLD_STEPS), kb, guidelines=None)
    first = agent.run(QUESTION, ENTITIES)
    second = agent.run(QUESTION, ENTITIES)
    first.trajectory.save(path)
    second.trajectory.save(path, append=True)
    lines = path.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-4]) + "\n")  # the second run crashed mid-way
    assert [t.answers for t in load_trajectories(path)] == [first.answers, second.answers]
    partial = load_trajectories(cut)
    assert len(partial) == 2 and not partial[1].finished and len(partial[1].steps) == 3
    assert "Thought 1: Find what John Godey" in first.trajectory.render()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n\n{oops\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: not a JSON line"):
        load_trajectories(bad)


def test_replay_of_a_run_that_outgrew_the_context(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([*GOLD_TOOLS[:2], LLMContextLengthError("too long", model="scripted")])
    agent = QueryAgent(llm, kb, guidelines=None, mode="tools")
    recorded = agent.run(QUESTION, ENTITIES)
    assert recorded.stop_reason == "context_length" and len(recorded.steps) == 2
    replay = QueryAgent(ReplayLLM(recorded.trajectory, check_prompts=True), kb, guidelines=None,
                        mode="tools").run(QUESTION, ENTITIES)
    assert replay.stop_reason == "context_length"
    assert [s.observation for s in replay.steps] == [s.observation for s in recorded.steps]
    assert replay.answers == recorded.answers == ()
