"""A throw-away Virtuoso server for tests.

:meth:`VirtuosoServer.start` makes a temporary directory with a generated ``virtuoso.ini`` (SQL
and HTTP ports picked free on 127.0.0.1, ``DirsAllowed`` limited to that directory), runs
``virtuoso-t +foreground`` in its own process group and waits until ``/sparql`` answers.
:meth:`VirtuosoServer.load` copies an RDF file into the directory and loads it with ``isql-vt``;
:meth:`VirtuosoServer.stop` kills the process group and removes the directory.

Virtuoso has no separate default graph: every triple lives in a named graph and ``/sparql``
queries the union of all graphs when no ``default-graph-uri`` is given. ``load(path)`` without a
graph therefore uses :data:`DEFAULT_GRAPH`; the data is visible to plain queries either way.
The anonymous ``SPARQL`` user keeps Virtuoso's default rights (SELECT only, no update).

The session fixture :func:`virtuoso` skips only when ``virtuoso-t`` is not on PATH::

    def test_it(virtuoso):
        graph = virtuoso.load("tests/fixtures/endpoint_small.ttl", graph="http://example.org/g")
        kb = SparqlEndpointKB(virtuoso.sparql_url, graph=graph)
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = [
    "DEFAULT_GRAPH",
    "VirtuosoError",
    "VirtuosoServer",
    "free_port",
    "virtuoso",
]

logger = logging.getLogger(__name__)

#: the graph ``load(path)`` uses when no graph is given (queried as part of the default graph)
DEFAULT_GRAPH = "urn:pyql:test:default"
DBA_PASSWORD = "dba"  # Virtuoso's built-in default; the server only listens on 127.0.0.1

_TURTLE_SUFFIXES = (".ttl", ".nt", ".n3", ".turtle", ".ntriples")
_RDFXML_SUFFIXES = (".rdf", ".owl", ".xml")
_STARTUP_ATTEMPTS = 3
_PORT_FAILURE = re.compile(r"bind|already in use|failed [^\n]*listen", re.IGNORECASE)

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
CheckpointInterval = 0
NumberOfBuffers = 10000
MaxDirtyBuffers = 6000
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
ResultSetMaxRows = 100000
MaxQueryCostEstimationTime = 0
"""


class VirtuosoError(RuntimeError):
    """The test server could not be started, or an isql command failed."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class VirtuosoServer:
    """A running throw-away Virtuoso. Use :meth:`start`; always :meth:`stop` (or ``with``)."""

    def __init__(
        self,
        workdir: Path,
        process: subprocess.Popen[bytes],
        *,
        sql_port: int,
        http_port: int,
        isql_binary: str | None,
    ) -> None:
        self.workdir = workdir
        self.process = process
        self.sql_port = sql_port
        self.http_port = http_port
        self.isql_binary = isql_binary
        self.sparql_url = f"http://127.0.0.1:{http_port}/sparql"
        self._loaded = 0
        atexit.register(self.stop)

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        *,
        binary: str | None = None,
        isql: str | None = None,
        startup_timeout: float = 60.0,
    ) -> VirtuosoServer:
        """Start a server on free loopback ports; raise :class:`VirtuosoError` if it fails."""
        binary = binary or shutil.which("virtuoso-t")
        if binary is None:
            raise VirtuosoError("virtuoso-t is not on PATH")
        isql = isql or shutil.which("isql-vt")
        last_log = ""
        for attempt in range(1, _STARTUP_ATTEMPTS + 1):
            workdir = Path(tempfile.mkdtemp(prefix="pyql-virtuoso-"))
            try:
                server = cls._launch(binary, isql, workdir, startup_timeout)
            except _PortTaken as exc:
                last_log = str(exc)
                shutil.rmtree(workdir, ignore_errors=True)
                logger.warning("virtuoso start attempt %d lost a port race; retrying", attempt)
                continue
            except BaseException:
                shutil.rmtree(workdir, ignore_errors=True)
                raise
            return server
        raise VirtuosoError(f"could not start virtuoso-t on free ports:\n{last_log}")

    @classmethod
    def _launch(
        cls, binary: str, isql: str | None, workdir: Path, startup_timeout: float
    ) -> VirtuosoServer:
        sql_port, http_port = free_port(), free_port()
        while http_port == sql_port:
            http_port = free_port()
        (workdir / "www").mkdir()
        (workdir / "data").mkdir()
        ini = workdir / "virtuoso.ini"
        ini.write_text(_INI.format(dir=workdir, sql_port=sql_port, http_port=http_port))
        console = open(workdir / "console.log", "wb")  # noqa: SIM115 - owned by the process
        try:
            process = subprocess.Popen(
                [binary, "+foreground", "+configfile", str(ini)],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() kills it whole
            )
        finally:
            console.close()
        server = cls(workdir, process, sql_port=sql_port, http_port=http_port, isql_binary=isql)
        started = time.monotonic()
        try:
            server._wait_ready(startup_timeout)
        except BaseException:
            server.stop()
            raise
        logger.info(
            "virtuoso ready at %s (sql port %d) in %.1fs",
            server.sparql_url,
            sql_port,
            time.monotonic() - started,
        )
        return server

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        probe = self.sparql_url + "?query=ASK%7B%7D"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = self.log_tail()
                if _PORT_FAILURE.search(log):
                    raise _PortTaken(log)
                raise VirtuosoError(
                    f"virtuoso-t exited with code {self.process.returncode}:\n{log}"
                )
            try:
                with urllib.request.urlopen(probe, timeout=2) as response:
                    # the Server header proves it is our Virtuoso, not another process
                    server = response.headers.get("Server", "")
                    if response.status == 200 and "virtuoso" in server.lower():
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise VirtuosoError(f"virtuoso-t did not answer within {timeout:g}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's console output and error log (for failure messages)."""
        out = []
        for name in ("console.log", "virtuoso.log"):
            path = self.workdir / name
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {name}\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self) -> None:
        """Kill the server's process group and remove its directory. Safe to call twice."""
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # a throw-away database: no shutdown
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                logger.error("virtuoso-t (pid %d) did not exit after SIGKILL", self.process.pid)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> VirtuosoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- administration ----------------------------------------------------------------------
    def isql(self, script: str, *, timeout: float = 300.0) -> str:
        """Run SQL statements (``;``-terminated) as dba with ``isql-vt``; return its output.

        Raises :class:`VirtuosoError` when isql reports an error (it exits 0 regardless).
        """
        if self.isql_binary is None:
            raise VirtuosoError("isql-vt is not on PATH (Debian: virtuoso-opensource-7-bin)")
        path = self.workdir / f"script-{uuid.uuid4().hex}.sql"
        path.write_text(script if script.rstrip().endswith(";") else script + ";")
        try:
            done = subprocess.run(
                [self.isql_binary, f"127.0.0.1:{self.sql_port}", "dba", DBA_PASSWORD, str(path)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        finally:
            path.unlink(missing_ok=True)
        output = (done.stdout + done.stderr).decode(errors="replace")
        if done.returncode != 0 or "*** Error" in output:
            errors = [line for line in output.splitlines() if "Error" in line]
            raise VirtuosoError(
                f"isql failed (exit {done.returncode}): {' | '.join(errors)}\n{output.strip()}"
            )
        return output

    def load(self, path: str | os.PathLike[str], graph: str | None = None) -> str:
        """Load an RDF file (Turtle, N-Triples, RDF/XML; ``.gz`` allowed) into ``graph``.

        Without ``graph`` the data goes to :data:`DEFAULT_GRAPH`, which plain queries of
        ``/sparql`` see (Virtuoso's default graph is the union of all graphs). Returns the graph
        IRI. Raises :class:`VirtuosoError` when Virtuoso rejects the file.
        """
        source = Path(path)
        if not source.is_file():
            raise FileNotFoundError(source)
        graph = graph or DEFAULT_GRAPH
        self._loaded += 1
        # Virtuoso reads only inside DirsAllowed (the server directory): copy the file there.
        target = self.workdir / "data" / f"{self._loaded:04d}-{source.name}"
        shutil.copyfile(source, target)
        name = source.name.lower()
        compressed = name.endswith(".gz")
        stem = name[:-3] if compressed else name
        reader = (
            f"gz_file_open({_sql_string(str(target))})"
            if compressed
            else (f"file_to_string_output({_sql_string(str(target))})")
        )
        if stem.endswith(_RDFXML_SUFFIXES):
            statement = f"DB.DBA.RDF_LOAD_RDFXML_MT({reader}, '', {_sql_string(graph)})"
        elif stem.endswith(_TURTLE_SUFFIXES):
            statement = f"DB.DBA.TTLP_MT({reader}, '', {_sql_string(graph)}, 0)"
        else:
            raise VirtuosoError(f"unsupported RDF file type: {source.name}")
        try:
            self.isql(f"{statement};\ncheckpoint;")
        finally:
            target.unlink(missing_ok=True)
        logger.info("loaded %s into <%s>", source, graph)
        return graph

    def clear(self, graph: str) -> None:
        """Remove every triple of ``graph``."""
        self.isql(f"SPARQL CLEAR GRAPH <{graph}>;\ncheckpoint;")


class _PortTaken(VirtuosoError):
    """virtuoso-t could not bind a port picked as free (another process took it)."""


@pytest.fixture(scope="session")
def virtuoso() -> Iterator[VirtuosoServer]:
    """A Virtuoso server for the test session: ``.sparql_url``, ``.load(path, graph=None)``."""
    binary = shutil.which("virtuoso-t")
    if binary is None:
        pytest.skip(
            "virtuoso-t is not on PATH (Debian/Ubuntu: apt-get install virtuoso-opensource-7-bin)"
        )
    server = VirtuosoServer.start(binary=binary)
    try:
        yield server
    finally:
        server.stop()
