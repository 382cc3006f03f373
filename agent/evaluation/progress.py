"""The progress of an evaluation run: on a terminal a rich bar with the ETA and the running
scores; elsewhere (stderr to a file, a pipe, a CI log) whole log lines, at most one every
``interval`` seconds and one at the end, never a bar cut at the terminal width; nothing with
``--no-progress``."""

from __future__ import annotations

import time
from typing import Any

from pyql.agent.evaluation.records import OUTAGES, QuestionResult

__all__ = ["LOG_INTERVAL", "RunProgress"]

#: seconds between two progress lines when stderr is not a terminal
LOG_INTERVAL = 15.0


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class RunProgress:
    """A rich progress bar with ETA and the running scores on a terminal, whole log lines
    elsewhere (``interval``: the seconds between two), or nothing (``enabled`` false)."""

    def __init__(self, enabled: bool, total: int, done: int, primary: str, label: str, *,
                 interval: float = LOG_INTERVAL) -> None:
        self.primary = primary
        self.sums: dict[str, float] = {primary: 0.0, "f1": 0.0}
        self.n = 0
        self.errors = 0
        self.outages = 0
        self.total = total
        self.done = done
        self.label = label
        self.interval = interval
        self._bar: Any = None
        self._task: Any = None
        self._console: Any = None
        self._started = time.monotonic()
        self._last_line: float | None = None
        self._logged_done = -1  # questions done when the last line was printed
        self._counted = 0  # questions of this session (the ETA's rate)
        self._stats = ""
        if not enabled:
            return
        from pyql.cli.output import shared_stderr

        console = shared_stderr()
        if not console.is_terminal:
            self._console = console
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=console, transient=False,
        )
        self._task = self._bar.add_task(label, total=total, completed=done, stats="")

    def __enter__(self) -> RunProgress:
        self._started = time.monotonic()
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self._console is not None and self._logged_done != self.done:
            self._log_line()  # the last state, unless the last line said it

    def add(self, result: QuestionResult, *, advance: bool = True) -> None:
        if result.status in OUTAGES:
            self.outages += 1
        else:
            self.n += 1
            for key in self.sums:
                self.sums[key] += float(result.metrics.get(key, 0.0))
            self.errors += 1 if result.error is not None else 0
        if not advance:
            return
        self.done += 1
        self._counted += 1
        parts = [f"{self.primary} {self.sums[self.primary] / max(self.n, 1):.3f}"]
        if self.primary != "f1" and "f1" in result.metrics:
            parts.append(f"F1 {self.sums['f1'] / max(self.n, 1):.3f}")
        parts.append(f"errors {self.errors}")
        if self.outages:
            parts.append(f"outages {self.outages}")
        self._stats = " · ".join(parts)
        if self._bar is not None:
            self._bar.update(self._task, advance=1, stats=self._stats)
        elif self._console is not None:
            now = time.monotonic()
            if self._last_line is None or now - self._last_line >= self.interval:
                self._log_line()

    def line(self) -> str:
        """The progress as one whole line: label, done of total, elapsed, ETA, scores."""
        elapsed = time.monotonic() - self._started
        left = self.total - self.done
        eta = (_clock(elapsed / self._counted * left) if self._counted and left > 0
               else "0:00:00" if left <= 0 else "-")
        stats = f" · {self._stats}" if self._stats else ""
        return (f"{self.label}: {self.done}/{self.total} questions, {_clock(elapsed)} elapsed, "
                f"ETA {eta}{stats}")

    def _log_line(self) -> None:
        self._last_line = time.monotonic()
        self._logged_done = self.done
        self._console.print(self.line(), soft_wrap=True, markup=False, highlight=False)
