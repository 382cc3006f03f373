"""The HTTP side of the tests' local SPARQL endpoints: one server on 127.0.0.1 that reads the
SPARQL protocol's GET and POST requests, so each endpoint says only how it answers.

A subclass calls ``super().__init__()`` last (the server answers as soon as it starts) and
implements :meth:`LoopbackEndpoint.answer`; :func:`send_results` writes a SPARQL JSON reply
(:func:`send_head` its status and headers alone).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

__all__ = ["LoopbackEndpoint", "send_head", "send_results", "RESULTS_JSON"]

RESULTS_JSON = "application/sparql-results+json"

_E = TypeVar("_E", bound="LoopbackEndpoint")


class LoopbackEndpoint:
    """A threaded HTTP server at ``.url`` (``http://127.0.0.1:PORT/sparql``); a context manager.

    Each request's parameters are the URL's query string, then (POST) the form in its body.
    """

    def __init__(self) -> None:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                endpoint._dispatch(self, b"")

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                endpoint._dispatch(self, self.rfile.read(length))

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sparql"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _dispatch(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        params = parse_qs(urlsplit(handler.path).query)
        params.update(parse_qs(body.decode()))
        self.answer(handler, params)

    def answer(self, handler: BaseHTTPRequestHandler, params: dict[str, list[str]]) -> None:
        """Reply to one request (``params["query"][0]`` is its query)."""
        raise NotImplementedError

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self: _E) -> _E:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def send_head(
    handler: BaseHTTPRequestHandler,
    length: int,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> None:
    """Send the status line and headers of a reply of ``length`` bytes: a SPARQL JSON content
    type unless ``headers`` names another, then ``headers`` and the length."""
    handler.send_response(status)
    for name, value in {"Content-Type": RESULTS_JSON, **(headers or {})}.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(length))
    handler.end_headers()


def send_results(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """Send ``body`` as a whole SPARQL JSON reply (200)."""
    send_head(handler, len(body))
    handler.wfile.write(body)
