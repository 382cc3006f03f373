"""Per-question metrics and the aggregate, on hand-made results."""

from __future__ import annotations

import random

import pytest

from pyql.agent.evaluation.metrics import (
    aggregate,
    corrections,
    env_class,
    kbqa_scores,
    score_item,
    spider_accuracy,
    wikisql_accuracy,
)
from pyql.agent.evaluation.records import EvalItem, QuestionResult
from pyql.agent.trajectory import Step


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        (["a", "b"], ["b", "a"], {"hit@1": 1.0, "f1": 1.0, "em": 1.0, "hit@1_top1": 1.0}),
        (["a", "z"], ["a"], {"hit@1": 1.0, "f1": 2 / 3, "em": 0.0, "hit@1_top1": 1.0}),
        # hit@1 is "any predicted answer is gold" (all tied first); hit@1_top1 is strict
        (["b", "a"], ["b"], {"hit@1": 1.0, "f1": 2 / 3, "em": 0.0, "hit@1_top1": 0.0}),
        (["x"], ["a"], {"hit@1": 0.0, "f1": 0.0, "em": 0.0, "hit@1_top1": 0.0}),
        ([], ["a"], {"hit@1": 0.0, "f1": 0.0, "em": 0.0, "hit@1_top1": 0.0}),
        ([], [], {"hit@1": 1.0, "f1": 1.0, "em": 1.0, "hit@1_top1": 1.0}),  # WebQSP's eval.py
        (["a"], [], {"hit@1": 0.0, "f1": 0.0, "em": 0.0, "hit@1_top1": 0.0}),
        (["a", "a"], ["a"], {"hit@1": 1.0, "f1": 1.0, "em": 1.0, "hit@1_top1": 1.0}),  # sets
    ],
)
def test_kbqa_scores(predicted: list[str], gold: list[str], expected: dict[str, float]) -> None:
    assert kbqa_scores(predicted, gold) == pytest.approx(expected)


def test_kbqa_best_of_several_gold_answer_sets() -> None:
    scores = kbqa_scores(["m.1"], ["m.1", "m.2"], answer_sets=[["m.1"], ["m.1", "m.2"]])
    assert scores["f1"] == 1.0 and scores["em"] == 1.0


@pytest.mark.parametrize(
    ("predicted", "gold", "ok"),
    [
        (["Antonio Lang"], ["antonio lang"], True),  # WikiSQL's database is lower-cased
        ([3], [3.0], True),
        ([2.5000000001], [2.5], True),
        (["3"], [3.0], False),  # text is not a number
        (["a", "b"], ["b", "a"], False),  # official: list equality
        ([None], [None], True),
        ([], [], True),
        ([1], [], False),
    ],
)
def test_wikisql_accuracy(predicted: list[object], gold: list[object], ok: bool) -> None:
    assert wikisql_accuracy(predicted, gold) == {"accuracy": 1.0 if ok else 0.0}


def test_spider_accuracy_multisets_and_order() -> None:
    gold = [("a", 1), ("b", 2), ("b", 2)]
    assert spider_accuracy([("b", 2), ("a", 1), ("b", 2)], gold)["accuracy"] == 1.0
    assert spider_accuracy([("b", 2), ("a", 1)], gold)["accuracy"] == 0.0  # multiset
    assert spider_accuracy([("b", 2), ("a", 1), ("b", 2)], gold, ordered=True)["accuracy"] == 0.0
    assert spider_accuracy([["a", 1.0], ["b", 2], ["b", 2]], gold, ordered=True)["accuracy"] == 1.0
    assert spider_accuracy(["x", "y"], [("y",), ("x",)])["accuracy"] == 1.0  # one-column answers
    assert spider_accuracy([], [])["accuracy"] == 1.0


def test_score_item_dispatch() -> None:
    item = EvalItem(id="1", question="q", answers=(("a",),), tools="sql", meta={"ordered": True})
    assert score_item("spider", item, ["a"]) == {"accuracy": 1.0}
    with pytest.raises(ValueError, match="unknown metric kind"):
        score_item("bleu", item, [])


def test_env_classes() -> None:
    assert [env_class(c) for c in ("PY101", "KB204", "DB103", "RM201", "ZZ9")] == [
        "python", "kb", "db", "memory", "other"]


def test_corrections_count_a_hint_followed_by_an_accepted_step() -> None:
    steps = [
        Step(n=1, hint="KB204", accepted=False, status="hint"),
        Step(n=2, accepted=True),  # corrected KB204
        Step(n=3, hint="PY104", accepted=False, status="hint"),
        Step(n=4, hint="PY104", accepted=False, status="hint"),  # not corrected
        Step(n=5, accepted=True),  # corrected the second PY104
        Step(n=6, hint="RM201", accepted=False, status="hint"),  # the run ended: not corrected
    ]
    assert corrections(steps) == {"KB204": 1, "PY104": 1}
    empty = [Step(n=1, hint="DB102", accepted=False, status="hint"),
             Step(n=2, status="empty", accepted=True)]  # no rows, but accepted
    assert corrections(empty) == {"DB102": 1}
    rejected = [Step(n=1, hint="DB102", accepted=False, status="hint"),
                Step(n=2, status="error", accepted=False)]
    assert corrections(rejected) == {}


def _result(i: int, **kw: object) -> QuestionResult:
    base: dict[str, object] = {
        "id": f"q{i}", "metrics": {"hit@1": 1.0, "f1": 0.5, "em": 0.0, "hit@1_top1": 1.0},
        "usage": {"seconds": 2.0, "kb_queries": 4, "cost": 0.01, "llm_calls": 5,
                  "prompt_tokens": 100, "completion_tokens": 10},
        "meta": {"hops": 1, "qtype": "a_to_b"}, "stop_reason": "execute",
    }
    base.update(kw)
    return QuestionResult.model_validate(base)


def test_aggregate_by_hand() -> None:
    results = [
        _result(1),
        _result(2, metrics={"hit@1": 0.0, "f1": 0.0, "em": 0.0, "hit@1_top1": 0.0},
                usage={"seconds": 4.0, "kb_queries": 8, "label_queries": 3, "cost": 0.03,
                       "llm_calls": 7,
                       "prompt_tokens": 300, "completion_tokens": 30},
                guidelines={"KB204": 2, "PY104": 1}, corrected={"KB204": 1, "PY104": 1},
                meta={"hops": 2, "qtype": "a_to_c"}, finished=False, stop_reason="max_steps"),
        _result(3, error="BackendUnavailableError: down", finished=False, stop_reason="error",
                metrics={"hit@1": 0.0, "f1": 0.0, "em": 0.0, "hit@1_top1": 0.0},
                usage={"seconds": 0.5}, guidelines={"RM201": 1}, meta={"hops": 2}),
    ]
    m = aggregate(results)
    assert m["n"] == 3 and m["primary"] == "hit@1"
    assert m["hit@1"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx(0.5 / 3)
    assert m["accuracy"] is None
    assert m["tpq"] == pytest.approx(6.5 / 3)
    assert m["qpq"] == pytest.approx(12 / 3)
    assert m["qpq_paper"] == pytest.approx((12 - 3) / 3)  # without the label lookups
    assert m["cpq"] == pytest.approx(0.04 / 3)
    assert m["llm_calls"] == pytest.approx(4.0)
    assert m["tokens"] == pytest.approx(440 / 3)
    assert m["cost"] == pytest.approx(0.04)
    assert m["errors"] == 1
    assert m["finished"] == pytest.approx(1 / 3)
    assert m["stop_reasons"] == {"error": 1, "execute": 1, "max_steps": 1}
    g = m["guidelines"]
    assert g["triggers"] == 4 and g["questions"] == 2 and g["corrected"] == 2
    assert g["per_question"] == pytest.approx(4 / 3)
    assert g["by_class"]["kb"] == {"triggers": 2, "share": 0.5, "questions": 1, "corrected": 1,
                                   "correction_rate": 0.5}
    assert g["by_class"]["python"]["correction_rate"] == 1.0
    assert g["by_class"]["memory"] == {"triggers": 1, "share": 0.25, "questions": 1,
                                       "corrected": 0, "correction_rate": 0.0}
    assert g["by_class"]["db"]["triggers"] == 0 and g["by_class"]["db"]["correction_rate"] is None
    assert g["by_code"]["KB204"]["class"] == "kb"
    assert m["by"]["hops"]["1"] == {"n": 1, "hit@1": 1.0, "f1": 0.5, "em": 0.0, "hit@1_top1": 1.0,
                                    "errors": 0}
    assert m["by"]["hops"]["2"]["n"] == 2 and m["by"]["hops"]["2"]["errors"] == 1
    assert set(m["by"]["qtype"]) == {"a_to_b", "a_to_c"}


def test_aggregate_is_order_independent_and_reads_dicts() -> None:
    rng = random.Random(0)
    results = [_result(i, metrics={"hit@1": float(i % 2), "f1": rng.random() / 3},
                       usage={"seconds": rng.random() * 10, "cost": rng.random() / 7})
               for i in range(500)]
    shuffled = results[:]
    rng.shuffle(shuffled)
    assert aggregate(results) == aggregate(shuffled)
    assert aggregate(r.model_dump(mode="json") for r in results) == aggregate(results)


def test_aggregate_sql_primary_and_empty() -> None:
    m = aggregate([_result(1, metrics={"accuracy": 1.0}), _result(2, metrics={"accuracy": 0.0})])
    assert m["primary"] == "accuracy" and m["accuracy"] == 0.5 and m["hit@1"] is None
    empty = aggregate([])
    assert empty["n"] == 0 and empty["hit@1"] is None and empty["tpq"] is None


def test_pooled_rates_of_a_strategys_own_counts() -> None:
    """``NAME:hits`` / ``NAME:of`` per question become the run's pooled ``NAME`` (not a mean of
    per-question ratios): 3 right of 4 verdicts and 0 of 0 give 0.75."""
    from pyql.agent.evaluation.metrics import aggregate

    rows = [QuestionResult(id="a", usage={"judge_accuracy:hits": 3.0, "judge_accuracy:of": 4.0}),
            QuestionResult(id="b", usage={"judge_accuracy:hits": 0.0, "judge_accuracy:of": 0.0}),
            QuestionResult(id="c", usage={"other:of": 0.0})]
    own = aggregate(rows)["strategy"]
    assert own["judge_accuracy"] == 0.75
    assert own["judge_accuracy:of"] == pytest.approx(4 / 3)
    assert own["other"] is None


def test_the_two_hit_at_1_scores_have_distinct_names() -> None:
    # any predicted answer gold (ToG/Readi/SRP) vs the top-1 answer gold, for one prediction
    scores = kbqa_scores(["Anna", "Zorro"], ["Zorro"])
    assert (scores["hit@1"], scores["hit@1_top1"]) == (1.0, 0.0)
    m = aggregate([_result(1, metrics=scores)])
    assert (m["hit@1"], m["hit@1_top1"]) == (1.0, 0.0)
    assert "top1" not in m


def test_results_written_with_the_old_top1_name_still_count() -> None:
    old = _result(1, metrics={"hit@1": 1.0, "f1": 0.5, "em": 0.0, "top1": 0.0})
    new = _result(2, metrics={"hit@1": 1.0, "f1": 0.5, "em": 0.0, "hit@1_top1": 1.0})
    assert aggregate([old, new])["hit@1_top1"] == pytest.approx(0.5)


@pytest.mark.parametrize(("strategy", "preset", "default", "expected"), [
    ("queryagent", "paper", "hit@1", "f1"),     # QueryAgent's paper: F1 on every dataset
    ("readi", "paper", "f1", "hit@1"),          # Readi: Hit@1, any answer (Table 1)
    ("srp", "paper", "f1", "hit@1"),            # SRP: ToG's Hits@1
    ("readi", None, "f1", "f1"),                # no preset: the dataset's own headline
    ("vanilla", "paper", "f1", "f1"),           # no paper of its own: the dataset's
])
def test_each_paper_preset_heads_with_its_papers_metric(strategy: str, preset: str | None,
                                                        default: str, expected: str) -> None:
    from pyql.agent.strategies.queryagent.presets import primary_metric

    assert primary_metric(default, metric="kbqa", strategy=strategy, preset=preset) == expected
    # table datasets keep their execution accuracy
    assert primary_metric("accuracy", metric="wikisql", strategy=strategy,
                          preset=preset) == "accuracy"
