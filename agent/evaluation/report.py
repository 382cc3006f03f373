"""A run directory as one static HTML page: ``pyql report RUN_DIR`` writes ``report.html``.

The page is a single file with inline CSS, inline SVG charts and a few lines of vanilla JS (no
network, no CDN, no chart library), rendered from the Jinja2 templates in ``templates/report/``
(HTML-autoescaped; this module computes the numbers and the chart geometry, the templates hold
all markup). It shows:

- **Summary**: the metrics (n, scored, outages per status; Hit@1 of any answer / F1 / EM / Hit@1
  of the top-1 answer / accuracy
  where defined; TPQ, QPQ, CPQ: time in seconds, KB/DB queries and cost per question, and QPQ as
  the paper counts it, without label lookups; LLM calls and tokens per question; total cost and
  time), the run's configuration, breakdowns by question meta
  (qtype, hops, ...), and a notice when the "LLM" was the ``gold``/``noisy-gold`` stand-in (the
  scores then measure the environment and the guidelines, not a language model).
- **Guidelines**: ERASER triggers by environment class (``PY``/``KB``/``DB``/``RM``, the prefix of
  the code: the environment whose feedback detected the error), by the paper's Table 8 class of
  the feedback a guideline reads (``KB+RM`` ...: ``Guideline.env_class()``, from its ``needs``)
  when the guideline registry can be loaded, and by code (Table 9: code, name and the paper's
  class side by side), each with how often a triggered hint was followed by an accepted step (a
  successful correction).
- **Charts**: the main metric by question type, steps per question, guideline triggers by code.
- **Questions**: every question with its outcome, filterable (status, type, hints) and searchable;
  each expands (``<details>``, no JS needed) to its trajectory: thought, action, observation or
  guideline hint (highlighted), the query after the step, tokens and time. The steps come from
  ``trajectories.jsonl`` (the last trajectory of the question's id,
  :meth:`~pyql.agent.evaluation.rundir.RunDir.trajectories`); a run directory without it, or a
  question without a trajectory there, shows its outcome and says that its steps are missing.

All text from the run is HTML-escaped. ``results.jsonl`` is streamed twice (rows, then the
final query and program of the embedded questions) and the page is written as it is produced;
a row's step count is its ``usage["steps"]`` and its hint codes its ``guidelines``, so the rows
never read ``trajectories.jsonl``, which is read once, for the embedded questions only. A
question that appears twice (a resumed run) counts once, its last line wins; malformed lines
are skipped and counted (the run directory's one reader,
:meth:`~pyql.agent.evaluation.rundir.RunDir.lines`, with a callback; a torn last line is not
counted: it is being written); a malformed line of ``trajectories.jsonl`` is skipped.

**Big runs.** Every question gets a row in the list (id, question, outcome, gold and predicted
answers, usage: about 1.5 kB), so search and filters cover the whole run, and the JS pages the
list (:data:`PAGE_SIZE` rows per page; without JS every row shows). The step-by-step
trajectories are embedded for at most ``max_trajectories`` questions (:data:`MAX_TRAJECTORIES`;
about 4-10 kB each): all of them when the run is smaller, else errors first, then incorrect
answers, then correct ones, in file order; the page says so, and a row without its trajectory
gives its line in ``results.jsonl``. A 10,000-question MetaQA run makes a ~18 MB page in ~5 s
(the page is streamed to the file as the template renders).
Observations and other long texts are cut to a preview with an expander, and to
:data:`MAX_TEXT_CHARS` at most.

**Metrics.** The headline numbers, the breakdowns by question meta and the guideline tables are
the run's one aggregate, :func:`pyql.agent.evaluation.metrics.aggregate` (what the runner writes
to ``metrics.json``; ``RunDir.recompute_metrics`` rewrites it): read from ``metrics.json`` when it
counts the questions of ``results.jsonl``, else computed by that function over ``results.jsonl``.
Outages (the KB/DB or the LLM failed: ``QuestionResult.status`` in
:data:`~pyql.agent.evaluation.records.OUTAGES`) are not scored: the summary gives ``scored``, the
outages per status, and the list marks those questions *Outage*, not wrong. The report itself
only derives presentation from ``results.jsonl``: the per-question rows and the steps chart.

>>> from pyql.agent.evaluation.records import QuestionResult
>>> question_status(QuestionResult(id="1", status="backend_error", error="KB down"))
'outage'
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import jinja2
from markupsafe import Markup
from pydantic import ValidationError

from pyql.agent.evaluation.llm_spec import LLMSpecError, StandInSpec, parse_llm_spec
from pyql.agent.evaluation.metrics import ENV_CLASSES, aggregate
from pyql.agent.evaluation.records import (
    CONFIG,
    METRICS,
    OUTAGES,
    RESULTS,
    QuestionResult,
    RunConfig,
)
from pyql.agent.evaluation.rundir import TRAJECTORIES, RunDir, RunDirError
from pyql.agent.trajectory import Step, Trajectory
from pyql.errors import PyqlError

__all__ = [
    "REPORT",
    "MAX_TRAJECTORIES",
    "PAGE_SIZE",
    "PREVIEW_CHARS",
    "MAX_TEXT_CHARS",
    "QUALITY_METRICS",
    "RunDirError",
    "write_report",
    "question_status",
    "is_stand_in",
    "RunView",
    "read_run",
    "report_templates",
]

log = logging.getLogger(__name__)

#: the report's file name inside the run directory
REPORT = "report.html"
#: trajectories embedded in the page at most (rows for all questions are always there)
MAX_TRAJECTORIES = 1000
#: questions per page in the list (client side; without JS every row is shown)
PAGE_SIZE = 50
#: characters of a long text shown before its expander
PREVIEW_CHARS = 600
#: characters of one text embedded at most (the rest stays in results.jsonl)
MAX_TEXT_CHARS = 20_000
#: values of gold/predicted answers shown per question
MAX_VALUES = 30

#: per-question quality metrics, in the order the report shows them (as
#: :data:`pyql.agent.evaluation.metrics.SCORES`)
QUALITY_METRICS: tuple[str, ...] = ("hit@1", "f1", "em", "hit@1_top1", "accuracy")
_LABELS = {
    "accuracy": "Accuracy",
    "hit@1": "Hit@1 (any answer)",
    "em": "EM",
    "f1": "F1",
    "hit@1_top1": "Hit@1 (top-1 answer)",
    "tpq": "TPQ",
    "qpq": "QPQ",
    "cpq": "CPQ",
}
#: display names of the environment classes of :data:`pyql.agent.evaluation.metrics.ENV_CLASSES`
_CLASS_NAMES = {
    "python": "Python interpreter",
    "kb": "Knowledge base",
    "db": "Database",
    "memory": "Reasoning memory",
    "other": "other codes",
}
#: the code prefix of each environment class (``kb`` -> ``KB``)
_CLASS_PREFIX = {cls: prefix for prefix, cls in ENV_CLASSES.items()}
_STATUSES = ("correct", "incorrect", "error", "outage", "unscored")
_STATUS_LABELS = {
    "correct": "Correct",
    "incorrect": "Incorrect",
    "error": "Error",
    "outage": "Outage",
    "unscored": "Unscored",
}


# -- helpers ------------------------------------------------------------------------------------
def _num(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _int(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _dec(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.3g}" if abs(value) >= 1e-4 else f"${value:.2e}"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def is_stand_in(llm: str | None) -> str | None:
    """``"gold"``/``"noisy-gold"`` when the llm spec names a stand-in, else None (a spec this
    version no longer reads, too: an old run still renders).

    >>> is_stand_in("noisy-gold:0.3"), is_stand_in("gold"), is_stand_in("openai:gpt-4o")
    ('noisy-gold', 'gold', None)
    """
    spec = _stand_in_spec(llm)
    return spec.kind if spec is not None else None


def _stand_in_spec(llm: str | None) -> StandInSpec | None:
    try:
        spec = parse_llm_spec(llm or "")
    except LLMSpecError:
        return None
    return spec if isinstance(spec, StandInSpec) else None


def _primary(keys: Iterable[str]) -> str | None:
    """The headline metric among ``keys``: ``accuracy`` when defined, else ``hit@1``, else the
    first of :data:`QUALITY_METRICS` (as :func:`pyql.agent.evaluation.metrics.aggregate`)."""
    have = set(keys)
    for key in ("accuracy", "hit@1", *QUALITY_METRICS):
        if key in have:
            return key
    return None


def question_status(result: QuestionResult) -> str:
    """``outage``, ``error``, ``correct``, ``incorrect`` or ``unscored`` (no per-question metric).

    An outage (``status`` in :data:`~pyql.agent.evaluation.records.OUTAGES`: the KB/DB or the LLM
    failed) is not an answer and is not scored; a question is correct when its headline metric
    (``accuracy``, else ``hit@1``, ...) is 1.

    >>> question_status(QuestionResult(id="1", metrics={"hit@1": 1.0, "em": 0.0}))
    'correct'
    >>> question_status(QuestionResult(id="2", status="llm_timeout", error="timed out"))
    'outage'
    """
    if result.status in OUTAGES:
        return "outage"
    if result.error is not None:
        return "error"
    key = _primary(k for k, v in result.metrics.items() if _num(v) is not None)
    if key is None:
        return "unscored"
    return "correct" if float(result.metrics[key]) >= 1 - 1e-9 else "incorrect"


def _scalar_meta(meta: Mapping[str, Any]) -> dict[str, str]:
    """The meta values that can label a breakdown (strings, numbers, booleans), as text (as
    :func:`pyql.agent.evaluation.metrics.aggregate` names the breakdown's values)."""
    return {str(k): (str(v).lower() if isinstance(v, bool) else str(v) if v != "" else "(empty)")
            for k, v in meta.items() if isinstance(v, str) or _num(v) is not None}


@dataclass
class _Row:
    """What the report keeps of one question between the two passes."""

    line: int
    result: QuestionResult  # without steps, query and program
    status: str
    n_steps: int
    hint_codes: tuple[str, ...]


# -- reading the run ------------------------------------------------------------------------------
def _read_config(run_dir: Path) -> tuple[RunConfig | None, dict[str, Any], str | None]:
    path = run_dir / CONFIG
    if not path.is_file():
        return None, {}, f"{CONFIG} is missing"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, {}, f"{CONFIG} cannot be read: {exc}"
    if not isinstance(raw, dict):
        return None, {}, f"{CONFIG} is not a JSON object"
    try:
        return RunConfig.model_validate(raw), raw, None
    except ValidationError as exc:
        return None, raw, f"{CONFIG} is not a valid RunConfig ({exc.error_count()} errors)"


def _read_metrics(run_dir: Path) -> dict[str, Any] | None:
    try:
        return RunDir(run_dir).read_metrics()
    except RunDirError as exc:
        log.warning("%s; computing metrics from %s", exc, RESULTS)
        return None


def _skip(number: int, why: str) -> None:
    """A malformed line of ``results.jsonl`` (counted by the first pass) or of
    ``trajectories.jsonl``: skipped."""


@dataclass
class _Run:
    """The first pass over a run directory."""

    run_dir: Path
    config: RunConfig | None
    config_raw: dict[str, Any]
    config_note: str | None
    rows: list[_Row]
    metrics: dict[str, Any]  # the run's one aggregate (metrics.aggregate)
    metrics_source: str
    notes: list[str]
    bad_lines: int
    duplicates: int
    steps_hist: dict[int, Counter[str]]  # steps -> outcome -> questions (a chart)

    @property
    def primary(self) -> str | None:
        primary = self.metrics.get("primary")
        return primary if isinstance(primary, str) else None

    def quality(self) -> list[str]:
        """The quality metrics this run defines, in display order."""
        return [k for k in QUALITY_METRICS if _num(self.metrics.get(k)) is not None]

    def breakdown(self) -> dict[str, dict[str, dict[str, Any]]]:
        by = self.metrics.get("by")
        return by if isinstance(by, dict) else {}

    def guideline_stats(self) -> dict[str, Any]:
        stats = self.metrics.get("guidelines")
        return stats if isinstance(stats, dict) else {}


def _load(run_dir: Path) -> _Run:
    if not run_dir.is_dir():
        raise RunDirError(f"no such run directory: {run_dir}")
    if not RunDir(run_dir).results_path.is_file():
        raise RunDirError(f"{run_dir} has no {RESULTS}: is it a run directory?")
    config, config_raw, config_note = _read_config(run_dir)
    by_id: dict[str, _Row] = {}
    bad: list[int] = []
    seen = 0
    for number, result in RunDir(run_dir).lines(malformed=lambda n, _: bad.append(n)):
        seen += 1
        codes = tuple(code for code, k in sorted(result.guidelines.items())
                      for _ in range(int(k)))
        light = result.model_copy(update={"query": "", "program": ""})
        by_id.pop(result.id, None)  # re-insert: file order of the last occurrence
        by_id[result.id] = _Row(number, light, question_status(result),
                                int(result.usage.get("steps", 0)), codes)
    rows = list(by_id.values())
    metrics, source, notes = _metrics(run_dir, rows)
    steps_hist: dict[int, Counter[str]] = defaultdict(Counter)
    for row in rows:
        steps_hist[row.n_steps][row.status] += 1
    return _Run(run_dir, config, config_raw, config_note, rows, metrics, source, notes,
                len(bad), seen - len(rows), steps_hist)


#: what a ``metrics.json`` must hold to be shown as it is (older runs wrote less)
_METRICS_KEYS = ("n", "scored", "outages", "guidelines", "by")


def _metrics(run_dir: Path, rows: Sequence[_Row]) -> tuple[dict[str, Any], str, list[str]]:
    """(the run's aggregate, where it comes from, notes): ``metrics.json`` when it is current
    (counts the questions of ``results.jsonl`` and has every section), else
    :func:`pyql.agent.evaluation.metrics.aggregate` over ``results.jsonl`` (what
    ``RunDir.recompute_metrics`` would write). The one place that chooses the numbers."""
    notes: list[str] = []
    recorded = _read_metrics(run_dir)
    if recorded is not None:
        rec_n = _num(recorded.get("n"))
        if rec_n is not None and int(rec_n) != len(rows):
            notes.append(f"{METRICS} counts {int(rec_n)} questions but {RESULTS} has {len(rows)} "
                         f"(a run still going, or resumed): the metrics are computed from "
                         f"{RESULTS}.")
        elif all(key in recorded for key in _METRICS_KEYS):
            return recorded, f"from {METRICS}", notes
        else:
            notes.append(f"{METRICS} was written by an older pyql: the metrics are computed "
                         f"from {RESULTS}.")
    source = f"computed by metrics.aggregate from {RESULTS}"
    return aggregate(r.result for r in rows), source, notes


# -- charts: geometry here, markup in templates/report/charts.svg.j2 ------------------------------
_SERIES_COLORS = ("#3b5bdb", "#74c0fc", "#12b886", "#f59f00")
_STATUS_COLORS = {"correct": "#2f9e44", "incorrect": "#e03131", "error": "#868e96",
                  "outage": "#f59f00", "unscored": "#adb5bd"}
_CLASS_COLORS = {"PY": "#7048e8", "KB": "#1c7ed6", "DB": "#0ca678", "RM": "#f08c00",
                 "other": "#868e96"}
_CHAR_W = 6.6  # approximate width of one character at 12px
_AXIS, _GRID = "#adb5bd", "#e9ecef"


def _count_ticks(top: float, parts: int = 5) -> list[int]:
    step = max(1, math.ceil(max(top, 1) / parts))
    mag = 10 ** int(math.log10(step))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= step and float(m * mag).is_integer():
            step = int(m * mag)
            break
    return list(range(0, step * math.ceil(max(top, 1) / step) + 1, step))


def _legend(items: Sequence[tuple[str, str]], x: float, y: float) -> list[dict[str, Any]]:
    """Legend entries (label, color, position), laid out left to right."""
    out = []
    for label, color in items:
        out.append({"label": label, "color": color, "x": x, "y": y})
        x += 14 + len(label) * _CHAR_W + 16
    return out


def _chart_by_group(title: str, groups: Sequence[tuple[str, int, Mapping[str, float | None]]],
                    series: Sequence[str], width: int = 640) -> dict[str, Any]:
    """Horizontal grouped bars, 0-100%: one group per breakdown value, one bar per metric."""
    longest = max((len(f"{label} ({n})") for label, n, _ in groups), default=4)
    label_w, right = int(min(width * 0.4, max(80, longest * _CHAR_W + 16))), 48
    bar_h, gap = 12, 10
    plot_w = width - label_w - right
    row_h = bar_h * len(series) + 2 * (len(series) - 1) + gap
    top, bottom = 30, 26
    axis_y = top + row_h * len(groups) - gap / 2
    max_chars = int((label_w - 14) / _CHAR_W)
    rows = []
    for i, (label, n, values) in enumerate(groups):
        y0 = top + i * row_h
        bars = []
        for j, key in enumerate(series):
            value = values.get(key)
            y = y0 + j * (bar_h + 2)
            w = plot_w * max(0.0, min(1.0, value or 0.0))
            bars.append({"y": y, "w": w, "color": _SERIES_COLORS[j % 4],
                         "metric": _LABELS.get(key, key), "value": value})
        rows.append({"label": label, "n": n, "y": y0 + (row_h - gap) / 2 + 4,
                     "short": _short(label, max_chars - len(str(n)) - 3), "bars": bars})
    return {
        "kind": "groups", "title": title, "width": width,
        "height": top + row_h * len(groups) + bottom, "label_w": label_w, "bar_h": bar_h,
        "legend": _legend([(_LABELS.get(s, s), _SERIES_COLORS[i % 4])
                           for i, s in enumerate(series)], label_w, 16),
        "ticks": [{"x": label_w + plot_w * t / 100, "y1": top - 4, "y2": axis_y,
                   "stroke": _AXIS if t == 0 else _GRID, "text": f"{t}%"}
                  for t in (0, 25, 50, 75, 100)],
        "groups": rows,
    }


def _chart_steps(hist: Mapping[int, Mapping[str, int]]) -> dict[str, Any]:
    """Vertical bars stacked by outcome: how many questions took N steps."""
    width, height, left, right, top, bottom = 640, 260, 44, 16, 30, 40
    keys = sorted(hist)
    lo, hi = (keys[0], keys[-1]) if keys else (0, 1)
    size = max(1, math.ceil((hi - lo + 1) / 40))
    bins: list[tuple[int, Counter[str]]] = []
    for start in range(lo, hi + 1, size):
        c: Counter[str] = Counter()
        for k in range(start, start + size):
            c.update(hist.get(k, {}))
        bins.append((start, c))
    ticks = _count_ticks(max((sum(c.values()) for _, c in bins), default=1))
    ymax = ticks[-1]
    plot_w, plot_h = width - left - right, height - top - bottom
    slot = plot_w / max(1, len(bins))
    present = [s for s in _STATUSES if any(c[s] for _, c in bins)]
    label_every = max(1, math.ceil(len(bins) / 20))
    columns = []
    for i, (start, counts) in enumerate(bins):
        x, w, y = left + i * slot + slot * 0.15, slot * 0.7, top + plot_h
        name = str(start) if size == 1 else f"{start}–{start + size - 1}"
        parts = []
        for status in present:
            k = counts[status]
            if not k:
                continue
            h = plot_h * k / ymax
            y -= h
            parts.append({"y": y, "h": h, "color": _STATUS_COLORS[status], "k": k,
                          "status": _STATUS_LABELS[status].lower()})
        columns.append({"x": x, "w": w, "name": name, "parts": parts,
                        "labelled": i % label_every == 0})
    return {
        "kind": "steps", "title": "Steps per question", "width": width, "height": height,
        "left": left, "right": right, "top": top, "plot_w": plot_w, "plot_h": plot_h,
        "legend": _legend([(_STATUS_LABELS[s], _STATUS_COLORS[s]) for s in present], left, 16),
        "ticks": [{"y": top + plot_h - plot_h * t / ymax, "stroke": _AXIS if t == 0 else _GRID,
                   "text": t} for t in ticks],
        "columns": columns,
    }


def _chart_guidelines(rows: Sequence[tuple[str, int, int]]) -> dict[str, Any]:
    """Horizontal bars per code: triggers (light) and successful corrections (solid)."""
    width, label_w, right, bar_h, gap, top, bottom = 640, 64, 150, 14, 8, 30, 26
    plot_w = width - label_w - right
    ticks = _count_ticks(max((t for _, t, _ in rows), default=1))
    xmax = ticks[-1]
    classes = sorted({c[:2] if c[:2] in ENV_CLASSES else "other" for c, _, _ in rows},
                     key=lambda c: list(_CLASS_COLORS).index(c))
    axis_y = top + (bar_h + gap) * len(rows) - gap / 2
    bars = []
    for i, (code, triggers, corrected) in enumerate(rows):
        w = plot_w * triggers / xmax
        bars.append({"code": code, "y": top + i * (bar_h + gap), "w": w,
                     "wc": plot_w * min(corrected, triggers) / xmax,
                     "color": _CLASS_COLORS.get(code[:2], _CLASS_COLORS["other"]),
                     "triggers": triggers, "corrected": corrected,
                     "rate": f"{100 * corrected / triggers:.0f}%" if triggers else "—"})
    return {
        "kind": "guidelines", "title": "Guideline triggers by code", "width": width,
        "height": top + (bar_h + gap) * len(rows) + bottom, "label_w": label_w, "bar_h": bar_h,
        "legend": _legend([(c, _CLASS_COLORS[c]) for c in classes], label_w, 16),
        "ticks": [{"x": label_w + plot_w * t / xmax, "y1": top - 4, "y2": axis_y,
                   "stroke": _AXIS if t == 0 else _GRID, "text": t} for t in ticks],
        "bars": bars,
    }


def _figures(run: _Run) -> list[dict[str, Any]]:
    """The charts section: (id, caption, chart) of each figure."""
    figures = []
    quality = run.quality()
    primary = run.primary if run.primary in quality else _primary(quality)
    series = ([primary] if primary else []) + (["f1"] if "f1" in quality and primary != "f1"
                                               else [])
    for key, by_value in list(run.breakdown().items())[:2]:
        if not series or not by_value:
            break
        cells = list(by_value.items())
        if len(cells) > 30:
            cells = sorted(cells, key=lambda kv: -kv[1].get("n", 0))[:30]
            note = " (the 30 most frequent)"
        else:
            note = ""
        groups = [(v, int(cell.get("n", 0)), {m: _num(cell.get(m)) for m in series})
                  for v, cell in cells]
        names = " and ".join(_LABELS[s] for s in series)
        wide = max(len(v) for v, _ in cells) > 22  # long labels: the chart takes a full row
        figures.append({"id": f"chart-by-{_slug(key)}", "caption": f"{names} by {key}{note}",
                        "wide": wide, "chart": _chart_by_group(
                            f"{names} by {key}", groups, series, width=1100 if wide else 640)})
    if run.steps_hist:
        figures.append({"id": "chart-steps", "caption": "Steps per question, by outcome",
                        "wide": False, "chart": _chart_steps(run.steps_hist)})
    by_code = run.guideline_stats().get("by_code", {})
    top = sorted(by_code.items(), key=lambda kv: (-kv[1]["triggers"], kv[0]))[:25]
    if top:
        more = len(by_code) - len(top)
        figures.append({"id": "chart-guidelines",
                        "caption": "Guideline triggers by code"
                                   + (f" (top 25; {more} more)" if more else ""),
                        "wide": False,
                        "chart": _chart_guidelines([(c, int(st["triggers"]), int(st["corrected"]))
                                                    for c, st in top])})
    return figures


# -- page sections: the data each template shows --------------------------------------------------
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _guideline_info() -> dict[str, tuple[str, str, str]]:
    """code -> (name, Table 8 class, description) from the installed guidelines, if loadable."""
    try:
        from pyql.guidelines import default_registry
        from pyql.guidelines.base import parse_docstring

        registry = default_registry()
    except (ImportError, PyqlError) as exc:
        log.debug("guideline registry not available for the report: %s", exc)
        return {}
    # the paper's class is data on the guideline: the feedback it reads (``needs``)
    return {g.code: (g.name, g.env_class(), parse_docstring(type(g).__doc__)["description"])
            for g in registry}


def _stand_in(run: _Run) -> dict[str, Any] | None:
    """The stand-in of the run: its kind, and the parameter values ``metrics.json`` records
    (``stand_in``, written by the runner from the stand-in's declared assumptions); a run that
    recorded none shows ``parameters`` None."""
    llm = run.config.llm if run.config else str(run.config_raw.get("llm", ""))
    spec = _stand_in_spec(llm)
    if spec is None:
        return None
    recorded = run.metrics.get("stand_in") or {}
    parameters = recorded.get("parameters") if isinstance(recorded, dict) else None
    return {"kind": spec.kind, "rate": f"{spec.rate:g}" if spec.kind == "noisy-gold" else "",
            "parameters": dict(parameters) if isinstance(parameters, dict) else None}


def _outage_note(metrics: Mapping[str, Any]) -> str:
    outages = metrics.get("outages") or {}
    parts = [f"{status} {int(k):,}" for status, k in outages.items() if k]
    return ("KB/DB or LLM failures, not scored" + (f": {', '.join(parts)}" if parts else ""))


def _summary(run: _Run) -> dict[str, Any]:
    h = run.metrics
    n = int(_num(h.get("n")) or 0)
    quality = run.quality()
    primary = run.primary if run.primary in quality else _primary(quality)
    shown = ([primary] if primary else []) + [k for k in quality if k != primary]
    outages = int(_num(h.get("outage_total")) or 0)
    cards = [(_LABELS[k], _pct(_num(h.get(k))), "%") for k in shown[:3]]
    cards += [("Questions", _int(n), ""), ("Errors", _int(_num(h.get("errors"))), "")]
    if outages:
        cards.append(("Outages", _int(outages), ""))
    cards += [("TPQ", _dec(_num(h.get("tpq")), 1), "s"), ("CPQ", _money(_num(h.get("cpq"))), "")]
    stops = ", ".join(f"{k or 'none'} {v}" for k, v in
                      sorted((h.get("stop_reasons") or {}).items(), key=lambda kv: -kv[1]))
    rows: list[tuple[str, str, str]] = [
        ("Questions (n)", _int(n), f"stop reasons: {stops}" if stops else ""),
        ("Scored", _int(_num(h.get("scored"))), "questions the scores are over (outages left out)"),
        ("Outages", _int(outages), _outage_note(h)),
        ("Errors", _int(_num(h.get("errors"))), "scored questions ended by an error (score 0)"),
        ("Finished", _pct(_num(h.get("finished"))), "% ended with an accepted execute()"),
    ]
    for key in shown:
        rows.append((_LABELS[key], _pct(_num(h.get(key))),
                     "% (headline)" if key == primary else "%"))
    rows += [
        ("TPQ", _dec(_num(h.get("tpq")), 2), "time per question, seconds (LLM and environment)"),
        ("QPQ", _dec(_num(h.get("qpq"))), "KB/DB queries per question, every query pyql ran"),
        ("QPQ (paper: without label lookups)", _dec(_num(h.get("qpq_paper"))),
         "the paper's count: SPARQL queries per question, label lookups left out"),
        ("CPQ", _money(_num(h.get("cpq"))), "LLM cost per question"),
        ("LLM calls / question", _dec(_num(h.get("llm_calls"))),
         f"{_dec(_num(h.get('constrained_calls')))} of them constrained to a JSON schema"),
        ("Parse failures", _int(_num(h.get("parse_failures_total"))),
         f"replies the strategy could not read, in "
         f"{_int(_num(h.get('questions_with_parse_failures')))} questions"),
        ("Cached prompt share", _pct(_num(h.get("cached_share"))),
         "% of prompt tokens the server took from its prompt cache"),
        ("Tokens / question", _int(_num(h.get("tokens"))),
         f"{_int(_num(h.get('prompt_tokens')))} prompt + "
         f"{_int(_num(h.get('completion_tokens')))} completion")
        if h.get("tokens_counted") is not False else
        ("Tokens / question", "—", "not counted: a stand-in run without --token-estimates"),
        ("Steps / question", _dec(_num(h.get("steps"))), "LLM turns, hints included"),
        ("Total cost", _money(_num(h.get("cost"))), "US$"),
        ("Total time", _dec(_num(h.get("seconds")), 1), "seconds, summed over questions"),
    ]
    # the strategy's own counts (Readi/SRP: LLM calls per kind, edits, instantiation success,
    # answer coverage, retrieved knowledge, judge accuracy...), means per question
    rows += [(key, _dec(_num(value), 3), "per question (the strategy's own count)")
             for key, value in sorted((h.get("strategy") or {}).items())]
    return {"cards": cards, "rows": rows, "source": run.metrics_source,
            "config": _config_rows(run), "breakdowns": _breakdowns(run, quality)}


_CONFIG_LABELS = {"llm": "LLM", "kb": "KB", "db": "DB", "llm_cache": "LLM cache",
                  "kb_cache": "KB cache", "pyql_version": "pyql version", "max_steps": "max steps",
                  "data_dir": "data dir", "base_url": "base URL"}


def _config_rows(run: _Run) -> list[dict[str, str]]:
    """(label, value, how to show it: ``pill``, ``code`` or ``text``) of each setting."""
    raw = run.config.model_dump(mode="json") if run.config is not None else dict(run.config_raw)
    rows = []
    extra = raw.pop("extra", None)
    for key, value in raw.items():
        if value is None or value == "":
            continue
        label = _CONFIG_LABELS.get(key, key.replace("_", " "))
        if key == "guidelines" and isinstance(value, bool):
            rows.append({"label": label, "value": "on" if value else "off", "show": "pill"})
        else:
            show = "code" if key in ("llm", "data_dir") else "text"
            rows.append({"label": label, "value": str(value), "show": show})
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            rows.append({"label": f"extra.{key}", "value": _short(shown, 200), "show": "text"})
    return rows


def _breakdowns(run: _Run, quality: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for key, by_value in run.breakdown().items():
        rows = [[value, _int(_num(cell.get("n"))), *[_pct(_num(cell.get(m))) for m in quality],
                 _int(_num(cell.get("errors")))]
                for value, cell in by_value.items()]
        out.append({"id": f"breakdown-{_slug(key)}", "rows": rows,
                    "head": [key, "n", *[_LABELS[m] for m in quality], "errors"]})
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _guidelines(run: _Run, info: Mapping[str, tuple[str, str, str]]) -> dict[str, Any]:
    g = run.guideline_stats()
    total = int(g.get("triggers", 0))
    by_code: dict[str, dict[str, Any]] = g.get("by_code", {})
    enabled = run.config.guidelines if run.config else run.config_raw.get("guidelines")
    if not total:
        return {"total": 0, "state": "were off in this run" if enabled is False
                else "never fired in this run"}
    n = int(_num(run.metrics.get("scored")) or 0)
    codes_in = Counter(st.get("class", "other") for st in by_code.values())
    classes = [{"cls": _CLASS_PREFIX.get(cls, "other"), "name": _CLASS_NAMES.get(cls, cls),
                "color": _CLASS_COLORS[_CLASS_PREFIX.get(cls, "other")],
                "cells": [_int(codes_in[cls]), _int(st["triggers"]), _pct(st["share"]),
                          _int(st["corrected"]), _pct(st["correction_rate"])]}
               for cls, st in g.get("by_class", {}).items() if st["triggers"]]
    feedback = []
    if info:  # the paper's Table 8 classes: the feedback a guideline reads
        needs: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for code, st in by_code.items():
            cell = needs[info[code][1] if code in info else "unknown"]
            cell[0] += 1
            cell[1] += int(st["triggers"])
            cell[2] += int(st["corrected"])
        feedback = [[cls, _int(c0), _int(k), _pct(k / total), _int(c), _pct(c / k if k else None)]
                    for cls, (c0, k, c) in sorted(needs.items(), key=lambda kv: -kv[1][1])]
    codes = []
    for code, st in sorted(by_code.items(), key=lambda kv: (-kv[1]["triggers"], kv[0])):
        name, paper, desc = info.get(code, ("", "", ""))
        codes.append({"code": code, "name": name, "paper": paper, "desc": _short(desc, 140),
                      "cells": [_int(st["triggers"]), _pct(st["share"]), _int(st["questions"]),
                                _int(st["corrected"]), _pct(st["correction_rate"])]})
    corrected = int(g.get("corrected", 0))
    return {
        "total": total, "questions": int(g.get("questions", 0)), "n": n,
        "share": _pct(g.get("questions", 0) / n if n else None),
        "per_question": f"{_num(g.get('per_question')) or 0:.2f}", "corrected": corrected,
        "corrected_share": _pct(corrected / total), "classes": classes, "feedback": feedback,
        "codes": codes,
    }


# -- the question list ----------------------------------------------------------------------------
def _preview(text: str) -> dict[str, Any]:
    """How a long text shows: a preview, the embedded body and how much is left out."""
    cut = text.rfind("\n", 0, PREVIEW_CHARS)
    body = text[:MAX_TEXT_CHARS]
    return {"head": text[: cut if cut > PREVIEW_CHARS // 2 else PREVIEW_CHARS], "body": body,
            "rest": len(text) - len(body)}


def _usage_line(r: QuestionResult) -> str:
    usage = []
    for key, label in (("llm_calls", "LLM calls"), ("prompt_tokens", "prompt tokens"),
                       ("completion_tokens", "completion tokens"), ("kb_queries", "queries"),
                       ("parse_failures", "parse failures"), ("seconds", "s")):
        value = _num(r.usage.get(key))
        if value is not None:
            usage.append(f"{_dec(value, 2) if key == 'seconds' else _int(value)} {label}")
    cost = _num(r.usage.get("cost"))
    if cost is not None:
        usage.append(_money(cost))
    return " · ".join(usage)


def _step_kind(step: Step) -> str:
    if step.hint:
        return "hint"
    return "error" if step.status in ("error", "backend_error", "timeout") else "ok"


def _question(index: int, row: _Row, full: QuestionResult | None,
              trajectory: Trajectory | None, group_key: str | None, *, file: bool = True
              ) -> dict[str, Any]:
    """What the question template shows of one question (``full``: its whole result, when it is
    embedded; ``trajectory``: its steps, when trajectories.jsonl has them; ``file``: whether the
    run directory has a trajectories.jsonl at all)."""
    r = row.result
    meta = _scalar_meta(r.meta)
    group = meta.get(group_key, "") if group_key else ""
    search = " ".join([r.id, r.question, group, *sorted(set(row.hint_codes)),
                       *(str(v) for v in r.predicted[:5])]).lower()
    f1 = _num(r.metrics.get("f1"))
    steps = []
    if full is not None and trajectory is not None:
        previous = ""
        for step in trajectory.steps:
            steps.append({"step": step, "kind": _step_kind(step),
                          "query_changed": step.query != previous})
            previous = step.query or previous
    return {
        "index": index, "row": row, "r": r, "full": full, "group": group, "search": search,
        "hints": len(row.hint_codes), "meta": meta, "usage": _usage_line(r),
        "f1": f1 if f1 is not None and row.status == "incorrect" else None,
        "metrics": [(_LABELS.get(k, k), _dec(_num(v), 2)) for k, v in r.metrics.items()],
        "stop": " · ".join([r.stop_reason or "—", "finished" if r.finished else "not finished"]),
        "steps": steps, "trajectory": trajectory, "trajectory_file": file,
    }


def _embedded(rows: Sequence[_Row], cap: int) -> tuple[set[str], dict[str, Any] | None]:
    """The ids whose trajectories are embedded, and what the note about the rest says."""
    if len(rows) <= cap:
        return {r.result.id for r in rows}, None
    chosen: list[str] = []
    order = ("error", "incorrect", "outage", "unscored", "correct")
    for status in order:
        for row in rows:
            if len(chosen) >= cap:
                break
            if row.status == status:
                chosen.append(row.result.id)
    counts = Counter(r.status for r in rows)
    status_of = {r.result.id: r.status for r in rows}
    got = Counter(status_of[i] for i in chosen)
    detail = ", ".join(f"{got[s]:,} of {counts[s]:,} {_STATUS_LABELS[s].lower()}"
                       for s in order if counts[s])
    return set(chosen), {"chosen": len(chosen), "total": len(rows), "detail": detail}


def _questions(run: _Run, info: Mapping[str, tuple[str, str, str]],
               max_trajectories: int) -> dict[str, Any]:
    rows = run.rows
    breakdown = run.breakdown()
    # the list filters by question type when the run has one, else by the first breakdown
    group_key = "qtype" if "qtype" in breakdown else next(iter(breakdown), None)
    embedded, note = _embedded(rows, max(0, max_trajectories))
    counts = Counter(r.status for r in rows)

    def items() -> Iterator[dict[str, Any]]:
        # second pass: rows are in file order (of their last line), so one forward scan suffices
        run_dir = RunDir(run.run_dir)
        wanted = {row.line for row in rows if row.result.id in embedded}
        lines: Iterator[tuple[int, QuestionResult]] = (
            run_dir.lines(malformed=_skip, numbers=wanted) if embedded else iter(()))
        trajectories = run_dir.trajectories(embedded, malformed=_skip) if embedded else {}
        file = run_dir.trajectories_path.is_file()
        for index, row in enumerate(rows):
            result: QuestionResult | None = None
            if row.result.id in embedded:
                for number, read in lines:
                    if number == row.line:
                        result = read
                        break
            trajectory = trajectories.pop(row.result.id, None)
            yield _question(index, row, result, trajectory, group_key, file=file)

    return {
        "total": len(rows), "note": note, "group_key": group_key,
        "groups": list(breakdown[group_key]) if group_key else [],
        "statuses": [(s, counts[s]) for s in _STATUSES if counts[s]], "items": items(),
        "info": info,
    }


# -- the page -------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _templates() -> jinja2.Environment:
    """The report's templates (package data under ``templates/report``), HTML-autoescaped."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pyql.agent.evaluation", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(pct=_pct, count=_int, dec=_dec, money=_money, short=_short, slug=_slug,
                       f1=lambda v: f"{v:.1f}")
    env.globals.update(RESULTS=RESULTS, TRAJECTORIES=TRAJECTORIES, PREVIEW_CHARS=PREVIEW_CHARS,
                       MAX_VALUES=MAX_VALUES, MAX_TEXT_CHARS=MAX_TEXT_CHARS,
                       STATUS_LABELS=_STATUS_LABELS, LABELS=_LABELS, preview=_preview)
    return env


def _render(run: _Run, out: TextIO, max_trajectories: int) -> None:
    info = _guideline_info() if run.guideline_stats().get("by_code") else {}
    cfg = run.config
    bits = ([cfg.dataset, cfg.split, cfg.llm] if cfg else
            [str(run.config_raw.get(k, "")) for k in ("dataset", "split", "llm")])
    page = _templates().get_template("report/page.html.j2")
    context = {
        "title": "pyql report" + (f" — {cfg.dataset} {cfg.split} · {cfg.llm}" if cfg else ""),
        "subtitle": " · ".join(b for b in bits if b),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "run": run, "run_name": run.run_dir.name, "stand_in": _stand_in(run),
        "css": Markup(_asset("report.css")),
        "script": Markup(_asset("report.js").replace("</", "<\\/")),
        "summary": _summary(run), "guidelines": _guidelines(run, info),
        "figures": _figures(run), "questions": _questions(run, info, max_trajectories),
        "class_colors": _CLASS_COLORS, "page_size": PAGE_SIZE,
    }
    for chunk in page.generate(**context):
        out.write(chunk)


def report_templates() -> jinja2.Environment:
    """The report's Jinja2 environment (templates ``report/*.html.j2``, autoescaped, with the
    report's filters and globals), for views that show the report's sections elsewhere."""
    return _templates()


@dataclass(frozen=True)
class RunView:
    """What the report shows of a run, for other views of it (``pyql serve``'s run page): the
    rows of its questions (``rows``: each with ``result`` — without query and program —,
    ``status``, ``n_steps``, ``hint_codes`` and ``line``), its aggregate (``metrics``), and the
    report's summary and guideline sections as the report's templates take them
    (``report/summary.html.j2`` and ``report/guidelines.html.j2``)."""

    run_dir: Path
    config: RunConfig | None
    rows: list[_Row]
    metrics: dict[str, Any]
    summary: dict[str, Any]
    guidelines: dict[str, Any]
    notes: list[str]
    bad_lines: int


def read_run(run_dir: str | os.PathLike[str]) -> RunView:
    """The report's reading of ``run_dir`` (one pass over ``results.jsonl``; no trajectory is
    read). Raises :class:`RunDirError` when it is not a directory with a ``results.jsonl``."""
    run = _load(Path(run_dir))
    info = _guideline_info() if run.guideline_stats().get("by_code") else {}
    return RunView(run.run_dir, run.config, run.rows, run.metrics, _summary(run),
                   _guidelines(run, info), run.notes, run.bad_lines)


def write_report(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                 max_trajectories: int = MAX_TRAJECTORIES) -> Path:
    """Write the run's HTML report (``RUN_DIR/report.html`` unless ``out``); return its path.

    Raises :class:`RunDirError` when ``run_dir`` is not a directory with a ``results.jsonl``.
    The page is written to a temporary file next to ``out`` and moved into place.
    """
    run = _load(Path(run_dir))
    target = Path(out) if out is not None else run.run_dir / REPORT
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            _render(run, handle, max_trajectories)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    log.info("report written to %s (%d questions)", target, len(run.rows))
    return target
