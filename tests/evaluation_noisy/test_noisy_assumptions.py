"""NoisyGoldLLM's declared assumptions: the fix rates after a hint or an error (a mistake not
fixed is written again) and the silent mistakes no guideline addresses, on the real agent and
KBs of the noisy-gold tests."""

from __future__ import annotations

from typing import Any

import pytest

from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.evaluation.noisy import PARAMETERS, NoisyGoldLLM, summarise
from pyql.agent.evaluation.records import EvalItem
from pyql.agent.evaluation.standins import build_stand_in
from pyql.program import Call
from tests.evaluation_noisy.test_noisy import DIRECTORS, SQL, TWO_HOP, run


def test_declared_defaults_are_not_the_oracle() -> None:
    declared = {p.name: p for p in PARAMETERS}
    assert set(declared) == {"fix_on_hint", "fix_on_error", "silent"}
    assert declared["fix_on_hint"].default < 1.0 == declared["fix_on_hint"].oracle
    assert declared["fix_on_error"].default == declared["fix_on_hint"].default
    assert declared["silent"].default > 0.0 == declared["silent"].oracle
    assert all(p.source for p in PARAMETERS)


def test_an_unfixed_reversed_fact_is_written_again_and_then_kept(movies: Any) -> None:
    llm = NoisyGoldLLM(TWO_HOP, rate=1.0, seed=0, types=["reversed_direction"], fix_on_hint=0.0)
    result = run(llm, movies)
    first = llm.injections[0]
    # KB202 named it; the stand-in wrote it again, and the repeat of a result-based hint is
    # accepted (HintPolicy): the wrong fact stays
    assert first.hint_code == "KB202" and first.repeats == 1
    assert first.outcome == "kept" and not first.corrected
    actions = [s.action for s in result.steps]
    assert actions.count(first.action) == 2
    assert set(result.answers) != DIRECTORS


def test_the_oracle_fixes_at_once(movies: Any) -> None:
    llm = NoisyGoldLLM(TWO_HOP, rate=1.0, seed=0, types=["reversed_direction"])
    result = run(llm, movies)
    assert all(i.corrected and i.repeats == 0 for i in llm.injections)
    assert set(result.answers) == DIRECTORS


def test_a_rejected_mistake_is_retried_until_a_draw_fixes_it(movies: Any) -> None:
    # an unknown function is rejected every time: each repeat gets a fresh draw
    llm = NoisyGoldLLM(TWO_HOP, rate=1.0, seed=3, types=["invalid_action"], fix_on_hint=0.3,
                       fix_on_error=0.3)
    result = run(llm, movies, eraser=False)
    assert any(i.repeats for i in llm.injections)
    # each fixed mistake cost 1 + repeats steps; the last ones ran into the step cap
    fixed = [i for i in llm.injections if i.outcome == "retried"]
    assert fixed and all(i.outcome in ("retried", "ended") for i in llm.injections)
    actions = [s.action for s in result.steps]
    for inj in fixed:
        assert actions.count(inj.action) >= 1 + inj.repeats
    assert len(result.steps) == 25
    assert summarise(llm.injections)["invalid_action"]["repeats"] == sum(
        i.repeats for i in llm.injections)


def test_the_fix_draws_are_the_same_with_and_without_eraser(movies: Any) -> None:
    def repeats(eraser: bool) -> list[int]:
        llm = NoisyGoldLLM(TWO_HOP, rate=1.0, seed=5, types=["invalid_action"],
                           fix_on_hint=0.5, fix_on_error=0.5)
        run(llm, movies, eraser=eraser)
        return [i.repeats for i in llm.injections]

    assert repeats(True) == repeats(False)


def test_a_silent_relation_is_listed_in_the_same_direction_and_gets_no_hint(movies: Any) -> None:
    llm = NoisyGoldLLM(TWO_HOP, rate=0.0, seed=0, silent=1.0)
    result = run(llm, movies)
    silent = [i for i in llm.injections if i.type == "silent_relation"]
    assert silent and all(not i.hint_fired and i.outcome == "kept" for i in silent)
    second = next(i for i in silent if i.gold_index == 3)
    wrong = Call.parse(second.action)
    # ?x1's forward relations (the movie is the head), not directed_by
    assert str(wrong.args[0]) == "?x1" and wrong.args[1].value != "directed_by"
    assert wrong.args[1].value in {"has_genre", "release_year", "starred_actors", "written_by"}
    assert not any(s.hint for s in result.steps)
    assert set(result.answers) != DIRECTORS


def test_silent_mistakes_come_on_top_of_the_same_injections(movies: Any) -> None:
    plain = NoisyGoldLLM(TWO_HOP, rate=0.5, seed=7)
    run(plain, movies)
    noisy = NoisyGoldLLM(TWO_HOP, rate=0.5, seed=7, silent=1.0)
    run(noisy, movies)
    kept = [(i.type, i.gold_index) for i in noisy.injections if i.type != "silent_relation"]
    assert kept == [(i.type, i.gold_index) for i in plain.injections]


def test_a_silent_sql_mistake_answers_another_column(players: Any) -> None:
    llm = NoisyGoldLLM(SQL, rate=0.0, seed=0, tools="sql", silent=1.0)
    result = run(llm, players, table="players", mode="text",
                 question="which centers wear a number above 18", entities={})
    (silent,) = llm.injections
    assert silent.type == "silent_relation" and silent.detail == "answer_column"
    assert not silent.hint_fired and "Player" not in silent.action
    assert result.steps[-1].action == "execute()"


def _item(program: str = TWO_HOP) -> EvalItem:
    return EvalItem(id="q1", question="q", entities={}, answers=("a",), program=program)


def test_the_stand_in_reads_the_parameters_of_the_parsed_spec() -> None:
    llm = build_stand_in("queryagent", "noisy-gold:0.3:wrong_arity:fix_on_hint=0.25,silent=0",
                         _item(), seed=1)
    assert isinstance(llm, NoisyGoldLLM)
    assert (llm.rate, llm.types, llm.fix_on_hint, llm.fix_on_error, llm.silent) == (
        0.3, ("wrong_arity",), 0.25, 0.6, 0.0)
    with pytest.raises(LLMSpecError) as info:
        build_stand_in("queryagent", "noisy-gold:0.3:judge_accuracy=1", _item(), seed=1)
    assert info.value.parameter == "judge_accuracy" and info.value.strategy == "queryagent"
    with pytest.raises(LLMSpecError, match="fix_on_hint") as info:
        NoisyGoldLLM(TWO_HOP, rate=0.1, seed=0, fix_on_hint=2.0)
    assert info.value.parameter == "fix_on_hint"
