"""Readi's stand-in with its declared assumptions: an edit that can pick a wrong candidate and
a reader that can err; the oracle only when named."""

from __future__ import annotations

import pytest

from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.evaluation.records import EvalItem
from pyql.agent.evaluation.standins import build_stand_in
from pyql.agent.evaluation.standins.readi import PARAMETERS, ReadiStandIn, gold_path
from pyql.agent.grounding.paths.table import TablePath
from pyql.agent.strategies.readi import Readi
from pyql.agent.trajectory import Step
from tests.agent.readi.test_readi import ITEM

EDIT = [{"role": "user", "content": "Question: q\nCorrected Path"}]
ANSWER = [{"role": "user", "content": "Q: q\nKnowledge Triplets:\n(A, r, B)\nA:"}]
STUCK = {"entity": "John Godey", "relations": ["^written_by", "weather"], "position": 1,
         "candidates": ["release_year", "directed_by", "has_genre"]}


def _stuck(llm: ReadiStandIn) -> None:
    llm.observe(Step(n=1, kind="instantiate", data={"constraints": [{"stuck": STUCK}]}))


def test_noisy_gold_takes_the_stated_defaults_and_gold_the_oracle() -> None:
    defaults = {p.name: p.default for p in PARAMETERS}
    assert defaults == {"edit_success": 0.8, "reader_accuracy": 0.9}
    noisy = build_stand_in("readi", "noisy-gold:0.3", ITEM)
    assert (noisy.edit_success, noisy.reader_accuracy) == (0.8, 0.9)
    gold = build_stand_in("readi", "gold", ITEM)
    assert (gold.edit_success, gold.reader_accuracy) == (1.0, 1.0)
    named = build_stand_in("readi", "noisy-gold:0.3:edit_success=1,reader_accuracy=1", ITEM)
    assert (named.edit_success, named.reader_accuracy) == (1.0, 1.0)
    assert build_stand_in("readi", "gold:reader_accuracy=0.5", ITEM).reader_accuracy == 0.5


def test_a_failed_edit_picks_another_offered_candidate() -> None:
    llm = ReadiStandIn(gold_path(ITEM), edit_success=0.0)
    _stuck(llm)
    text = llm.complete(EDIT).text
    picked = text.rsplit("→", 1)[1].strip()
    assert picked in {"release_year", "has_genre"}
    oracle = ReadiStandIn(gold_path(ITEM))
    _stuck(oracle)
    assert oracle.complete(EDIT).text.endswith("→ directed_by")


def test_edit_success_is_a_rate_over_questions() -> None:
    right = 0
    for seed in range(200):
        llm = ReadiStandIn(gold_path(ITEM), edit_success=0.8, seed=seed)
        _stuck(llm)
        right += llm.complete(EDIT).text.endswith("→ directed_by")
    assert 140 <= right <= 180


def test_a_reader_that_errs_answers_a_distractor_from_the_instances() -> None:
    llm = ReadiStandIn(None, answers=["Walter Hill"], reader_accuracy=0.0)
    llm.observe(Step(n=1, kind="instantiate", data={"instances": ["A", "Walter Hill"]}))
    assert llm.complete(ANSWER).text.endswith("{A}.")
    llm.observe(Step(n=2, kind="instantiate", data={"instances": ["Walter Hill"]}))
    assert llm.complete(ANSWER).text.endswith("{}.")


def test_the_accuracy_draws_leave_the_corruption_unchanged() -> None:
    oracle = build_stand_in("readi", "noisy-gold:0.5:edit_success=1,reader_accuracy=1", ITEM,
                            seed=4)
    noisy = build_stand_in("readi", "noisy-gold:0.5", ITEM, seed=4)
    generate = [{"role": "user", "content": "Question: q\nThought:"}]
    assert oracle.complete(generate).text == noisy.complete(generate).text


def test_the_gold_stand_in_is_still_the_ceiling(kb) -> None:
    from tests.agent.conftest import ENTITIES, GOLD, QUESTION

    result = Readi(build_stand_in("readi", "gold", ITEM), kb).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD


@pytest.mark.parametrize("spec, parameter", [
    ("noisy-gold:0.3:judge_accuracy=0.9", "judge_accuracy"),
    ("noisy-gold:0.3:edit_success=1.5", "edit_success"),
    ("noisy-gold:0.3:reader_accuracy=high", "reader_accuracy"),
    ("noisy-gold:0.3:wrong_arity", "types"),
])
def test_bad_parameters_are_typed_errors(spec: str, parameter: str) -> None:
    with pytest.raises(LLMSpecError) as info:
        build_stand_in("readi", spec, ITEM)
    assert info.value.parameter == parameter and info.value.spec == spec


def test_a_table_path_takes_no_edit_success() -> None:
    from pyql.agent.evaluation.records import EvalItem

    table = EvalItem(id="t", question="q", tools="sql", table="players",
                     program='add_condition(Player, =, "A")\nset_answer(Nationality)')
    assert build_stand_in("readi", "gold:reader_accuracy=0.5", table).reader_accuracy == 0.5
    with pytest.raises(LLMSpecError) as info:
        build_stand_in("readi", "gold:edit_success=0.5", table)
    assert info.value.parameter == "edit_success"


def test_stand_in_specs() -> None:
    assert build_stand_in("readi", "noisy-gold:0.5", ITEM, seed=3).rate == 0.5
    table_item = EvalItem(id="t", question="q", tools="sql", table="players",
                          program='add_condition(Player, =, "A")\nset_answer(Nationality)')
    assert isinstance(build_stand_in("readi", "gold", table_item).gold, TablePath)
    for bad, item in (("noisy-gold:x", ITEM), ("openai:gpt", ITEM),
                      ("noisy-gold:0.3", table_item)):
        with pytest.raises(LLMSpecError):
            build_stand_in("readi", bad, item)
