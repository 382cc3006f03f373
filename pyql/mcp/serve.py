"""Running :class:`~pyql.mcp.server.PyqlMcp` over stdio or Streamable HTTP."""

from __future__ import annotations

import anyio

from pyql.mcp.server import PyqlMcp

__all__ = ["serve_stdio", "serve_http", "http_app"]


def serve_stdio(face: PyqlMcp) -> None:
    """Serve one MCP session over this process's stdin/stdout until the host closes it."""
    from mcp.server.stdio import stdio_server

    server = face.server()

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def http_app(face: PyqlMcp, host: str = "127.0.0.1"):  # type: ignore[no-untyped-def]
    """The Starlette app serving ``face`` at ``/mcp`` (stateful sessions that the SDK drops
    after the same idle timeout as the pyql sessions)."""
    return face.server().streamable_http_app(
        host=host, session_idle_timeout=face.sessions.idle_timeout)


def serve_http(face: PyqlMcp, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve Streamable HTTP at ``http://HOST:PORT/mcp``, concurrent clients each in their own
    session."""
    import uvicorn

    uvicorn.run(http_app(face, host), host=host, port=port, log_level="warning")
