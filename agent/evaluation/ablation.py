"""ERASER ablation with injected hallucinations: the paper's Table 3 shape, without an LLM.

:func:`run_ablation` samples ``n`` dev questions of a dataset, and answers each one four times
with :class:`~pyql.agent.QueryAgent` driven by :class:`~pyql.agent.evaluation.noisy.NoisyGoldLLM`
(the question's gold program, replayed):

- **clean gold**, ERASER on and off (``rate=0``): the ceiling, and a conservatism check — any
  hint on a clean run is a guideline firing on a correct step;
- **noisy**, ERASER on and off (``rate``): the same mistakes at the same gold calls in both runs
  (the stand-in's draws are keyed on the seed and the gold call, see
  :mod:`~pyql.agent.evaluation.noisy`).

It reports, per injected type, the **detection rate** (share of injections followed by a hint),
the **correction rate** (share of injections whose hint named the problem, so the stand-in wrote
the gold call next) and the hint codes seen; and the **final accuracy** with ERASER on vs off
(MetaQA: Hit@1 and F1 of the answer set; WikiSQL: execution accuracy against WikiSQL's own
execution), next to the clean gold accuracy. The stand-in fixes a mistake *only* when a hint
names it and otherwise behaves like a model that does not notice, so this measures the
environment and the guidelines, not an LLM.

Command line::

    python -m pyql.agent.evaluation.ablation --dataset metaqa-2hop --rate 0.3 --n 300 --seed 0
        [--data-dir DIR] [--types wrong_relation,invalid_action] [--max-steps 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyql.agent.evaluation.noisy import (
    INJECTION_TYPES,
    Injection,
    NoisyGoldLLM,
    summarise,
)
from pyql.agent.evaluation.records import EvalItem, item_seed
from pyql.agent.query_agent import QueryAgent, Result

__all__ = ["DATASETS", "NOTE", "run_ablation", "load_items", "format_table", "main"]

log = logging.getLogger(__name__)

#: the datasets this module knows
DATASETS: tuple[str, ...] = ("metaqa-1hop", "metaqa-2hop", "metaqa-3hop", "wikisql")
#: said with every result
NOTE = "This measures the environment and guidelines, not an LLM."
#: the four runs of each question: (name, noisy?, ERASER on?)
SETTINGS: tuple[tuple[str, bool, bool], ...] = (
    ("clean_on", False, True),
    ("clean_off", False, False),
    ("eraser_on", True, True),
    ("eraser_off", True, False),
)
LABELS = {
    "clean_on": "clean gold, ERASER on",
    "clean_off": "clean gold, w/o ERASER",
    "eraser_on": "noisy, ERASER on",
    "eraser_off": "noisy, w/o ERASER",
}

Scorer = Callable[[EvalItem, Sequence[Any]], dict[str, float]]


@dataclass
class _Dataset:
    """A loaded dataset: the backend the agent runs on, the sampled items, how to score."""

    backend: Any
    items: list[EvalItem]
    metrics: tuple[str, ...]
    score: Scorer


# -- datasets ---------------------------------------------------------------------------------


def _sample(count: int, n: int | None, seed: int) -> list[int]:
    if n is None or n >= count:
        return list(range(count))
    return sorted(random.Random(seed).sample(range(count), n))


def _metaqa(hop: int, n: int | None, seed: int, data_dir: str | Path | None,
            kb: Any = None) -> _Dataset:
    from pyql.datasets import metaqa

    qa, qtype = metaqa.paths(data_dir, hop, "dev")
    questions = list(metaqa.load_questions(qa, qtype))
    chosen = [questions[i] for i in _sample(len(questions), n, seed)]
    items = [
        EvalItem(id=q.id, question=q.question, entities={q.topic: q.topic}, answers=q.answers,
                 program=str(metaqa.gold_program(q)), tools="sparql",
                 meta={"qtype": q.qtype, "hops": q.hops})
        for q in chosen
    ]
    backend = kb if kb is not None else metaqa.load_kb(metaqa.kb_path(data_dir))
    return _Dataset(backend, items, *_load_scorer(f"metaqa-{hop}hop"))


def _wikisql(n: int | None, seed: int, data_dir: str | Path | None, db: Any = None) -> _Dataset:
    from pyql.datasets import wikisql
    from pyql.datasets.paths import default_data_dir

    base = Path(data_dir) if data_dir is not None else default_data_dir()
    folder = base / "wikisql" if (base / "wikisql").is_dir() else base
    tables_path = folder / "dev.tables.jsonl.gz"
    if not tables_path.exists():
        tables_path = folder / "dev.tables.jsonl"
    tables = wikisql.load_tables(tables_path)
    questions = list(wikisql.load_questions(folder / "dev.jsonl", tables))
    chosen = [questions[i] for i in _sample(len(questions), n, seed)]
    items = [
        EvalItem(id=q.id, question=q.question,
                 answers=tuple(wikisql.wikisql_execute(tables[q.table_id], **q.sql)),
                 program=str(q.program), tools="sql", table=q.table,
                 meta={"table_id": q.table_id})
        for q in chosen
    ]
    backend = db if db is not None else wikisql.load_db(tables_path)
    return _Dataset(backend, items, *_load_scorer("wikisql"))


def load_items(dataset: str, n: int | None, seed: int, data_dir: str | Path | None = None, *,
               backend: Any = None) -> tuple[Any, list[EvalItem], tuple[str, ...], Scorer]:
    """``(backend, items, metric names, scorer)`` of ``n`` dev questions sampled with ``seed``
    (all when ``n`` is None), in file order. ``backend`` reuses a loaded KB/DB."""
    ds = _load(dataset, n, seed, data_dir, backend)
    return ds.backend, ds.items, ds.metrics, ds.score


def _load(dataset: str, n: int | None, seed: int, data_dir: str | Path | None,
          backend: Any) -> _Dataset:
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
    if dataset == "wikisql":
        return _wikisql(n, seed, data_dir, backend)
    return _metaqa(int(dataset.split("-")[1][0]), n, seed, data_dir, backend)


# -- running ------------------------------------------------------------------------------------


def _run_one(backend: Any, item: EvalItem, *, rate: float, seed: int, eraser: bool,
             types: Sequence[str] | None, max_steps: int) -> tuple[Result, list[Injection]]:
    llm = NoisyGoldLLM(item.program or "", rate=rate, seed=item_seed(seed, item.id),
                       tools=item.tools, types=types)
    agent = QueryAgent(llm, backend, guidelines=True if eraser else None, max_steps=max_steps,
                       table=item.table)
    result = agent.run(item.question, item.entities, table=item.table)
    return result, llm.reconcile(result.trajectory)


def _rates(rows: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    total = {"n": 0, "detected": 0, "corrected": 0, "kept": 0, "retried": 0, "ended": 0,
             "codes": {}}
    for kind in INJECTION_TYPES:
        row = rows.get(kind)
        if row is None:
            continue
        out[kind] = _with_rates(row)
        for key in ("n", "detected", "corrected", "kept", "retried", "ended"):
            total[key] += row[key]
        for code, count in row["codes"].items():
            total["codes"][code] = total["codes"].get(code, 0) + count
    out["all"] = _with_rates(total)
    return out


def _with_rates(row: dict[str, Any]) -> dict[str, Any]:
    n = row["n"]
    return {**row, "codes": dict(sorted(row["codes"].items(), key=lambda kv: -kv[1])),
            "detection_rate": row["detected"] / n if n else 0.0,
            "correction_rate": row["corrected"] / n if n else 0.0}


def run_ablation(
    dataset: str,
    rate: float,
    n: int | None,
    seed: int,
    data_dir: str | Path | None = None,
    *,
    types: Sequence[str] | None = None,
    max_steps: int = 20,
    backend: Any = None,
    items: Sequence[EvalItem] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the ablation (module docstring) on ``n`` sampled dev questions of ``dataset``
    (``metaqa-1hop``, ``metaqa-2hop``, ``metaqa-3hop``, ``wikisql``).

    ``backend`` reuses a loaded KB/DB; ``items`` (with ``backend``) replaces the sampled
    questions (tests). Returns a JSON-serialisable dict: ``accuracy`` per setting
    (``clean_on``, ``clean_off``, ``eraser_on``, ``eraser_off``: the metrics, ``finished``,
    ``steps`` and ``hints`` per question), ``injections`` per setting and type (``n``,
    ``detected``, ``detection_rate``, ``corrected``, ``correction_rate``, ``kept``, ``retried``,
    ``ended``, ``codes``), ``clean_hints`` (hint codes on clean runs: guidelines firing on
    correct steps), ``decoding`` (how often the hint code read from the text matched the
    Session's), and ``note``.
    """
    started = time.perf_counter()
    if items is None:
        ds = _load(dataset, n, seed, data_dir, backend)
    else:
        if backend is None:
            raise ValueError("items= needs backend=")
        loaded = _load_scorer(dataset)
        ds = _Dataset(backend, list(items), loaded[0], loaded[1])
    load_seconds = time.perf_counter() - started
    sums: dict[str, dict[str, float]] = {name: {} for name, _, _ in SETTINGS}
    injections: dict[str, list[Injection]] = {"eraser_on": [], "eraser_off": []}
    clean_hints: dict[str, int] = {}
    decoded = agreed = 0
    with_injection = 0
    total = len(ds.items)
    for done, item in enumerate(ds.items, 1):
        for name, noisy, eraser in SETTINGS:
            result, records = _run_one(ds.backend, item, rate=rate if noisy else 0.0, seed=seed,
                                       eraser=eraser, types=types, max_steps=max_steps)
            scores = ds.score(item, result.answers)
            hints = [s.hint for s in result.steps if s.hint is not None]
            row = sums[name]
            for key, value in {**scores, "finished": float(result.finished),
                               "steps": float(len(result.steps)),
                               "hints": float(len(hints))}.items():
                row[key] = row.get(key, 0.0) + value
            if not noisy and eraser:
                for code in hints:
                    clean_hints[code] = clean_hints.get(code, 0) + 1
            if noisy:
                injections[name].extend(records)
                if name == "eraser_on" and records:
                    with_injection += 1
                for inj in records:
                    if inj.hint_code is not None and inj.trajectory_code is not None:
                        decoded += 1
                        agreed += inj.hint_code == inj.trajectory_code
        if progress is not None:
            progress(done, total)
    accuracy = {name: {key: value / total if total else 0.0 for key, value in row.items()}
                for name, row in sums.items()}
    return {
        "dataset": dataset,
        "split": "dev",
        "rate": rate,
        "n": total,
        "seed": seed,
        "types": list(types) if types is not None else list(INJECTION_TYPES),
        "max_steps": max_steps,
        "metrics": list(ds.metrics),
        "accuracy": accuracy,
        "injections": {name: _rates(summarise(records))
                       for name, records in injections.items()},
        "questions_with_injection": with_injection,
        "clean_hints": clean_hints,
        "decoding": {"checked": decoded, "agree": agreed},
        "load_seconds": load_seconds,
        "seconds": time.perf_counter() - started,
        "note": NOTE,
    }


def _load_scorer(dataset: str) -> tuple[tuple[str, ...], Scorer]:
    """The metrics and scorer of a dataset without loading its data."""
    if dataset == "wikisql":
        from pyql.datasets.sql_fidelity import same_rows

        def sql_score(item: EvalItem, predicted: Sequence[Any]) -> dict[str, float]:
            same = same_rows([[p] for p in predicted], [[a] for a in item.answers], ordered=True,
                             casefold=True)
            return {"accuracy": 1.0 if same else 0.0}

        return ("accuracy",), sql_score
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
    from pyql.datasets.gold import score

    def kb_score(item: EvalItem, predicted: Sequence[Any]) -> dict[str, float]:
        s = score(predicted, item.answers)
        return {"hit1": s.hit1, "f1": s.f1}

    return ("hit1", "f1"), kb_score


# -- reporting ----------------------------------------------------------------------------------

_METRIC_NAMES = {"hit1": "Hit@1", "f1": "F1", "accuracy": "EX acc"}


def _codes(codes: Mapping[str, int], limit: int = 4) -> str:
    shown = [f"{code}×{count}" for code, count in list(codes.items())[:limit]]
    if len(codes) > limit:
        shown.append("…")
    return " ".join(shown) or "–"


def format_table(result: Mapping[str, Any]) -> str:
    """The result of :func:`run_ablation` as Markdown tables."""
    lines = [
        f"ERASER ablation with injected hallucinations: {result['dataset']} "
        f"{result['split']}, n={result['n']}, rate={result['rate']:g}, seed={result['seed']}, "
        f"max_steps={result['max_steps']}",
        "",
        f"**{result['note']}**",
        "",
        "Injected mistakes (ERASER on; detection = a hint followed the mistake; correction = "
        "the hint named it and the gold step came next; kept = accepted unnoticed, the wrong "
        "step stays; ended = the run ended on it, e.g. an accepted premature execute()):",
        "",
        "| type | injected | detected | detection | corrected | correction | kept | ended | "
        "hint codes | w/o ERASER: injected / kept / ended |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    on = result["injections"]["eraser_on"]
    off = result["injections"]["eraser_off"]
    for kind in (*INJECTION_TYPES, "all"):
        row = on.get(kind)
        other = off.get(kind)
        if row is None and other is None:
            continue
        row = row or {"n": 0, "detected": 0, "detection_rate": 0.0, "corrected": 0,
                      "correction_rate": 0.0, "kept": 0, "ended": 0, "codes": {}}
        name = f"**{kind}**" if kind == "all" else kind
        tail = f"{other['n']} / {other['kept']} / {other['ended']}" if other else "0 / 0 / 0"
        lines.append(
            f"| {name} | {row['n']} | {row['detected']} | {row['detection_rate']:.1%} | "
            f"{row['corrected']} | {row['correction_rate']:.1%} | {row['kept']} | "
            f"{row['ended']} | {_codes(row['codes'])} | {tail} |")
    metrics = result["metrics"]
    lines += [
        "",
        f"Final accuracy ({result['questions_with_injection']} of {result['n']} questions got "
        "at least one mistake with ERASER on):",
        "",
        "| setting | " + " | ".join(_METRIC_NAMES.get(m, m) for m in metrics)
        + " | finished | steps/q | hints/q |",
        "|---|" + "---:|" * (len(metrics) + 3),
    ]
    for name, label in LABELS.items():
        acc = result["accuracy"][name]
        values = " | ".join(f"{acc.get(m, 0.0):.3f}" for m in metrics)
        lines.append(f"| {label} | {values} | {acc.get('finished', 0.0):.3f} | "
                     f"{acc.get('steps', 0.0):.2f} | {acc.get('hints', 0.0):.2f} |")
    first = metrics[0]
    gain = result["accuracy"]["eraser_on"].get(first, 0.0) - result["accuracy"]["eraser_off"].get(
        first, 0.0)
    decoding = result["decoding"]
    lines += [
        "",
        f"ERASER on − off: {gain * 100:+.1f} points of {_METRIC_NAMES.get(first, first)}. "
        f"Hints on clean runs: {_codes(result['clean_hints'], 8)}. Hint codes read from the "
        f"rendered text agree with the Session's for {decoding['agree']}/{decoding['checked']}. "
        f"{result['seconds']:.1f} s.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pyql.agent.evaluation.ablation",
        description="ERASER on vs off with a gold-program stand-in LLM that injects the paper's "
                    "hallucination types. " + NOTE)
    parser.add_argument("--dataset", choices=DATASETS, required=True)
    parser.add_argument("--rate", type=float, default=0.3,
                        help="probability that a gold step gets a mistake (default 0.3)")
    parser.add_argument("--n", type=int, default=300, help="questions sampled (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None, help="the shared datasets folder")
    parser.add_argument("--types", default=None,
                        help="comma-separated injection types (default all): "
                             + ", ".join(INJECTION_TYPES))
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    try:
        result = run_ablation(args.dataset, args.rate, args.n, args.seed, args.data_dir,
                              types=types, max_steps=args.max_steps)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
