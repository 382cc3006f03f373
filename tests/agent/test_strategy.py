"""The strategy interface: registry by entry point, the common Result, QueryAgent as one."""

from __future__ import annotations

import dataclasses

import pytest

from pyql.agent import (
    QueryAgent,
    Result,
    ScriptedLLM,
    Strategy,
    StrategyConfig,
    UnknownStrategyError,
    available_strategies,
    build_strategy,
    get_strategy,
)
from pyql.agent.trajectory import Trajectory
from pyql.kb import OxigraphKB
from pyql.program import Program
from tests.support.metaqa import metaqa_kb


@pytest.fixture()
def kb() -> OxigraphKB:
    return metaqa_kb("Kismet|directed_by|William Dieterle")


def test_queryagent_is_registered() -> None:
    assert "queryagent" in available_strategies()
    assert get_strategy("queryagent") is QueryAgent


def test_unknown_strategy_names_the_installed_ones() -> None:
    with pytest.raises(UnknownStrategyError) as info:
        get_strategy("no-such-strategy")
    assert info.value.name == "no-such-strategy"
    assert "queryagent" in info.value.available
    assert "queryagent" in str(info.value)


def test_built_queryagent_satisfies_the_contract(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([
        "Thought 1 : find the director.\nAction 1 : add_fact(Kismet, directed_by, ?d)",
        "Thought 2 : that is the answer.\nAction 2 : set_answer(?d)",
        "Thought 3 : done.\nAction 3 : execute()",
    ])
    agent = build_strategy("queryagent", llm, kb,
                           StrategyConfig(guidelines=False, max_steps=5, options={"top_k": 3}))
    assert isinstance(agent, QueryAgent) and isinstance(agent, Strategy)
    assert agent.max_steps == 5 and agent.top_k == 3 and agent.guidelines is None
    result = agent.run("who directed [Kismet]", {"Kismet": "Kismet"}, unused_context=1)
    assert isinstance(result, Result)
    assert result.strategy == "queryagent"
    assert result.answers == ("William Dieterle",)
    assert result.finished and result.usage.llm_calls == 3
    assert [s.kind for s in result.steps] == ["action"] * 3
    # the strategy name and step kinds survive the JSONL round trip
    again = Trajectory.from_records(result.trajectory.records())
    assert again.strategy == "queryagent" and again == result.trajectory


def test_a_results_attributes_are_its_trajectorys() -> None:
    trajectory = Trajectory(question="q", strategy="readi", answers=("a",), query="ASK {}",
                            finished=True, stop_reason="execute")
    result = Result(trajectory, Program())
    read = {name: getattr(result, name) for name in
            ("question", "strategy", "answers", "query", "steps", "usage", "finished",
             "stop_reason")}
    assert read == {name: getattr(trajectory, name) for name in read}
    assert [f.name for f in dataclasses.fields(Result)] == ["trajectory", "program"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.question = "other"  # type: ignore[misc]


def test_a_factory_that_builds_no_strategy_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                      kb: OxigraphKB) -> None:
    import pyql.agent.strategy as strategy

    class EP:
        value = "x:y"

        def load(self):  # noqa: ANN202
            return Broken

    class Broken:
        name = "broken"

        @classmethod
        def from_config(cls, llm, backend, config):  # noqa: ANN001, ANN206
            return object()

    monkeypatch.setattr(strategy, "_entry_points", lambda: {"broken": EP(), "nothing": EP2()})
    with pytest.raises(TypeError, match="broken"):
        build_strategy("broken", None, kb)
    with pytest.raises(TypeError, match="from_config"):
        build_strategy("nothing", None, kb)


class EP2:
    value = "x:z"

    def load(self):  # noqa: ANN202
        return object()
