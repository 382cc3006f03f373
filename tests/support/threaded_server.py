"""An ASGI app served by uvicorn in a thread of the test process: a real HTTP server on a free
port of 127.0.0.1 (port 0, the one the OS picked is read back), for as long as the block runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

__all__ = ["Running", "served_in_thread"]


@dataclass(frozen=True)
class Running:
    """The server of :func:`served_in_thread`: ``url`` is ``http://127.0.0.1:PORT``."""

    url: str
    port: int
    server: uvicorn.Server


@contextmanager
def served_in_thread(app: Any, *, name: str = "pyql-test-server", start_seconds: float = 20,
                     stop_seconds: float = 10, graceful_seconds: int | None = None
                     ) -> Iterator[Running]:
    """``app`` served until the block ends; RuntimeError when it is not listening within
    ``start_seconds``. At the end the server is told to exit and its thread joined for at most
    ``stop_seconds`` (uvicorn's ``timeout_graceful_shutdown`` is ``graceful_seconds``)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           timeout_graceful_shutdown=graceful_seconds))
    thread = threading.Thread(target=server.run, daemon=True, name=name)
    thread.start()
    deadline = time.monotonic() + start_seconds
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = int(server.servers[0].sockets[0].getsockname()[1])
    try:
        yield Running(f"http://127.0.0.1:{port}", port, server)
    finally:
        server.should_exit = True
        thread.join(stop_seconds)
