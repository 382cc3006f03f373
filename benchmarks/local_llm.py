"""A real model on every strategy: what it scores, what it costs, how often its replies are
unreadable — free, constrained to the reply's format, grounded in the environment, choosing —
beside a no-model baseline that chooses among the same candidates.

Runs the evaluation harness (:func:`pyql.agent.evaluation.runner.evaluate`, the same code as
``pyql eval``) on a seeded sample of ``--n`` dev questions (``--sample N --seed S``: a uniform
sample of the whole split, kept in file order, so every question type can be drawn; ``--first``
takes the first N instead) of MetaQA 1/2/3-hop and WikiSQL, for each strategy (QueryAgent text
mode, Readi, SRP on the KB datasets) and each **setting** (``--settings``):

``off``       free text, the paper's format (``--constrain off``)
``format``    replies follow the reply kind's JSON schema (``--constrain format``; ``on``)
``grounded``  the schemas narrowed to what the environment offered (``--constrain grounded``)
``choose``    ``--choose on --constrain grounded``: where a step's options are enumerable the
              model scores the candidates (``llm.score``) and the best is taken; the other steps
              are generated under the grounded schemas
``prior``     choose mode with the baseline's rule as a prior: each candidate scores the
              model's log-likelihood + ``--prior-weight`` x its word overlap (QueryAgent's
              ``prior_weight``; the rule of :func:`pyql.agent.grounding.candidates.combine`):
              a shared word decides, the model breaks the rule's ties
``ranker``    the **no-model baseline**: ``--llm ranker --choose on`` — the same candidates,
              built by the same code, scored by word-prefix overlap with the question
              (:mod:`pyql.agent.llm.ranker`); it writes nothing, so a step that is not enumerable
              ends the question (the ranker's ``GenerationUnsupportedError``, recorded as an
              error outcome)

The model is ``--llm local`` by default — SmolLM2-135M-Instruct in llama.cpp's server, in this
process — or any OpenAI-compatible server (``--llm openai:MODEL --base-url URL``): the command is
the same for a bigger model.

Printed per run: Hit@1 in both meanings (any predicted answer / the top-1 answer is gold) or
accuracy, LLM calls and scoring calls per question (a scoring call counts as an LLM call too),
prompt / completion / cached tokens per question, seconds per question, the hints that an
argument named something the environment does not have (``off-vocab``: RM201 get_relation of an
unknown node, PY202 a fact's invalid relation, KB201 a fact on a relation its node never listed,
DB101 an unknown table/column name), unreadable replies (parse failures), and the outcome
distribution (stop reasons), with the top hints by code. ``--json PATH`` keeps every run's
metrics (and the sample's seed). Usage (from the repository root)::

    python benchmarks/local_llm.py [--n 5] [--seed 37] [--first]
        [--datasets metaqa-1hop,metaqa-2hop,metaqa-3hop,wikisql]
        [--strategies queryagent,readi,srp] [--settings off,format,grounded,choose,prior,ranker]
        [--prior-weight 30] [--max-steps 6] [--llm local | --llm openai:MODEL --base-url URL]
        [--threads N] [--llm-cache FILE] [--json out.json] [--keep DIR]

``--constrain`` is kept as an alias of ``--settings``.

**Throughput** (``--throughput``, issue 37 item 6): the same questions answered at
``--concurrency 1`` and at ``--concurrency K`` (``--throughput-k``, default 4) with the local
model, in one run: at K the evaluation's K worker threads send their calls to one llama.cpp
server with K parallel slots, which decodes them together (continuous batching). Printed: the
questions per minute at 1 and at K (wall clock of each run), their ratio, the cached share of
the prompt tokens of each, and whether every question's predicted answers and stop reason are
the same (greedy decoding)::

    python benchmarks/local_llm.py --throughput [--n 4] [--throughput-k 4] [--threads N]
        [--datasets metaqa-1hop] [--strategies queryagent] [--settings grounded] [--max-steps 6]

``--threads N`` sets the local server's CPU threads for every run (``PYQL_LOCAL_THREADS``);
``--llm-cache FILE`` keeps replies and scoring calls, so another ``--prior-weight`` on the same
questions only scores the steps that differ (its seconds per question then count the hits).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KB_DATASETS = ("metaqa-1hop", "metaqa-2hop", "metaqa-3hop")
#: each setting: (``--constrain``, ``--choose``, the LLM: None = ``--llm``)
SETTINGS: dict[str, tuple[str, bool, str | None]] = {
    "off": ("off", False, None),
    "format": ("format", False, None),
    "on": ("format", False, None),
    "grounded": ("grounded", False, None),
    "choose": ("grounded", True, None),
    "prior": ("grounded", True, None),
    "ranker": ("off", True, "ranker"),
}
#: hints that an argument named something the environment does not have (see the docstring)
OFF_VOCAB = ("RM201", "PY202", "KB201", "DB101")


def _run(dataset: str, strategy: str, setting: str, args: argparse.Namespace,
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
    if setting == "prior" and strategy in ("queryagent", "readi"):
        options["prior_weight"] = args.prior_weight
    constrain, choose, llm = SETTINGS[setting]
    config = RunConfig(dataset=dataset, data_dir=str(data), llm=llm or args.llm,
                       base_url=None if llm else args.base_url, strategy=strategy,
                       options=options, limit=args.n if args.first else None,
                       sample=None if args.first else args.n, seed=args.seed,
                       max_steps=args.max_steps, constrain=constrain,  # type: ignore[arg-type]
                       choose=choose, question_deadline=args.deadline, max_outages=0,
                       concurrency=concurrency,
                       llm_cache=str(args.llm_cache) if args.llm_cache and not llm else None)
    out = work / (name or f"{dataset}-{strategy}-{setting}")
    started = time.perf_counter()
    metrics = evaluate(config, out, progress=False)
    metrics["wall_seconds"] = time.perf_counter() - started
    hints: dict[str, int] = {}
    for result in RunDir(out).results():
        for code, n in result.guidelines.items():
            hints[code] = hints.get(code, 0) + n
    metrics["hints_by_code"] = dict(sorted(hints.items(), key=lambda kv: -kv[1]))
    metrics["off_vocab_hints"] = {code: hints[code] for code in OFF_VOCAB if hints.get(code)}
    metrics["question_ids"] = [r.id for r in RunDir(out).results()]
    metrics["seed"] = None if args.first else args.seed
    return metrics


def _row(dataset: str, strategy: str, setting: str, m: dict[str, Any]) -> str:
    def f(key: str, digits: int = 2) -> str:
        value = m.get(key)
        return "—" if value is None else f"{value:.{digits}f}"

    score = (f"acc {f('accuracy')}" if m.get("accuracy") is not None
             else f"{f('hit@1')} / {f('hit@1_top1')}")
    stops = m.get("stop_reasons") or {}
    outcome = ", ".join(f"{k or '?'} {v}" for k, v in stops.items())
    hints = ", ".join(f"{k} {v}" for k, v in list(m.get("hints_by_code", {}).items())[:4])
    off_vocab = m.get("off_vocab_hints") or {}
    off = ", ".join(f"{k} {v}" for k, v in off_vocab.items()) or "0"
    return (f"| {dataset} | {strategy} | {setting} | {score} | {f('llm_calls', 1)} | "
            f"{f('scoring_calls', 1)} | "
            f"{f('prompt_tokens', 0)} / {f('completion_tokens', 0)} / {f('cached_tokens', 0)} | "
            f"{f('tpq', 1)} | {off} | {m.get('parse_failures_total', 0)} | {f('finished')} | "
            f"{outcome} | {hints or '—'} |")


def _answers(run: Path) -> dict[str, tuple[Any, str]]:
    """Each question's predicted answers and stop reason in a run directory."""
    from pyql.agent.evaluation.rundir import RunDir

    return {r.id: (sorted(map(str, r.predicted)), r.stop_reason) for r in RunDir(run).results()}


def throughput(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """The same questions at concurrency 1 and ``args.throughput_k`` (see the module
    docstring); prints one table row per run and the ratio, returns the figures."""
    dataset = args.datasets.split(",")[0]
    strategy = args.strategies.split(",")[0]
    setting = args.settings.split(",")[0]
    rows: dict[int, dict[str, Any]] = {}
    print("| concurrency | questions | wall s | questions / min | cached share | LLM calls/q |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="pyql-local-llm-") as tmp:
        answers = {}
        for k in (1, args.throughput_k):
            m = _run(dataset, strategy, setting, args, data, Path(tmp), concurrency=k,
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
    return {"dataset": dataset, "strategy": strategy, "setting": setting, "runs": rows,
            "ratio": ratio, "same_answers": same, "differ": differ,
            "seed": None if args.first else args.seed, "n": args.n,
            "max_steps": args.max_steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5,
                        help="questions per dataset (a seeded sample; --first: the first N)")
    parser.add_argument("--seed", type=int, default=37, help="the sample's seed")
    parser.add_argument("--first", action="store_true", help="the first N, not a sample")
    parser.add_argument("--datasets", default=",".join((*KB_DATASETS, "wikisql")))
    parser.add_argument("--strategies", default="queryagent,readi,srp")
    parser.add_argument("--settings", "--constrain", dest="settings",
                        default="off,format,grounded,choose,ranker",
                        help="comma-separated: " + ", ".join(SETTINGS))
    parser.add_argument("--llm", default="local", help="local[:PATH.gguf] or openai:MODEL")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--max-steps", type=int, default=6, help="QueryAgent's step cap")
    parser.add_argument("--max-edits", type=int, default=2, help="Readi's edits, SRP's rounds")
    parser.add_argument("--deadline", type=float, default=600.0,
                        help="seconds of LLM time per question")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every run's metrics")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep every run's directory (results, trajectories) under this "
                             "folder instead of a temporary one")
    parser.add_argument("--throughput", action="store_true",
                        help="questions per minute at concurrency 1 vs --throughput-k (the "
                             "first dataset, strategy and constrain setting given)")
    parser.add_argument("--throughput-k", type=int, default=4)
    parser.add_argument("--prior-weight", type=float, default=30.0,
                        help="the `prior` setting's weight of the word-overlap prior "
                             "(QueryAgent's and Readi's prior_weight; default 30, chosen on a "
                             "dev sample disjoint from the measured one: benchmarks/README.md)")
    parser.add_argument("--llm-cache", type=Path, default=None,
                        help="an LLM cache file (replies and scoring calls) shared by the runs: "
                             "a re-run or another prior weight skips the steps already scored")
    parser.add_argument("--threads", type=int, default=None,
                        help="the local server's CPU threads (PYQL_LOCAL_THREADS; default half "
                             "the cores), the same for every run")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1")
        os.environ["PYQL_LOCAL_THREADS"] = str(args.threads)
    unknown = [s for s in args.settings.split(",") if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(SETTINGS)}")
    logging.basicConfig(level=logging.WARNING)
    from pyql.datasets.paths import default_data_dir

    data = args.data_dir or default_data_dir()
    if args.throughput:
        figures = throughput(args, data)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1, default=str))
        return 0
    runs: list[dict[str, Any]] = []
    print(f"sample: {'the first' if args.first else 'seeded'} {args.n} dev questions per dataset"
          + ("" if args.first else f", seed {args.seed}") + f"; QueryAgent's step cap "
          f"{args.max_steps}; Readi's edits / SRP's rounds {args.max_edits}; LLM {args.llm}\n")
    print("| dataset | strategy | setting | Hit@1 any / top-1 (or accuracy) | LLM calls/q | "
          "scoring calls/q | prompt / completion / cached tokens per q | s/q | off-vocab hints | "
          "unreadable replies | finished | outcomes | hints (top 4) |")
    print("|---|---|---|---|---:|---:|---|---:|---|---:|---:|---|---|")
    with tempfile.TemporaryDirectory(prefix="pyql-local-llm-") as tmp:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            tmp = str(args.keep)
        for dataset in args.datasets.split(","):
            for strategy in args.strategies.split(","):
                if strategy == "srp" and dataset not in KB_DATASETS:
                    continue  # SRP plans over a KB only
                for setting in args.settings.split(","):
                    metrics = _run(dataset, strategy, setting, args, data, Path(tmp))
                    print(_row(dataset, strategy, setting, metrics), flush=True)
                    constrain, choose, llm = SETTINGS[setting]
                    runs.append({"dataset": dataset, "strategy": strategy, "setting": setting,
                                 "constrain": constrain, "choose": choose,
                                 "llm": llm or args.llm, "max_steps": args.max_steps,
                                 "prior_weight": (args.prior_weight if setting == "prior"
                                                  else None),
                                 "metrics": metrics})
                    if args.json:  # after every run: a cut-short plan keeps what it measured
                        args.json.write_text(json.dumps(runs, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
