"""A real model on every strategy: what it scores, what it costs, how often its replies are
unreadable — with and without constrained output.

Runs the evaluation harness (:func:`pyql.agent.evaluation.runner.evaluate`, the same code as
``pyql eval``) on the first ``--n`` dev questions of MetaQA 1/2/3-hop and WikiSQL, for each
strategy (QueryAgent text mode, Readi, SRP on the KB datasets) and each ``--constrain`` setting
(``on``: replies follow the strategy's JSON schemas; ``off``: free text, the paper's format). The
model is ``--llm local`` by default — SmolLM2-135M-Instruct in llama.cpp's server, in this process
— or any OpenAI-compatible server (``--llm openai:MODEL --base-url URL``): the command is the
same for a bigger model.

Printed per run: Hit@1 in both meanings (any predicted answer / the top-1 answer is gold) or
accuracy, LLM calls, prompt / completion / cached tokens per question, seconds per question,
and the outcome distribution: finished (an accepted ``execute()`` or the strategy's own end),
step cap, parse failures (replies the strategy could not read), guideline hints by code.
``--json PATH`` keeps every run's metrics. Usage (from the repository root)::

    python benchmarks/local_llm.py [--n 5] [--datasets metaqa-1hop,metaqa-2hop,metaqa-3hop,wikisql]
        [--strategies queryagent,readi,srp] [--constrain on,off] [--max-steps 6]
        [--llm local | --llm openai:MODEL --base-url URL] [--json out.json]

The baseline of each row is the same strategy with ``--constrain off`` on the same questions.

**Throughput** (``--throughput``, issue 37 item 6): the same questions answered at
``--concurrency 1`` and at ``--concurrency K`` (``--throughput-k``, default 4) with the local
model, in one run: at K the evaluation's K worker threads send their calls to one llama.cpp
server with K parallel slots, which decodes them together (continuous batching). Printed: the
questions per minute at 1 and at K (wall clock of each run), their ratio, the cached share of
the prompt tokens of each, and whether every question's predicted answers and stop reason are
the same (greedy decoding)::

    python benchmarks/local_llm.py --throughput [--n 4] [--throughput-k 4]
        [--datasets metaqa-1hop] [--strategies queryagent] [--max-steps 6]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KB_DATASETS = ("metaqa-1hop", "metaqa-2hop", "metaqa-3hop")


def _run(dataset: str, strategy: str, constrain: str, args: argparse.Namespace,
         data: Path, work: Path, concurrency: int = 1, name: str | None = None
         ) -> dict[str, Any]:
    from pyql.agent.evaluation.records import RunConfig
    from pyql.agent.evaluation.rundir import RunDir
    from pyql.agent.evaluation.runner import evaluate

    options: dict[str, Any] = {}
    if strategy == "readi":
        options["max_edits"] = args.max_edits
    if strategy == "srp":
        options["max_rounds"] = args.max_edits
    config = RunConfig(dataset=dataset, data_dir=str(data), llm=args.llm, base_url=args.base_url,
                       strategy=strategy, options=options, limit=args.n,
                       max_steps=args.max_steps, constrain=constrain,  # type: ignore[arg-type]
                       question_deadline=args.deadline, max_outages=0, concurrency=concurrency)
    out = work / (name or f"{dataset}-{strategy}-{constrain}")
    started = time.perf_counter()
    metrics = evaluate(config, out, progress=False)
    metrics["wall_seconds"] = time.perf_counter() - started
    hints: dict[str, int] = {}
    for result in RunDir(out).results():
        for code, n in result.guidelines.items():
            hints[code] = hints.get(code, 0) + n
    metrics["hints_by_code"] = dict(sorted(hints.items(), key=lambda kv: -kv[1]))
    return metrics


def _row(dataset: str, strategy: str, constrain: str, m: dict[str, Any]) -> str:
    def f(key: str, digits: int = 2) -> str:
        value = m.get(key)
        return "—" if value is None else f"{value:.{digits}f}"

    score = (f"acc {f('accuracy')}" if m.get("accuracy") is not None
             else f"{f('hit@1')} / {f('hit@1_top1')}")
    stops = m.get("stop_reasons") or {}
    outcome = ", ".join(f"{k or '?'} {v}" for k, v in stops.items())
    hints = ", ".join(f"{k} {v}" for k, v in list(m.get("hints_by_code", {}).items())[:4])
    return (f"| {dataset} | {strategy} | {constrain} | {score} | {f('llm_calls', 1)} | "
            f"{f('prompt_tokens', 0)} / {f('completion_tokens', 0)} / {f('cached_tokens', 0)} | "
            f"{f('tpq', 1)} | {m.get('parse_failures_total', 0)} | {f('finished')} | {outcome} | "
            f"{hints or '—'} |")


def _answers(run: Path) -> dict[str, tuple[Any, str]]:
    """Each question's predicted answers and stop reason in a run directory."""
    from pyql.agent.evaluation.rundir import RunDir

    return {r.id: (sorted(map(str, r.predicted)), r.stop_reason) for r in RunDir(run).results()}


def throughput(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """The same questions at concurrency 1 and ``args.throughput_k`` (see the module
    docstring); prints one table row per run and the ratio, returns the figures."""
    dataset = args.datasets.split(",")[0]
    strategy = args.strategies.split(",")[0]
    constrain = args.constrain.split(",")[0]
    rows: dict[int, dict[str, Any]] = {}
    print("| concurrency | questions | wall s | questions / min | cached share | LLM calls/q |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="pyql-local-llm-") as tmp:
        answers = {}
        for k in (1, args.throughput_k):
            m = _run(dataset, strategy, constrain, args, data, Path(tmp), concurrency=k,
                     name=f"c{k}")
            n = int(m.get("n") or 0)
            qpm = 60.0 * n / m["wall_seconds"] if m["wall_seconds"] else 0.0
            rows[k] = {"n": n, "wall_seconds": m["wall_seconds"], "questions_per_minute": qpm,
                       "cached_share": m.get("cached_share"), "llm_calls": m.get("llm_calls")}
            answers[k] = _answers(Path(tmp) / f"c{k}")
            print(f"| {k} | {n} | {m['wall_seconds']:.1f} | {qpm:.2f} | "
                  f"{m.get('cached_share') or 0:.3f} | {m.get('llm_calls') or 0:.1f} |",
                  flush=True)
    k = args.throughput_k
    ratio = rows[k]["questions_per_minute"] / rows[1]["questions_per_minute"]
    same = answers[1] == answers[k]
    differ = sorted(q for q in answers[1] if answers[1][q] != answers[k].get(q))
    print(f"\nratio (concurrency {k} / 1): {ratio:.2f}; same answers and stop reasons: "
          f"{same}" + (f" (differ: {', '.join(differ)})" if differ else ""))
    return {"dataset": dataset, "strategy": strategy, "constrain": constrain, "runs": rows,
            "ratio": ratio, "same_answers": same, "differ": differ}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5, help="questions per dataset (the first N)")
    parser.add_argument("--datasets", default=",".join((*KB_DATASETS, "wikisql")))
    parser.add_argument("--strategies", default="queryagent,readi,srp")
    parser.add_argument("--constrain", default="on,off")
    parser.add_argument("--llm", default="local", help="local[:PATH.gguf] or openai:MODEL")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--max-steps", type=int, default=6, help="QueryAgent's step cap")
    parser.add_argument("--max-edits", type=int, default=2, help="Readi's edits, SRP's rounds")
    parser.add_argument("--deadline", type=float, default=600.0,
                        help="seconds of LLM time per question")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every run's metrics")
    parser.add_argument("--throughput", action="store_true",
                        help="questions per minute at concurrency 1 vs --throughput-k (the "
                             "first dataset, strategy and constrain setting given)")
    parser.add_argument("--throughput-k", type=int, default=4)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from pyql.datasets.paths import default_data_dir

    data = args.data_dir or default_data_dir()
    if args.throughput:
        figures = throughput(args, data)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1, default=str))
        return 0
    runs: list[dict[str, Any]] = []
    print("| dataset | strategy | constrain | Hit@1 any / top-1 (or accuracy) | LLM calls/q | "
          "prompt / completion / cached tokens per q | s/q | parse failures | finished | "
          "outcomes | hints (top 4) |")
    print("|---|---|---|---|---:|---|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory(prefix="pyql-local-llm-") as tmp:
        for dataset in args.datasets.split(","):
            for strategy in args.strategies.split(","):
                if strategy == "srp" and dataset not in KB_DATASETS:
                    continue  # SRP plans over a KB only
                for constrain in args.constrain.split(","):
                    metrics = _run(dataset, strategy, constrain, args, data, Path(tmp))
                    print(_row(dataset, strategy, constrain, metrics), flush=True)
                    runs.append({"dataset": dataset, "strategy": strategy,
                                 "constrain": constrain, "metrics": metrics})
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
