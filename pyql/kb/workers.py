"""Worker processes that answer timed queries on a read-only store directory.

pyoxigraph cannot stop an evaluation, so a query with a timeout runs in another process that is
killed when the time is up (:class:`~pyql.kb.oxigraph.OxigraphKB`). For a store in memory that
process is a fork per query (the only way to share the store). A store *directory* opened
read-only cannot change under its readers, so its timed queries go to long-lived worker
processes instead, each with its own read-only handle: a query costs a pipe round trip, not a
fork; a worker is started (a fresh interpreter running :func:`main`: no forked
RocksDB state) when every other one is busy, and a worker whose query ran out of time is killed and replaced on the next
query. Workers watch the process that started them and exit when it dies.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pyql.errors import BackendError, BackendTimeoutError
from pyql.results import Limits

__all__ = ["QueryWorkers"]

log = logging.getLogger(__name__)

#: the worker side lives in its own module (:mod:`pyql.kb.worker_main`), which opens the store
_ENTRY = "import sys; from pyql.kb.worker_main import main; main(sys.argv[1:])"

#: seconds a new worker may take to start and open the store (not counted against a query)
START_TIMEOUT = 120.0


class _Worker:
    __slots__ = ("process", "reader", "writer")

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        assert process.stdout is not None and process.stdin is not None
        self.reader = Connection(os.dup(process.stdout.fileno()), writable=False)
        self.writer = Connection(os.dup(process.stdin.fileno()), readable=False)
        process.stdout.close()
        process.stdin.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)
        self.reader.close()
        self.writer.close()


class QueryWorkers:
    """Idle workers for the store at ``path``; :meth:`ask` hands a query to one."""

    def __init__(self, path: str | Path, limits: Limits) -> None:
        self.path = str(path)
        self.limits = limits
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        #: workers started so far (a killed one is replaced by a new one)
        self.started = 0

    def ask(self, query: str, form: str, seconds: float) -> tuple[Any, ...]:
        """The worker's answer to ``query`` (``form`` ``select`` or ``ask``), or
        :class:`~pyql.errors.BackendTimeoutError` after ``seconds`` (the worker is killed)."""
        worker = self._take(query)
        try:
            worker.writer.send((query, form))
            if not worker.reader.poll(seconds):
                raise BackendTimeoutError(
                    f"the embedded store did not answer within {seconds:g}s (query stopped)",
                    backend="oxigraph", query=query)
            answer: tuple[Any, ...] = worker.reader.recv()
        except (EOFError, OSError) as exc:  # the worker died under the query
            worker.kill()
            raise BackendError(f"the query process ended without an answer ({exc!r})",
                               backend="oxigraph", query=query) from None
        except BaseException:  # the deadline, or the caller interrupted: stop the evaluation
            worker.kill()
            raise
        self._give(worker)
        return answer

    def _take(self, query: str) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._start(query)

    def _give(self, worker: _Worker) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                return
        worker.kill()

    def _start(self, query: str) -> _Worker:
        # a fresh interpreter (not multiprocessing's spawn, which would import the caller's
        # main module again: a script without a __main__ guard would run twice)
        limits = self.limits
        process = subprocess.Popen(
            [sys.executable, "-c", _ENTRY, self.path, str(os.getpid()),
             str(limits.max_rows), str(limits.max_cell)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        worker = _Worker(process)
        try:
            if not worker.reader.poll(START_TIMEOUT):
                raise BackendError(f"a query worker did not start within {START_TIMEOUT:g}s",
                                   backend="oxigraph", query=query)
            hello = worker.reader.recv()
        except (EOFError, OSError) as exc:
            worker.kill()
            raise BackendError(f"a query worker failed to start ({exc!r})",
                               backend="oxigraph", query=query) from None
        except BaseException:
            worker.kill()
            raise
        if hello[0] != "ready":
            worker.kill()
            raise BackendError(hello[1], backend="oxigraph", query=query)
        self.started += 1
        log.debug("query worker %d started for %s", process.pid, self.path)
        return worker

    def close(self) -> None:
        """Stop every idle worker (a busy one is stopped when its query returns)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
