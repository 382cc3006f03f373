"""The evaluation harness's CPU against the environment's: ``pyql eval --llm gold`` vs bare
Sessions replaying the same gold programs (``pyql fidelity gold``), side by side in one process.

Both sides answer the same ``--n`` MetaQA ``--hops``-hop questions of ``--split`` on the same KB
(the on-disk Oxigraph store ``pyql eval`` keeps in its cache directory; each side opens its own
handle on it, every round, as each command does):

- **bare**: :func:`pyql.datasets.gold.metaqa_fidelity` on that store: per question a fresh
  :class:`~pyql.Session`, the gold program's calls through ``Session.run``, the answers scored;
- **harness**: :func:`pyql.agent.evaluation.runner.evaluate` with ``--llm gold`` (the QueryAgent
  answering through the gold stand-in, ERASER on, text mode) into a temporary run directory:
  the dataset's items, the strategy, trajectories, ``results.jsonl``, ``metrics.json``. With
  ``pyql eval``'s own choice of worker processes (``--processes``, default: as ``pyql eval``
  picks: the cores, up to 4, for 2,000 questions or more; ``--processes 1`` answers in this
  process, one worker thread).

CPU is ``time.process_time`` (user + system of this process, every thread) around each side,
plus the CPU of the worker processes (``RUSAGE_CHILDREN``: their start-up included), opening
the store and reading the questions included on both. The sides alternate
``--rounds`` times (bare, harness, bare, ...) so a drift of the shared machine hits both; the
ratio printed is the median of the per-round ratios harness/bare.

Usage (from the repository root)::

    python benchmarks/harness_overhead.py [--n 4000] [--hops 3] [--split dev] [--rounds 3]
        [--profile harness|bare | --breakdown | --instructions] [--json out.json]
        [--data-dir DIR]
        [--option KEY=VALUE] [--token-estimates]

``--profile`` runs that side once under cProfile and prints its top functions (cumulative and
own time) instead of the comparison; ``--breakdown`` prints both sides' thread CPU per
question in their main functions (:data:`BREAKDOWN`). ``--instructions`` counts instead of
timing: each side runs in its own process under valgrind's cachegrind, once with ``--n``
questions and once with none (after the same warm-up), and the difference over ``--n`` is the
side's instructions per question; a count does not move with the machine's load as CPU time
does (this machine's rounds of CPU time differ by up to 15 %): the counting processes run with
a fixed hash seed, and the runner's wall-clock intervals stretched by valgrind's slowdown (about
11 times), so the count is the same from run to run. Take ``--n`` of a few hundred. ``--option`` passes a strategy option to
the harness side as ``pyql eval --option`` does; ``--token-estimates`` has it estimate the
stand-in's tokens with tiktoken, as ``pyql eval --token-estimates`` (off by default, as in
``pyql eval``). Target: harness / bare <= 1.25.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import typer

from pyql.agent.commands.ask import strategy_options
from pyql.agent.evaluation import runner
from pyql.agent.evaluation.datasets import get_dataset
from pyql.agent.evaluation.records import RunConfig
from pyql.datasets.gold import metaqa_fidelity
from pyql.datasets.paths import default_data_dir


def bare(data_dir: Path, hops: int, split: str, n: int) -> dict[str, Any]:
    """Gold programs through bare Sessions: CPU seconds and the scores. The store is opened
    here, as the harness opens its own: a handle's caches warm up over its first thousands
    of queries, and a side that reused a warm handle would have its engine work cheaper."""
    cpu = time.process_time()
    backend = get_dataset(f"metaqa-{hops}hop", data_dir).backend(split=split)
    try:
        report = metaqa_fidelity(data_dir, hops=(hops,), split=split, limit=n, kb=backend.kb)
    finally:
        backend.close()
    cpu = time.process_time() - cpu
    h = report["hops"][hops]
    return {"cpu": cpu, "n": h["n"], "hit@1": h["hit1"], "f1": h["f1"]}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def harness(data_dir: Path, hops: int, split: str, n: int, processes: int | None = None,
            options: dict[str, Any] | None = None, token_estimates: bool = False
            ) -> dict[str, Any]:
    """``pyql eval --llm gold`` (``options``: its ``--option`` strategy options;
    ``token_estimates``: ``--token-estimates``): CPU seconds (this process's and its worker
    processes') and the scores."""
    config = RunConfig(dataset=f"metaqa-{hops}hop", split=split, data_dir=str(data_dir),
                       llm="gold", limit=n, processes=processes, options=options or {},
                       token_estimates=token_estimates)
    with tempfile.TemporaryDirectory(prefix="pyql-harness-") as out:
        cpu, children = time.process_time(), _children_cpu()
        metrics = runner.evaluate(config, Path(out) / "run", progress=False)
        cpu = time.process_time() - cpu + _children_cpu() - children
    return {"cpu": cpu, "n": metrics["n"], "hit@1": metrics["hit@1"], "f1": metrics["f1"]}


def profile(side: str, data_dir: Path, hops: int, split: str, n: int,
            settings: dict[str, Any]) -> None:
    """Profile one side: the calling thread, and the harness's worker thread (where the
    questions are answered: cProfile sees only the thread that enables it)."""
    profiler = cProfile.Profile()
    if side == "bare":
        profiler.runcall(bare, data_dir, hops, split, n)
    else:
        run_item = runner._Session.run_item
        runner._Session.run_item = lambda self, item: profiler.runcall(run_item, self, item)
        try:
            harness(data_dir, hops, split, n, processes=1, **settings)
        finally:
            runner._Session.run_item = run_item
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)


#: what ``--breakdown`` times: (module, attribute path); thread CPU, inclusive
BREAKDOWN = (
    ("pyql.agent.evaluation.runner", "evaluate"),
    ("pyql.agent.evaluation.runner", "_Session.run_item"),
    ("pyql.agent.strategies.queryagent.strategy", "QueryAgent.run"),
    ("pyql.environment", "Environment.run"),
    ("pyql.environment", "Environment.parse"),
    ("pyql.environment", "HintPolicy.judge"),
    ("pyql.kb.oxigraph", "OxigraphKB._select"),
    ("pyql.agent.recorder", "Recorder.llm"),
    ("pyql.agent.strategies.queryagent.strategy", "_PromptTokens.__call__"),
    ("pyql.agent.strategies.queryagent.strategy", "QueryAgent._decide"),
    ("pyql.agent.recorder", "Recorder.add"),
    ("pyql.agent.evaluation.runner", "_Session.record"),
)


def breakdown(data_dir: Path, hops: int, split: str, n: int, settings: dict[str, Any]
              ) -> None:
    """Thread CPU per question in the functions of :data:`BREAKDOWN` (wrapped; each figure
    includes what it calls), for one round of each side. ``evaluate`` is the main thread's
    share, ``run_item`` the worker thread's; cProfile's own cost distorts such small
    functions, a clock read around each call much less."""
    import functools
    import importlib

    spent: dict[str, float] = dict.fromkeys((path for _, path in BREAKDOWN), 0.0)
    undo: list[tuple[Any, str, Any]] = []
    for module, path in BREAKDOWN:
        owner: Any = importlib.import_module(module)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)

        def timed(*args: Any, _f: Any = original, _key: str = path, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return _f(*args, **kwargs)
            finally:
                spent[_key] += time.thread_time() - start

        setattr(owner, name, functools.wraps(original)(timed))
        undo.append((owner, name, original))
    try:
        sides = {}
        for side, run in (("bare", lambda: bare(data_dir, hops, split, n)),
                          ("harness", lambda: harness(data_dir, hops, split, n, processes=1,
                                                      **settings))):
            for key in spent:
                spent[key] = 0.0
            total = run()["cpu"]
            sides[side] = (total, dict(spent))
    finally:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)
    print(f"{'ms CPU / question':32} {'bare':>8} {'harness':>8}")
    print(f"{'total (process)':32} {1000 * sides['bare'][0] / n:8.3f} "
          f"{1000 * sides['harness'][0] / n:8.3f}")
    for key in spent:
        print(f"{key:32} {1000 * sides['bare'][1][key] / n:8.3f} "
              f"{1000 * sides['harness'][1][key] / n:8.3f}")


#: questions each side answers before the counted one, in ``--instructions``
_WARM = 20
#: how much slower the harness runs under cachegrind (300 questions: 1.6 s natively, 18.5 s)
_SLOWDOWN = 11.0


def _one_side(side: str, data_dir: Path, hops: int, split: str, n: int,
              settings: dict[str, Any]) -> None:
    """What ``--instructions`` counts in a process of its own: a warm-up, then one run of
    ``n`` questions of one side (the baseline count runs none: opening the store and reading
    the questions, the run's fixed work, is in both counts). The runner's wall-clock intervals
    (the running ``metrics.json``, the worker's batches) are stretched by :data:`_SLOWDOWN`, so
    that under cachegrind they come as often per question as in a native run."""
    runner.METRICS_INTERVAL *= _SLOWDOWN
    runner.BATCH_SECONDS *= _SLOWDOWN
    run = ((lambda k: bare(data_dir, hops, split, k)) if side == "bare" else
           (lambda k: harness(data_dir, hops, split, k, processes=1, **settings)))
    run(_WARM)
    run(n)


def _instructions_of(argv: list[str]) -> int:
    """The instructions valgrind's cachegrind counts for ``python harness_overhead.py argv``,
    with a fixed hash seed (one cause less of a count that moves between runs)."""
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, __file__, *argv], capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def instructions(args: argparse.Namespace, passed: list[str]) -> dict[str, Any]:
    """Each side's instructions per question and their ratio (see the module docstring)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt install valgrind)")
    per: dict[str, float] = {}
    for side in ("bare", "harness"):
        counts = [_instructions_of([*passed, "--one", side, "--n", str(k)])
                  for k in (0, args.n)]
        per[side] = (counts[1] - counts[0]) / args.n
        print(f"{side}: {per[side] / 1e6:.2f} M instructions per question", flush=True)
    ratio = per["harness"] / per["bare"]
    print(f"harness / bare = {ratio:.3f} in instructions (n {args.n}; target for CPU <= 1.25)")
    return {"instructions_per_question": per, "ratio": ratio}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000, help="questions per side")
    parser.add_argument("--hops", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--split", default="dev")
    parser.add_argument("--rounds", type=int, default=3, help="bare/harness pairs")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--processes", type=int, default=None,
                        help="the harness's worker processes (default: pyql eval's choice)")
    parser.add_argument("--profile", choices=("harness", "bare"), default=None)
    parser.add_argument("--breakdown", action="store_true",
                        help="thread CPU per question in the main functions of both sides")
    parser.add_argument("--instructions", action="store_true",
                        help="count each side's instructions per question under valgrind "
                             "instead of timing (take --n of a few hundred)")
    parser.add_argument("--one", choices=("harness", "bare"), default=None,
                        help=argparse.SUPPRESS)  # one side, as --instructions runs it
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a strategy option of the harness side, as pyql eval --option")
    parser.add_argument("--token-estimates", action="store_true",
                        help="the harness side estimates the stand-in's tokens, as pyql eval "
                             "--token-estimates")
    args = parser.parse_args(argv)
    if args.n < (0 if args.one else 1):  # the figures are per question
        parser.error("--n must be at least 1")
    try:
        options = strategy_options(args.option)
    except typer.BadParameter as exc:
        parser.error(exc.format_message())
    settings = {"options": options,
                "token_estimates": args.token_estimates}
    logging.basicConfig(level=logging.WARNING)
    data_dir = (args.data_dir or default_data_dir()).resolve()
    if args.one:
        _one_side(args.one, data_dir, args.hops, args.split, args.n, settings)
        return 0
    if args.instructions:
        passed = ["--hops", str(args.hops), "--split", args.split, "--data-dir", str(data_dir),
                  *(f"--option={o}" for o in args.option),
                  *(["--token-estimates"] if args.token_estimates else [])]
        figures = instructions(args, passed)
        if args.json:
            args.json.write_text(json.dumps({"n": args.n, "hops": args.hops, **settings,
                                             **figures}, indent=2) + "\n")
        return 0

    started = time.process_time()
    get_dataset(f"metaqa-{args.hops}hop", data_dir).backend(split=args.split).close()
    print(f"KB store ready in {time.process_time() - started:.2f} s CPU", flush=True)
    # one unmeasured pass of each side: the store's caches, imports, the tokenizer
    warm = min(args.n, 50)
    bare(data_dir, args.hops, args.split, warm)
    harness(data_dir, args.hops, args.split, warm, processes=1, **settings)
    if args.profile:
        profile(args.profile, data_dir, args.hops, args.split, args.n, settings)
        return 0
    if args.breakdown:
        breakdown(data_dir, args.hops, args.split, args.n, settings)
        return 0

    rounds: list[dict[str, Any]] = []
    for number in range(1, args.rounds + 1):
        b = bare(data_dir, args.hops, args.split, args.n)
        h = harness(data_dir, args.hops, args.split, args.n, processes=args.processes,
                    **settings)
        if (b["hit@1"], b["f1"]) != (h["hit@1"], h["f1"]) or b["n"] != h["n"]:
            print(f"the sides disagree: bare {b}, harness {h}", file=sys.stderr)
            return 1
        ratio = h["cpu"] / b["cpu"]
        rounds.append({"bare": b, "harness": h, "ratio": ratio})
        print(f"round {number}: bare {1000 * b['cpu'] / b['n']:.2f} ms CPU/question, "
              f"harness {1000 * h['cpu'] / h['n']:.2f} ms CPU/question, ratio {ratio:.3f} "
              f"(n {h['n']}, Hit@1 {h['hit@1']:.3f}, F1 {h['f1']:.3f})", flush=True)
    ratio = statistics.median(r["ratio"] for r in rounds)
    bare_ms = statistics.median(1000 * r["bare"]["cpu"] / r["bare"]["n"] for r in rounds)
    harness_ms = statistics.median(1000 * r["harness"]["cpu"] / r["harness"]["n"]
                                   for r in rounds)
    print(f"median: bare {bare_ms:.2f} ms, harness {harness_ms:.2f} ms CPU per question; "
          f"harness / bare = {ratio:.3f} (target <= 1.25)")
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "hops": args.hops, "split": args.split,
                                         **settings, "rounds": rounds, "ratio": ratio},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
