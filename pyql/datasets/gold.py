"""Gold-program fidelity: run each question's gold program through a :class:`~pyql.Session` and
score its answers against the dataset's gold answers.

This measures what pyql itself can reach on a dataset (the ceiling an agent is held to): the
program is the one an agent would write, run step by step exactly as an agent's actions are.

Metrics per question (averaged per hop):

- ``hit1`` (Hit@1): an answer ranked first is a gold answer. A program returns a *set*, so all
  its answers are tied at rank 1 and Hit@1 is 1 when any predicted answer is gold (how the
  LLM-KBQA papers, e.g. ToG and RoG, score answer sets).
- ``top1``: the strict variant: answers are put in a fixed order by :func:`answer_order`
  (case-folded text, then text) and only the first one counts. Reproducible, but it measures
  the alphabet as much as the program (see the MetaQA figures in ``benchmarks/README.md``).
- ``f1``: set F1 of predicted against gold answers (0 when nothing is predicted).
- ``exact``: the predicted set equals the gold set.

Answers are compared as exact strings (MetaQA's entity names are the KB's labels).

Command line::

    pyql fidelity gold metaqa --hops 1,2,3 --split dev [--limit N] [--sample N]

>>> score(["Drama", "Music"], ["Music", "Drama"])
Score(hit1=1.0, top1=1.0, f1=1.0, exact=True)
>>> score(["Zorro", "Anna"], ["Zorro"])
Score(hit1=1.0, top1=0.0, f1=0.6666666666666666, exact=False)
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from pyql.kb.base import KB
from pyql.program import Program
from pyql.session import Session

__all__ = [
    "Score",
    "GoldResult",
    "answer_order",
    "score",
    "run_program",
    "metaqa_fidelity",
    "format_table",
]

log = logging.getLogger(__name__)

#: how many failing/imperfect questions a report lists per hop
MAX_LISTED = 20


class Score(NamedTuple):
    hit1: float
    top1: float
    f1: float
    exact: bool


def answer_order(answers: Iterable[Any]) -> list[str]:
    """Distinct answers as text, ordered by case-folded text, then text (the ranking used for
    ``top1``)."""
    return sorted({str(a) for a in answers}, key=lambda a: (a.casefold(), a))


def score(predicted: Iterable[Any], gold: Iterable[Any]) -> Score:
    """Hit@1 (any answer, all tied first), top-1 of :func:`answer_order`, set F1, exact."""
    ranked = answer_order(predicted)
    pred = set(ranked)
    gold_set = {str(g) for g in gold}
    common = len(pred & gold_set)
    if common:
        precision, recall = common / len(pred), common / len(gold_set)
        f1 = 2 * precision * recall / (precision + recall)
    else:
        f1 = 0.0
    top1 = 1.0 if ranked and ranked[0] in gold_set else 0.0
    return Score(1.0 if common else 0.0, top1, f1, pred == gold_set)


class GoldResult(BaseModel):
    """The outcome of one question's gold program."""

    model_config = ConfigDict(frozen=True)

    id: str
    hops: int
    qtype: str
    predicted: tuple[str, ...]
    gold: tuple[str, ...]
    hit1: float
    top1: float
    f1: float
    exact: bool
    #: the first step that failed (status and text), None when every step ran
    error: str | None = None
    steps: int = 0
    seconds: float = 0.0


def run_program(
    kb: KB, program: Program, entities: Mapping[str, str], **session_options: Any
) -> tuple[tuple[str, ...], str | None, int]:
    """Run ``program`` step by step in a fresh Session.

    Returns the answers of the last ``execute()`` (as text), the first failed step (or None)
    and the number of steps run. A step fails when it is an error, a backend error, a timeout
    or a hint; the remaining steps still run, like an agent that ignores the observation.
    """
    session = Session(kb, entities=entities, **session_options)
    answers: tuple[str, ...] = ()
    error: str | None = None
    for call in program:
        obs = session.run(call)
        if error is None and obs.status in ("error", "backend_error", "timeout", "hint"):
            error = f"step {obs.step} {obs.action}: {obs.status}: {obs.text}"
        if call.name == "execute":
            answers = tuple(str(a) for a in (obs.answers or ()))
    return answers, error, len(program)


def _select(items: Sequence[Any], limit: int | None, sample: int | None, seed: int) -> list[Any]:
    chosen = list(items[:limit] if limit is not None else items)
    if sample is not None and sample < len(chosen):
        picked = sorted(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [chosen[i] for i in picked]
    return chosen


def _summarise(results: list[GoldResult], seconds: float) -> dict[str, Any]:
    n = len(results)

    def mean(values: Iterable[float]) -> float:
        return sum(values) / n if n else 0.0

    imperfect = [r for r in results if r.error is not None or not r.exact]
    listed = []
    for r in imperfect[:MAX_LISTED]:
        pred, gold = set(r.predicted), set(r.gold)
        listed.append({
            "id": r.id, "qtype": r.qtype, "f1": round(r.f1, 4), "error": r.error,
            "missing": sorted(gold - pred)[:5], "extra": sorted(pred - gold)[:5],
        })
    return {
        "n": n,
        "hit1": mean(r.hit1 for r in results),
        "top1": mean(r.top1 for r in results),
        "f1": mean(r.f1 for r in results),
        "exact": mean(1.0 if r.exact else 0.0 for r in results),
        "errors": sum(1 for r in results if r.error is not None),
        # an empty prediction is "exact" against an empty gold set (score())
        "gold_empty": sum(1 for r in results if not r.gold),
        "misses": sum(1 for r in results if not r.hit1),
        "imperfect": len(imperfect),
        "failures": listed,
        "steps": sum(r.steps for r in results),
        "seconds": seconds,
    }


def metaqa_fidelity(
    data_dir: str | Path | None = None,
    hops: Sequence[int] = (1, 2, 3),
    split: str = "dev",
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    *,
    kb: KB | None = None,
    store_dir: str | Path | None = None,
    topic_exclusion: str = "same_type",
    keep_results: bool = False,
    progress: Callable[[int, GoldResult], None] | None = None,
    **session_options: Any,
) -> dict[str, Any]:
    """Run MetaQA gold programs and report per hop.

    ``limit`` keeps the first N questions of each hop, then ``sample`` draws N of those at
    random (``seed``; kept in file order). ``kb`` reuses a loaded KB, else it is loaded from
    ``data_dir`` (``store_dir``: see :func:`pyql.datasets.metaqa.load_kb`).
    ``topic_exclusion`` is passed to :func:`~pyql.datasets.metaqa.gold_program`.

    Returns ``{"dataset", "split", "topic_exclusion", "answer_order", "kb_triples",
    "load_seconds", "seconds", "hops": {hop: {"n", "hit1", "top1", "f1", "exact", "errors",
    "misses", "imperfect", "failures", "steps", "seconds"}}}`` (plus ``"results"``: hop -> list
    of :class:`GoldResult` with ``keep_results``). ``failures`` lists up to 20 questions whose
    program failed or whose answers differ from gold, with missing/extra answers.
    """
    from pyql.datasets import metaqa

    start = time.perf_counter()
    if kb is None:
        kb = metaqa.load_kb(metaqa.kb_path(data_dir), store_dir=store_dir)
    load_seconds = time.perf_counter() - start
    report: dict[str, Any] = {
        "dataset": "metaqa",
        "split": split,
        "topic_exclusion": topic_exclusion,
        "answer_order": "case-folded text, then text",
        "kb_triples": len(kb),  # type: ignore[arg-type]
        "load_seconds": load_seconds,
        "hops": {},
    }
    all_results: dict[int, list[GoldResult]] = {}
    for hop in hops:
        items = list(metaqa.load_questions(*metaqa.paths(data_dir, hop, split)))
        chosen = _select(items, limit, sample, seed)
        hop_start = time.perf_counter()
        results = []
        for index, item in enumerate(chosen):
            q_start = time.perf_counter()
            program = metaqa.gold_program(item, topic_exclusion=topic_exclusion)  # type: ignore[arg-type]
            predicted, error, steps = run_program(kb, program, {item.topic: item.topic},
                                                  **session_options)
            s = score(predicted, item.answers)
            result = GoldResult(
                id=item.id, hops=item.hops, qtype=item.qtype, predicted=predicted,
                gold=item.answers, hit1=s.hit1, top1=s.top1, f1=s.f1, exact=s.exact, error=error,
                steps=steps, seconds=time.perf_counter() - q_start,
            )
            results.append(result)
            if progress is not None:
                progress(index, result)
        summary = _summarise(results, time.perf_counter() - hop_start)
        log.info("metaqa %d-hop %s: n=%d hit1=%.4f f1=%.4f in %.1fs", hop, split, summary["n"],
                 summary["hit1"], summary["f1"], summary["seconds"])
        report["hops"][hop] = summary
        all_results[hop] = results
    report["seconds"] = time.perf_counter() - start
    if keep_results:
        report["results"] = all_results
    return report


def format_table(report: Mapping[str, Any]) -> str:
    """A plain-text table of a :func:`metaqa_fidelity` report."""
    header = f"{'hops':>4} {'n':>6} {'Hit@1':>6} {'top1':>6} {'F1':>6} {'exact':>6} " \
             f"{'errors':>6} {'misses':>6} {'steps':>7} {'sec':>7} {'ms/q':>6}"
    lines = [
        f"MetaQA {report['split']} gold programs (topic exclusion: {report['topic_exclusion']}; "
        f"Hit@1: any answer, all tied first; top1: first by {report['answer_order']})",
        header,
        "-" * len(header),
    ]
    for hop, h in report["hops"].items():
        per_q = 1000 * h["seconds"] / h["n"] if h["n"] else 0.0
        lines.append(
            f"{hop:>4} {h['n']:>6} {h['hit1']:>6.3f} {h['top1']:>6.3f} {h['f1']:>6.3f} "
            f"{h['exact']:>6.3f} {h['errors']:>6} {h['misses']:>6} {h['steps']:>7} "
            f"{h['seconds']:>7.1f} {per_q:>6.2f}"
        )
    empty = {hop: h.get("gold_empty", 0) for hop, h in report["hops"].items()}
    lines.append("Gold answers empty: " + ", ".join(f"{n} of {report['hops'][hop]['n']} "
                                                    f"({hop}-hop)" for hop, n in empty.items())
                 + "; an empty prediction is exact against an empty gold set (Hit@1 and F1 "
                 "are 0 there).")
    lines.append(f"KB: {report['kb_triples']} triples, loaded in {report['load_seconds']:.2f}s; "
                 f"total {report['seconds']:.1f}s")
    return "\n".join(lines)
