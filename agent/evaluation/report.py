"""A run directory as one static HTML page: ``pyql report RUN_DIR`` writes ``report.html``.

The page is a single file with inline CSS, inline SVG charts drawn here in Python and a few lines
of vanilla JS (no network, no CDN, no chart library). It shows:

- **Summary**: the metrics (n, Hit@1 / F1 / EM / Top-1 / accuracy where defined; TPQ, QPQ, CPQ:
  time in seconds, KB/DB queries and cost per question; LLM calls and tokens per question; total
  cost and time), the run's configuration, breakdowns by question meta
  (qtype, hops, ...), and a notice when the "LLM" was the ``gold``/``noisy-gold`` stand-in (the
  scores then measure the environment and the guidelines, not a language model).
- **Guidelines**: ERASER triggers by environment class (``PY``/``KB``/``DB``/``RM``, the prefix of
  the code: the environment whose feedback detected the error), by the paper's Table 8 class of
  the feedback a guideline reads (``KB+RM`` ...) when the guideline registry can be loaded, and
  by code (Table 9), each with how often a triggered hint was followed by an accepted step (a
  successful correction).
- **Charts**: the main metric by question type, steps per question, guideline triggers by code.
- **Questions**: every question with its outcome, filterable (status, type, hints) and searchable;
  each expands (``<details>``, no JS needed) to its trajectory: thought, action, observation or
  guideline hint (highlighted), the query after the step, tokens and time.

All text from the run is HTML-escaped. ``results.jsonl`` is streamed twice (aggregate, then
render) and the page is written as it is produced, so memory stays small; a question that appears
twice (a resumed run) counts once, its last line wins; malformed lines are skipped and counted.

**Big runs.** Every question gets a row in the list (id, question, outcome, gold and predicted
answers, usage: about 1.5 kB), so search and filters cover the whole run, and the JS pages the
list (:data:`PAGE_SIZE` rows per page; without JS every row shows). The step-by-step
trajectories are embedded for at most ``max_trajectories`` questions (:data:`MAX_TRAJECTORIES`;
about 4-10 kB each): all of them when the run is smaller, else errors first, then incorrect
answers, then correct ones, in file order; the page says so, and a row without its trajectory
gives its line in ``results.jsonl``. A 10,000-question MetaQA run makes a ~19 MB page in ~4 s.
Observations and other long texts are cut to a preview with an expander, and to
:data:`MAX_TEXT_CHARS` at most.

**Metrics.** The summary takes its headline numbers from ``metrics.json`` when it is there and
counts as many questions as ``results.jsonl``; without it, from
:func:`pyql.agent.evaluation.metrics.aggregate` when that module is importable and works, else
from :func:`local_aggregate` (plain means over ``results.jsonl``). Guideline tables, breakdowns
and charts are always computed from ``results.jsonl``.

>>> from pyql.agent.evaluation.records import QuestionResult
>>> agg = local_aggregate([QuestionResult(id="1", metrics={"hit@1": 1.0, "f1": 0.5},
...                                       guidelines={"KB201": 2}, corrected={"KB201": 1}),
...                        QuestionResult(id="2", metrics={"hit@1": 0.0, "f1": 0.0})])
>>> agg["n"], agg["hit@1"], agg["f1"], agg["guidelines"]["by_class"]["KB"]["triggers"]
(2, 0.5, 0.25, 2)
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from pyql.agent.evaluation.records import (
    CONFIG,
    METRICS,
    RESULTS,
    QuestionResult,
    RunConfig,
    StepRecord,
)
from pyql.errors import PyqlError

__all__ = [
    "REPORT",
    "MAX_TRAJECTORIES",
    "PAGE_SIZE",
    "PREVIEW_CHARS",
    "MAX_TEXT_CHARS",
    "QUALITY_METRICS",
    "ENV_CLASSES",
    "RunDirError",
    "write_report",
    "local_aggregate",
    "question_status",
    "is_stand_in",
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
QUALITY_METRICS: tuple[str, ...] = ("hit@1", "f1", "em", "top1", "accuracy")
_LABELS = {
    "accuracy": "Accuracy",
    "hit@1": "Hit@1",
    "em": "EM",
    "f1": "F1",
    "top1": "Top-1",
    "tpq": "TPQ",
    "qpq": "QPQ",
    "cpq": "CPQ",
}
_ALIASES = {
    "hits@1": "hit@1",
    "hit1": "hit@1",
    "hit_at_1": "hit@1",
    "exact_match": "em",
    "acc": "accuracy",
}
#: environment classes by code prefix: the environment whose feedback detects the error
ENV_CLASSES: dict[str, str] = {
    "PY": "Python interpreter",
    "KB": "Knowledge base",
    "DB": "Database",
    "RM": "Reasoning memory",
}
_STATUSES = ("correct", "incorrect", "error", "unscored")
_STATUS_LABELS = {
    "correct": "Correct",
    "incorrect": "Incorrect",
    "error": "Error",
    "unscored": "Unscored",
}
#: meta keys used for breakdowns whenever present
_KNOWN_BREAKDOWNS = ("qtype", "hops", "difficulty", "hardness", "agg", "conds", "expressible",
                     "db_id", "level", "type")
#: scalar aggregate keys taken from metrics.json (or metrics.aggregate) when it is current
_HEADLINE = frozenset({"n", *QUALITY_METRICS, "tpq", "qpq", "cpq", "llm_calls", "prompt_tokens",
                       "completion_tokens", "tokens", "cost", "seconds"})
_STAND_IN = re.compile(r"^\s*(noisy-)?gold\b", re.IGNORECASE)


class RunDirError(PyqlError):
    """The run directory cannot be reported (missing, or no ``results.jsonl``)."""


# -- helpers ------------------------------------------------------------------------------------
def _e(value: object) -> str:
    """HTML-escape any value (quotes too, so it is safe in attributes)."""
    return html.escape(str(value), quote=True)


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


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def is_stand_in(llm: str | None) -> str | None:
    """``"gold"``/``"noisy-gold"`` when the llm spec names a stand-in, else None.

    >>> is_stand_in("noisy-gold:0.3"), is_stand_in("gold"), is_stand_in("openai:gpt-4o")
    ('noisy-gold', 'gold', None)
    """
    m = _STAND_IN.match(llm or "")
    if m is None:
        return None
    return "noisy-gold" if m.group(1) else "gold"


def _primary(keys: Iterable[str]) -> str | None:
    """The headline metric among ``keys``: ``accuracy`` when defined, else ``hit@1``, else the
    first of :data:`QUALITY_METRICS` (as :func:`pyql.agent.evaluation.metrics.aggregate`)."""
    have = set(keys)
    for key in ("accuracy", "hit@1", *QUALITY_METRICS):
        if key in have:
            return key
    return None


def question_status(result: QuestionResult) -> str:
    """``error``, ``correct``, ``incorrect`` or ``unscored`` (no per-question metric).

    A question is correct when its headline metric (``accuracy``, else ``hit@1``, ...) is 1.

    >>> question_status(QuestionResult(id="1", metrics={"hit@1": 1.0, "em": 0.0}))
    'correct'
    """
    if result.error is not None:
        return "error"
    key = _primary(k for k, v in result.metrics.items() if _num(v) is not None)
    if key is None:
        return "unscored"
    return "correct" if float(result.metrics[key]) >= 1 - 1e-9 else "incorrect"


def _tokens(result: QuestionResult) -> tuple[float, float]:
    """Prompt and completion tokens: the usage, else the sum over the steps."""
    prompt = _num(result.usage.get("prompt_tokens"))
    completion = _num(result.usage.get("completion_tokens"))
    if prompt is None and completion is None and result.steps:
        prompt = float(sum(s.prompt_tokens for s in result.steps))
        completion = float(sum(s.completion_tokens for s in result.steps))
    return prompt or 0.0, completion or 0.0


def _prefix(code: str) -> str:
    return code[:2] if code[:2] in ENV_CLASSES else "other"


def _scalar_meta(meta: Mapping[str, Any]) -> dict[str, str]:
    """The meta values that can label a breakdown (strings, numbers, booleans), as text."""
    return {str(k): (str(v) if v != "" else "(empty)") for k, v in meta.items()
            if isinstance(v, str) or _num(v) is not None}


# -- aggregation --------------------------------------------------------------------------------
@dataclass
class _Group:
    """Counters of one breakdown cell (or of the whole run)."""

    n: int = 0
    errors: int = 0
    steps: int = 0
    hints: int = 0
    metrics: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    scored: Counter[str] = field(default_factory=Counter)

    def add(self, result: QuestionResult, n_steps: int) -> None:
        self.n += 1
        self.errors += result.error is not None
        self.steps += n_steps
        self.hints += sum(result.guidelines.values())
        for key, value in result.metrics.items():
            number = _num(value)
            if number is not None:
                self.metrics[key] += number
                self.scored[key] += 1

    def mean(self, key: str) -> float | None:
        """The mean of a metric over the questions that have it (an error scores 0 there)."""
        return self.metrics[key] / self.scored[key] if self.scored[key] else None


@dataclass
class _Row:
    """What the report keeps of one question between the two passes."""

    line: int
    result: QuestionResult  # without steps, query and program
    status: str
    n_steps: int
    hint_codes: tuple[str, ...]


class _Aggregator:
    """Everything the summary, the guideline tables and the charts need, in one pass."""

    def __init__(self) -> None:
        self.total = _Group()
        self.finished = 0
        self.stop_reasons: Counter[str] = Counter()
        self.usage: defaultdict[str, float] = defaultdict(float)
        self.prompt_tokens = 0.0
        self.completion_tokens = 0.0
        self.metric_keys: dict[str, None] = {}
        self.by_code: Counter[str] = Counter()
        self.corrected: Counter[str] = Counter()
        self.questions_by_code: Counter[str] = Counter()
        self.questions_with_triggers = 0
        self.meta: dict[str, dict[str, _Group]] = defaultdict(lambda: defaultdict(_Group))
        self.steps_hist: dict[int, Counter[str]] = defaultdict(Counter)

    def add(self, result: QuestionResult, *, n_steps: int | None = None,
            status: str | None = None) -> None:
        n_steps = len(result.steps) if n_steps is None else n_steps
        status = question_status(result) if status is None else status
        self.total.add(result, n_steps)
        self.finished += bool(result.finished)
        self.stop_reasons[result.stop_reason or ""] += 1
        for key in result.metrics:
            self.metric_keys.setdefault(key, None)
        for key, value in result.usage.items():
            number = _num(value)
            if number is not None:
                self.usage[key] += number
        prompt, completion = _tokens(result)
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        fired = {c: k for c, k in result.guidelines.items() if k > 0}
        self.by_code.update(fired)
        self.questions_by_code.update(fired.keys())
        self.questions_with_triggers += bool(fired)
        self.corrected.update({c: k for c, k in result.corrected.items() if k > 0})
        for key, value in _scalar_meta(result.meta).items():
            self.meta[key][value].add(result, n_steps)
        self.steps_hist[n_steps][status] += 1

    # -- views ----------------------------------------------------------------------------------
    def breakdown_keys(self) -> list[str]:
        """Meta keys worth a breakdown: the known ones, and others with few distinct values."""
        n = self.total.n
        keys = [k for k in _KNOWN_BREAKDOWNS if k in self.meta and len(self.meta[k]) >= 1]
        for key, cells in self.meta.items():
            if key in keys:
                continue
            if 2 <= len(cells) <= 12 and len(cells) <= n / 2:
                keys.append(key)
        return keys

    def quality(self) -> list[str]:
        """The quality metrics of this run, in display order."""
        return [k for k in QUALITY_METRICS if k in self.metric_keys]

    def _guideline_stats(self, codes: Iterable[str], total: int) -> dict[str, Any]:
        codes = list(codes)
        triggers = sum(self.by_code[c] for c in codes)
        fixed = sum(min(self.corrected[c], self.by_code[c]) for c in codes)
        return {"triggers": triggers, "share": triggers / total if total else 0.0,
                "questions": sum(self.questions_by_code[c] for c in codes), "corrected": fixed,
                "correction_rate": fixed / triggers if triggers else None}

    def as_dict(self) -> dict[str, Any]:
        n = self.total.n
        per_q: Callable[[float], float | None] = (lambda v: v / n) if n else (lambda v: None)
        out: dict[str, Any] = {"n": n, "primary": _primary(self.metric_keys)}
        for key in [*self.quality(), *[k for k in self.metric_keys if k not in QUALITY_METRICS]]:
            out[key] = self.total.mean(key)
        out.update({
            "tpq": per_q(self.usage["seconds"]),
            "qpq": per_q(self.usage["kb_queries"]),
            "cpq": per_q(self.usage["cost"]),
            "llm_calls": per_q(self.usage["llm_calls"]),
            "prompt_tokens": per_q(self.prompt_tokens),
            "completion_tokens": per_q(self.completion_tokens),
            "tokens": per_q(self.prompt_tokens + self.completion_tokens),
            "steps": per_q(self.total.steps),
            "cost": self.usage["cost"],
            "seconds": self.usage["seconds"],
            "errors": self.total.errors,
            "finished": self.finished / n if n else None,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
        })
        total = sum(self.by_code.values())
        fixed = sum(min(self.corrected[c], k) for c, k in self.by_code.items())
        classes = {cls: [c for c in self.by_code if _prefix(c) == cls]
                   for cls in [*ENV_CLASSES, "other"]}
        out["guidelines"] = {
            "triggers": total,
            "per_question": total / n if n else 0.0,
            "questions": self.questions_with_triggers,
            "corrected": fixed,
            "correction_rate": fixed / total if total else None,
            "by_class": {cls: self._guideline_stats(codes, total)
                         for cls, codes in classes.items() if codes or cls != "other"},
            "by_code": {c: {"class": _prefix(c), **self._guideline_stats([c], total)}
                        for c in sorted(self.by_code)},
        }
        out["by"] = {
            key: {
                value: {"n": g.n, **{m: g.mean(m) for m in self.metric_keys if g.scored[m]},
                        "errors": g.errors}
                for value, g in sorted(self.meta[key].items(), key=lambda kv: _sort_key(kv[0]))
            }
            for key in self.breakdown_keys()
        }
        return out


def local_aggregate(results: Iterable[QuestionResult]) -> dict[str, Any]:
    """The run's aggregate, computed here from the results (a stand-alone fallback).

    The keys and meanings of :func:`pyql.agent.evaluation.metrics.aggregate`: ``n``,
    ``primary``; each per-question metric's mean over the questions that have it (``hit@1``,
    ``f1``, ...); per question ``tpq`` (seconds), ``qpq`` (KB/DB queries), ``cpq`` (cost),
    ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``tokens``, ``steps``; totals
    ``cost`` and ``seconds``; ``errors`` (count), ``finished`` (share), ``stop_reasons``;
    ``guidelines`` (``triggers``, ``per_question``, ``questions``, ``corrected``,
    ``correction_rate``, ``by_class`` keyed by code prefix ``PY``/``KB``/``DB``/``RM``,
    ``by_code``) and ``by`` (meta key -> value -> ``n``, metrics, ``errors``).
    """
    agg = _Aggregator()
    for result in results:
        agg.add(result)
    return agg.as_dict()


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
    path = run_dir / METRICS
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("%s: cannot read (%s); computing metrics from %s", path, exc, RESULTS)
        return None
    return raw if isinstance(raw, dict) else None


def _iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield number, line


def _parse(line: str) -> QuestionResult | None:
    try:
        return QuestionResult.model_validate_json(line)
    except ValidationError:
        return None


def _external_aggregate(results: Sequence[QuestionResult]) -> dict[str, Any] | None:
    """:func:`pyql.agent.evaluation.metrics.aggregate`, if it is there and works."""
    try:
        from pyql.agent.evaluation.metrics import aggregate
    except ImportError:
        return None
    try:
        out = aggregate(list(results))
    except Exception as exc:  # an optional, independently developed module: never fatal here
        log.warning("metrics.aggregate failed (%s); computing metrics locally", exc)
        return None
    if hasattr(out, "model_dump"):
        out = out.model_dump()
    return dict(out) if isinstance(out, Mapping) else None


def _normalise(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Scalar headline numbers of a recorded aggregate, aliases resolved, percents as ratios."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        number = _num(value)
        if number is None:
            continue
        name = _ALIASES.get(key.lower(), key.lower())
        if name in QUALITY_METRICS and number > 1.0 + 1e-9:
            number /= 100.0
        out[name] = number
    return out


@dataclass
class _Run:
    """The first pass over a run directory."""

    run_dir: Path
    config: RunConfig | None
    config_raw: dict[str, Any]
    config_note: str | None
    rows: list[_Row]
    agg: _Aggregator
    local: dict[str, Any]
    headline: dict[str, float]
    primary: str | None
    metrics_source: str
    notes: list[str]
    bad_lines: int
    duplicates: int


def _load(run_dir: Path) -> _Run:
    results_path = run_dir / RESULTS
    if not run_dir.is_dir():
        raise RunDirError(f"no such run directory: {run_dir}")
    if not results_path.is_file():
        raise RunDirError(f"{run_dir} has no {RESULTS}: is it a run directory?")
    config, config_raw, config_note = _read_config(run_dir)
    by_id: dict[str, _Row] = {}
    bad = seen = 0
    for number, line in _iter_lines(results_path):
        result = _parse(line)
        if result is None:
            bad += 1
            continue
        seen += 1
        codes = tuple(s.hint for s in result.steps if s.hint)
        prompt, completion = _tokens(result)
        usage = dict(result.usage)
        usage.setdefault("prompt_tokens", prompt)
        usage.setdefault("completion_tokens", completion)
        light = result.model_copy(update={"steps": (), "query": "", "program": "", "usage": usage})
        by_id.pop(result.id, None)  # re-insert: file order of the last occurrence
        by_id[result.id] = _Row(number, light, question_status(result), len(result.steps), codes)
    rows = list(by_id.values())
    agg = _Aggregator()
    for row in rows:
        agg.add(row.result, n_steps=row.n_steps, status=row.status)
    local = agg.as_dict()
    notes: list[str] = []
    recorded = _read_metrics(run_dir)
    source = f"computed here from {RESULTS}"
    if recorded is not None:
        rec_n = _num(recorded.get("n"))
        if rec_n is not None and int(rec_n) != len(rows):
            notes.append(f"{METRICS} counts {int(rec_n)} questions but {RESULTS} has {len(rows)} "
                         f"(a run still going, or resumed): the metrics are computed from "
                         f"{RESULTS}.")
            recorded = None
        else:
            source = f"from {METRICS}"
    elif rows:
        recorded = _external_aggregate([r.result for r in rows])
        if recorded is not None:
            source = f"computed by metrics.aggregate (no {METRICS})"
    headline = {k: float(v) for k, v in local.items() if _num(v) is not None}
    primary = local.get("primary")
    if recorded is not None:
        headline.update({k: v for k, v in _normalise(recorded).items() if k in _HEADLINE})
        if isinstance(recorded.get("primary"), str):
            primary = recorded["primary"]
    return _Run(run_dir, config, config_raw, config_note, rows, agg, local, headline,
                primary if isinstance(primary, str) else None, source, notes, bad,
                seen - len(rows))


# -- charts (inline SVG) ------------------------------------------------------------------------
_SERIES_COLORS = ("#3b5bdb", "#74c0fc", "#12b886", "#f59f00")
_STATUS_COLORS = {"correct": "#2f9e44", "incorrect": "#e03131", "error": "#868e96",
                  "unscored": "#adb5bd"}
_CLASS_COLORS = {"PY": "#7048e8", "KB": "#1c7ed6", "DB": "#0ca678", "RM": "#f08c00",
                 "other": "#868e96"}
_CHAR_W = 6.6  # approximate width of one character at 12px


def _count_ticks(top: float, parts: int = 5) -> list[int]:
    step = max(1, math.ceil(max(top, 1) / parts))
    mag = 10 ** int(math.log10(step))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= step and float(m * mag).is_integer():
            step = int(m * mag)
            break
    return list(range(0, step * math.ceil(max(top, 1) / step) + 1, step))


def _svg_open(width: int, height: int, label: str) -> str:
    return (f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{_e(label)}" '
            'xmlns="http://www.w3.org/2000/svg" font-family="inherit" font-size="12">'
            f"<title>{_e(label)}</title>")


def _legend(items: Sequence[tuple[str, str]], x: float, y: float) -> str:
    parts = []
    for label, color in items:
        parts.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" rx="2" '
                     f'fill="{color}"/><text x="{x + 14:.1f}" y="{y}" fill="#495057">'
                     f"{_e(label)}</text>")
        x += 14 + len(label) * _CHAR_W + 16
    return "".join(parts)


def _chart_by_group(title: str, groups: Sequence[tuple[str, int, Mapping[str, float | None]]],
                    series: Sequence[str], width: int = 640) -> str:
    """Horizontal grouped bars, 0-100%: one group per breakdown value, one bar per metric."""
    longest = max((len(f"{label} ({n})") for label, n, _ in groups), default=4)
    label_w, right = int(min(width * 0.4, max(80, longest * _CHAR_W + 16))), 48
    bar_h, gap = 12, 10
    plot_w = width - label_w - right
    row_h = bar_h * len(series) + 2 * (len(series) - 1) + gap
    top, bottom = 30, 26
    height = top + row_h * len(groups) + bottom
    out = [_svg_open(width, height, title)]
    out.append(_legend([(_LABELS.get(s, s), _SERIES_COLORS[i % 4]) for i, s in enumerate(series)],
                       label_w, 16))
    axis_y = top + row_h * len(groups) - gap / 2
    for tick in (0, 25, 50, 75, 100):
        x = label_w + plot_w * tick / 100
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y:.1f}" '
                   f'stroke="{"#adb5bd" if tick == 0 else "#e9ecef"}"/>'
                   f'<text x="{x:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle" '
                   f'fill="#868e96">{tick}%</text>')
    max_chars = int((label_w - 14) / _CHAR_W)
    for i, (label, n, values) in enumerate(groups):
        y0 = top + i * row_h
        text = f"{label} ({n})"
        out.append(f'<text x="{label_w - 8}" y="{y0 + (row_h - gap) / 2 + 4:.1f}" '
                   f'text-anchor="end" fill="#212529"><title>{_e(text)}</title>'
                   f"{_e(_short(label, max_chars - len(str(n)) - 3))} "
                   f'<tspan fill="#868e96">({n})</tspan></text>')
        for j, key in enumerate(series):
            value = values.get(key)
            y = y0 + j * (bar_h + 2)
            w = plot_w * max(0.0, min(1.0, value or 0.0))
            out.append(f'<rect x="{label_w}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" '
                       f'rx="2" fill="{_SERIES_COLORS[j % 4]}"><title>{_e(label)}: '
                       f"{_e(_LABELS.get(key, key))} {_pct(value)}%</title></rect>")
            out.append(f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 2:.1f}" '
                       f'font-size="11" fill="#495057">{_pct(value)}</text>')
    out.append("</svg>")
    return "".join(out)


def _chart_steps(hist: Mapping[int, Mapping[str, int]]) -> str:
    """Vertical bars stacked by outcome: how many questions took N steps."""
    width, height, left, right, top, bottom = 640, 260, 44, 16, 30, 40
    keys = sorted(hist)
    lo, hi = (keys[0], keys[-1]) if keys else (0, 1)
    span = hi - lo + 1
    size = max(1, math.ceil(span / 40))
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
    out = [_svg_open(width, height, "Steps per question")]
    out.append(_legend([(_STATUS_LABELS[s], _STATUS_COLORS[s]) for s in present], left, 16))
    for t in ticks:
        y = top + plot_h - plot_h * t / ymax
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" '
                   f'stroke="{"#adb5bd" if t == 0 else "#e9ecef"}"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#868e96">'
                   f"{t}</text>")
    label_every = max(1, math.ceil(len(bins) / 20))
    for i, (start, counts) in enumerate(bins):
        x = left + i * slot + slot * 0.15
        w = slot * 0.7
        y = top + plot_h
        name = str(start) if size == 1 else f"{start}–{start + size - 1}"
        for status in present:
            k = counts[status]
            if not k:
                continue
            h = plot_h * k / ymax
            y -= h
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                       f'fill="{_STATUS_COLORS[status]}"><title>{name} steps: {k} '
                       f"{_STATUS_LABELS[status].lower()}</title></rect>")
        if i % label_every == 0:
            out.append(f'<text x="{x + w / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                       f'fill="#495057">{name}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" '
               'fill="#868e96">steps (LLM turns) per question</text>')
    out.append("</svg>")
    return "".join(out)


def _chart_guidelines(rows: Sequence[tuple[str, int, int]]) -> str:
    """Horizontal bars per code: triggers (light) and successful corrections (solid)."""
    width, label_w, right, bar_h, gap, top, bottom = 640, 64, 150, 14, 8, 30, 26
    plot_w = width - label_w - right
    height = top + (bar_h + gap) * len(rows) + bottom
    ticks = _count_ticks(max((t for _, t, _ in rows), default=1))
    xmax = ticks[-1]
    classes = sorted({c[:2] if c[:2] in ENV_CLASSES else "other" for c, _, _ in rows},
                     key=lambda c: list(_CLASS_COLORS).index(c))
    out = [_svg_open(width, height, "Guideline triggers by code")]
    out.append(_legend([(c, _CLASS_COLORS[c]) for c in classes], label_w, 16))
    out.append(f'<text x="{width - 4}" y="16" text-anchor="end" fill="#868e96">'
               "solid: followed by a correction</text>")
    axis_y = top + (bar_h + gap) * len(rows) - gap / 2
    for t in ticks:
        x = label_w + plot_w * t / xmax
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y:.1f}" '
                   f'stroke="{"#adb5bd" if t == 0 else "#e9ecef"}"/>'
                   f'<text x="{x:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle" '
                   f'fill="#868e96">{t}</text>')
    for i, (code, triggers, corrected) in enumerate(rows):
        y = top + i * (bar_h + gap)
        color = _CLASS_COLORS.get(code[:2], _CLASS_COLORS["other"])
        w = plot_w * triggers / xmax
        wc = plot_w * min(corrected, triggers) / xmax
        rate = f"{100 * corrected / triggers:.0f}%" if triggers else "—"
        out.append(f'<text x="{label_w - 8}" y="{y + bar_h - 3}" text-anchor="end" '
                   f'font-family="ui-monospace, SFMono-Regular, Menlo, monospace" '
                   f'fill="#212529">{_e(code)}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" rx="2" '
                   f'fill="{color}" fill-opacity="0.3"><title>{_e(code)}: {triggers} '
                   f"triggers</title></rect>")
        out.append(f'<rect x="{label_w}" y="{y}" width="{wc:.1f}" height="{bar_h}" rx="2" '
                   f'fill="{color}"><title>{_e(code)}: {corrected} corrected</title></rect>')
        out.append(f'<text x="{label_w + w + 6:.1f}" y="{y + bar_h - 3}" font-size="11" '
                   f'fill="#495057">{triggers} · {corrected} corrected ({rate})</text>')
    out.append("</svg>")
    return "".join(out)


# -- page sections ------------------------------------------------------------------------------
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _guideline_info() -> dict[str, tuple[str, str, str]]:
    """code -> (name, Table 8 class, description) from the installed guidelines, if loadable."""
    try:
        from pyql.guidelines import default_registry
        from pyql.guidelines.base import env_class, parse_docstring

        registry = default_registry()
    except (ImportError, PyqlError) as exc:
        log.debug("guideline registry not available for the report: %s", exc)
        return {}
    return {g.code: (g.name, env_class(g.needs), parse_docstring(type(g).__doc__)["description"])
            for g in registry}


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "",
           numeric_from: int = 1, table_id: str | None = None) -> str:
    """A table; cells are HTML already (escape before); columns from ``numeric_from`` align
    right."""
    attrs = (f' id="{table_id}"' if table_id else "") + (f' class="{cls}"' if cls else "")
    out = [f"<table{attrs}><thead><tr>"]
    out += [f'<th{" class=num" if i >= numeric_from else ""}>{h}</th>' for i, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(
            f'<td{" class=num" if i >= numeric_from else ""}>{c}</td>' for i, c in enumerate(row)
        ) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _header(run: _Run, generated: str) -> str:
    cfg = run.config
    title = "pyql evaluation report"
    bits = ([cfg.dataset, cfg.split, cfg.llm] if cfg else
            [str(run.config_raw.get(k, "")) for k in ("dataset", "split", "llm")])
    sub = " · ".join(_e(b) for b in bits if b)
    return (f'<header class="top"><div class="wrap"><div class="brand">pyql</div>'
            f"<div><h1>{title}</h1><p class=sub>{sub}</p></div>"
            f'<div class="meta"><span>run '
            f"<code>{_e(run.run_dir.name)}</code></span>"
            f"<span>generated {_e(generated)}</span></div></div>"
            '<nav class="wrap"><a href="#summary">Summary</a><a href="#guidelines">Guidelines</a>'
            '<a href="#charts">Charts</a><a href="#questions">Questions</a></nav></header>')


def _notices(run: _Run) -> str:
    out = []
    llm = run.config.llm if run.config else str(run.config_raw.get("llm", ""))
    kind = is_stand_in(llm)
    if kind:
        rate = llm.partition(":")[2].strip()
        what = ("replays each question's gold program" if kind == "gold" else
                "replays each question's gold program and injects the mistakes LLMs typically "
                "make" + (f" (rate {_e(rate)})" if rate else ""))
        out.append(
            f'<div class="notice stand-in" id="stand-in-note"><strong>No language model in this '
            f"run.</strong> The “LLM” is the <code>{_e(kind)}</code> stand-in, which {what}. The "
            "scores measure the environment (KB/DB, tools, profile) and the ERASER guidelines "
            "(how they catch and correct mistakes), not an LLM; token and cost figures are "
            "those of the stand-in.</div>")
    if run.config_note:
        out.append(f'<div class="notice warn">{_e(run.config_note)}</div>')
    for note in run.notes:
        out.append(f'<div class="notice warn">{_e(note)}</div>')
    if run.bad_lines:
        out.append(f'<div class="notice warn">{run.bad_lines} malformed line(s) of {RESULTS} '
                   "were skipped (a run cut short writes a partial last line).</div>")
    if run.duplicates:
        out.append(f'<div class="notice">{run.duplicates} question(s) appear more than once in '
                   f"{RESULTS} (a resumed run); the last line of each counts.</div>")
    return "".join(out)


def _summary(run: _Run) -> str:
    h, agg = run.headline, run.agg
    n = int(h.get("n", 0))
    quality = agg.quality()
    primary = run.primary if run.primary in quality else _primary(quality)
    shown = ([primary] if primary else []) + [k for k in quality if k != primary]
    cards = [(_LABELS[k], _pct(h.get(k)), "%") for k in shown[:3]]
    cards += [("Questions", _int(n), ""), ("Errors", _int(agg.total.errors), ""),
              ("TPQ", _dec(h.get("tpq"), 1), "s"), ("CPQ", _money(h.get("cpq")), "")]
    out = ['<section id="summary"><h2>Summary</h2><div class="cards">']
    for label, value, unit in cards:
        out.append(f'<div class="card"><div class="card-label">{_e(label)}</div>'
                   f'<div class="card-value">{value}<span class="unit">{_e(unit)}</span></div>'
                   "</div>")
    out.append("</div>")
    stops = ", ".join(f"{k or 'none'} {v}" for k, v in
                      sorted(agg.stop_reasons.items(), key=lambda kv: -kv[1]))
    rows: list[tuple[str, str, str]] = [
        ("Questions (n)", _int(n), f"{agg.finished:,} finished (accepted execute); "
                                   f"stop reasons: {stops}"),
        ("Errors", _int(agg.total.errors), "questions ended by an error (the run went on)"),
    ]
    for key in shown:
        note = "% (headline)" if key == primary else "%"
        rows.append((_LABELS[key], _pct(h.get(key)), note))
    for key in [k for k in agg.metric_keys if k not in QUALITY_METRICS]:
        rows.append((key, _dec(h.get(key), 3), "mean per question"))
    rows += [
        ("TPQ", _dec(h.get("tpq"), 2), "time per question, seconds (LLM and environment)"),
        ("QPQ", _dec(h.get("qpq")), "KB/DB queries per question"),
        ("CPQ", _money(h.get("cpq")), "LLM cost per question"),
        ("LLM calls / question", _dec(h.get("llm_calls")), ""),
        ("Tokens / question", _int(h.get("tokens")), f"{_int(h.get('prompt_tokens'))} prompt + "
                                                      f"{_int(h.get('completion_tokens'))} "
                                                      "completion"),
        ("Steps / question", _dec(h.get("steps")), "LLM turns, hints included"),
        ("Total cost", _money(h.get("cost")), "US$"),
        ("Total time", _dec(h.get("seconds"), 1), "seconds, summed over questions"),
    ]
    out.append('<div class="grid2"><div><h3>Metrics</h3>')
    out.append(_table(["Metric", "Value", ""], [(_e(a), b, f'<span class="muted">{_e(c)}</span>')
                                                for a, b, c in rows],
                      cls="kv-table", numeric_from=1, table_id="metrics-table"))
    out.append(f'<p class="muted small" id="metrics-source">Headline metrics '
               f"{_e(run.metrics_source)}; everything else from {RESULTS}.</p></div>")
    out.append("<div><h3>Configuration</h3>" + _config_table(run) + "</div></div>")
    out.append(_breakdowns(run, quality))
    out.append("</section>")
    return "".join(out)


def _config_table(run: _Run) -> str:
    if run.config is not None:
        raw = run.config.model_dump(mode="json")
    else:
        raw = dict(run.config_raw)
    labels = {"llm": "LLM", "kb": "KB", "db": "DB", "llm_cache": "LLM cache",
              "kb_cache": "KB cache", "pyql_version": "pyql version", "max_steps": "max steps",
              "data_dir": "data dir", "base_url": "base URL"}
    rows = []
    extra = raw.pop("extra", None)
    for key, value in raw.items():
        if value is None or value == "":
            continue
        if key == "guidelines" and isinstance(value, bool):
            state = "on" if value else "off"
            text = f'<span class="pill {state}">{state}</span>'
        else:
            text = f"<code>{_e(value)}</code>" if key in ("llm", "data_dir") else _e(value)
        rows.append((_e(labels.get(key, key.replace("_", " "))), text))
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            rows.append((_e(f"extra.{key}"), _e(_short(shown, 200))))
    if not rows:
        return '<p class="muted">No configuration recorded.</p>'
    return _table(["Setting", "Value"], rows, cls="kv-table", numeric_from=9,
                  table_id="config-table")


def _breakdowns(run: _Run, quality: Sequence[str]) -> str:
    keys = run.agg.breakdown_keys()
    if not keys:
        return ""
    out = ['<h3>Breakdowns</h3><div class="stack">']
    for key in keys:
        cells = sorted(run.agg.meta[key].items(), key=lambda kv: _sort_key(kv[0]))
        head = [_e(key), "n", *[_LABELS[m] for m in quality], "errors", "steps/q", "hints/q"]
        rows = []
        for value, g in cells:
            rows.append([_e(value), _int(g.n), *[_pct(g.mean(m)) for m in quality],
                         _int(g.errors), _dec(g.steps / g.n if g.n else None, 1),
                         _dec(g.hints / g.n if g.n else None, 2)])
        out.append(f'<div class="scroll">'
                   f"{_table(head, rows, table_id=f'breakdown-{_slug(key)}')}</div>")
    out.append("</div>")
    return "".join(out)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _guidelines(run: _Run, info: Mapping[str, tuple[str, str, str]]) -> str:
    agg = run.agg
    total = sum(agg.by_code.values())
    n = agg.total.n
    out = ['<section id="guidelines"><h2>Guidelines (ERASER)</h2>']
    enabled = run.config.guidelines if run.config else run.config_raw.get("guidelines")
    if not total:
        state = "were off in this run" if enabled is False else "never fired in this run"
        out.append(f'<p class="muted" id="guidelines-empty">The guidelines {state}.</p>')
        out.append("</section>")
        return "".join(out)
    corrected = sum(min(agg.corrected[c], k) for c, k in agg.by_code.items())
    out.append(
        f'<p class="lead">{total:,} triggers in {agg.questions_with_triggers:,} of {n:,} '
        f"questions ({_pct(agg.questions_with_triggers / n if n else None)}%), "
        f"{total / n if n else 0:.2f} per question; {corrected:,} "
        f"({_pct(corrected / total)}%) were followed by an accepted step (a successful "
        "correction).</p>")
    # by environment class (code prefix)
    by_class: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for code, k in agg.by_code.items():
        cls = code[:2] if code[:2] in ENV_CLASSES else "other"
        by_class[cls][0] += 1
        by_class[cls][1] += k
        by_class[cls][2] += min(agg.corrected[code], k)
    rows = []
    for cls in [*ENV_CLASSES, "other"]:
        if cls not in by_class:
            continue
        codes, k, c = by_class[cls]
        dot = f'<span class="dot" style="background:{_CLASS_COLORS[cls]}"></span>'
        rows.append([f"{dot}<strong>{_e(cls)}</strong> "
                     f'<span class="muted">{_e(ENV_CLASSES.get(cls, "other codes"))}</span>',
                     _int(codes), _int(k), _pct(k / total), _int(c), _pct(c / k if k else None)])
    out.append('<div class="grid2"><div><h3>By environment</h3>')
    out.append(_table(["Class (code prefix)", "codes", "triggers", "share", "corrected",
                       "rate"], rows, table_id="guidelines-by-class"))
    out.append('<p class="muted small">The prefix names the environment whose feedback detects '
               "the error (Table 8). Share: of all triggers; rate: triggers followed by an "
               "accepted step.</p></div>")
    # by the feedback a guideline reads (Table 8 classes), when the registry is available
    if info:
        needs: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for code, k in agg.by_code.items():
            cls = info[code][1] if code in info else "unknown"
            needs[cls][0] += 1
            needs[cls][1] += k
            needs[cls][2] += min(agg.corrected[code], k)
        rows = [[_e(cls), _int(c0), _int(k), _pct(k / total), _int(c), _pct(c / k if k else None)]
                for cls, (c0, k, c) in sorted(needs.items(), key=lambda kv: -kv[1][1])]
        out.append("<div><h3>By feedback read</h3>")
        out.append(_table(["Feedback", "codes", "triggers", "share", "corrected",
                           "rate"], rows, table_id="guidelines-by-feedback"))
        out.append('<p class="muted small">The feedback each guideline reads: Python, KB, RM '
                   "(reasoning memory) or combinations such as KB+RM.</p></div>")
    out.append("</div>")
    # by code (Table 9)
    rows = []
    for code, k in sorted(agg.by_code.items(), key=lambda kv: (-kv[1], kv[0])):
        name, _, desc = info.get(code, ("", "", ""))
        c = min(agg.corrected[code], k)
        rows.append([f'<code class="code c-{_e(code[:2])}">{_e(code)}</code>',
                     f'<span class="gname">{_e(name)}</span>'
                     f'<span class="gdesc">{_e(_short(desc, 140))}</span>',
                     _int(k), _pct(k / total), _int(agg.questions_by_code[code]), _int(c),
                     _pct(c / k if k else None)])
    out.append("<h3>By code</h3>")
    out.append(_table(["Code", "Guideline", "triggers", "% of triggers", "questions",
                       "corrected", "% corrected"], rows, numeric_from=2,
                      table_id="guidelines-by-code"))
    out.append("</section>")
    return "".join(out)


def _charts(run: _Run) -> str:
    agg = run.agg
    figures = []
    quality = agg.quality()
    primary = run.primary if run.primary in quality else _primary(quality)
    series = ([primary] if primary else []) + (["f1"] if "f1" in quality and primary != "f1"
                                               else [])
    for key in agg.breakdown_keys()[:2]:
        if not series:
            break
        cells = sorted(agg.meta[key].items(), key=lambda kv: _sort_key(kv[0]))
        if len(cells) > 30:
            cells = sorted(cells, key=lambda kv: -kv[1].n)[:30]
            note = " (the 30 most frequent)"
        else:
            note = ""
        groups = [(v, g.n, {m: g.mean(m) for m in series}) for v, g in cells]
        names = " and ".join(_LABELS[s] for s in series)
        wide = max(len(v) for v, _ in cells) > 22  # long labels: the chart takes a full row
        figures.append((f"chart-by-{_slug(key)}", f"{names} by {key}{note}",
                        _chart_by_group(f"{names} by {key}", groups, series,
                                        width=1100 if wide else 640)))
    if agg.steps_hist:
        figures.append(("chart-steps", "Steps per question, by outcome",
                        _chart_steps(agg.steps_hist)))
    top = sorted(agg.by_code.items(), key=lambda kv: (-kv[1], kv[0]))[:25]
    if top:
        more = len(agg.by_code) - len(top)
        figures.append(("chart-guidelines",
                        "Guideline triggers by code" + (f" (top 25; {more} more)" if more else ""),
                        _chart_guidelines([(c, k, agg.corrected[c]) for c, k in top])))
    out = ['<section id="charts"><h2>Charts</h2>']
    if not figures:
        out.append('<p class="muted">Nothing to chart yet.</p>')
    out.append('<div class="charts">')
    for fig_id, caption, svg in figures:
        span = ' class="wide"' if 'viewBox="0 0 1100 ' in svg else ""
        out.append(f'<figure id="{fig_id}"{span}><figcaption>{_e(caption)}</figcaption>{svg}'
                   "</figure>")
    out.append("</div></section>")
    return "".join(out)


# -- the trajectory viewer ----------------------------------------------------------------------
def _long(text: str, cls: str = "") -> str:
    """A <pre> for ``text``; past :data:`PREVIEW_CHARS` a preview and an expander."""
    attr = f' class="{cls}"' if cls else ""
    if len(text) <= PREVIEW_CHARS:
        return f"<pre{attr}>{_e(text)}</pre>"
    cut = text.rfind("\n", 0, PREVIEW_CHARS)
    head = text[: cut if cut > PREVIEW_CHARS // 2 else PREVIEW_CHARS]
    body = text[:MAX_TEXT_CHARS]
    rest = len(text) - len(body)
    tail = (f'\n<span class="cut">[… {rest:,} more characters not embedded; see '
            f"{RESULTS}]</span>" if rest else "")
    return (f'<div class="long"><pre{attr}>{_e(head)}<span class="cut">…</span></pre>'
            f'<details class="more"><summary>Show all ({len(text):,} characters)</summary>'
            f"<pre{attr}>{_e(body)}{tail}</pre></details></div>")


def _values(values: Sequence[Any]) -> str:
    if not values:
        return '<span class="muted">none</span>'
    shown = [f'<span class="val">{_e(_short(str(v), 200))}</span>' for v in values[:MAX_VALUES]]
    more = len(values) - MAX_VALUES
    if more > 0:
        shown.append(f'<span class="muted">+{more:,} more</span>')
    return "".join(shown)


def _step(step: StepRecord, previous_query: str, info: Mapping[str, tuple[str, str, str]]) -> str:
    kind = "hint" if step.hint else ("error" if step.status in ("error", "backend_error",
                                                                "timeout") else "ok")
    out = [f'<li class="step k-{kind}" data-step="{step.n}"><div class="step-head">'
           f'<span class="step-n">Step {step.n}</span>'
           f'<span class="st st-{_e(_slug(step.status))}">{_e(step.status)}</span>']
    tokens = []
    if step.prompt_tokens or step.completion_tokens:
        tokens.append(f"{step.prompt_tokens:,} + {step.completion_tokens:,} tokens")
    if step.seconds:
        tokens.append(f"{step.seconds:.2f} s")
    if tokens:
        out.append(f'<span class="tok">{" · ".join(tokens)}</span>')
    out.append("</div>")
    if step.thought:
        out.append(f'<div class="row"><span class="lbl">Thought</span>'
                   f'<div class="thought">{_long(step.thought, "txt")}</div></div>')
    if step.action:
        out.append(f'<div class="row"><span class="lbl">Action</span>'
                   f'<div class="action">{_long(step.action, "code")}</div></div>')
    if step.hint:
        name = info.get(step.hint, ("", "", ""))[0]
        out.append(f'<div class="row"><span class="lbl">Guideline</span><div class="hint">'
                   f'<div class="hint-head"><code class="code c-{_e(step.hint[:2])}">'
                   f"{_e(step.hint)}</code> <span>{_e(name)}</span></div>"
                   f'{_long(step.observation, "txt")}</div></div>')
    else:
        out.append(f'<div class="row"><span class="lbl">Observation</span>'
                   f'<div class="obs">{_long(step.observation, "txt")}</div></div>')
    if step.query and step.query != previous_query:
        out.append('<details class="qry"><summary>Query after this step</summary>'
                   f"{_long(step.query, 'code')}</details>")
    elif step.query:
        out.append('<div class="qry-same">query unchanged</div>')
    out.append("</li>")
    return "".join(out)


def _question(index: int, row: _Row, full: QuestionResult | None, group_key: str | None,
              info: Mapping[str, tuple[str, str, str]]) -> str:
    r = row.result
    meta = _scalar_meta(r.meta)
    group = meta.get(group_key, "") if group_key else ""
    hints = len(row.hint_codes)
    search = " ".join([r.id, r.question, group, *sorted(set(row.hint_codes)),
                       *(str(v) for v in r.predicted[:5])]).lower()
    attrs = (f'id="q-{index}" class="q s-{row.status}" data-status="{row.status}" '
             f'data-group="{_e(group)}" data-hints="{hints}" data-search="{_e(search)}"')
    chips = []
    if group:
        chips.append(f'<span class="chip">{_e(_short(group, 40))}</span>')
    chips.append(f'<span class="chip">{row.n_steps} step{"s" if row.n_steps != 1 else ""}</span>')
    if hints:
        chips.append(f'<span class="chip chip-hint" title="{_e(", ".join(row.hint_codes))}">'
                     f'{hints} hint{"s" if hints != 1 else ""}</span>')
    for key in ("f1",):
        value = _num(r.metrics.get(key))
        if value is not None and row.status == "incorrect":
            chips.append(f'<span class="chip">{_LABELS[key]} {value:.2f}</span>')
    out = [f"<details {attrs}><summary>"
           f'<span class="badge b-{row.status}">{_STATUS_LABELS[row.status]}</span>'
           f'<span class="qid">{_e(r.id)}</span>'
           f'<span class="qtext">{_e(_short(r.question, 300)) or "<em>no question</em>"}</span>'
           f'<span class="chips">{"".join(chips)}</span></summary><div class="qbody">']
    if len(r.question) > 300:
        out.append(f'<p class="fullq">{_e(r.question[:MAX_TEXT_CHARS])}</p>')
    if r.error is not None:
        out.append(f'<div class="errbox"><strong>Error.</strong> {_long(r.error, "txt")}</div>')
    facts = [("Gold", _values(r.gold)), ("Predicted", _values(r.predicted))]
    if r.metrics:
        facts.append(("Metrics", " · ".join(
            f"{_e(_LABELS.get(k, k))} <strong>{_dec(_num(v), 2)}</strong>"
            for k, v in r.metrics.items())))
    stop = [r.stop_reason or "—", "finished" if r.finished else "not finished"]
    facts.append(("Stop", _e(" · ".join(stop))))
    usage = []
    for key, label in (("llm_calls", "LLM calls"), ("prompt_tokens", "prompt tokens"),
                       ("completion_tokens", "completion tokens"), ("kb_queries", "queries"),
                       ("seconds", "s")):
        value = _num(r.usage.get(key))
        if value is not None:
            usage.append(f"{_dec(value, 2) if key == 'seconds' else _int(value)} {label}")
    cost = _num(r.usage.get("cost"))
    if cost is not None:
        usage.append(_money(cost))
    if usage:
        facts.append(("Usage", _e(" · ".join(usage))))
    if r.guidelines:
        facts.append(("Guidelines", " ".join(
            f'<code class="code c-{_e(c[:2])}">{_e(c)}</code>×{k}'
            + (f' <span class="muted">({r.corrected.get(c, 0)} corrected)</span>')
            for c, k in r.guidelines.items())))
    if meta:
        facts.append(("Meta", " · ".join(f"{_e(k)}: {_e(_short(v, 80))}"
                                         for k, v in meta.items())))
    out.append('<dl class="facts">' + "".join(f"<dt>{a}</dt><dd>{b}</dd>" for a, b in facts)
               + "</dl>")
    if full is None:
        out.append(f'<p class="muted notembedded">Trajectory not embedded (see the note above); '
                   f"it is line {row.line} of {RESULTS}.</p>")
    else:
        if full.steps:
            out.append('<ol class="steps">')
            previous = ""
            for step in full.steps:
                out.append(_step(step, previous, info))
                previous = step.query or previous
            out.append("</ol>")
        else:
            out.append('<p class="muted">No steps recorded.</p>')
        if full.query:
            out.append('<details class="final" open><summary>Final query</summary>'
                       f"{_long(full.query, 'code')}</details>")
        if full.program:
            out.append('<details class="final"><summary>Program</summary>'
                       f"{_long(full.program, 'code')}</details>")
    out.append("</div></details>\n")
    return "".join(out)


def _embedded(rows: Sequence[_Row], cap: int) -> tuple[set[str], str | None]:
    """The ids whose trajectories are embedded, and the note that says which."""
    if len(rows) <= cap:
        return {r.result.id for r in rows}, None
    chosen: list[str] = []
    order = ("error", "incorrect", "unscored", "correct")
    for status in order:
        for row in rows:
            if len(chosen) >= cap:
                break
            if row.status == status:
                chosen.append(row.result.id)
    counts = Counter(r.status for r in rows)
    status_of = {r.result.id: r.status for r in rows}
    got = Counter(status_of[i] for i in chosen)
    detail = " (" + ", ".join(f"{got[s]:,} of {counts[s]:,} {_STATUS_LABELS[s].lower()}"
                              for s in order if counts[s]) + ")"
    note = (f"Step-by-step trajectories are embedded for {len(chosen):,} of {len(rows):,} "
            f"questions{detail}: errors first, then incorrect answers, then correct ones, to keep "
            "the page small. Every question is listed and searchable; the others link to their "
            f"line in {RESULTS}. Raise the cap with <code>pyql report --max-trajectories N</code>.")
    return set(chosen), note


def _questions(run: _Run, out: TextIO, info: Mapping[str, tuple[str, str, str]],
               max_trajectories: int) -> None:
    rows = run.rows
    keys = run.agg.breakdown_keys()
    group_key = keys[0] if keys else None
    embedded, note = _embedded(rows, max(0, max_trajectories))
    counts = Counter(r.status for r in rows)
    out.write('<section id="questions"><h2>Questions</h2>')
    if note:
        out.write(f'<div class="notice" id="cap-note">{note}</div>')
    # the toolbar works only with JS (CSS shows it once the script ran)
    out.write('<div class="toolbar" id="q-toolbar" data-ready="0">'
              '<input type="search" id="q-search" placeholder="Search id, question, answer, '
              'guideline code…" aria-label="Search questions">'
              '<div class="seg" role="group" aria-label="Outcome">'
              f'<button type="button" data-status="" aria-pressed="true">All '
              f'<span>{len(rows):,}</span></button>')
    for status in _STATUSES:
        if counts[status]:
            out.write(f'<button type="button" data-status="{status}" aria-pressed="false">'
                      f"{_STATUS_LABELS[status]} <span>{counts[status]:,}</span></button>")
    out.write("</div>")
    if group_key:
        values = sorted(run.agg.meta[group_key], key=_sort_key)
        out.write(f'<select id="q-group" aria-label="{_e(group_key)}">'
                  f'<option value="">all {_e(group_key)}</option>')
        out.write("".join(f'<option value="{_e(v)}">{_e(_short(v, 60))}</option>' for v in values))
        out.write("</select>")
    out.write('<label class="check"><input type="checkbox" id="q-hints"> with guideline hints'
              "</label>"
              "</div>")
    out.write(f'<div class="listinfo"><span id="q-count" data-count="{len(rows)}">'
              f"{len(rows):,} questions</span>"
              '<span class="pager" id="q-pager"></span>'
              '<span class="bulk"><button type="button" id="q-expand">expand all</button>'
              '<button type="button" id="q-collapse">collapse all</button></span></div>')
    out.write(f'<div id="q-list" data-page-size="{PAGE_SIZE}" data-total="{len(rows)}">\n')
    if not rows:
        out.write('<p class="muted">No results yet.</p>')
    # second pass: rows are in file order (of their last line), so one forward scan suffices
    lines: Iterator[tuple[int, str]] = (
        _iter_lines(run.run_dir / RESULTS) if embedded else iter(()))
    for index, row in enumerate(rows):
        result: QuestionResult | None = None
        if row.result.id in embedded:
            for number, line in lines:
                if number == row.line:
                    result = _parse(line)
                    break
        out.write(_question(index, row, result, group_key, info))
    out.write("</div>")
    out.write('<noscript><p class="muted small">Filters and paging need JavaScript; every '
              "question is listed above.</p></noscript></section>")


# -- the page -------------------------------------------------------------------------------------
def _render(run: _Run, out: TextIO, max_trajectories: int) -> None:
    info = _guideline_info() if run.agg.by_code else {}
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cfg = run.config
    title = "pyql report" + (f" — {cfg.dataset} {cfg.split} · {cfg.llm}" if cfg else "")
    out.write("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              '<meta name="viewport" content="width=device-width, initial-scale=1">'
              '<meta name="generator" content="pyql report">'
              f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>\n<body>")
    out.write(_header(run, generated))
    out.write('<main class="wrap">')
    out.write(_notices(run))
    out.write(_summary(run))
    out.write(_guidelines(run, info))
    out.write(_charts(run))
    _questions(run, out, info, max_trajectories)
    out.write("</main>")
    out.write(f'<footer class="wrap muted small">Generated by <code>pyql report</code> from '
              f"<code>{_e(run.run_dir.name)}/{RESULTS}</code>. A static page: no network "
              "access, all data inline.</footer>")
    script = _asset("report.js").replace("</", "<\\/")
    out.write(f"<script>{script}</script></body></html>\n")


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

