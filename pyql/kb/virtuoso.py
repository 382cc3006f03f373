"""Drive a local Virtuoso 7 (``virtuoso-t``): make a database directory, start and stop the
server, bulk-load RDF with Virtuoso's own loader.

This is the route to a full Freebase: the papers (and dki-lab/Freebase-Setup) serve the dump
with Virtuoso; pyql talks to it as a SPARQL endpoint (:class:`~pyql.kb.endpoint.SparqlEndpointKB`).

- :meth:`Virtuoso.init` writes ``virtuoso.ini`` into a directory: the SQL and HTTP ports bound
  to 127.0.0.1 only, ``DirsAllowed`` limited to the directory, buffers sized from a memory
  budget (Virtuoso's guidance: 85,000 8-KB buffers per GB, three quarters of them dirty at most),
  and a ``pyql-virtuoso.json`` with the settings;
- :meth:`Virtuoso.start` runs ``virtuoso-t +foreground`` in its own session (detached: it
  outlives the command that started it; the pid is kept in ``pyql-virtuoso.pid``) and waits
  until ``/sparql`` answers; :meth:`Virtuoso.stop` asks for a checkpointed ``shutdown`` and
  waits for the process to end; :meth:`Virtuoso.kill` ends it at once (throw-away databases);
- :meth:`Virtuoso.load` bulk-loads files with ``ld_add`` / ``rdf_loader_run()``, several
  loaders in parallel, then ``checkpoint``; a file the loader rejected is a
  :class:`VirtuosoError` naming it. The loader only reads inside ``DirsAllowed``: the files are
  linked into the directory's ``import/`` folder first.

``virtuoso-t`` and ``isql-vt`` are found on ``PATH`` (Debian/Ubuntu:
``apt-get install virtuoso-opensource-7-bin``); when missing, :class:`VirtuosoNotFound` says so.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from pyql.errors import PyqlError
from pyql.terms import validate_iri

__all__ = [
    "CONFIG",
    "PID_FILE",
    "DBA_PASSWORD",
    "VirtuosoError",
    "VirtuosoNotFound",
    "VirtuosoPortError",
    "VirtuosoSettings",
    "Virtuoso",
    "find_binary",
    "free_port",
    "buffers_for",
    "sql_string",
]

log = logging.getLogger(__name__)

CONFIG = "pyql-virtuoso.json"
PID_FILE = "pyql-virtuoso.pid"
#: Virtuoso's built-in dba password; the server listens on 127.0.0.1 only
DBA_PASSWORD = "dba"
_PORT_FAILURE = re.compile(r"bind|already in use|failed [^\n]*listen", re.IGNORECASE)
_HINT = "Debian/Ubuntu: apt-get install virtuoso-opensource-7-bin"

_INI = """\
[Database]
DatabaseFile = {dir}/virtuoso.db
ErrorLogFile = {dir}/virtuoso.log
LockFile = {dir}/virtuoso.lck
TransactionFile = {dir}/virtuoso.trx
xa_persistent_file = {dir}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
MaxCheckpointRemap = 2000
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {dir}/virtuoso-temp.db
TransactionFile = {dir}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping = 0

[Parameters]
ServerPort = 127.0.0.1:{sql_port}
LiteMode = 0
DisableUnixSocket = 1
DisableTcpSocket = 0
ServerThreads = 10
CheckpointInterval = 60
NumberOfBuffers = {buffers}
MaxDirtyBuffers = {dirty}
SchedulerInterval = 0
DirsAllowed = {dir}

[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerRoot = {dir}/www
ServerThreads = 8
MaxClientConnections = 8
EnabledDavVSP = 0
HTTPProxyEnabled = 0

[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryCostEstimationTime = 0
MaxQueryExecutionTime = {max_seconds}
"""


class VirtuosoError(PyqlError):
    """Virtuoso failed: it did not start, isql reported an error, the loader rejected a file.

    ``log`` holds the end of the server's logs when they explain it."""

    def __init__(self, message: str, *, log: str = "") -> None:
        self.log = log
        super().__init__(message + (f"\n{log}" if log else ""))


class VirtuosoNotFound(VirtuosoError):
    """``virtuoso-t`` / ``isql-vt`` is not installed (``binary`` names the missing one)."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        super().__init__(f"{binary} is not on PATH ({_HINT})")


def _alive(pid: int) -> bool:
    """Is process ``pid`` running? (A child of ours that exited is reaped, not a zombie.)"""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # not our child: its parent reaps it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class VirtuosoPortError(VirtuosoError):
    """The server could not bind one of its ports (another process has it)."""


def find_binary(name: str, given: str | None = None) -> str:
    """The path of ``virtuoso-t`` / ``isql-vt`` (``given`` if set); :class:`VirtuosoNotFound`."""
    found = shutil.which(given or name)
    if found is None:
        raise VirtuosoNotFound(given or name)
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (for throw-away servers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def buffers_for(memory_gb: float) -> tuple[int, int]:
    """``NumberOfBuffers`` and ``MaxDirtyBuffers`` for a memory budget (Virtuoso's guidance)."""
    buffers = max(2000, int(85_000 * memory_gb))
    return buffers, buffers * 3 // 4


def sql_string(text: str) -> str:
    """A SQL string literal (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class VirtuosoSettings:
    sql_port: int = 1111
    http_port: int = 8890
    memory_gb: float = 2.0
    max_rows: int = 100_000
    max_seconds: int = 0  # 0: no limit on a query's run time


class Virtuoso:
    """A Virtuoso database directory and its server (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], *, binary: str | None = None,
                 isql: str | None = None) -> None:
        self.directory = Path(directory).resolve()
        config = self.directory / CONFIG
        if not config.is_file():
            raise VirtuosoError(f"{self.directory} is not a Virtuoso directory made by "
                                f"`pyql kb virtuoso init` (no {CONFIG})")
        self.settings = VirtuosoSettings(**json.loads(config.read_text()))
        self._binary = binary
        self._isql = isql
        self.process: subprocess.Popen[bytes] | None = None

    @classmethod
    def init(cls, directory: str | os.PathLike[str], settings: VirtuosoSettings | None = None,
             **kwargs: str | None) -> Virtuoso:
        """Write ``virtuoso.ini`` and the settings into ``directory`` (created if needed)."""
        settings = settings or VirtuosoSettings()
        path = Path(directory).resolve()
        if (path / "virtuoso.db").exists():
            raise VirtuosoError(f"{path} already holds a Virtuoso database")
        for sub in ("www", "import"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        buffers, dirty = buffers_for(settings.memory_gb)
        (path / "virtuoso.ini").write_text(_INI.format(
            dir=path, sql_port=settings.sql_port, http_port=settings.http_port, buffers=buffers,
            dirty=dirty, max_rows=settings.max_rows, max_seconds=settings.max_seconds,
        ))
        (path / CONFIG).write_text(json.dumps(asdict(settings), indent=2) + "\n")
        return cls(path, **kwargs)

    @property
    def sparql_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.http_port}/sparql"

    # -- the process ---------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The server's pid if it runs (from this object or the pid file)."""
        if self.process is not None:
            return self.process.pid if self.process.poll() is None else None
        path = self.directory / PID_FILE
        if not path.is_file():
            return None
        try:
            pid = int(path.read_text().strip())
        except ValueError:
            return None
        return pid if _alive(pid) else None

    def is_running(self) -> bool:
        return self.pid() is not None

    def start(self, *, timeout: float = 120.0) -> None:
        """Start the server (detached) and wait until ``/sparql`` answers."""
        if self.is_running():
            raise VirtuosoError(f"Virtuoso already runs in {self.directory} (pid {self.pid()})")
        binary = find_binary("virtuoso-t", self._binary)
        (self.directory / "virtuoso.lck").unlink(missing_ok=True)  # left by a killed server
        console = open(self.directory / "console.log", "ab")  # noqa: SIM115 - the process owns it
        try:
            self.process = subprocess.Popen(
                [binary, "+foreground", "+configfile", str(self.directory / "virtuoso.ini")],
                cwd=self.directory, stdin=subprocess.DEVNULL, stdout=console,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        finally:
            console.close()
        (self.directory / PID_FILE).write_text(f"{self.process.pid}\n")
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until ``/sparql`` answers as Virtuoso; raise if the server exits or times out."""
        deadline = time.monotonic() + timeout
        probe = self.sparql_url + "?query=ASK%7B%7D"
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                tail = self.log_tail()
                cls = VirtuosoPortError if _PORT_FAILURE.search(tail) else VirtuosoError
                raise cls(f"virtuoso-t exited with code {self.process.returncode}", log=tail)
            try:
                with urllib.request.urlopen(probe, timeout=2) as response:
                    # the Server header proves it is a Virtuoso, not another process on the port
                    if response.status == 200 and "virtuoso" in response.headers.get(
                            "Server", "").lower():
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise VirtuosoError(f"virtuoso-t did not answer within {timeout:g}s", log=self.log_tail())

    def stop(self, *, timeout: float = 120.0) -> bool:
        """Checkpoint and shut the server down; False when it was not running."""
        pid = self.pid()
        if pid is None:
            return False
        try:
            self.isql("shutdown;", timeout=timeout)
        except VirtuosoError:
            pass  # isql loses its connection as the server goes down
        if not self._wait_exit(pid, timeout):
            os.kill(pid, signal.SIGTERM)
            self._wait_exit(pid, 10)
        (self.directory / PID_FILE).unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """End the server's process group at once (no checkpoint)."""
        pid = self.pid()
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait_exit(pid, 10)
        (self.directory / PID_FILE).unlink(missing_ok=True)

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.pid == pid:
                if self.process.poll() is not None:
                    return True
            elif not _alive(pid):
                return True
            time.sleep(0.1)
        return False

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's console output and error log."""
        out = []
        for name in ("console.log", "virtuoso.log"):
            path = self.directory / name
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {name}\n" + "\n".join(text))
        return "\n".join(out)

    # -- SQL -----------------------------------------------------------------------------------
    def isql(self, script: str, *, timeout: float = 600.0) -> str:
        """Run ``;``-terminated SQL statements as dba; return isql's output.

        Raises :class:`VirtuosoError` when isql reports an error (it exits 0 regardless)."""
        isql = find_binary("isql-vt", self._isql)
        path = self.directory / f"script-{uuid.uuid4().hex}.sql"
        path.write_text(script if script.rstrip().endswith(";") else script + ";")
        try:
            done = subprocess.run(
                [isql, f"127.0.0.1:{self.settings.sql_port}", "dba", DBA_PASSWORD, str(path)],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False,
            )
        except subprocess.TimeoutExpired:
            raise VirtuosoError(f"isql did not finish within {timeout:g}s") from None
        finally:
            path.unlink(missing_ok=True)
        output = (done.stdout + done.stderr).decode(errors="replace")
        if done.returncode != 0 or "*** Error" in output:
            errors = [line for line in output.splitlines() if "Error" in line]
            raise VirtuosoError(f"isql failed (exit {done.returncode}): {' | '.join(errors)}",
                                log=output.strip())
        return output

    # -- loading -------------------------------------------------------------------------------
    def load(self, sources: Iterable[str | os.PathLike[str]], graph: str, *,
             loaders: int = 2, timeout: float = 86_400.0) -> int:
        """Bulk-load RDF files (``.nt``/``.ttl``/``.nq``/``.owl``, optionally ``.gz``) into
        ``graph`` with ``loaders`` parallel ``rdf_loader_run()``; return the graph's triple
        count. Raises :class:`VirtuosoError` naming the files the loader rejected."""
        validate_iri(graph)
        staged = self._stage(sources)
        registered = "\n".join(f"ld_add({sql_string(str(p))}, {sql_string(graph)});"
                               for p in staged)
        self.isql(registered)
        with ThreadPoolExecutor(max_workers=max(1, loaders)) as pool:
            for future in [pool.submit(self.isql, "rdf_loader_run();", timeout=timeout)
                           for _ in range(max(1, loaders))]:
                future.result()
        self.isql("checkpoint;", timeout=timeout)
        failed = self._failures(staged)
        for p in staged:
            p.unlink(missing_ok=True)
        if failed:
            raise VirtuosoError("the bulk loader rejected: " + "; ".join(failed))
        return self.count(graph)

    def _stage(self, sources: Iterable[str | os.PathLike[str]]) -> list[Path]:
        staged = []
        for source in sources:
            path = Path(source).resolve()
            if not path.is_file():
                raise VirtuosoError(f"no such file: {path}")
            link = self.directory / "import" / f"{uuid.uuid4().hex[:8]}-{path.name}"
            try:
                link.symlink_to(path)
            except OSError:
                shutil.copyfile(path, link)
            staged.append(link)
        return staged

    def _failures(self, staged: Sequence[Path]) -> list[str]:
        names = ", ".join(sql_string(str(p)) for p in staged)
        out = self.isql(f"SELECT ll_file, ll_error FROM DB.DBA.LOAD_LIST WHERE ll_file IN "
                        f"({names}) AND ll_error IS NOT NULL;")
        return [line.strip() for line in out.splitlines()
                if any(str(p) in line for p in staged)]

    def count(self, graph: str) -> int:
        """How many triples ``graph`` holds."""
        validate_iri(graph)
        out = self.isql(f"SPARQL SELECT COUNT(*) WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }};")
        numbers = [line.strip() for line in out.splitlines() if line.strip().isdigit()]
        if not numbers:
            raise VirtuosoError("could not read the triple count", log=out)
        return int(numbers[-1])
