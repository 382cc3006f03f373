"""The progress bar of an evaluation run: rich, with the ETA and the running scores (or
nothing, with ``--no-progress``)."""

from __future__ import annotations

from typing import Any

from pyql.agent.evaluation.records import OUTAGES, QuestionResult

__all__ = ["RunProgress"]


class RunProgress:
    """A rich progress bar with ETA and the running scores (or nothing)."""

    def __init__(self, enabled: bool, total: int, done: int, primary: str, label: str) -> None:
        self.primary = primary
        self.sums: dict[str, float] = {primary: 0.0, "f1": 0.0}
        self.n = 0
        self.errors = 0
        self.outages = 0
        self._bar: Any = None
        self._task: Any = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from pyql.cli.output import shared_stderr

        self._bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=shared_stderr(), transient=False,
        )
        self._task = self._bar.add_task(label, total=total, completed=done, stats="")

    def __enter__(self) -> RunProgress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def add(self, result: QuestionResult, *, advance: bool = True) -> None:
        if result.status in OUTAGES:
            self.outages += 1
        else:
            self.n += 1
            for key in self.sums:
                self.sums[key] += float(result.metrics.get(key, 0.0))
            self.errors += 1 if result.error is not None else 0
        if self._bar is not None and advance:
            parts = [f"{self.primary} {self.sums[self.primary] / max(self.n, 1):.3f}"]
            if self.primary != "f1" and "f1" in result.metrics:
                parts.append(f"F1 {self.sums['f1'] / max(self.n, 1):.3f}")
            parts.append(f"errors {self.errors}")
            if self.outages:
                parts.append(f"outages {self.outages}")
            self._bar.update(self._task, advance=1, stats=" · ".join(parts))
