"""Strategies side by side on the same questions, held out from a reference base's source; and
the reference part of a split a base is built from (:func:`reference_part`).

>>> compare("metaqa-3hop", "refs/mqa-dev", limit=200, llm="noisy-gold:0.3",
...         strategies=["srp", "readi", "queryagent"])  # doctest: +SKIP

The same runs one at a time: ``pyql eval --dataset metaqa-3hop --strategy srp --references
refs/mqa-dev --limit 200`` (``--references`` leaves the base's source questions out).

The questions are the first ``limit`` of the split outside the base's reference part, so
every strategy answers the same questions and SRP never sees its own references. ``llm="gold"``
/ ``noisy-gold:R`` use each strategy's own stand-in; SRP adds its measures (judge accuracy,
reference hit rate: :meth:`~pyql.agent.strategies.srp.strategy.SRP.measures`); ``reflection=False`` runs
SRP without judge and edit.

Each strategy is one ordinary evaluation run (:func:`pyql.agent.evaluation.runner.evaluate`)
leaving out the base's source questions (``exclude_ids``: its ``source_ids.txt``), so the
numbers are the runner's one aggregate; ``out`` keeps the run directories (one per
strategy, resumable, ``pyql report``-able), else they go to a temporary folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyql.agent.evaluation.datasets import get_dataset
from pyql.agent.strategies.srp.labelled import LabelledQuestion, id_part, labelled_items

__all__ = ["compare", "reference_part", "reference_split"]


def reference_split(datasets: Sequence[str],
                    data_dir: str | os.PathLike[str] | None = None) -> str:
    """The split a reference base is built from by default: ``train`` when every dataset has
    one (the SRP paper, 4.2: "We extract references from training set"), else the first
    dataset's default split (evaluate on the rest of it: ``--fraction``, the held-out
    questions)."""
    found = [get_dataset(name, data_dir) for name in datasets]
    if found and all("train" in d.splits() for d in found):
        return "train"
    return found[0].default_split if found else "dev"


def reference_part(datasets: Sequence[str], split: str, *, fraction: float = 1.0,
                   salt: str = "srp", data_dir: str | os.PathLike[str] | None = None
                   ) -> tuple[list[LabelledQuestion], list[str]]:
    """The labelled questions of the reference part of ``split`` of each dataset (the
    evaluation datasets of :mod:`pyql.agent.evaluation.datasets`), and the ids of every question
    of that part (with or without a relation path: none of them may be evaluated against a
    base built from it)."""
    questions: list[LabelledQuestion] = []
    ids: list[str] = []
    for name in datasets:
        items = [i for i in get_dataset(name, data_dir).items(split)
                 if fraction >= 1.0 or id_part(i.id, fraction, salt=salt)]
        ids += [i.id for i in items]
        questions += labelled_items(items, dataset=name)
    return questions, ids


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
    from pyql.agent.strategies.srp.strategy import open_references

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
