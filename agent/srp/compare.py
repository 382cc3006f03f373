"""Strategies side by side on the same questions, held out from a reference base's source.

::

    python -m pyql.agent.srp.compare --dataset metaqa-3hop --references refs/mqa-dev \\
        --limit 200 --llm noisy-gold:0.3 --strategy srp --strategy readi --strategy queryagent

The questions are the first ``--limit`` of the split's *evaluation part* (the ids outside the
base's reference part, :func:`pyql.agent.srp.labelled.evaluation_part` with the manifest's
fraction and salt), so every strategy answers the same questions and SRP never sees its own
references. Each strategy runs through the Strategy contract (``from_config``; ``--llm gold`` /
``noisy-gold:R``: the strategy's own ``stand_in``; ``openai:MODEL``: one client for all), and is
scored with the evaluation's metrics (Hit@1, F1); usage is per question (LLM calls, prompt and
completion tokens, KB queries). SRP adds its measures (:mod:`pyql.agent.srp.metrics`);
``--no-reflection`` runs SRP without judge and edit. ``--json`` prints everything as JSON.

This is a comparison tool, not the evaluation runner (``pyql eval``), which has no selection by
reference part.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["compare", "main"]


def _llm_for(spec: str, kind: Any, item: Any, seed: int, shared: dict[str, Any]) -> Any:
    if spec.startswith("openai:"):
        if "client" not in shared:
            from pyql.agent.llm import OpenAIChat

            shared["client"] = OpenAIChat(spec.partition(":")[2])
        return shared["client"]
    from pyql.agent.evaluation.specs import item_seed

    # the question's own seed, derived from the run's as the evaluation runner does
    return kind.stand_in(spec, item, seed=item_seed(seed, item.id))


def compare(dataset: str, references: str, *, strategies: Sequence[str] = ("srp",),
            llm: str = "gold", split: str = "dev", limit: int = 100, seed: int = 0,
            reflection: bool = True, data_dir: str | None = None,
            options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``strategies`` on the held-out questions (module docstring); the summary per
    strategy."""
    from pyql.agent.accounting import TokenCounter
    from pyql.agent.evaluation.datasets import get_dataset
    from pyql.agent.evaluation.metrics import score_item
    from pyql.agent.srp.labelled import evaluation_part
    from pyql.agent.srp.metrics import srp_measures, summarise
    from pyql.agent.srp.strategy import open_references
    from pyql.agent.strategy import StrategyConfig, get_strategy

    base = open_references(references)
    assert base is not None
    m = base.manifest
    ds = get_dataset(dataset, data_dir)
    items = evaluation_part(ds.items(split), m.fraction, salt=m.salt)[:limit]
    base.check_disjoint(i.id for i in items)
    backend = ds.backend(split=split)
    counter = TokenCounter()
    shared: dict[str, Any] = {}
    out: dict[str, Any] = {"dataset": dataset, "split": split, "questions": len(items),
                           "held_out_of": f"{m.source} (evaluation part: the other ids)",
                           "llm": llm, "strategies": {}}
    try:
        for name in strategies:
            kind = get_strategy(name)
            own = {"references": base, "reflection": reflection, **(options or {})} \
                if name == "srp" else {}
            rows, measures = [], []
            started = time.perf_counter()
            for item in items:
                strategy = kind.from_config(
                    _llm_for(llm, kind, item, seed, shared), backend.for_item(item),
                    StrategyConfig(profile=ds.profile, seed=seed, token_counter=counter,
                                   options=own))
                result = strategy.run(item.question, item.entities, meta={"id": item.id})
                usage = result.usage
                rows.append({**score_item(ds.metric, item, result.answers),
                             "llm_calls": usage.llm_calls, "prompt_tokens": usage.prompt_tokens,
                             "completion_tokens": usage.completion_tokens,
                             "kb_queries": usage.kb_queries})
                if name == "srp":
                    measures.append(srp_measures(result.steps, item))
            n = len(rows) or 1
            summary = {k: sum(r[k] for r in rows) / n
                       for k in ("hit@1", "f1", "llm_calls", "prompt_tokens", "completion_tokens",
                                 "kb_queries")}
            summary["seconds"] = time.perf_counter() - started
            if name == "srp":
                summary["srp"] = summarise(measures)
            out["strategies"][name] = summary
    finally:
        backend.close()
    return out


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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    summary = compare(args.dataset, args.references, strategies=args.strategies or ["srp"],
                      llm=args.llm, split=args.split, limit=args.limit, seed=args.seed,
                      reflection=not args.no_reflection, data_dir=args.data_dir)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{summary['dataset']} {summary['split']}: {summary['questions']} questions held out "
          f"of {summary['held_out_of']}; --llm {summary['llm']}")
    for name, s in summary["strategies"].items():
        line = (f"  {name:<11} hit@1 {s['hit@1']:.3f}  f1 {s['f1']:.3f}  calls/q "
                f"{s['llm_calls']:.2f}  prompt tok/q {s['prompt_tokens']:.0f}  completion "
                f"tok/q {s['completion_tokens']:.0f}  kb q/q {s['kb_queries']:.1f}")
        print(line)
        if "srp" in s:
            print("              " + json.dumps(s["srp"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
