"""Table 3's self-correction baselines: every action re-checked by the model, ERASER off."""

from __future__ import annotations

import pytest

from pyql.agent import ScriptedLLM, StrategyConfig, build_strategy
from pyql.agent.strategies.baselines.self_correction import FewShotSC, ZeroShotSC, sc_prompt
from pyql.kb import OxigraphKB
from tests.support.metaqa import metaqa_kb


@pytest.fixture()
def kb() -> OxigraphKB:
    return metaqa_kb("Kismet|directed_by|William Dieterle\nKismet|written_by|Edward Knoblock")


def script() -> ScriptedLLM:
    return ScriptedLLM([
        # step 1: a wrong relation, fixed by the correction call
        "Thought 1 : find the director.\nAction 1 : add_fact(Kismet, written_by, ?d)",
        "Explanation : written_by gives the writer, not the director.\n"
        "Action : add_fact(Kismet, directed_by, ?d)",
        # step 2: kept as it is
        "Thought 2 : that is the answer.\nAction 2 : set_answer(?d)",
        "Action : set_answer(?d)",
        # step 3: the correction gives no action: the original stands
        "Thought 3 : done.\nAction 3 : execute()",
        "Looks fine to me.",
    ])


def test_zero_shot_sc_corrects_each_action_and_counts_both_calls(kb: OxigraphKB) -> None:
    llm = script()
    agent = build_strategy("queryagent-sc0", llm, kb, StrategyConfig(max_steps=5))
    assert isinstance(agent, ZeroShotSC) and agent.guidelines is None  # SC replaces ERASER
    result = agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    assert result.strategy == "queryagent-sc0"
    assert result.answers == ("William Dieterle",)
    assert result.usage.llm_calls == 6
    fixes = [s.data["self_correction"] for s in result.steps]
    assert [f["changed"] for f in fixes] == [True, False, False]
    assert fixes[0] == {"original": "add_fact(Kismet, written_by, ?d)",
                        "corrected": "add_fact(Kismet, directed_by, ?d)", "changed": True}
    # the correction call saw the step's reply and the zero-shot prompt, after the step's messages
    check = llm.calls[1]["messages"]
    assert check[-1]["content"] == sc_prompt("zero", "sparql")
    assert check[-2]["content"].endswith("Action 1 : add_fact(Kismet, written_by, ?d)")
    assert check[:-2] == llm.calls[0]["messages"]


def test_without_correction_the_wrong_relation_would_stand(kb: OxigraphKB) -> None:
    plain = build_strategy("queryagent", ScriptedLLM([
        "Thought 1 : find the director.\nAction 1 : add_fact(Kismet, written_by, ?d)",
        "Thought 2 : that is the answer.\nAction 2 : set_answer(?d)",
        "Thought 3 : done.\nAction 3 : execute()"]), kb, StrategyConfig(guidelines=False))
    assert plain.run("who directed [Kismet]", {"Kismet": "Kismet"}).answers == ("Edward Knoblock",)


def test_few_shot_prompt_has_demonstrations_per_tool_set(kb: OxigraphKB) -> None:
    agent = build_strategy("queryagent-sc-few", script(), kb)
    assert isinstance(agent, FewShotSC)
    assert agent.llm.prompt == sc_prompt("few", "sparql")
    assert "Here are two examples." in sc_prompt("few", "sparql")
    assert "Table Header" in sc_prompt("few", "sql")
    assert sc_prompt("zero", "sql") == sc_prompt("zero", "sparql")
    with pytest.raises(ValueError, match="'zero' or 'few'"):
        sc_prompt("many", "sparql")


def test_guidelines_can_be_turned_back_on_and_tools_mode_is_refused(kb: OxigraphKB) -> None:
    agent = build_strategy("queryagent-sc0", script(), kb,
                           StrategyConfig(options={"guidelines": True}))
    assert agent.guidelines is not None
    with pytest.raises(ValueError, match="no tools mode"):
        ZeroShotSC(script(), kb, mode="tools")
