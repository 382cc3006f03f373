"""``--llm`` specs and providers: gold (text and tools), replay, noisy-gold, openai (through the
fake OpenAI server, with a real 429)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.evaluation.datasets import get_dataset
from pyql.agent.evaluation.llm_spec import (
    LLMSpecError,
    StandInParameter,
    StandInSpec,
    parse_llm_spec,
)
from pyql.agent.evaluation.records import EvalItem, RunConfig
from pyql.agent.evaluation.runner import TRAJECTORIES, EvalAbort, evaluate, read_results
from pyql.agent.evaluation.specs import (
    RateGate,
    ReplayProvider,
    SharedLLMProvider,
    StandInProvider,
    build_provider,
)
from pyql.agent.evaluation.standins import stand_in_assumptions
from pyql.agent.evaluation.standins.gold import GoldLLM
from pyql.agent.strategies.queryagent.prompts import parse_reply
from pyql.agent.strategy import UnknownStrategyError
from tests.support.fake_openai import FakeOpenAI, RateLimit, Text


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("gold", ("gold", "")), ("openai:gpt-4o-mini", ("openai", "gpt-4o-mini")),
     ("replay:runs/a", ("replay", "runs/a")), ("noisy-gold:0.2", ("noisy-gold", "0.2")),
     (" OpenAI:m ", ("openai", "m"))],
)
def test_parse_llm_spec(spec: str, expected: tuple[str, str]) -> None:
    parsed = parse_llm_spec(spec)
    assert (parsed.kind, parsed.argument) == expected and parsed.text == spec.strip()
    assert parsed.is_stand_in == (expected[0] in ("gold", "noisy-gold"))


@pytest.mark.parametrize("spec", ["", "gpt-4o", "openai:", "gold:x", "replay", "magic:x"])
def test_bad_specs(spec: str) -> None:
    with pytest.raises(LLMSpecError, match="unknown --llm spec"):
        parse_llm_spec(spec)


def test_gold_llm_text_and_tools_replies() -> None:
    program = 'add_fact(?x, directed_by, "Paris, Texas")\nset_answer(?x)\nexecute()'
    llm = GoldLLM(program)
    first = llm.complete([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}])
    parsed = parse_reply(first.text)
    assert parsed.actions == ('add_fact(?x, directed_by, "Paris, Texas")',)
    second = llm.complete([{"role": "user", "content": "q"},
                           {"role": "assistant", "content": "..."},
                           {"role": "user", "content": "Observation 1 : ..."}])
    assert second.text.startswith("Thought 2 : ") and "Action 2 : set_answer(?x)" in second.text
    llm.complete([])
    with pytest.raises(LLMScriptExhaustedError, match="has 3 calls"):
        llm.complete([])
    tools = GoldLLM(program, mode="tools")
    reply = tools.complete([], tools=[{"type": "function"}])
    [call] = reply.tool_calls
    assert call.name == "add_fact"
    assert json.loads(call.arguments) == {"head": "?x", "relation": "directed_by",
                                          "tail": '"Paris, Texas"'}
    with pytest.raises(LLMScriptExhaustedError, match="no gold program"):
        GoldLLM(None).complete([])
    assert GoldLLM("set_answer(?x)").calls[-1].name == "execute"  # execute() added


def test_gold_in_tools_mode_answers_like_text_mode(tmp_path: Path, mini_metaqa: Path) -> None:
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=8,
                       mode="tools")
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["hit@1"] == 1.0 and metrics["errors"] == 0


def test_gold_without_guidelines(tmp_path: Path, mini_metaqa: Path) -> None:
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=5,
                       guidelines=False)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["hit@1"] == 1.0 and metrics["guidelines"]["triggers"] == 0


def test_providers(tmp_path: Path) -> None:
    item = EvalItem(id="x", question="q", program="execute()")
    gold = build_provider("gold")
    assert isinstance(gold, StandInProvider) and gold.strategy == "queryagent"
    assert gold.for_item(item) is not gold.for_item(item)  # per question
    assert isinstance(gold.for_item(item), GoldLLM)  # QueryAgent's stand-in
    with pytest.raises(LLMSpecError, match="no trajectories file"):
        build_provider(f"replay:{tmp_path}")
    with pytest.raises(LLMSpecError, match="a number"):
        build_provider("noisy-gold:lots")
    with pytest.raises(LLMSpecError, match="a probability"):
        build_provider("noisy-gold:1.5")
    noisy = build_provider("noisy-gold:0.5", seed=3)
    assert isinstance(noisy, StandInProvider)
    assert noisy.for_item(item).model == "noisy-gold"  # type: ignore[attr-defined]
    with pytest.raises(UnknownStrategyError):
        build_provider("gold", strategy="no-such-strategy")


def test_replay_without_a_recording_is_a_question_error(tmp_path: Path,
                                                        mini_metaqa: Path) -> None:
    first = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=3)
    evaluate(first, tmp_path / "gold", progress=False)
    replay = ReplayProvider(tmp_path / "gold")
    assert set(replay.trajectories) == {"1hop-dev-0", "1hop-dev-1", "1hop-dev-2"}
    config = RunConfig(dataset="metaqa-1hop", llm=f"replay:{tmp_path / 'gold'}",
                       data_dir=str(mini_metaqa), limit=4)
    metrics = evaluate(config, tmp_path / "replay", progress=False)
    assert metrics["errors"] == 1 and metrics["hit@1"] == 0.75
    [failed] = [r for r in read_results(tmp_path / "replay") if r.error]
    assert failed.id == "1hop-dev-3" and "no recorded trajectory" in failed.error


def test_replay_of_a_run_killed_mid_line(tmp_path: Path, mini_metaqa: Path) -> None:
    """A run killed while appending leaves a torn last trajectory line: the replay reads the
    complete recordings (it read the file as a whole before, and the torn line failed it)."""
    first = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=2)
    evaluate(first, tmp_path / "gold", progress=False)
    path = tmp_path / "gold" / TRAJECTORIES
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"record":"question","question":"cut sh')
    replay = ReplayProvider(tmp_path / "gold")
    assert set(replay.trajectories) == {"1hop-dev-0", "1hop-dev-1"}


def test_openai_through_the_fake_server_with_a_429(tmp_path: Path, mini_metaqa: Path,
                                                   fake_openai: FakeOpenAI,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", fake_openai.api_key)
    [item] = get_dataset("metaqa-1hop", mini_metaqa).items(limit=1)
    calls = (item.program or "").splitlines()
    replies = [Text(f"Thought {n} : go on.\nAction {n} : {call}")
               for n, call in enumerate(calls, 1)]
    fake_openai.push(replies[0], RateLimit(retry_after=0.05), *replies[1:])
    config = RunConfig(dataset="metaqa-1hop", llm="openai:gpt-test", data_dir=str(mini_metaqa),
                       limit=1, base_url=fake_openai.base_url)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["hit@1"] == 1.0 and metrics["errors"] == 0
    assert metrics["run"]["rate_limit_pauses"] == 1
    assert metrics["llm_calls"] == len(calls)
    [result] = read_results(tmp_path / "run")
    assert result.usage["prompt_tokens"] == 10 * len(calls)  # the server's usage, not estimates


def test_openai_unknown_model_aborts(tmp_path: Path, mini_metaqa: Path, fake_openai: FakeOpenAI,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", fake_openai.api_key)
    config = RunConfig(dataset="metaqa-1hop", llm="openai:no-such-model",
                       data_dir=str(mini_metaqa), limit=2, base_url=fake_openai.base_url)
    with pytest.raises(EvalAbort, match="LLMModelNotFoundError"):
        evaluate(config, tmp_path / "run", progress=False)


def test_openai_without_a_key_aborts_before_starting(tmp_path: Path, mini_metaqa: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = RunConfig(dataset="metaqa-1hop", llm="openai:gpt-4o-mini",
                       data_dir=str(mini_metaqa), limit=2)
    with pytest.raises(EvalAbort, match="no API key"):
        evaluate(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "config.json").exists()


def test_shared_provider_gates_the_client() -> None:
    gate = RateGate()
    provider = SharedLLMProvider(GoldLLM("execute()"), gate=gate)
    item = EvalItem(id="x", question="q")
    assert provider.for_item(item) is provider.for_item(item)
    assert provider.for_item(item).gate is gate  # type: ignore[attr-defined]


# -- stand-in assumptions (issue 20 item 6) -----------------------------------------------------


def test_parameter_errors_name_the_parameter() -> None:
    declared = [StandInParameter("judge_accuracy", 0.85, "right verdict", "assumption")]
    for spec, parameter in (("noisy-gold:0.3:judge_accuracy=1,judge_accuracy=0", "judge_accuracy"),
                            ("noisy-gold:0.3:=1", None),
                            ("noisy-gold:0.3:judge_accuracy=-0.1", "judge_accuracy"),
                            ("gold:edit_success=1", "edit_success")):
        with pytest.raises(LLMSpecError) as info:
            parse_llm_spec(spec).values(declared)  # type: ignore[attr-defined]
        assert info.value.spec == spec and info.value.parameter == parameter
    with pytest.raises(LLMSpecError):
        parse_llm_spec("gold:0.3:judge_accuracy=1")  # gold has no rate


def test_specs_with_parameters_parse_once_into_a_frozen_value() -> None:
    gold = parse_llm_spec("gold:judge_accuracy=1")
    assert isinstance(gold, StandInSpec) and dict(gold.parameters) == {"judge_accuracy": 1.0}
    noisy = parse_llm_spec("noisy-gold:0.3:wrong_arity:fix_on_hint=1")
    assert isinstance(noisy, StandInSpec)
    assert (noisy.rate, noisy.types, dict(noisy.parameters)) == (0.3, ("wrong_arity",),
                                                                 {"fix_on_hint": 1.0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        noisy.rate = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        noisy.parameters["fix_on_hint"] = 0.0  # type: ignore[index]
    assert parse_llm_spec(noisy) is noisy and hash(noisy) == hash(parse_llm_spec(noisy.text))
    with pytest.raises(LLMSpecError):
        parse_llm_spec("noisy-gold:0.3:wrong_arity:invalid_action:fix_on_hint=1")  # 2 type lists
    assert stand_in_assumptions("replay:runs/x") is None
    assumed = stand_in_assumptions("gold", "readi")
    assert assumed is not None and dict(assumed.parameters) == {
        "rate": 0.0, "edit_success": 1.0, "reader_accuracy": 1.0}
    with pytest.raises(TypeError):
        assumed.parameters["rate"] = 1.0  # type: ignore[index]


# -- the same spec for every strategy (issue 21 item 4) -----------------------------------------

STAND_IN_STRATEGIES = ("queryagent", "queryagent-sc0", "agentbench", "readi", "srp", "vanilla")


@pytest.mark.parametrize("strategy", STAND_IN_STRATEGIES)
def test_a_rate_out_of_range_is_a_spec_error_for_every_strategy(strategy: str) -> None:
    for spec in ("noisy-gold:1.5", "noisy-gold:-0.1"):
        with pytest.raises(LLMSpecError) as info:
            build_provider(spec, strategy=strategy)
        assert (info.value.spec, info.value.parameter) == (spec, "rate")


def test_a_stand_in_rate_out_of_range_is_a_spec_error_wherever_it_is_given() -> None:
    # before, the stand-ins' own constructors raised a bare ValueError
    item = EvalItem(id="x", question="q", program="execute()")
    from pyql.agent.evaluation.noisy import NoisyGoldLLM
    from pyql.agent.evaluation.standins.readi import ReadiStandIn, gold_path
    from pyql.agent.evaluation.standins.srp import SRPStandIn

    for make in (lambda: NoisyGoldLLM("execute()", rate=1.5, seed=0),
                 lambda: ReadiStandIn(gold_path(item), rate=1.5),
                 lambda: SRPStandIn(ReadiStandIn(None), judge_accuracy=1.5)):
        with pytest.raises(LLMSpecError) as info:
            make()
        assert info.value.value == "1.5"


@pytest.mark.parametrize(("strategy", "accepted"), [
    ("queryagent", True), ("queryagent-sc0", True), ("readi", False), ("srp", False),
    ("vanilla", False)])
def test_injection_types_mean_the_same_to_every_strategy(strategy: str, accepted: bool) -> None:
    spec = "noisy-gold:0.3:wrong_relation"
    if accepted:
        provider = build_provider(spec, strategy=strategy)
        assert isinstance(provider, StandInProvider)
        assert provider.parsed.types == ("wrong_relation",)
        return
    with pytest.raises(LLMSpecError) as info:  # refused when the provider is made
        build_provider(spec, strategy=strategy)
    assert (info.value.spec, info.value.strategy) == (spec, strategy)
    assert info.value.parameter == ("kind" if strategy == "vanilla" else "types")
    assert info.value.value == ("noisy-gold" if strategy == "vanilla" else "wrong_relation")


def test_readi_refuses_injection_types_before_the_run_starts(tmp_path: Path,
                                                             mini_metaqa: Path) -> None:
    # before, the spec was accepted and every question failed on its own
    config = RunConfig(dataset="metaqa-1hop", llm="noisy-gold:0.3:wrong_relation",
                       strategy="readi", data_dir=str(mini_metaqa), limit=2)
    with pytest.raises(EvalAbort, match="makes no injection type"):
        evaluate(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "config.json").exists()


def test_which_injection_types_exist_is_the_strategys_stand_ins_to_say() -> None:
    # the spec reads any type name; the stand-in of the strategy knows its own: a plugin's
    # stand-in may make types QueryAgent's does not (before, the parser refused them all)
    spec = parse_llm_spec("noisy-gold:0.3:drop_fact")
    assert isinstance(spec, StandInSpec) and spec.types == ("drop_fact",)
    with pytest.raises(LLMSpecError) as info:
        stand_in_assumptions(spec, "queryagent")
    assert (info.value.parameter, info.value.value, info.value.strategy) == (
        "types", "drop_fact", "queryagent")
    assert "makes the injection types wrong_relation" in str(info.value)
