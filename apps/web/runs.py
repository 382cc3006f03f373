"""The Runs pages' data: the run directories the server may open, one run's rows, a question,
and two runs compared question by question.

**Which directories.** Only those under the roots: the ones ``pyql serve`` was given
(``--runs DIR``, repeatable, and the folder the Ask page saves to) and those opened by path on
the Runs page (:meth:`RunIndex.add`, a CSRF-checked ``POST``). A root is a run directory itself
or a folder of them (two levels deep: an ablation's ``eraser_on/``, ``eraser_off/``). A run is
named in URLs by its key, ``ROOT_INDEX/RELATIVE_PATH``; a key that leaves its root is refused
(:class:`RunNotFound`), so no ``GET`` reads a file outside the roots.

**Reading.** A run is read by the static report's reader
(:func:`~pyql.agent.evaluation.report.read_run`: the same statuses, summary and guideline
sections); the rows a page filters carry the outcome, the guideline codes that fired and the hop count (``meta.hops``, else ``meta.qtype``'s
``Nhop``). A run being written (its ``.lock`` held by ``pyql eval``) is *live*: the page asks
for the rows after the last line it has (:func:`rows_after`).

**Comparing.** :func:`compare_runs` pairs the questions two runs share: a question *flipped*
when its outcome differs; for each flipped one, the first step where the two trajectories
differ (action, hint or status) is the divergence shown.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pyql.agent.evaluation.records import RESULTS, QuestionResult
from pyql.agent.evaluation.report import RunView, question_status, read_run
from pyql.agent.evaluation.rundir import LOCK, RunDir, RunDirError
from pyql.agent.trajectory import Step, Trajectory
from pyql.errors import PyqlError

__all__ = ["RunNotFound", "RunRef", "RunIndex", "compare_runs", "first_divergence", "headline",
           "is_live",
           "question_page", "row_json", "rows_after", "hops_of"]

log = logging.getLogger(__name__)


class RunNotFound(PyqlError):
    """No run of that key under the server's roots (``key``)."""

    def __init__(self, key: str, why: str = "no such run") -> None:
        super().__init__(f"{why}: {key}")
        self.key = key


@dataclass(frozen=True)
class RunRef:
    """One run directory the server may open: its URL key and its path."""

    key: str
    path: Path

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1] or self.path.name


def _is_run(path: Path) -> bool:
    """A run directory with results to show (a run that has written none yet is listed with
    its first; an ablation's folder, whose results are in its sub-runs, is not a run)."""
    return (path / RESULTS).is_file()


class RunIndex:
    """The roots and the runs under them (module docstring)."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = [Path(r).expanduser().resolve() for r in roots]

    def runs(self) -> list[RunRef]:
        found: list[RunRef] = []
        for i, root in enumerate(self.roots):
            for path in _walk(root, depth=2):
                rel = path.relative_to(root).as_posix()
                found.append(RunRef(f"{i}/{'' if rel == '.' else rel}", path))
        return found

    def add(self, path: str | os.PathLike[str]) -> RunRef:
        """Serve ``path`` too (a run directory or a folder of them: the Runs page's "open"); its
        first run. :class:`RunNotFound` when it holds none."""
        root = Path(path).expanduser().resolve()
        if root in self.roots:
            index = self.roots.index(root)
        else:
            if not root.is_dir() or next(_walk(root, depth=2), None) is None:
                raise RunNotFound(str(path), "not a run directory, nor a folder of them")
            self.roots.append(root)
            index = len(self.roots) - 1
        first = next(ref for ref in self.runs() if ref.key.partition("/")[0] == str(index))
        return first

    def get(self, key: str) -> RunRef:
        head, _, rest = key.partition("/")
        if not head.isdigit() or int(head) >= len(self.roots):
            raise RunNotFound(key)
        root = self.roots[int(head)]
        path = (root / rest).resolve() if rest else root
        if path != root and root not in path.parents:
            raise RunNotFound(key, "outside the served run folders")
        if not path.is_dir() or not _is_run(path):
            raise RunNotFound(key)
        return RunRef(f"{head}/{path.relative_to(root).as_posix() if path != root else ''}",
                      path)


def _walk(root: Path, depth: int) -> Iterator[Path]:
    if not root.is_dir():
        return
    if _is_run(root):
        yield root
        if depth <= 0:
            return
    if depth <= 0:
        return
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        yield from _walk(child, depth - 1)


def is_live(path: Path) -> bool:
    """Whether a ``pyql eval`` holds the run's lock now (the run is being written). Read-only:
    an existing ``.lock`` is opened for reading and probed; none means not running."""
    lock = path / LOCK
    if not lock.is_file():
        return False
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return False
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def headline(path: Path) -> dict[str, Any]:
    """What the runs list shows of a run from its ``metrics.json`` (the questions and the
    headline metric; empty when there is none yet or it cannot be read)."""
    try:
        metrics = RunDir(path).read_metrics() or {}
    except RunDirError:
        return {}
    primary = metrics.get("primary")
    value = metrics.get(primary) if isinstance(primary, str) else None
    return {"n": metrics.get("n"), "metric": primary if value is not None else None,
            "value": value if isinstance(value, (int, float)) else None}


_HOPS = re.compile(r"(\d+)\s*-?hop")


def hops_of(meta: dict[str, Any]) -> str:
    """A question's hop count: ``meta.hops``, else the ``N`` of an ``Nhop`` qtype or id; ""
    when unknown."""
    hops = meta.get("hops")
    if isinstance(hops, (int, float)) and not isinstance(hops, bool):
        return str(int(hops))
    if isinstance(hops, str) and hops.strip():
        return hops.strip()
    for key in ("qtype", "id"):
        value = meta.get(key)
        if isinstance(value, str) and (m := _HOPS.search(value)):
            return m.group(1)
    return ""


def row_json(row: Any, primary: str | None) -> dict[str, Any]:
    """One question of the run's table (what the page filters and shows)."""
    r: QuestionResult = row.result
    value = r.metrics.get(primary) if primary else None
    return {
        "id": r.id, "line": row.line, "question": r.question, "status": row.status,
        "hints": sorted(set(row.hint_codes)), "hops": hops_of({**r.meta, "id": r.id}),
        "steps": row.n_steps, "score": value if isinstance(value, (int, float)) else None,
        "predicted": [str(v) for v in r.predicted[:5]],
        "seconds": r.usage.get("seconds"),
    }


def read(ref: RunRef) -> RunView:
    try:
        return read_run(ref.path)
    except RunDirError as exc:
        raise RunNotFound(ref.key, str(exc)) from None


def rows_after(ref: RunRef, after: int) -> dict[str, Any]:
    """The rows of results.jsonl lines after line ``after`` (a live run's new questions; a
    question run again replaces its row), the last line read and whether the run is live."""
    view = read(ref)
    primary = view.metrics.get("primary") if isinstance(view.metrics.get("primary"), str) else None
    rows = [row_json(row, primary) for row in view.rows if row.line > after]
    last = max((row.line for row in view.rows), default=after)
    return {"rows": rows, "last": max(last, after), "live": is_live(ref.path),
            "total": len(view.rows)}


# -- a question -----------------------------------------------------------------------------------
@lru_cache(maxsize=16)
def _gold_programs(dataset: str, split: str, data_dir: str | None) -> dict[str, str]:
    from pyql.agent.evaluation.datasets import get_dataset

    items = get_dataset(dataset, data_dir).items(split)
    return {item.id: item.program for item in items if item.program}


def gold_program(view: RunView, qid: str) -> tuple[str | None, str]:
    """The question's gold program from its dataset, when the dataset can be read here, and a
    note on why not otherwise."""
    config = view.config
    if config is None:
        return None, "the run has no readable config.json"
    if config.dataset == "ask":  # the program the Ask page gave the stand-in, if any
        program = config.extra.get("gold_program")
        return ((program, "") if isinstance(program, str) and program
                else (None, "an Ask run without a gold program"))
    data_dir = config.data_dir
    if data_dir and not Path(data_dir).is_absolute():
        data_dir = str((view.run_dir / data_dir).resolve()) if (
            view.run_dir / data_dir).exists() else data_dir
    try:
        program = _gold_programs(config.dataset, config.split, data_dir).get(qid)
    except (PyqlError, OSError, ValueError) as exc:
        return None, f"the dataset cannot be read here ({type(exc).__name__}: {exc})"
    return program, "" if program else "the dataset has no gold program for this question"


def question_page(ref: RunRef, qid: str) -> dict[str, Any]:
    """A question of a run: its whole result, its trajectory, the gold program."""
    directory = RunDir(ref.path)
    result = None
    for _, read_result in directory.lines(malformed=lambda n, why: None):
        if read_result.id == qid:
            result = read_result
    if result is None:
        raise RunNotFound(f"{ref.key} question {qid}", "no such question")
    trajectories = directory.trajectories([qid], malformed=lambda n, why: None)
    trajectory = trajectories.get(qid)
    view = read(ref)
    gold, gold_note = gold_program(view, qid)
    language = "sql" if (view.config and view.config.db) or result.meta.get("table") else "sparql"
    if trajectory is not None and trajectory.tools == "sql":
        language = "sql"
    return {"ref": ref, "result": result, "status": question_status(result),
            "trajectory": trajectory, "gold_program": gold, "gold_note": gold_note,
            "language": language, "config": view.config, "hops": hops_of({**result.meta,
                                                                           "id": result.id})}


# -- comparing ------------------------------------------------------------------------------------
def _step_key(step: Step) -> tuple[str, str | None, str]:
    return (step.action.strip(), step.hint, step.status)


def first_divergence(a: Trajectory | None, b: Trajectory | None) -> dict[str, Any] | None:
    """The first step where two trajectories differ (action, hint or status), with both
    steps (None where one trajectory has ended); None when they agree throughout or either is
    missing."""
    if a is None or b is None:
        return None
    for i in range(max(len(a.steps), len(b.steps))):
        sa = a.steps[i] if i < len(a.steps) else None
        sb = b.steps[i] if i < len(b.steps) else None
        if sa is None or sb is None or _step_key(sa) != _step_key(sb):
            return {"n": i + 1, "a": sa, "b": sb}
    return None


_GOOD = {"correct": 2, "incorrect": 1, "unscored": 1, "error": 0, "outage": 0}


def compare_runs(a: RunRef, b: RunRef) -> dict[str, Any]:
    """The questions two runs share, side by side: each one's outcome in both, whether it
    flipped (``better``/``worse`` for B against A), and for flipped ones the first divergent
    step."""
    va, vb = read(a), read(b)
    rows_b = {row.result.id: row for row in vb.rows}
    pairs = []
    flipped_ids = []
    for row in va.rows:
        other = rows_b.get(row.result.id)
        if other is None:
            continue
        flip = row.status != other.status
        change = ""
        if flip:
            flipped_ids.append(row.result.id)
            change = ("better" if _GOOD.get(other.status, 0) > _GOOD.get(row.status, 0)
                      else "worse" if _GOOD.get(other.status, 0) < _GOOD.get(row.status, 0)
                      else "changed")
        pairs.append({"id": row.result.id, "question": row.result.question,
                      "a": row.status, "b": other.status, "flipped": flip, "change": change,
                      "hops": hops_of({**row.result.meta, "id": row.result.id})})
    ta = RunDir(a.path).trajectories(flipped_ids, malformed=lambda n, why: None)
    tb = RunDir(b.path).trajectories(flipped_ids, malformed=lambda n, why: None)
    for pair in pairs:
        if pair["flipped"]:
            pair["divergence"] = first_divergence(ta.get(pair["id"]), tb.get(pair["id"]))
    shown = [k for k in ("n", "hit@1", "f1", "accuracy", "em", "tpq", "llm_calls", "steps")
             if isinstance(va.metrics.get(k), (int, float))
             or isinstance(vb.metrics.get(k), (int, float))]
    metrics = [{"name": k, "a": va.metrics.get(k), "b": vb.metrics.get(k)} for k in shown]
    counts = {"shared": len(pairs), "flipped": len(flipped_ids),
              "better": sum(p["change"] == "better" for p in pairs),
              "worse": sum(p["change"] == "worse" for p in pairs),
              "only_a": len(va.rows) - len(pairs),
              "only_b": len(vb.rows) - len(pairs)}
    return {"a": a, "b": b, "va": va, "vb": vb, "pairs": pairs, "counts": counts,
            "metrics": metrics}
