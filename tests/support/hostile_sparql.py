"""Hostile SPARQL endpoints on loopback, for the outage and malformed-result tests (issue 24).

- :class:`HungEndpoint`: accepts connections and reads the request, then never answers (the
  connection stays open until the server is closed): a hung SPARQL server.
- :class:`ShortRowsEndpoint`: answers every query from a real in-memory Oxigraph store, but
  leaves the last selected column out of its result (``head.vars`` and the bindings), down to
  ``min_columns`` (0: a one-column result has none; 1: only results of two or more columns are
  cut, as in the label lookups): a server whose results have fewer columns than the query
  selected.

Both are context managers with ``.url`` (``http://127.0.0.1:PORT/sparql``) and ``.requests``
(how many requests arrived).
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pyoxigraph

from tests.support.loopback import LoopbackEndpoint, send_results

__all__ = ["HungEndpoint", "ShortRowsEndpoint"]


class HungEndpoint:
    """See the module docstring."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.1)
        self._closing = threading.Event()
        self._held: list[socket.socket] = []
        self.requests = 0
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/sparql"
        self._thread = threading.Thread(target=self._accept, name="hung-sparql", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self.requests += 1
            self._held.append(conn)  # read nothing back, answer nothing

    def close(self) -> None:
        self._closing.set()
        self._thread.join(2)
        for conn in self._held:
            conn.close()
        self._sock.close()

    def __enter__(self) -> HungEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShortRowsEndpoint(LoopbackEndpoint):
    """See the module docstring. ``source``: a store, or an RDF file loaded into one (its
    format told by the extension)."""

    def __init__(self, source: pyoxigraph.Store | Path, *, min_columns: int = 0) -> None:
        self.min_columns = min_columns
        if isinstance(source, pyoxigraph.Store):
            self.store = source
        else:
            self.store = pyoxigraph.Store()
            self.store.load(path=str(source), format=pyoxigraph.RdfFormat.from_extension(
                source.suffix.lstrip(".")))
        self.requests = 0
        super().__init__()

    def answer(self, handler: BaseHTTPRequestHandler, params: dict[str, list[str]]) -> None:
        self.requests += 1
        result = self.store.query(params["query"][0])
        if isinstance(result, pyoxigraph.QueryBoolean):
            payload: dict[str, Any] = {"head": {}, "boolean": bool(result)}
        else:
            names = [v.value for v in result.variables]
            kept = names[:max(len(names) - 1, self.min_columns)]
            bindings = [{name: _cell(solution[name]) for name in kept
                         if solution[name] is not None} for solution in result]
            payload = {"head": {"vars": kept}, "results": {"bindings": bindings}}
        send_results(handler, json.dumps(payload).encode())

def _cell(term: Any) -> dict[str, str]:
    if isinstance(term, pyoxigraph.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, pyoxigraph.BlankNode):
        return {"type": "bnode", "value": term.value}
    cell = {"type": "literal", "value": term.value}
    if term.language:
        cell["xml:lang"] = term.language
    elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
        cell["datatype"] = term.datatype.value
    return cell
