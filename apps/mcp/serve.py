"""Running :class:`~pyql.apps.mcp.server.PyqlMcp` over stdio or Streamable HTTP.

Over stdio on POSIX the host's pipes are read and written by the event loop itself: the SDK's
own stdio transport hands every line to a worker thread (a read, a write and a flush per
message), which costs more than a step of the Session on the embedded store
(``benchmarks/mcp_latency.py``). As the SDK does, fd 0 and fd 1 are diverted (to the null
device and to stderr) while serving, so stray output never reaches the wire.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from pyql.apps.mcp.server import PyqlMcp

__all__ = ["serve_stdio", "serve_http", "http_app", "stdio"]


#: the longest message line read from the host (the HTTP transport's body limit is 4 MiB)
MAX_LINE_BYTES = 16 * 1024 * 1024


def serve_stdio(face: PyqlMcp) -> None:
    """Serve one MCP session over this process's stdin/stdout until the host closes it."""
    stdio(face.server(inline_steps=True))


def stdio(server: Server[Any]) -> None:
    """Serve any low-level MCP ``server`` over stdin/stdout as ``pyql mcp`` does (the latency
    benchmark serves its no-op server through this too)."""
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        if sys.platform == "win32":  # no pipe transports on the default loop there
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        async with _pipes() as (lines, out), stdio_server(lines, out) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


@asynccontextmanager
async def _pipes() -> AsyncIterator[tuple[Any, Any]]:
    """The host's stdin/stdout as an event-loop reader and writer; fd 0/1 diverted meanwhile."""
    in_fd, out_fd = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", buffering=0))
        os.set_blocking(out_fd, False)
        try:
            yield _LineReader(reader), _LineWriter(out_fd)
        finally:
            transport.close()
    finally:
        os.close(out_fd)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


def http_app(face: PyqlMcp, host: str = "127.0.0.1") -> Any:
    """The ASGI app serving ``face`` at ``/mcp``: stateful sessions that the SDK drops after the
    same idle timeout as the pyql sessions; a session the client ends (HTTP ``DELETE``, as the
    SDK's client does when it closes) has its pyql session freed at once."""
    app = face.server().streamable_http_app(
        host=host, session_idle_timeout=face.sessions.idle_timeout)
    return _FreeEndedSessions(app, face)


class _FreeEndedSessions:
    """ASGI middleware: when the SDK accepts a ``DELETE`` of an MCP session, drop its pyql
    session (the SDK's session manager has no hook for a session's end)."""

    def __init__(self, app: Any, face: PyqlMcp) -> None:
        self.app = app
        self.face = face

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "DELETE":
            await self.app(scope, receive, send)
            return
        wanted = MCP_SESSION_ID_HEADER.lower().encode()
        session_id = next((v.decode("latin-1") for k, v in scope["headers"] if k == wanted), None)

        async def watched(message: Any) -> None:
            # dropped before the client can read the answer: it may look right after
            if (session_id is not None and message["type"] == "http.response.start"
                    and 200 <= message["status"] < 300):
                self.face.sessions.drop(("http", session_id))
            await send(message)

        await self.app(scope, receive, watched)


def serve_http(face: PyqlMcp, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve Streamable HTTP at ``http://HOST:PORT/mcp``, concurrent clients each in their own
    session."""
    import uvicorn

    uvicorn.run(http_app(face, host), host=host, port=port, log_level="warning")


class _LineReader:
    """The host's lines, read by the event loop itself (no worker thread per line)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _LineWriter:
    """Writes whole messages to the host's pipe (no worker thread per write)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                data = data[os.write(self._fd, data):]
            except BlockingIOError:  # the host reads slowly: wait without blocking the loop
                await asyncio.sleep(0.001)

    async def flush(self) -> None:
        return None
