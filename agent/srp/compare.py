"""Strategies side by side on the same questions, held out from a reference base's source.

::

    python -m pyql.agent.srp.compare --dataset metaqa-3hop --references refs/mqa-dev \\
        --limit 200 --llm noisy-gold:0.3 --strategy srp --strategy readi --strategy queryagent

The questions are the first ``--limit`` of the split outside the base's reference part, so
every strategy answers the same questions and SRP never sees its own references. ``--llm gold``
/ ``noisy-gold:R`` use each strategy's own stand-in; SRP adds its measures (judge accuracy,
reference hit rate: :meth:`~pyql.agent.srp.strategy.SRP.measures`); ``--no-reflection`` runs
SRP without judge and edit. ``--json`` prints everything as JSON.

Each strategy is one ordinary evaluation run (:func:`pyql.agent.evaluation.runner.evaluate`)
leaving out the base's source questions (``exclude_ids``: its ``source_ids.txt``), so the
numbers are the runner's one aggregate; ``--out DIR`` keeps the run directories (one per
strategy, resumable, ``pyql report``-able), else they go to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["compare", "main"]


#: the aggregate's numbers a comparison shows, per strategy
SHOWN = ("hit@1", "f1", "llm_calls", "prompt_tokens", "completion_tokens", "qpq", "tpq")


def compare(dataset: str, references: str, *, strategies: Sequence[str] = ("srp",),
            llm: str = "gold", split: str = "dev", limit: int = 100, seed: int = 0,
            reflection: bool = True, data_dir: str | None = None,
            options: dict[str, Any] | None = None, out: str | None = None) -> dict[str, Any]:
    """Run ``strategies`` on the held-out questions (module docstring); the summary per
    strategy (the runner's aggregate: :data:`SHOWN`, and the strategy's own section)."""
    from pyql.agent.evaluation.records import RunConfig
    from pyql.agent.evaluation.runner import evaluate
    from pyql.agent.srp.strategy import open_references

    directory = Path(references).expanduser().resolve()
    base = open_references(directory)
    if base is None:
        raise ValueError("compare needs a reference base directory")
    summary: dict[str, Any] = {
        "dataset": dataset, "split": split, "llm": llm, "strategies": {},
        "held_out_of": f"{base.manifest.source} (evaluation part: the other ids)"}
    with tempfile.TemporaryDirectory(prefix="pyql-compare-") as scratch:
        root = Path(out) if out is not None else Path(scratch)
        for name in strategies:
            own = ({"references": str(directory), "reflection": reflection, **(options or {})}
                   if name == "srp" else {})
            config = RunConfig(dataset=dataset, split=split, data_dir=data_dir, llm=llm,
                               limit=limit, seed=seed, strategy=name, options=own,
                               exclude_ids=str(directory / "source_ids.txt"))
            metrics = evaluate(config, root / name, progress=False)
            summary["questions"] = metrics["n"]
            summary["strategies"][name] = {**{k: metrics.get(k) for k in SHOWN},
                                           "own": metrics.get("strategy") or {},
                                           "stand_in": metrics.get("stand_in")}
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyql.agent.srp.compare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--references", required=True, help="a reference base directory")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--llm", default="gold", help="gold, noisy-gold:R or openai:MODEL")
    parser.add_argument("--strategy", action="append", dest="strategies",
                        help="repeat: srp, readi, queryagent (default: srp)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-reflection", action="store_true", help="SRP without judge/edit")
    parser.add_argument("--data-dir")
    parser.add_argument("--out", help="keep the run directories here (one per strategy)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    summary = compare(args.dataset, args.references, strategies=args.strategies or ["srp"],
                      llm=args.llm, split=args.split, limit=args.limit, seed=args.seed,
                      reflection=not args.no_reflection, data_dir=args.data_dir, out=args.out)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{summary['dataset']} {summary['split']}: {summary['questions']} questions held out "
          f"of {summary['held_out_of']}; --llm {summary['llm']}")
    for name, s in summary["strategies"].items():
        line = (f"  {name:<11} hit@1 {s['hit@1']:.3f}  f1 {s['f1']:.3f}  calls/q "
                f"{s['llm_calls']:.2f}  prompt tok/q {s['prompt_tokens']:.0f}  completion "
                f"tok/q {s['completion_tokens']:.0f}  kb q/q {s['qpq']:.1f}")
        print(line)
        if s["own"]:
            print("              " + json.dumps(s["own"]))
        if s.get("stand_in"):
            print("              stand-in assumes " + json.dumps(s["stand_in"]["parameters"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
