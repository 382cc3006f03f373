"""``--preset paper``: QueryAgent sends the request the original QueryAgent code builds.

The expected requests (``tests/fixtures/paper_requests/*.requests.json``) were made by running
the original's own loop code (``webthink`` of each dataset script, ``llm`` and
``get_dynamic_history`` of ``ag_utils.py``, commit ``5364b3e``) on the same trajectories, outside
the project (``PROVENANCE.md`` there). Here the same replies go through the real OpenAI client
to a local fake server, and each request it receives must be the original's: the one message
byte for byte, the stop, ``max_tokens`` and the temperature; the actions the environment is
handed must be those the original's environment got.

Figures 5-7 (Appendix G) are Freebase runs whose KB is not here: their environment replays the
observations the paper printed (:class:`RecordedEnvironment`). The MetaQA and WikiSQL
trajectories run on real backends (an Oxigraph MetaQA KB, a SQLite table).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from pyql.agent import QueryAgent, ScriptedLLM
from pyql.agent.llm.clients import LLM, OpenAIChat
from pyql.agent.strategies.queryagent.paper_request import parse_paper_reply
from pyql.agent.strategies.queryagent.presets import get_preset
from pyql.agent.strategy import Result
from pyql.feedback import Feedback
from pyql.memory import Memory
from pyql.program import Call
from pyql.session import Observation
from tests.support.fake_openai import FakeOpenAI, Text
from tests.support.metaqa import metaqa_kb

FIXTURES = Path(__file__).parents[1] / "fixtures" / "paper_requests"
FIGURES = ("figure5_grailqa", "figure6_graphq", "figure7_webqsp")
COMPARED = ("messages", "stop", "max_tokens", "temperature")


def load(name: str, kind: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.{kind}.json").read_text(encoding="utf-8"))


class RecordedEnvironment:
    """A question's environment that answers each action with the observation a recorded
    trajectory printed (Figures 5-7: their Freebase is not here), and keeps the actions."""

    #: the parts of the Environment contract QueryAgent reads (no KB behind it)
    backend = None
    query = None
    program = None

    def __init__(self, observations: list[tuple[str, bool]]) -> None:
        self.recorded = observations
        self.actions: list[str] = []
        self.memory = Memory()
        self.observations: list[Observation] = []

    def run(self, action: Any) -> Observation:
        text = str(action)
        self.actions.append(text)
        n = len(self.actions)
        summary = self.recorded[n - 1][0] if n <= len(self.recorded) else ""
        call = Call(name="execute") if text.startswith("execute(") else None
        feedback = Feedback(step=n, action_text=text, call=call, memory=Memory())
        obs = Observation(step=n, action=text, feedback=feedback, summary=summary)
        self.observations.append(obs)
        return obs


def through_openai(fake: FakeOpenAI, replies: list[str]) -> OpenAIChat:
    fake.models.add("gpt-3.5-turbo-0613")  # the original's model (config.py:26)
    fake.push(*[Text(r) for r in replies])
    return OpenAIChat("gpt-3.5-turbo-0613", base_url=fake.base_url, api_key=fake.api_key)


def assert_original_requests(fake: FakeOpenAI, expected: dict[str, Any]) -> None:
    sent = [r.body for r in fake.chat_requests]
    assert len(sent) == len(expected["requests"])
    for n, (got, want) in enumerate(zip(sent, expected["requests"]), 1):
        for key in COMPARED:
            assert got[key] == want[key], f"request {n}: {key} differs"
        # byte for byte, not only equal as JSON values
        assert got["messages"][0]["content"].encode() == want["messages"][0]["content"].encode()


@pytest.mark.parametrize("name", FIGURES)
def test_figure_trajectories_send_the_original_requests(name: str,
                                                        fake_openai: FakeOpenAI) -> None:
    spec, expected = load(name, "trajectory"), load(name, "requests")
    env = RecordedEnvironment([tuple(o) for o in spec["observations"]])
    agent = QueryAgent(through_openai(fake_openai, spec["replies"]),
                       lambda **_: env, guidelines=None, preset="paper",
                       dataset=spec["dataset"], ranker="bm25")
    result = agent.run(spec["question"], spec["entities"])
    assert_original_requests(fake_openai, expected)
    assert env.actions == expected["env_actions"]
    assert fake_openai.pending == 0
    regenerated = [s.n for s in result.trajectory.steps if s.format_issue == "regenerated"]
    assert regenerated == ([3] if name == "figure7_webqsp" else [])
    assert result.usage.llm_calls == len(expected["requests"])


def run_metaqa(spec: dict[str, Any], llm: LLM | None = None) -> tuple[Result, LLM]:
    llm = llm if llm is not None else ScriptedLLM(spec["replies"])
    kb = metaqa_kb("\n".join(spec["triples"]))
    agent = QueryAgent(llm, kb, preset="paper", dataset="metaqa-3hop", ranker="bm25")
    return agent.run(spec["question"], spec["entities"]), llm


def run_wikisql(spec: dict[str, Any], llm: LLM | None = None) -> tuple[Result, LLM]:
    from pyql.db import SqlDB

    llm = llm if llm is not None else ScriptedLLM(spec["replies"])
    columns = ", ".join(json.dumps(c) for c in spec["header"])
    rows = ", ".join("(" + ", ".join("'" + v.replace("'", "''") + "'" for v in row) + ")"
                     for row in spec["rows"])
    db = SqlDB.sqlite_memory(lambda c: c.executescript(
        f"CREATE TABLE {spec['table']}({columns}); INSERT INTO {spec['table']} VALUES {rows};"))
    agent = QueryAgent(llm, db, preset="paper", dataset="wikisql", table=spec["table"],
                       ranker="bm25")
    return agent.run(spec["question"]), llm


@pytest.mark.parametrize(("name", "runner"), [("metaqa_3hop", run_metaqa),
                                              ("wikisql", run_wikisql)])
def test_dataset_trajectories_send_the_original_requests(name: str, runner: Any,
                                                         fake_openai: FakeOpenAI) -> None:
    spec, expected = load(name, "trajectory"), load(name, "requests")
    result, _ = runner(spec, through_openai(fake_openai, spec["replies"]))
    assert result.finished
    assert [s.observation for s in result.trajectory.steps] == [
        o for o, _ in spec["observations"]]
    assert_original_requests(fake_openai, expected)


def test_metaqa_walk_answers_with_a_regenerated_step() -> None:
    spec = load("metaqa_3hop", "trajectory")
    result, llm = run_metaqa(spec)
    assert result.answers == ("Herbert Wilcox",)
    steps = result.trajectory.steps
    assert [s.format_issue for s in steps] == [None, "regenerated", None, None, None]
    assert steps[1].action == "get_relation()" and steps[1].data["regenerated"] == " get_relation()"
    assert result.usage.llm_calls == 6 and result.usage.parse_failures == 1
    first = llm.calls[0]["messages"][0]["content"]  # type: ignore[attr-defined]
    assert first.endswith("\nQuestion: who are the directors of the films written by the writer "
                          "of [Kismet] \nEntity: Kismet\nRelation for the entity: "
                          "['directed_by', 'release_year', 'written_by']\nThought 1:")


def test_the_original_parser_reads_what_the_original_reads() -> None:
    assert parse_paper_reply(" a\n\nb\nAction 3: add_fact(x, r, ?y)\nmore", 3, "grailqa") == (
        "a\nb", "add_fact(x, r, ?y)")
    assert parse_paper_reply("a\nAction 2: relate(r)", 3, "grailqa") is None
    assert parse_paper_reply("a\nAction 2: relate(r)", 3, "webqsp") == ("a", "relate(r)")
    assert parse_paper_reply("a\nAction 1: x\nAction 1: y", 1, "metaqa") is None


def test_the_paper_preset_settings_of_the_request() -> None:
    grail, webqsp = get_preset("paper", "grailqa"), get_preset("paper", "webqsp")
    assert (grail.request, grail.relation_order, grail.context_budget,
            grail.context_budget_16k) == ("paper", "sorted", 4090, 16090)
    assert webqsp.context_budget_16k is None and webqsp.original_checks
    assert not grail.original_checks  # the pack has no GrailQA checks
    assert get_preset("default", "grailqa").request == "chat"


def test_a_16k_model_gets_the_16k_budget() -> None:
    env = RecordedEnvironment([])
    short = QueryAgent(ScriptedLLM([], model="gpt-3.5-turbo-16k"), lambda **_: env,
                       guidelines=None, preset="paper", dataset="graphq", ranker="bm25")
    assert short._paper_budget() == 16090
    plain = QueryAgent(ScriptedLLM([], model="gpt-3.5-turbo-0613"), lambda **_: env,
                       guidelines=None, preset="paper", dataset="graphq", ranker="bm25")
    assert plain._paper_budget() == 4090
    webqsp = QueryAgent(ScriptedLLM([], model="gpt-3.5-turbo-16k"), lambda **_: env,
                        guidelines=None, preset="paper", dataset="webqsp", ranker="bm25")
    assert webqsp._paper_budget() == 4090  # WebQSP.py:46 has no 16k clause


def test_the_preset_temperature_is_sent() -> None:
    from dataclasses import replace

    preset = replace(get_preset("paper", "graphq"), temperature=0.7)
    llm = ScriptedLLM([" t\nAction 1: execute()"])
    env = RecordedEnvironment([("Step finished\n", True)])
    QueryAgent(llm, lambda **_: env, guidelines=None, preset=preset, ranker="bm25").run(
        "q", {"x": "m.0x"})
    assert (llm.calls[0]["temperature"], llm.calls[0]["max_tokens"]) == (0.7, 256)


def test_the_paper_preset_does_not_constrain_its_text_unless_asked() -> None:
    llm = ScriptedLLM([], structured_output=True)
    env = RecordedEnvironment([])
    auto = QueryAgent(llm, lambda **_: env, preset="paper", dataset="graphq", ranker="bm25")
    on = QueryAgent(llm, lambda **_: env, preset="paper", dataset="graphq", ranker="bm25",
                    constrain="on")
    assert not auto.constrained and on.constrained


def test_the_paper_preset_adds_the_original_checks_and_the_fact_fallback() -> None:
    from pyql.kb import OxigraphKB

    fb = OxigraphKB(profile="freebase")
    webqsp = QueryAgent(ScriptedLLM([]), fb, preset="paper", dataset="webqsp", ranker="bm25")
    assert "PY401" in webqsp.guidelines.codes  # the original WebQSP environment's check
    assert webqsp.new_session({}).fact_fallback
    default = QueryAgent(ScriptedLLM([]), fb, ranker="bm25")
    assert "PY401" not in default.guidelines.codes and not default.new_session({}).fact_fallback
    off = QueryAgent(ScriptedLLM([]), fb, preset="paper", dataset="webqsp", ranker="bm25",
                     session_options={"fact_fallback": False})
    assert not off.new_session({}).fact_fallback


def test_relations_are_listed_sorted_as_the_original_prints_them() -> None:
    from pyql.agent.grounding.ranking import BM25Ranker
    from pyql.agent.strategies.queryagent.prompts import render_observation
    from pyql.feedback import KBFeedback, Relations

    relations = Relations(forward=tuple(f"r.{i:02d}" for i in range(30)),
                          backward=tuple(f"b.{i:02d}" for i in range(20)))
    feedback = Feedback(step=1, action_text="get_relation(m.0x)", memory=Memory(),
                        backend=KBFeedback(status="ok", relations=relations))
    obs = Observation(step=1, action="get_relation(m.0x)", feedback=feedback)
    text = render_observation(obs, 1, question="r", ranker=BM25Ranker(), top_k=40,
                              relation_order="sorted")
    shown = ast.literal_eval(text)  # the original prints a Python dict
    assert shown["forward"] == sorted(shown["forward"]) and "..." not in text
    assert len(shown["forward"]) + len(shown["backward"]) == 40
    assert "..." in render_observation(obs, 1, question="r", ranker=BM25Ranker(), top_k=40)


def test_a_run_with_a_regenerated_step_replays() -> None:
    from pyql.agent.llm.clients import ReplayLLM

    spec = load("metaqa_3hop", "trajectory")
    result, _ = run_metaqa(spec)
    replayed, replay = run_metaqa(spec, ReplayLLM(result.trajectory, check_prompts=True))
    assert replay.remaining == 0  # type: ignore[attr-defined]
    assert replayed.answers == result.answers
    assert [s.action for s in replayed.trajectory.steps] == [
        s.action for s in result.trajectory.steps]


def test_relation_order_and_temperature_are_options() -> None:
    env = RecordedEnvironment([("Step finished\n", True)])
    shuffled = QueryAgent(ScriptedLLM([]), lambda **_: env, preset="paper", dataset="graphq",
                          ranker="bm25", relation_order="shuffled")
    assert shuffled.relation_order == "shuffled"
    with pytest.raises(ValueError, match="relation_order"):
        QueryAgent(ScriptedLLM([]), lambda **_: env, relation_order="alphabetical")
    # pyql's own request sends a temperature only when one is given
    quiet = ScriptedLLM(["Thought 1 : done.\nAction 1 : execute()"])
    QueryAgent(quiet, lambda **_: env, guidelines=None).run("q", {})
    assert "temperature" not in quiet.calls[0] and "max_tokens" not in quiet.calls[0]
    warm = ScriptedLLM(["Thought 1 : done.\nAction 1 : execute()"])
    QueryAgent(warm, lambda **_: RecordedEnvironment([("Step finished\n", True)]),
               guidelines=None, temperature=0.3).run("q", {})
    assert warm.calls[0]["temperature"] == 0.3
