"""SRP's stand-in with its declared assumptions: a judge, a relation check, an edit and a
reader that can err (Readi's two plus judge_accuracy and check_accuracy); the oracle only when
named, and SRP run end to end on the test KB with the realistic defaults."""

from __future__ import annotations

import pytest

from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.evaluation.standins import build_stand_in, stand_in_assumptions
from pyql.agent.evaluation.standins.srp import PARAMETERS, SRPStandIn
from pyql.agent.strategies.srp import prompts
from pyql.agent.strategies.srp.metrics import srp_measures
from pyql.agent.strategies.srp.strategy import SRP
from pyql.agent.trajectory import Step
from tests.agent.conftest import ENTITIES, GOLD, QUESTION
from tests.agent.srp.test_strategy import _item

WITH_ANSWER = [["Johnny Handsome", "written_by", "John Godey"],
               ["Johnny Handsome", "directed_by", "Walter Hill"]]


def _judge(llm: SRPStandIn) -> str:
    sequence = [tuple(t) for t in WITH_ANSWER]
    llm.observe(Step(n=1, kind="retrieve", data={"sequences": [WITH_ANSWER]}))
    reply = llm.complete(prompts.judge_messages("q", [sequence])).text
    return prompts.parse_judge(reply, [sequence]).verdict


def test_the_declared_parameters_and_their_sources() -> None:
    names = [p.name for p in PARAMETERS]
    assert names == ["edit_success", "reader_accuracy", "judge_accuracy", "check_accuracy"]
    assert all(p.default < p.oracle == 1.0 and p.source for p in PARAMETERS)
    noisy = build_stand_in("srp", "noisy-gold:0.3", _item())
    assert (noisy.judge_accuracy, noisy.check_accuracy, noisy.readi.edit_success,
            noisy.readi.reader_accuracy) == (0.85, 0.85, 0.8, 0.9)
    assert build_stand_in("srp", "gold", _item()).judge_accuracy == 1.0


def test_a_wrong_judge_flips_its_verdict() -> None:
    oracle = build_stand_in("srp", "noisy-gold:0.3:judge_accuracy=1", _item())
    assert _judge(oracle) == "HAVE_ANSWER"
    assert _judge(build_stand_in("srp", "noisy-gold:0.3:judge_accuracy=0", _item())) == "NO_ANSWER"
    verdicts = [_judge(build_stand_in("srp", "noisy-gold:0.3", _item(), seed=s))
                for s in range(200)]
    assert 150 <= verdicts.count("HAVE_ANSWER") <= 190


def test_a_wrong_relation_check_leaves_the_gold_relation_out() -> None:
    def rated(spec: str) -> str:
        llm = build_stand_in("srp", spec, _item())
        llm.observe(Step(n=1, kind="candidates", data={
            "entity": "John Godey", "candidates": ["release_year", "written_by", "has_genre"]}))
        text = llm.complete(prompts.relation_check_messages("q", "John Godey", [
            "release_year", "written_by", "has_genre"])).text
        return text

    assert "'written_by'" in rated("gold").splitlines()[0]
    wrong = rated("gold:check_accuracy=0")
    assert "'written_by'" not in wrong and "release_year" in wrong and "has_genre" in wrong


def test_a_reader_that_errs_answers_another_entity_of_the_kept_triples() -> None:
    llm = build_stand_in("srp", "gold:reader_accuracy=0", _item())
    llm.observe(Step(n=1, kind="knowledge", data={"kept": WITH_ANSWER}))
    text = llm.complete(prompts.answer_messages("q", [tuple(t) for t in WITH_ANSWER])).text
    assert "{Walter Hill}" not in text and "{" in text


def test_srp_runs_end_to_end_under_the_defaults(kb) -> None:
    item = _item()
    for seed in range(6):
        result = SRP(build_stand_in("srp", "noisy-gold:0.3", item, seed=seed), kb).run(
            QUESTION, ENTITIES)
        measures = srp_measures(result.steps, item)
        assert measures["judged"] >= 1 and 0.0 <= measures["judge_correct"] <= measures["judged"]
    oracle = SRP(build_stand_in("srp", "gold", item), kb).run(QUESTION, ENTITIES)
    assert set(oracle.answers) == GOLD


def test_the_assumptions_of_a_run() -> None:
    assumed = stand_in_assumptions("noisy-gold:0.3:judge_accuracy=1", "srp")
    assert assumed is not None and assumed.to_dict() == {
        "name": "noisy-gold", "strategy": "srp",
        "parameters": {"rate": 0.3, "edit_success": 0.8, "reader_accuracy": 0.9,
                       "judge_accuracy": 1.0, "check_accuracy": 0.85}}
    with pytest.raises(LLMSpecError) as info:
        stand_in_assumptions("noisy-gold:0.3:fix_on_hint=1", "srp")
    assert info.value.parameter == "fix_on_hint"
