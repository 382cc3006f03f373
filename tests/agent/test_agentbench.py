"""AgentBench (QueryAgent paper Table 6) as a configuration of QueryAgent: tool calling,
15 steps, AgentBench's instruction; ``agentbench`` without ERASER, ``agentbench-eraser`` with."""

from __future__ import annotations

import pytest

from pyql.agent.llm.clients import ScriptedLLM
from pyql.agent.strategies.baselines.agentbench import (
    AGENTBENCH_ROUNDS,
    AgentBench,
    AgentBenchEraser,
)
from pyql.agent.strategy import StrategyConfig, build_strategy
from pyql.kb import OxigraphKB
from tests.agent.conftest import ENTITIES, GOLD, QUESTION

GOLD_CALLS = [
    [{"name": "get_relation", "arguments": {"node": "John Godey"}}],
    [{"name": "add_fact", "arguments": {"head": "?m", "relation": "written_by",
                                        "tail": "John Godey"}}],
    [{"name": "add_fact", "arguments": {"head": "?m", "relation": "directed_by", "tail": "?d"}}],
    [{"name": "set_answer", "arguments": {"answer_var": "?d"}}],
    [{"name": "execute", "arguments": {}}],
]
#: AgentBench's own tool name, which PyQL does not have: a Python error ERASER has a hint for
WRONG_TOOL = [{"name": "get_relations", "arguments": {"node": "John Godey"}}]


def test_configuration(kb: OxigraphKB) -> None:
    plain = build_strategy("agentbench", ScriptedLLM([]), kb, StrategyConfig(profile="metaqa"))
    eraser = build_strategy("agentbench-eraser", ScriptedLLM([]), kb,
                            StrategyConfig(profile="metaqa"))
    assert isinstance(plain, AgentBench) and isinstance(eraser, AgentBenchEraser)
    for agent in (plain, eraser):
        assert agent.mode == "tools" and agent.max_steps == AGENTBENCH_ROUNDS
        assert agent.profile.name == "agentbench-metaqa" and agent.tools
        assert "You can only take ONE action at a time!!" in agent.system
        assert f"at most {AGENTBENCH_ROUNDS} actions" in agent.system
        assert "Question : which person directed" in agent.system  # the profile's one shot
    assert plain.guidelines is None and eraser.guidelines is not None
    text = build_strategy("agentbench", ScriptedLLM([]), kb,
                          StrategyConfig(profile="metaqa", max_steps=5,
                                         options={"mode": "text", "guidelines": "on"}))
    assert text.mode == "text" and text.max_steps == 5 and text.guidelines is not None  # type: ignore[attr-defined]
    # the ERASER-off side of --ablation: agentbench-eraser becomes Table 6's first row
    off = build_strategy("agentbench-eraser", ScriptedLLM([]), kb,
                         StrategyConfig(profile="metaqa", guidelines=False))
    assert off.guidelines is None  # type: ignore[attr-defined]
    # under pyql eval --preset paper the preset only picks the headline (F1), not the loop
    evaluated = build_strategy("agentbench", ScriptedLLM([]), kb,
                               StrategyConfig(profile="metaqa", preset="paper", dataset="metaqa"))
    assert evaluated.preset.name == "default"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="preset"):
        AgentBench(ScriptedLLM([]), kb, preset="paper", dataset="metaqa")


def test_runs_on_tool_calls(kb: OxigraphKB) -> None:
    agent = AgentBench(ScriptedLLM(GOLD_CALLS), kb, profile="metaqa")
    result = agent.run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and result.finished
    assert result.strategy == "agentbench" and result.trajectory.mode == "tools"


@pytest.mark.parametrize(("kind", "hinted"), [(AgentBench, False), (AgentBenchEraser, True)])
def test_eraser_is_the_only_difference(kb: OxigraphKB, kind: type[AgentBench],
                                       hinted: bool) -> None:
    result = kind(ScriptedLLM([WRONG_TOOL, *GOLD_CALLS]), kb, profile="metaqa").run(
        QUESTION, ENTITIES)
    first = result.steps[0]
    assert not first.accepted and (first.hint is not None) is hinted
    assert set(result.answers) == GOLD
