"""A run directory and its files: the one place that writes and reads them.

:class:`RunDir` owns what ``pyql eval --out RUN_DIR`` leaves behind; the runner writes through
it, and the runner's resume, ``pyql report``, the ablation summary and the benchmarks read
through it:

- ``config.json``: the :class:`~pyql.agent.evaluation.records.RunConfig`, written atomically
  (a temporary file, ``fsync``, ``rename``) once, before any question runs;
- ``results.jsonl``: one :class:`~pyql.agent.evaluation.records.QuestionResult` per line (the
  outcome, not the steps), appended by a :class:`ResultsLog` (each line whole, by one ``os.write`` on an ``O_APPEND``
  descriptor; ``fdatasync``-ed at most once a second and at the end). After a crash the file is
  a run of complete lines, possibly followed by one partial line, which :meth:`ResultsLog.repair`
  cuts away before anything is appended;
- ``trajectories.jsonl``: the :class:`~pyql.agent.trajectory.Trajectory` lines of each question
  (its ``meta["id"]`` is the question id), the one record of its steps, appended (not synced)
  just before its result line; a partial last line is cut on resume too;
- ``metrics.json``: the aggregate, rewritten atomically as results arrive and at the end;
- ``.lock``: held (``flock``) by the process running the directory (:meth:`RunDir.lock`).

**One reader.** :func:`iter_records` is the only parser of ``results.jsonl``: a last line
without its newline is being written (or was cut short) and is skipped; any other line that is
not a JSON object with an ``id`` that reads as a ``QuestionResult`` raises :class:`RunDirError`
naming the file and the line, unless the caller passes ``malformed`` (``pyql report`` does: it
shows a run as far as it can be read, and counts what it skipped). When an id appears twice
(a question that ended in an outage and ran again, or a file edited by hand) its last line
counts (:meth:`RunDir.results`).

:meth:`RunDir.trajectories` reads ``trajectories.jsonl`` the same way (a last line without its
newline skipped, any other unreadable line a :class:`RunDirError` or passed to ``malformed``):
the last trajectory of each question id, and with ``ids`` only those questions' lines are parsed.
A trajectory cut short (no result record) loads with ``finished=False``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Collection, Container, Iterable, Iterator
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from pyql.agent.evaluation.metrics import aggregate
from pyql.agent.evaluation.records import CONFIG, METRICS, RESULTS, QuestionResult, RunConfig
from pyql.agent.jsonl import Malformed, json_lines
from pyql.agent.trajectory import Trajectory, trajectory_records
from pyql.errors import PyqlError

__all__ = [
    "RunDir",
    "RunDirError",
    "ResultsLog",
    "iter_records",
    "read_results",
    "load_config",
    "recompute_metrics",
    "TRAJECTORIES",
    "LOCK",
]

log = logging.getLogger(__name__)

TRAJECTORIES = "trajectories.jsonl"
LOCK = ".lock"


class RunDirError(PyqlError):
    """The run directory cannot be used (already a run, not a run, locked, corrupt)."""


# -- writing ------------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def write_json_atomic(path: Path, value: Any) -> None:
    """``value`` as indented JSON in ``path``: written whole or not at all (a crash leaves the
    old file; a failed write — a full disk — removes its temporary file and raises)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    data = json.dumps(value, indent=2, ensure_ascii=False, default=str).encode() + b"\n"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class ResultsLog:
    """An append-only JSON-lines file: whole lines only, one ``write`` each (module docstring).
    """

    def __init__(self, path: Path, *, sync: bool = True, sync_interval: float = 1.0) -> None:
        self.path = path
        self.sync = sync
        #: seconds between two syncs (0: sync every append)
        self.sync_interval = sync_interval
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._synced = float("-inf")
        self._dirty = False

    def repair(self) -> int:
        """Cut a partial last line off (and sync the cut); return the bytes dropped. Only the
        file's tail is read."""
        if not self.path.exists():
            return 0
        with open(self.path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            end, block = size, 1 << 16
            while end > 0:
                start = max(0, end - block)
                handle.seek(start)
                chunk = handle.read(end - start)
                found = chunk.rfind(b"\n")
                if found >= 0:
                    end = start + found + 1
                    break
                end = start
        if end == size:
            return 0
        log.warning("%s: dropping a partial last line (%d bytes) left by an interrupted run",
                    self.path, size - end)
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, end)
            os.fsync(fd)
        finally:
            os.close(fd)
        return size - end

    def open(self) -> ResultsLog:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    def append(self, *lines: str) -> None:
        """Append ``lines`` (no newline in any) as one write; when ``sync``, sync the file if
        the last sync is ``sync_interval`` seconds old (:meth:`close` syncs the rest)."""
        if any("\n" in line for line in lines):
            raise ValueError("a record must be one line")
        data = "".join(line + "\n" for line in lines).encode()
        with self._lock:
            if self._fd is None:
                raise RuntimeError(f"{self.path} is not open")
            _write_all(self._fd, data)
            if self.sync:
                now = time.monotonic()
                if now - self._synced >= self.sync_interval:
                    _sync(self._fd)
                    self._synced, self._dirty = now, False
                else:
                    self._dirty = True

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                if self._dirty:
                    _sync(self._fd)
                    self._dirty = False
                os.close(self._fd)
                self._fd = None


class _Lock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> _Lock:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            return self
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise RunDirError(f"another pyql eval is running on {self.path.parent}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# -- reading ------------------------------------------------------------------------------------


def iter_records(path: Path, *, malformed: Malformed | None = None) -> Iterator[dict[str, Any]]:
    """The records (JSON objects with an ``id``) of a results file, one line at a time; a last
    line without its newline is skipped (it is being written, or was cut short). Any other line
    that is not a record raises :class:`RunDirError`, or with ``malformed`` is passed to it and
    skipped."""
    for _, record in _records(path, malformed=malformed):
        yield record


def _records(path: Path, *, malformed: Malformed | None = None,
             numbers: Container[int] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.exists():
        return
    bad = _reporter(path, malformed)
    for number, record in json_lines(path, complete=True, malformed=bad, numbers=numbers):
        if isinstance(record, dict) and "id" in record:
            yield number, record
        else:
            bad(number, "not a result record (no id)")


def _reporter(path: Path, malformed: Malformed | None) -> Malformed:
    """``malformed``, or (None) what raises the :class:`RunDirError` naming the line."""
    if malformed is not None:
        return malformed

    def fail(number: int, why: str) -> None:
        raise RunDirError(f"{path}:{number}: {why}")

    return fail


def _result(path: Path, number: int, record: dict[str, Any], malformed: Malformed | None
            ) -> QuestionResult | None:
    try:
        return QuestionResult.model_validate(record)
    except ValidationError as exc:
        why = f"not a question result ({exc.error_count()} errors)"
    _reporter(path, malformed)(number, why)
    return None


class _RunFile:
    """A file of every run directory: on a :class:`RunDir`, its path there."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, run: None, owner: type) -> _RunFile: ...
    @overload
    def __get__(self, run: RunDir, owner: type) -> Path: ...
    def __get__(self, run: RunDir | None, owner: type) -> Path | _RunFile:
        return self if run is None else run.path / self.name


class RunDir:
    """The files of one run directory (module docstring). Creating one touches nothing."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    config_path = _RunFile(CONFIG)
    results_path = _RunFile(RESULTS)
    trajectories_path = _RunFile(TRAJECTORIES)
    metrics_path = _RunFile(METRICS)

    def holds_run(self) -> bool:
        """Whether a run was started here (a configuration or results)."""
        return self.config_path.exists() or self.results_path.exists()

    def lock(self) -> _Lock:
        """Held while a process runs the directory; a second one gets :class:`RunDirError`."""
        return _Lock(self.path / LOCK)

    def discard_lock(self) -> None:
        (self.path / LOCK).unlink(missing_ok=True)

    # -- config.json ----------------------------------------------------------------------------
    def read_config(self) -> RunConfig:
        """The run's configuration (:class:`RunDirError` when missing or not one)."""
        path = self.config_path
        if not path.is_file():
            raise RunDirError(f"{self.path} is not a run directory (no {CONFIG})")
        try:
            return RunConfig.model_validate_json(path.read_bytes())
        except ValueError as exc:
            raise RunDirError(f"{path}: not a run configuration: {exc}") from None

    def write_config(self, config: RunConfig) -> None:
        write_json_atomic(self.config_path, config.model_dump(mode="json"))

    # -- metrics.json ---------------------------------------------------------------------------
    def read_metrics(self) -> dict[str, Any] | None:
        """The metrics last written (None when there are none yet); :class:`RunDirError` when
        the file cannot be read as a JSON object."""
        path = self.metrics_path
        if not path.is_file():
            return None
        try:
            value = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{path}: cannot be read: {exc}") from None
        if not isinstance(value, dict):
            raise RunDirError(f"{path}: not a JSON object")
        return value

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        write_json_atomic(self.metrics_path, metrics)

    def recompute_metrics(self, *, primary: str | None = None, run: dict[str, Any] | None = None,
                          stand_in: dict[str, Any] | None = None,
                          results: Iterable[QuestionResult] | None = None) -> dict[str, Any]:
        """Aggregate the results (``results``: already read by the caller, else
        ``results.jsonl``'s) and rewrite ``metrics.json`` (with ``primary``, ``run`` and the
        stand-in's assumptions, ``stand_in``, when given)."""
        metrics = aggregate(self.results() if results is None else results)
        if primary is not None:
            metrics["primary"] = primary
        if run is not None:
            metrics["run"] = run
        if stand_in is not None:
            metrics["stand_in"] = stand_in
        self.write_metrics(metrics)
        return metrics

    # -- results.jsonl / trajectories.jsonl -----------------------------------------------------
    def results_log(self) -> ResultsLog:
        return ResultsLog(self.results_path)

    def trajectory_log(self) -> ResultsLog:
        return ResultsLog(self.trajectories_path, sync=False)

    def lines(self, *, malformed: Malformed | None = None,
              numbers: Container[int] | None = None) -> Iterator[tuple[int, QuestionResult]]:
        """(line number, result) of every complete line of ``results.jsonl`` (of the line
        ``numbers`` only, when given: the others are not parsed), in file order (ids may
        repeat); see :func:`iter_records` for ``malformed``."""
        path = self.results_path
        for number, record in _records(path, malformed=malformed, numbers=numbers):
            result = _result(path, number, record, malformed)
            if result is not None:
                yield number, result

    def results(self) -> list[QuestionResult]:
        """One result per question (the last line of an id counts), in the order the ids first
        appear."""
        last: dict[str, QuestionResult] = {}
        for _, result in self.lines():
            last[result.id] = result
        return list(last.values())

    def trajectories(self, ids: Collection[str] | None = None, *,
                     malformed: Malformed | None = None) -> dict[str, Trajectory]:
        """Question id (``meta["id"]``) -> its last trajectory in ``trajectories.jsonl`` (a
        ``--resume`` runs an outage question again and appends it again), in the order the ids
        first appear; empty when the file is missing. With ``ids``, only those questions' lines
        are parsed. Read by :func:`~pyql.agent.trajectory.trajectory_records` (a trajectory cut
        short loads with ``finished=False``; a last line without its newline is skipped). A line
        that cannot be read, a question record without ``meta.id`` and records that do not make
        a :class:`~pyql.agent.trajectory.Trajectory` (named by its question's line) raise
        :class:`RunDirError` naming the file and the line, or with ``malformed`` are passed to
        it and skipped."""
        path = self.trajectories_path
        found: dict[str, Trajectory] = {}
        if not path.exists():
            return found
        wanted = None if ids is None else frozenset(ids)
        bad = _reporter(path, malformed)

        def keep(number: int, head: dict[str, Any]) -> bool:
            meta = head.get("meta")
            qid = meta.get("id") if isinstance(meta, dict) else None
            if not isinstance(qid, str):
                bad(number, "a question record without meta.id")
                return False
            return wanted is None or qid in wanted

        for start, records in trajectory_records(path, keep=keep, malformed=bad):
            try:
                trajectory = Trajectory.from_records(records)
            except ValidationError as exc:
                bad(start, f"not a trajectory ({exc.error_count()} errors)")
                continue
            found[trajectory.meta["id"]] = trajectory
        return found


def read_results(out_dir: str | os.PathLike[str]) -> list[QuestionResult]:
    """:meth:`RunDir.results` of ``out_dir``."""
    return RunDir(out_dir).results()


def load_config(out_dir: str | os.PathLike[str]) -> RunConfig:
    """:meth:`RunDir.read_config` of ``out_dir``."""
    return RunDir(out_dir).read_config()


def recompute_metrics(out_dir: str | os.PathLike[str], *, primary: str | None = None,
                      run: dict[str, Any] | None = None,
                      stand_in: dict[str, Any] | None = None) -> dict[str, Any]:
    """:meth:`RunDir.recompute_metrics` of ``out_dir``."""
    return RunDir(out_dir).recompute_metrics(primary=primary, run=run, stand_in=stand_in)
