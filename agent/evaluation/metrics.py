"""Per-question metrics with each dataset's official semantics, and their aggregate.

**KBQA** (MetaQA, WebQSP; :func:`kbqa_scores`), answers compared as exact strings (KB ids or
labels as the Session returns them):

Hit@1 has two meanings in the literature, reported under two names:

- ``hit@1`` (*any answer*): 1 when *any* predicted answer is gold. A program returns a set, so
  all its answers are tied at rank 1 (this is :func:`pyql.datasets.gold.score`'s ``hit1``); it is
  how ToG, Readi and SRP score ("whether the predicted answer is correct", ToG's
  ``exact_match`` over the answer list), and lenient: a prediction listing every entity of the
  KB scores 1;
- ``hit@1_top1`` (*top-1 answer*): the strict variant: only the first answer counts, the first
  by case-folded text (:func:`pyql.datasets.gold.answer_order`: a set has no rank of its own).
  Results written before this name was given read their ``top1`` as it (:data:`LEGACY_NAMES`).

Each paper preset's headline is its paper's own metric (:func:`pyql.agent.strategies.queryagent.presets.primary_metric`:
``hit@1`` for Readi and SRP, ``f1`` for QueryAgent); the other scores are reported beside it.

- ``f1``: set F1 of predicted against gold answers; ``em``: the sets are equal.
- As in WebQSP's official ``eval.py``, when gold and prediction are both empty every score is
  1; when only one is, 0. With several gold answer sets (WebQSP's ``different_answer``, in
  ``item.meta["answer_sets"]``) each score is the best over the sets.

**QALD / Wikidata** (:func:`qald_scores`; WikiWebQuestions and the QALD JSON sets): the same
scores over answer *sets*, as QALD's evaluation and GRASP compute F1 (macro-averaged over the
questions by :func:`aggregate`): precision = |predicted ∩ gold| / |predicted|, recall = |predicted
∩ gold| / |gold|, F1 their harmonic mean (0 when both are 0); both sets empty score 1, one empty
scores 0. Answers are compared after :func:`normalise_answer`: entities by their id (``Q42``, as
pyql returns them and :func:`pyql.datasets.wikidata.answers_from_results` reads the gold),
**numbers by value** (``"3"``, ``"3.0"`` and ``"3"^^xsd:decimal``'s lexical form are one answer:
so a count compares as the number it is), **booleans** as the one answer ``true`` or ``false``
(an ASK question is right only with the same boolean), other **literals** by their exact lexical
form (language tags and datatypes ignored; dates as written, ``2009-01-20T00:00:00Z``).

**WikiSQL** (:func:`wikisql_accuracy`): execution (denotation) accuracy, as WikiSQL's
``evaluate.py`` (``pred == gold`` on the executed results): the predicted values, in order, equal
the gold values of :func:`pyql.datasets.wikisql.wikisql_execute`, strings compared
case-insensitively (WikiSQL's database is lower-cased) and numbers by value (``3 == 3.0``; floats
to 6 significant digits).

**Spider** (:func:`spider_accuracy`): execution accuracy: the predicted rows equal the rows of
the gold SQL on the same SQLite file, as multisets, or as lists when the gold query has a
top-level ``ORDER BY`` (``item.meta["ordered"]``); cells as
:func:`pyql.datasets.sql_fidelity.normalise_cell` (numbers by value, floats to 6 significant
digits). A one-column prediction (one value per row) is read as one-cell rows.

**Aggregate** (:func:`aggregate`) over :class:`~pyql.agent.evaluation.records.QuestionResult`:
the one aggregate of a run (``metrics.json``; ``pyql report`` shows it). Questions that ended in
an outage (``status`` ``backend_error``, ``llm_error``, ``llm_timeout``: the KB/DB or the LLM
failed, not the answer) are left out of the scores and counted in ``outages`` (per status) and
``scored`` (the questions the scores are over); means over the scored questions (a question that
failed with an error of its own scores 0 and counts):
``hit@1``, ``hit@1_top1``, ``f1``, ``em``, ``accuracy`` (``None`` where the dataset does not define
them); ``tpq`` (seconds per question, wall clock of the agent), ``qpq`` (KB/DB queries per
question, every query pyql ran), ``qpq_paper`` (the paper's count: SPARQL queries per question
without the label lookups, ``usage.label_queries``), ``cpq`` (LLM cost in US$ per question), ``llm_calls``, ``prompt_tokens``,
``completion_tokens``, ``tokens``, ``steps`` (per question); ``tokens_estimated`` (the share of
questions whose tokens were estimated), ``tokens_counted`` (False when LLM calls were made and
no token counted: a stand-in run without ``--token-estimates``); totals ``cost`` and ``seconds``; ``errors``,
``finished`` (share that ended with an accepted ``execute()``), ``stop_reasons``;
``guidelines`` (see :func:`guideline_stats`), and ``by``: the same scores per value of the meta
keys in ``by`` (``hops``, ``qtype``, ...).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pyql.agent.evaluation.records import OUTAGES, EvalItem, QuestionResult
from pyql.datasets.gold import score as _set_score
from pyql.datasets.sql_fidelity import normalise_cell, same_rows
from pyql.registry import UnknownNameError

if TYPE_CHECKING:
    from pyql.agent.trajectory import Step

__all__ = [
    "SCORES",
    "LEGACY_NAMES",
    "ENV_CLASSES",
    "DEFAULT_BREAKDOWN",
    "env_class",
    "kbqa_scores",
    "qald_scores",
    "normalise_answer",
    "wikisql_accuracy",
    "spider_accuracy",
    "score_item",
    "corrections",
    "guideline_stats",
    "aggregate",
    "step_usage",
]

#: the per-question scores, in the order tables show them
SCORES: tuple[str, ...] = ("hit@1", "f1", "em", "hit@1_top1", "accuracy")

#: per-question score names of earlier results -> their name now
LEGACY_NAMES: dict[str, str] = {"top1": "hit@1_top1"}

#: guideline code prefix -> environment class (the paper's Tables 8/9: where the feedback comes
#: from): Python interpreter, KB, database, reasoning memory
ENV_CLASSES: dict[str, str] = {"PY": "python", "KB": "kb", "DB": "db", "RM": "memory"}

#: meta keys broken down by default, when items have them
DEFAULT_BREAKDOWN: tuple[str, ...] = ("hops", "qtype", "agg", "conds", "expressible", "db_id")

_USAGE_MEANS: tuple[tuple[str, str], ...] = (
    ("tpq", "seconds"),
    ("qpq", "kb_queries"),
    ("cpq", "cost"),
    ("llm_calls", "llm_calls"),
    ("prompt_tokens", "prompt_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("cached_tokens", "cached_tokens"),
    ("steps", "steps"),
    ("parse_failures", "parse_failures"),
    ("constrained_calls", "constrained_calls"),
    ("scoring_calls", "scoring_calls"),
)


#: usage keys every strategy's results carry; other keys are a strategy's own (step_usage)
_COMMON_USAGE = frozenset({"llm_calls", "prompt_tokens", "completion_tokens", "cached_tokens",
                           "cost", "kb_queries", "seconds", "llm_seconds", "steps",
                           "estimated_tokens", "parse_failures", "constrained_calls",
                           "scoring_calls"})


def step_usage(steps: Sequence[Any], gold: Iterable[Any] = ()) -> dict[str, float]:
    """A strategy's own per-question counts, read from its step records: LLM calls per step
    kind (``llm_calls.generate``, ``llm_calls.edit``, ... for kinds other than QueryAgent's
    ``action``), the numbers a step reports in ``data["counts"]`` (summed), and
    ``answer_coverage`` (1.0 when the last step that lists retrieved ``data["instances"]``
    holds a gold answer, compared case-insensitively)."""
    out: dict[str, float] = {}
    instances: Any = None
    for step in steps:
        kind = getattr(step, "kind", "action")
        if kind != "action" and (getattr(step, "reply_text", "") or getattr(step, "tool_calls", ())):
            out[f"llm_calls.{kind}"] = out.get(f"llm_calls.{kind}", 0.0) + 1.0
        data = getattr(step, "data", None) or {}
        for key, value in (data.get("counts") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = out.get(key, 0.0) + float(value)
        if "instances" in data:
            instances = data["instances"]
    if instances is not None:
        found = {str(v).strip().casefold() for v in instances}
        out["answer_coverage"] = float(any(str(g).strip().casefold() in found for g in gold))
    return out


def _rates(rows: Sequence[QuestionResult], keys: Iterable[str]) -> dict[str, float | None]:
    """Pooled rates of a strategy's own counts: a question reports ``NAME:hits`` and
    ``NAME:of`` (e.g. SRP's ``judge_accuracy``: verdicts right of verdicts given), and the run's
    ``NAME`` is their sums' ratio (None when nothing was counted)."""
    out: dict[str, float | None] = {}
    for key in keys:
        if key.endswith(":of"):
            name = key[: -len(":of")]
            total = math.fsum(float(r.usage.get(key, 0.0)) for r in rows)
            hits = math.fsum(float(r.usage.get(f"{name}:hits", 0.0)) for r in rows)
            out[name] = hits / total if total else None
    return out


def env_class(code: str) -> str:
    """The environment class of a guideline code (``PY101`` -> ``python``), else ``other``.

    >>> env_class("KB204"), env_class("RM201"), env_class("X1")
    ('kb', 'memory', 'other')
    """
    return ENV_CLASSES.get(code[:2].upper(), "other")


# -- per question -------------------------------------------------------------------------------


def _one_set(predicted: Sequence[str], gold: Sequence[Any]) -> dict[str, float]:
    if not gold and not predicted:
        return {"hit@1": 1.0, "f1": 1.0, "em": 1.0, "hit@1_top1": 1.0}
    s = _set_score(predicted, gold)
    return {"hit@1": s.hit1, "f1": s.f1, "em": 1.0 if s.exact else 0.0, "hit@1_top1": s.top1}


def kbqa_scores(predicted: Iterable[Any], gold: Iterable[Any], *,
                answer_sets: Iterable[Iterable[Any]] | None = None) -> dict[str, float]:
    """``hit@1`` (any answer), ``f1``, ``em``, ``hit@1_top1`` (the first answer) of a KBQA
    prediction (module docstring).

    >>> kbqa_scores(["Zorro", "Anna"], ["Zorro"])
    {'hit@1': 1.0, 'f1': 0.6666666666666666, 'em': 0.0, 'hit@1_top1': 0.0}
    >>> kbqa_scores([], [])["f1"], kbqa_scores([], ["a"])["f1"]
    (1.0, 0.0)
    """
    pred = [str(p) for p in predicted]
    sets = [[str(g) for g in gold]]
    sets += [[str(g) for g in alt] for alt in (answer_sets or ())]
    scores = [_one_set(pred, s) for s in sets]
    return {key: max(s[key] for s in scores) for key in scores[0]}


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def normalise_answer(value: Any) -> str:
    """An answer as :func:`qald_scores` compares it: a number by value (``3.0`` -> ``3``), a
    boolean as ``true``/``false``, anything else as its text.

    >>> normalise_answer("3.0"), normalise_answer(True), normalise_answer("Q42")
    ('3', 'true', 'Q42')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    if _NUMBER.fullmatch(text):
        number = Decimal(text).normalize()
        return format(number, "f") if number == number.to_integral() else str(number)
    return text


def qald_scores(predicted: Iterable[Any], gold: Iterable[Any]) -> dict[str, float]:
    """QALD/GRASP scores of one Wikidata prediction: :func:`kbqa_scores` over
    :func:`normalise_answer`-ed sets (module docstring).

    >>> qald_scores(["3"], ["3.0"])["f1"], qald_scores(["Q1", "Q2"], ["Q1"])["f1"]
    (1.0, 0.6666666666666666)
    >>> qald_scores(["true"], ["false"])["f1"], qald_scores([], [])["f1"]
    (0.0, 1.0)
    """
    return kbqa_scores(list(dict.fromkeys(normalise_answer(p) for p in predicted)),
                       list(dict.fromkeys(normalise_answer(g) for g in gold)))


def _wikisql_value(value: Any) -> Any:
    if isinstance(value, str):
        return ("s", value.casefold())
    if value is None:
        return ("n", None)
    return ("v", normalise_cell(value))


def wikisql_accuracy(predicted: Iterable[Any], gold: Iterable[Any]) -> dict[str, float]:
    """WikiSQL execution accuracy of one question (module docstring).

    >>> wikisql_accuracy(["Antonio Lang"], ["antonio lang"]), wikisql_accuracy([3], [3.0])
    ({'accuracy': 1.0}, {'accuracy': 1.0})
    """
    same = [_wikisql_value(v) for v in predicted] == [_wikisql_value(v) for v in gold]
    return {"accuracy": 1.0 if same else 0.0}


def _rows(values: Iterable[Any]) -> list[tuple[Any, ...]]:
    return [tuple(v) if isinstance(v, (list, tuple)) else (v,) for v in values]


def spider_accuracy(predicted: Iterable[Any], gold_rows: Iterable[Sequence[Any]], *,
                    ordered: bool = False) -> dict[str, float]:
    """Spider execution accuracy of one question (module docstring).

    >>> spider_accuracy(["b", "a"], [("a",), ("b",)])
    {'accuracy': 1.0}
    >>> spider_accuracy(["b", "a"], [("a",), ("b",)], ordered=True)
    {'accuracy': 0.0}
    """
    ok = same_rows(_rows(predicted), [tuple(r) for r in gold_rows], ordered=ordered)
    return {"accuracy": 1.0 if ok else 0.0}


def score_item(kind: str, item: EvalItem, predicted: Iterable[Any]) -> dict[str, float]:
    """The per-question scores of ``predicted`` for a dataset whose metric is ``kind``
    (``kbqa``, ``qald``, ``wikisql`` or ``spider``)."""
    if kind == "kbqa":
        return kbqa_scores(predicted, item.answers, answer_sets=item.meta.get("answer_sets"))
    if kind == "qald":
        return qald_scores(predicted, item.answers)
    if kind == "wikisql":
        return wikisql_accuracy(predicted, item.answers)
    if kind == "spider":
        return spider_accuracy(predicted, item.answers, ordered=bool(item.meta.get("ordered")))
    raise UnknownNameError("metric kind", kind, ("kbqa", "qald", "wikisql", "spider"))


def corrections(steps: Sequence[Step]) -> dict[str, int]:
    """Guideline codes whose hint was *immediately* followed by an accepted step (a successful
    correction), counted.
    """
    out: Counter[str] = Counter()
    for step, following in zip(steps, steps[1:], strict=False):
        if step.hint and following.accepted and not following.hint:
            out[step.hint] += 1
    return dict(out)


# -- aggregate ----------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _result(value: QuestionResult | Mapping[str, Any]) -> QuestionResult:
    return value if isinstance(value, QuestionResult) else QuestionResult.model_validate(value)


#: each score's name and the name earlier results gave it (itself when it had no other)
_OLD_NAMES = {new: old for old, new in LEGACY_NAMES.items()}
_SCORE_NAMES: tuple[tuple[str, str], ...] = tuple(
    (name, _OLD_NAMES.get(name, name)) for name in SCORES)


def _scores(results: Sequence[QuestionResult]) -> dict[str, float | None]:
    """The mean of each score over the results that have it (one pass over the results)."""
    values: dict[str, list[float]] = {name: [] for name in SCORES}
    for r in results:
        metrics = r.metrics
        for name, old in _SCORE_NAMES:
            if name in metrics:
                values[name].append(metrics[name])
            elif old in metrics:
                values[name].append(metrics[old])
    return {name: _mean(found) for name, found in values.items()}


def _stats(triggers: int, fixed: int, questions: int, **rates: float) -> dict[str, Any]:
    """``triggers``, then ``rates`` (a share, or triggers per question), then ``questions``,
    ``corrected`` and ``correction_rate``."""
    return {
        "triggers": triggers,
        **rates,
        "questions": questions,
        "corrected": fixed,
        "correction_rate": fixed / triggers if triggers else None,
    }


def guideline_stats(results: Sequence[QuestionResult]) -> dict[str, Any]:
    """Guideline triggers over a run.

    ``triggers`` (total), ``per_question``, ``questions`` (with at least one trigger),
    ``corrected`` (triggers immediately followed by an accepted step) and ``correction_rate``;
    ``by_class``: the same per environment class (``python``, ``kb``, ``db``, ``memory``, each
    with its ``share`` of all triggers; the shape of the paper's Tables 8/9); ``by_code``: per
    guideline code, with its ``class``. ``questions`` counts the questions with at least one
    trigger (of the code, of the class).
    """
    n = len(results)
    counts: Counter[str] = Counter()
    fixed: Counter[str] = Counter()
    questions: Counter[str] = Counter()
    class_questions: Counter[str] = Counter()
    with_any = 0
    for r in results:
        if r.corrected:
            fixed.update(r.corrected)
        if not r.guidelines:
            continue
        fired = [code for code, k in r.guidelines.items() if k]
        counts.update(r.guidelines)
        questions.update(fired)
        class_questions.update({env_class(code) for code in fired})
        with_any += 1 if fired else 0
    total = sum(counts.values())
    by_code = {}
    for code in sorted(counts):
        stats = _stats(counts[code], fixed[code], questions[code],
                       share=counts[code] / total if total else 0.0)
        by_code[code] = {"class": env_class(code), **stats}
    classes = [*ENV_CLASSES.values(), "other"]
    by_class = {}
    for cls in classes:
        codes = [c for c in counts if env_class(c) == cls]
        if cls == "other" and not codes:
            continue
        triggers = sum(counts[c] for c in codes)
        by_class[cls] = _stats(triggers, sum(fixed[c] for c in codes), class_questions[cls],
                               share=triggers / total if total else 0.0)
    return {
        **_stats(total, sum(fixed.values()), with_any, per_question=total / n if n else 0.0),
        "by_class": by_class,
        "by_code": by_code,
    }


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _breakdown(results: Sequence[QuestionResult], keys: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        groups: dict[str, list[QuestionResult]] = defaultdict(list)
        for r in results:
            value = r.meta.get(key)
            if value is None or isinstance(value, (dict, list, tuple)):
                continue
            groups[str(value).lower() if isinstance(value, bool) else str(value)].append(r)
        if not groups:
            continue
        out[key] = {
            value: {"n": len(group), **{k: v for k, v in _scores(group).items() if v is not None},
                    "errors": sum(1 for r in group if r.error is not None)}
            for value, group in sorted(groups.items(), key=lambda kv: _sort_key(kv[0]))
        }
    return out


def aggregate(results: Iterable[QuestionResult | Mapping[str, Any]], *,
              by: Iterable[str] = DEFAULT_BREAKDOWN, primary: str | None = None
              ) -> dict[str, Any]:
    """The run's metrics (module docstring). Order-independent: the sums are exact
    (``math.fsum``), so the same results in any order give the same numbers.

    ``primary`` names the headline score (default: ``accuracy`` when defined, else ``hit@1``;
    an evaluation passes :func:`pyql.agent.strategies.queryagent.presets.primary_metric`).
    """
    every = [_result(r) for r in results]
    outages = Counter(r.status for r in every if r.status in OUTAGES)
    rows = [r for r in every if r.status not in OUTAGES]
    n = len(rows)
    scores = _scores(rows)
    if primary is None:
        primary = "accuracy" if scores["accuracy"] is not None else "hit@1"
    out: dict[str, Any] = {"n": len(every), "scored": n, "primary": primary, **scores}
    out["outages"] = {status: outages[status] for status in OUTAGES}
    out["outage_total"] = sum(outages.values())
    for name, key in _USAGE_MEANS:
        out[name] = _mean([float(r.usage.get(key, 0.0)) for r in rows]) if n else None
    # the paper's QPQ: SPARQL queries per question without the label lookups
    out["qpq_paper"] = _mean([float(r.usage.get("kb_queries", 0.0))
                              - float(r.usage.get("label_queries", 0.0)) for r in rows]) if n else None
    out["tokens"] = (None if not n else _mean([
        float(r.usage.get("prompt_tokens", 0.0)) + float(r.usage.get("completion_tokens", 0.0))
        for r in rows]))
    # the share of questions whose tokens were counted locally, not reported by an API (gold
    # and noisy-gold stand-ins, a server without usage): the tables say "estimated"
    out["tokens_estimated"] = (None if not n else _mean([
        1.0 if r.usage.get("estimated_tokens") else 0.0 for r in rows]))
    # a prompt is never 0 tokens: LLM calls without any are calls nobody counted (a stand-in run
    # without --token-estimates, or its replay); the tables say so instead of showing 0
    out["tokens_counted"] = (None if not n else not any(
        r.usage.get("llm_calls") for r in rows) or any(r.usage.get("prompt_tokens") for r in rows))
    own = sorted({k for r in rows for k in r.usage} - _COMMON_USAGE)
    out["strategy"] = {k: _mean([float(r.usage.get(k, 0.0)) for r in rows]) for k in own}
    out["strategy"].update(_rates(rows, own))
    # replies the strategy could not read, and the prompt tokens the server had cached
    out["parse_failures_total"] = int(sum(float(r.usage.get("parse_failures", 0.0))
                                          for r in rows))
    out["questions_with_parse_failures"] = sum(
        1 for r in rows if float(r.usage.get("parse_failures", 0.0)) > 0)
    prompt_total = math.fsum(float(r.usage.get("prompt_tokens", 0.0)) for r in rows)
    out["cached_share"] = (math.fsum(float(r.usage.get("cached_tokens", 0.0)) for r in rows)
                           / prompt_total if prompt_total else None)
    out["cost"] = math.fsum(float(r.usage.get("cost", 0.0)) for r in rows)
    out["seconds"] = math.fsum(float(r.usage.get("seconds", 0.0)) for r in rows)
    out["errors"] = sum(1 for r in rows if r.error is not None)
    out["finished"] = sum(1 for r in rows if r.finished) / n if n else None
    out["stop_reasons"] = dict(sorted(Counter(r.stop_reason or "" for r in rows).items()))
    out["guidelines"] = guideline_stats(rows)
    out["by"] = _breakdown(rows, by)
    return out
