"""A throw-away Virtuoso server for tests, on top of :mod:`pyql.kb.virtuoso`.

:meth:`VirtuosoServer.start` makes a temporary directory with :meth:`pyql.kb.virtuoso.Virtuoso.init`
(SQL and HTTP ports picked free on 127.0.0.1, ``DirsAllowed`` limited to that directory), starts
``virtuoso-t`` in its own process group and waits until ``/sparql`` answers (retrying when another
process takes a port first). :meth:`VirtuosoServer.load` bulk-loads an RDF file with Virtuoso's
loader; :meth:`VirtuosoServer.stop` kills the process group and removes the directory.

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
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyql.kb.virtuoso import (
    DBA_PASSWORD,
    Virtuoso,
    VirtuosoError,
    VirtuosoPortError,
    VirtuosoSettings,
    find_binary,
    free_port,
)

__all__ = [
    "DBA_PASSWORD",
    "DEFAULT_GRAPH",
    "VirtuosoError",
    "VirtuosoServer",
    "free_port",
    "virtuoso",
]

logger = logging.getLogger(__name__)

#: the graph ``load(path)`` uses when no graph is given (queried as part of the default graph)
DEFAULT_GRAPH = "urn:pyql:test:default"
_STARTUP_ATTEMPTS = 3
#: a small buffer pool: the test data is tiny and several test servers may share a machine
_TEST_MEMORY_GB = 0.12


class VirtuosoServer:
    """A running throw-away Virtuoso. Use :meth:`start`; always :meth:`stop` (or ``with``)."""

    def __init__(self, db: Virtuoso) -> None:
        self.db = db
        self.workdir = db.directory
        self.sql_port = db.settings.sql_port
        self.http_port = db.settings.http_port
        self.sparql_url = db.sparql_url
        atexit.register(self.stop)

    @classmethod
    def start(cls, *, binary: str | None = None, isql: str | None = None,
              startup_timeout: float = 60.0) -> VirtuosoServer:
        """Start a server on free loopback ports; raise :class:`VirtuosoError` if it fails."""
        binary = find_binary("virtuoso-t", binary)
        last: VirtuosoError | None = None
        for attempt in range(1, _STARTUP_ATTEMPTS + 1):
            workdir = Path(tempfile.mkdtemp(prefix="pyql-virtuoso-"))
            sql_port, http_port = free_port(), free_port()
            while http_port == sql_port:
                http_port = free_port()
            settings = VirtuosoSettings(sql_port=sql_port, http_port=http_port,
                                        memory_gb=_TEST_MEMORY_GB)
            try:
                db = Virtuoso.init(workdir, settings, binary=binary, isql=isql)
                db.start(timeout=startup_timeout)
            except VirtuosoPortError as exc:
                last = exc
                shutil.rmtree(workdir, ignore_errors=True)
                logger.warning("virtuoso start attempt %d lost a port race; retrying", attempt)
                continue
            except BaseException:
                shutil.rmtree(workdir, ignore_errors=True)
                raise
            logger.info("virtuoso ready at %s (sql port %d)", db.sparql_url, sql_port)
            return cls(db)
        raise VirtuosoError(f"could not start virtuoso-t on free ports: {last}")

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's console output and error log (for failure messages)."""
        return self.db.log_tail(lines)

    def stop(self) -> None:
        """Kill the server's process group and remove its directory. Safe to call twice."""
        atexit.unregister(self.stop)
        self.db.kill()  # a throw-away database: no shutdown
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> VirtuosoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def isql(self, script: str, *, timeout: float = 300.0) -> str:
        """Run SQL statements (``;``-terminated) as dba with ``isql-vt``; return its output."""
        return self.db.isql(script, timeout=timeout)

    def load(self, path: str | os.PathLike[str], graph: str | None = None) -> str:
        """Bulk-load an RDF file (Turtle, N-Triples, RDF/XML; ``.gz`` allowed) into ``graph``
        (default :data:`DEFAULT_GRAPH`); return the graph IRI."""
        source = Path(path)
        if not source.is_file():
            raise FileNotFoundError(source)
        graph = graph or DEFAULT_GRAPH
        self.db.load([source], graph, loaders=1)
        logger.info("loaded %s into <%s>", source, graph)
        return graph

    def clear(self, graph: str) -> None:
        """Remove every triple of ``graph``."""
        self.isql(f"SPARQL CLEAR GRAPH <{graph}>;\ncheckpoint;")


@pytest.fixture(scope="session")
def virtuoso() -> Iterator[VirtuosoServer]:
    """A Virtuoso server for the test session: ``.sparql_url``, ``.load(path, graph=None)``."""
    if shutil.which("virtuoso-t") is None:
        pytest.skip(
            "virtuoso-t is not on PATH (Debian/Ubuntu: apt-get install virtuoso-opensource-7-bin)"
        )
    server = VirtuosoServer.start()
    try:
        yield server
    finally:
        server.stop()
