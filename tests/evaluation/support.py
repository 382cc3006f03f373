"""Helpers of the evaluation tests (the fixtures are in ``conftest.py``).

- ``require_data``: a path under the shared data directory, or skip;
- ``comparable`` / ``comparable_run`` / ``comparable_metrics``: results (with the steps of
  their trajectories) and metrics without wall-clock fields;
- ``FakeClock``: an injectable clock whose ``sleep`` yields to other threads briefly (real time)
  and then moves the fake time forward.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyql.agent.evaluation.records import QuestionResult
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.trajectory import Trajectory
from tests.conftest import data_dir, require_data  # noqa: F401 - re-exported

MINI_METAQA_QUESTIONS = 40
MINI_WIKISQL_QUESTIONS = 60

#: fields of a result that depend on wall-clock time
TIMING = ("seconds", "llm_seconds")
#: the fields of a step that two runs of the same questions must agree on (not its timings)
STEP_FIELDS = {"n", "thought", "action", "observation", "hint", "status", "query",
               "prompt_tokens", "completion_tokens"}


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def comparable(result: QuestionResult,
               trajectories: Mapping[str, Trajectory] | None = None) -> dict[str, Any]:
    """A result without what depends on wall-clock time; with the run's ``trajectories``, its
    ``steps`` are those of its trajectory (:data:`STEP_FIELDS`; None: it has none)."""
    data = result.model_dump(mode="json")
    data["usage"] = {k: v for k, v in data["usage"].items() if k not in TIMING}
    if trajectories is not None:
        trajectory = trajectories.get(result.id)
        data["steps"] = None if trajectory is None else [
            step.model_dump(mode="json", include=STEP_FIELDS) for step in trajectory.steps]
    return data


def comparable_run(run_dir: Path) -> dict[str, dict[str, Any]]:
    """:func:`comparable` of each result of ``run_dir`` with its steps, in file order."""
    run = RunDir(run_dir)
    trajectories = run.trajectories()
    return {r.id: comparable(r, trajectories) for r in run.results()}


def comparable_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics without timing, the per-session ``run`` section and ``stand_in`` (what answered,
    not what was measured: a replay of a stand-in's run has none)."""
    return {k: v for k, v in metrics.items()
            if k not in ("tpq", "seconds", "run", "stand_in")}


class FakeClock:
    """Fake time for the rate gate. ``sleep(s)`` first yields to the other threads for a few
    real milliseconds (so they reach the gate while it is closed), then moves the fake time
    ``s`` forward."""

    def __init__(self, yield_seconds: float = 0.02) -> None:
        self.now = 0.0
        self.sleeps: list[tuple[str, float]] = []
        self.yield_seconds = yield_seconds
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        time.sleep(self.yield_seconds)
        with self._lock:
            self.sleeps.append((threading.current_thread().name, seconds))
            self.now += seconds
