"""ERASER on vs off: a mode of the evaluation runner, and its combined table.

``evaluate(RunConfig(..., ablation=True), RUN_DIR)`` (``pyql eval ... --ablation``) runs the
configured questions twice, each a complete run directory of its own, resumable like any run:

- ``RUN_DIR/eraser_on``: guidelines on;
- ``RUN_DIR/eraser_off``: guidelines off (raw errors are observations: the paper's "w/o ERASER").

``RUN_DIR/config.json`` holds the configuration (``ablation: true``), ``RUN_DIR/metrics.json``
the :func:`summarise` of the two (each side's aggregate is its own ``metrics.json``, the one
aggregate of :mod:`pyql.agent.evaluation.metrics`), ``RUN_DIR/ablation.md`` its table.
``resume(RUN_DIR)`` finishes both. Any split, any dataset, any strategy and any ``--llm``.

With ``--llm noisy-gold:RATE`` (:mod:`pyql.agent.evaluation.noisy`: the gold program with the
paper's hallucinations injected, the same mistakes at the same gold calls in both runs, since the
stand-in's draws are keyed on the question's seed and the gold call) the summary adds, per
injected type, the **detection rate** (share of injections followed by a hint), the **correction
rate** (the hint named the problem, so the stand-in wrote the gold call next) and the hint codes
seen. The stand-in fixes a mistake *only* when a hint names it, so this measures the environment
and the guidelines, not an LLM.

The paper's Table 3 shape (clean gold and noisy gold, each ERASER on and off) is two ablation
runs::

    pyql eval --dataset metaqa-2hop --llm gold --sample 300 --ablation --out runs/clean
    pyql eval --dataset metaqa-2hop --llm noisy-gold:0.3 --sample 300 --ablation --out runs/noisy
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pyql.agent.evaluation.noisy import INJECTION_TYPES, SILENT_TYPES, Injection, summarise
from pyql.agent.evaluation.records import METRICS, RunConfig
from pyql.agent.evaluation.rundir import RunDir, RunDirError

__all__ = ["NOTE", "SIDES", "ABLATION_TABLE", "side_configs", "summarise_ablation",
           "format_table"]

log = logging.getLogger(__name__)

#: said with every result
NOTE = "This measures the environment and guidelines, not an LLM."
#: the sub-runs of an ablation: (directory, guidelines on?)
SIDES: tuple[tuple[str, bool], ...] = (("eraser_on", True), ("eraser_off", False))
#: the combined table, next to config.json
ABLATION_TABLE = "ablation.md"

_SETTING_KEYS = ("hit@1", "f1", "em", "accuracy", "finished", "steps", "errors",
                 "outage_total", "n", "scored")


def side_configs(config: RunConfig) -> dict[str, RunConfig]:
    """The configuration of each sub-run: the ablation's, guidelines on / off."""
    return {name: config.model_copy(update={"ablation": False, "guidelines": on})
            for name, on in SIDES}


def _injections(results: Iterable[Any]) -> list[Injection]:
    out = []
    for result in results:
        for record in result.meta.get("injections") or ():
            out.append(Injection.model_validate(record))
    return out


def _rates(rows: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    total: dict[str, Any] = {"n": 0, "detected": 0, "corrected": 0, "kept": 0, "retried": 0,
                             "ended": 0, "repeats": 0, "codes": {}}
    for kind in (*INJECTION_TYPES, *SILENT_TYPES):
        row = rows.get(kind)
        if row is None:
            continue
        out[kind] = _with_rates(row)
        for key in ("n", "detected", "corrected", "kept", "retried", "ended", "repeats"):
            total[key] += row.get(key, 0)
        for code, count in row["codes"].items():
            total["codes"][code] = total["codes"].get(code, 0) + count
    out["all"] = _with_rates(total)
    return out


def _with_rates(row: dict[str, Any]) -> dict[str, Any]:
    n = row["n"]
    return {**row, "codes": dict(sorted(row["codes"].items(), key=lambda kv: -kv[1])),
            "detection_rate": row["detected"] / n if n else 0.0,
            "correction_rate": row["corrected"] / n if n else 0.0}


def summarise_ablation(config: RunConfig, out_dir: Path) -> dict[str, Any]:
    """The combined result of the two sub-runs of ``out_dir`` (module docstring): per side the
    headline scores of its ``metrics.json`` (``hit@1``/``f1``/``accuracy``..., ``finished``,
    ``steps`` and ``hints`` per question, ``errors``, ``outage_total``), the ``gain`` of the
    primary score (on − off), ``complete`` (both sides ran every question), and with a noisy
    stand-in the injection rates per side."""
    settings: dict[str, dict[str, Any]] = {}
    stand_in: dict[str, Any] | None = None
    injections: dict[str, dict[str, Any]] = {}
    with_injection = 0
    hints_on_clean: dict[str, int] = {}
    primary = "hit@1"
    complete = True
    for name, _ in SIDES:
        side = out_dir / name
        run_dir = RunDir(side)
        metrics = run_dir.read_metrics()
        if metrics is None:
            raise RunDirError(f"{side}: the ablation side has no {METRICS}")
        complete = complete and bool((metrics.get("run") or {}).get("complete", True))
        primary = metrics.get("primary", primary)
        stand_in = stand_in or metrics.get("stand_in")
        row = {k: metrics.get(k) for k in _SETTING_KEYS if metrics.get(k) is not None}
        row["hints"] = (metrics.get("guidelines") or {}).get("per_question", 0.0)
        settings[name] = row
        results = run_dir.results()
        records = _injections(results)
        if records:
            injections[name] = _rates(summarise(records))
            if name == "eraser_on":
                with_injection = sum(1 for r in results if r.meta.get("injections"))
        elif name == "eraser_on":
            for r in results:
                for code, count in r.guidelines.items():
                    hints_on_clean[code] = hints_on_clean.get(code, 0) + count
    on, off = settings["eraser_on"].get(primary), settings["eraser_off"].get(primary)
    return {
        "dataset": config.dataset, "split": config.split, "llm": config.llm,
        "strategy": config.strategy, "seed": config.seed, "max_steps": config.max_steps,
        "n": settings["eraser_on"].get("n", 0), "primary": primary, "settings": settings,
        "gain": on - off if on is not None and off is not None else None,
        "injections": injections, "questions_with_injection": with_injection,
        "clean_hints": dict(sorted(hints_on_clean.items(), key=lambda kv: -kv[1])),
        "complete": complete, "note": NOTE, "stand_in": stand_in,
    }


# -- the table ----------------------------------------------------------------------------------

_METRIC_NAMES = {"hit@1": "Hit@1", "f1": "F1", "em": "EM", "accuracy": "EX acc"}
_SIDE_LABELS = {"eraser_on": "ERASER on", "eraser_off": "w/o ERASER"}


def _codes(codes: Mapping[str, int], limit: int = 4) -> str:
    shown = [f"{code}×{count}" for code, count in list(codes.items())[:limit]]
    if len(codes) > limit:
        shown.append("…")
    return " ".join(shown) or "–"


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def format_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown tables of one or more :func:`summarise_ablation` results, keyed by a label
    (``clean gold``, ``noisy gold``): the scores per label and side, then the injected
    mistakes of each noisy one."""
    first = next(iter(summaries.values()))
    metrics = [m for m in ("hit@1", "f1", "accuracy")
               if any(m in s["settings"]["eraser_on"] for s in summaries.values())]
    lines = [
        f"ERASER ablation: {first['dataset']} {first['split']}, n={first['n']}, "
        f"seed={first['seed']}, max_steps={first['max_steps']}, strategy {first['strategy']}",
        "",
    ]
    if any(s["injections"] for s in summaries.values()):
        lines += [f"**{NOTE}**", ""]
    lines += [
        "| run | setting | " + " | ".join(_METRIC_NAMES.get(m, m) for m in metrics)
        + " | finished | steps/q | hints/q | errors | outages |",
        "|---|---|" + "---:|" * (len(metrics) + 5),
    ]
    for label, summary in summaries.items():
        for name, _ in SIDES:
            row = summary["settings"][name]
            values = " | ".join(_fmt(row.get(m)) for m in metrics)
            lines.append(
                f"| {label} ({summary['llm']}) | {_SIDE_LABELS[name]} | {values} | "
                f"{_fmt(row.get('finished'))} | {_fmt(row.get('steps'), 2)} | "
                f"{_fmt(row.get('hints'), 2)} | {row.get('errors', 0)} | "
                f"{row.get('outage_total', 0)} |")
    for label, summary in summaries.items():
        gain = summary["gain"]
        name = _METRIC_NAMES.get(summary["primary"], summary["primary"])
        lines += ["", f"{label}: ERASER on − off: "
                  + (f"{gain * 100:+.1f} points of {name}." if gain is not None else "–")]
        assumed = summary.get("stand_in") or {}
        if assumed.get("parameters"):
            values = ", ".join(f"{k}={v:g}" for k, v in assumed["parameters"].items())
            lines.append(f"Stand-in {assumed.get('name')} assumes: {values}.")
        if summary["clean_hints"]:
            lines.append(f"Hints with ERASER on: {_codes(summary['clean_hints'], 8)}.")
        on = summary["injections"].get("eraser_on")
        if not on:
            continue
        off = summary["injections"].get("eraser_off", {})
        lines += [
            "",
            f"Injected mistakes of {label} ({summary['questions_with_injection']} of "
            f"{summary['n']} questions got at least one with ERASER on; detection = a hint "
            "followed the mistake; correction = the hint named it and the gold step came next; "
            "kept = accepted unnoticed; ended = the run ended on it):",
            "",
            "| type | injected | detected | detection | corrected | correction | kept | ended | "
            "hint codes | w/o ERASER: injected / kept / ended |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for kind in (*INJECTION_TYPES, *SILENT_TYPES, "all"):
            row, other = on.get(kind), off.get(kind)
            if row is None and other is None:
                continue
            row = row or {"n": 0, "detected": 0, "detection_rate": 0.0, "corrected": 0,
                          "correction_rate": 0.0, "kept": 0, "ended": 0, "codes": {}}
            shown = f"**{kind}**" if kind == "all" else kind
            tail = f"{other['n']} / {other['kept']} / {other['ended']}" if other else "0 / 0 / 0"
            lines.append(
                f"| {shown} | {row['n']} | {row['detected']} | {row['detection_rate']:.1%} | "
                f"{row['corrected']} | {row['correction_rate']:.1%} | {row['kept']} | "
                f"{row['ended']} | {_codes(row['codes'])} | {tail} |")
    return "\n".join(lines)
