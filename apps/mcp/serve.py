"""Running :class:`~pyql.apps.mcp.server.PyqlMcp` over stdio or Streamable HTTP.

**stdio** is the SDK's own transport (:func:`mcp.server.stdio.stdio_server`): blocking reads
and writes in worker threads, so the host's stdin may be a pipe, a regular file or the null
device, and the last reply is written before the server exits at end of input. fd 1 is
diverted to stderr while serving (stray output never reaches the wire), fd 0 to the null
device. On top of it the host's lines are read here, bounded (:data:`MAX_LINE_BYTES`), and
every line that is not a JSON-RPC message (over-long, not UTF-8, bad JSON, a raw control
character, a lone surrogate, nesting too deep, a number out of range) is answered with a
JSON-RPC error (``-32700`` parse error, ``-32600`` invalid request) carrying the request's
id when it can be read; the server keeps serving. A host that dies mid-call (its pipe
closed) ends the server quietly.

**Streamable HTTP** (:func:`http_app`): Host and Origin are checked on every bind (DNS
rebinding protection, as the MCP specification requires); a bind to a non-loopback address
needs a bearer token (:func:`serve_http` refuses one without); at the session cap the
oldest idle session is evicted for a new one, so throwaway initializes cannot lock other
clients out.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import socket
from collections.abc import Callable, Iterable
from typing import IO, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from pyql.apps.mcp.server import PyqlMcp
from pyql.errors import PyqlError

__all__ = ["serve_stdio", "serve_http", "http_app", "stdio", "check_bind", "BindError",
           "MAX_LINE_BYTES", "DEFAULT_MAX_SESSIONS"]

log = logging.getLogger(__name__)

#: the longest message line read from the host over stdio (the HTTP transport's body limit is
#: 4 MiB); a longer one is skipped to its end and answered with an error
MAX_LINE_BYTES = 16 * 1024 * 1024
#: HTTP sessions open at once; at the cap the oldest idle one is evicted for a new one
DEFAULT_MAX_SESSIONS = 1000
#: the reading buffer for the rest of an over-long line (it is skipped, never kept)
_SKIP_CHUNK = 1024 * 1024


class BindError(PyqlError, ValueError):
    """An HTTP bind refused: a non-loopback ``host`` without a bearer token."""

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message)
        self.host = host


# -- stdio --------------------------------------------------------------------------------------


def serve_stdio(face: PyqlMcp) -> None:
    """Serve one MCP session over this process's stdin/stdout until the host closes it."""
    stdio(face.server(inline_steps=True))


def stdio(server: Server[Any]) -> None:
    """Serve any low-level MCP ``server`` over stdin/stdout as ``pyql mcp`` does (the latency
    benchmark serves its no-op server through this too). Returns at end of input, or quietly
    when the host closed its end of the pipe."""
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        with _host_stdin() as binary:
            lines = _HostLines(binary)
            async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
                watched = lines.answer_on(write)
                await server.run(read, watched, server.create_initialization_options())

    try:
        anyio.run(main)
    except BaseException as exc:  # noqa: BLE001 - only the host's closed pipe is swallowed
        if not _host_gone(exc):
            raise
        _quiet_stdout()


def _host_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (or every exception of a group) is the host's pipe closing under us."""
    group = getattr(exc, "exceptions", None)  # an exception group (a backport on 3.10)
    if isinstance(group, tuple) and group:
        return all(_host_gone(e) for e in group)
    return isinstance(exc, (BrokenPipeError, ConnectionResetError))


def _quiet_stdout() -> None:
    """Point fd 1 at the null device: the interpreter's last flush of a closed pipe would print
    an ``Exception ignored`` line on the way out."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


class _host_stdin:  # noqa: N801 - a context manager used like a function
    """The host's stdin as a private binary file; fd 0 points at the null device meanwhile
    (handlers and children read end of file, never the wire)."""

    def __enter__(self) -> IO[bytes]:
        self._private = os.dup(0)
        self._saved = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        # closefd=False: a worker thread may still be blocked reading it after the transport ends
        return os.fdopen(self._private, "rb", buffering=64 * 1024, closefd=False)

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, 0)
        os.close(self._saved)


class _HostLines:
    """The host's message lines for the SDK's stdio reader: read in a worker thread (pipes,
    files and the null device alike), at most :data:`MAX_LINE_BYTES` each.

    A line that is no JSON-RPC message never reaches the SDK (which would drop it unanswered):
    its error reply is handed to the SDK's writer before the next line is read. At end of
    input the SDK cancels the requests still running, so the end is held back until every
    request read has been answered (or cancelled by the host): a host that writes its
    requests and closes its end, ``cat requests.jsonl | pyql mcp``, gets every reply."""

    def __init__(self, binary: IO[bytes]) -> None:
        self._binary = binary
        self._write: Any = None
        self._ready = anyio.Event()
        self._pending: set[str | int] = set()
        self._answered = anyio.Event()

    def answer_on(self, write: Any) -> _AnswerWatch:
        """Send error replies on the server's ``write`` stream (known once the SDK's transport
        has started); the stream to give the server instead, which notes the answers."""
        self._write = write
        self._ready.set()
        return _AnswerWatch(write, self)

    def answered(self, request_id: Any) -> None:
        self._pending.discard(request_id)
        if not self._pending:
            self._answered.set()

    def __aiter__(self) -> _HostLines:
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await anyio.to_thread.run_sync(self._read_line)
            if raw is None:
                if self._pending:
                    await self._answered.wait()
                raise StopAsyncIteration
            if not raw.strip():
                continue
            message, reply = _classify(raw)
            if message is not None:
                self._note(message)
                return raw.decode("utf-8")
            await self._ready.wait()
            try:
                await self._write.send(SessionMessage(reply))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # the server is ending: nobody to answer

    def _note(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._pending.add(message.id)
            self._answered = anyio.Event()
        elif (isinstance(message, types.JSONRPCNotification)
              and message.method == "notifications/cancelled"):
            self.answered((message.params or {}).get("requestId"))

    def _read_line(self) -> bytes | None:
        """The next line (None at end of input); an over-long one is read to its end and
        discarded, and comes back as ``b"\\0"`` + its size (never valid JSON)."""
        line = self._binary.readline(MAX_LINE_BYTES + 1)
        if not line:
            return None
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            return line
        size = len(line)
        while not line.endswith(b"\n"):
            line = self._binary.readline(_SKIP_CHUNK)
            if not line:
                break
            size += len(line)
        return b"\0" + str(size).encode()


class _AnswerWatch:
    """The server's write stream, noting each response and error sent (see :class:`_HostLines`)."""

    def __init__(self, write: Any, lines: _HostLines) -> None:
        self._write = write
        self._lines = lines

    async def send(self, item: SessionMessage) -> None:
        try:
            await self._write.send(item)
        finally:
            if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
                self._lines.answered(item.message.id)

    async def aclose(self) -> None:
        await self._write.aclose()

    async def __aenter__(self) -> _AnswerWatch:
        await self._write.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._write.__aexit__(*exc)


def _classify(raw: bytes) -> tuple[Any, types.JSONRPCError | None]:
    """``raw`` as a JSON-RPC message and None, or None and the JSON-RPC error answering it."""
    if raw.startswith(b"\0") and raw[1:].isdigit():
        return None, _error(None, types.INVALID_REQUEST,
                            f"a message line of {int(raw[1:]):,} bytes; at most "
                            f"{MAX_LINE_BYTES:,} are read",
                            {"size": int(raw[1:]), "limit": MAX_LINE_BYTES})
    try:
        return types.jsonrpc_message_adapter.validate_json(raw, by_name=False), None
    except ValidationError as exc:
        problems = exc.errors(include_url=False, include_input=False)
    first = problems[0] if problems else {"type": "", "msg": "invalid message"}
    parse = first["type"] == "json_invalid"
    return None, _error(
        _request_id(raw), types.PARSE_ERROR if parse else types.INVALID_REQUEST,
        ("Parse error: " if parse else "Invalid request: ") + str(first["msg"])[:300],
        {"type": first["type"], "location": [str(p) for p in first.get("loc", ())]})


def _request_id(raw: bytes) -> str | int | None:
    """The ``id`` of a request that is JSON to Python's reader but not a valid message to the
    SDK's (a lone surrogate, a long number, a raw control character, bytes that are not
    UTF-8): the host waits for a
    reply with that id. None when it cannot be read."""
    try:  # a number too long for int() is kept as its text
        message = json.loads(raw.decode("utf-8", errors="replace"), parse_int=lambda s: int(s) if len(s) < 4000 else s,
                             parse_float=str, parse_constant=str, strict=False)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict):
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    return request_id


def _error(request_id: str | int | None, code: int, message: str,
           data: dict[str, Any]) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id,
                              error=types.ErrorData(code=code, message=message, data=data))


# -- Streamable HTTP ----------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (a loopback address, or a name whose
    every address is one)."""
    name = host.strip("[]")
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback
                                   for a in addresses)


def check_bind(host: str, token: str | None) -> None:
    """Refuse (:class:`BindError`) to serve a non-loopback ``host`` without a bearer token."""
    if not token and not is_loopback(host):
        raise BindError(f"--host {host} is reachable from other machines: give a bearer token "
                        "(--token-env VAR, the name of an environment variable holding it) "
                        "or bind a loopback address (127.0.0.1, ::1, localhost)", host=host)


def transport_security(host: str, allowed_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """Host/Origin validation for a bind to ``host``: the loopback names, the bound address
    (a wildcard bind: this machine's host names) and ``allowed_hosts``, on any port."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    bare = host.strip("[]")
    if bare in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname(), socket.getfqdn()}
    else:
        names.add(f"[{bare}]" if ":" in bare else bare)
    names |= {h.strip() for h in allowed_hosts if h.strip()}
    hosts = sorted(n for name in names for n in (name, f"{name}:*"))
    origins = sorted(f"{scheme}://{n}" for name in names for scheme in ("http", "https")
                     for n in (name, f"{name}:*"))
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=hosts, allowed_origins=origins)


def http_app(face: PyqlMcp, host: str = "127.0.0.1", *, token: str | None = None,
             allowed_hosts: Iterable[str] = (),
             max_sessions: int = DEFAULT_MAX_SESSIONS) -> Any:
    """The ASGI app serving ``face`` at ``/mcp``: stateful sessions that the SDK drops after the
    same idle timeout as the pyql sessions; a session the client ends (HTTP ``DELETE``, as the
    SDK's client does when it closes) has its pyql session freed at once; at ``max_sessions``
    the oldest idle session is evicted for a new one. Host and Origin are validated
    (:func:`transport_security`); with ``token`` every request needs
    ``Authorization: Bearer TOKEN``."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    check_bind(host, token)
    manager = _EvictingSessionManager(
        app=face.server(), security_settings=transport_security(host, allowed_hosts),
        session_idle_timeout=face.sessions.idle_timeout, max_sessions=max_sessions,
        on_evict=lambda session_id: face.sessions.drop(("http", session_id)))
    app: Any = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))],
                         lifespan=lambda _: manager.run())
    app = _FreeEndedSessions(app, face)
    return _BearerAuth(app, token) if token else app


class _EvictingSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, but at the session cap the oldest idle session (no request
    in flight, no open stream) is evicted to admit a new one; only when every session is busy
    is a new one refused (503)."""

    def __init__(self, *args: Any, on_evict: Callable[[str], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_evict = on_evict

    def _admit_session(self, requestor: Any) -> Any:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            self._evict_oldest_idle()
        return super()._admit_session(requestor)

    def _evict_oldest_idle(self) -> None:
        idle = [(transport.idle_scope.deadline, session_id, transport)
                for session_id, transport in self._server_instances.items()
                if transport.idle_scope is not None and transport.idle_scope.deadline < float("inf")
                and not transport.is_terminated]
        if not idle:
            return
        _, session_id, transport = min(idle, key=lambda t: t[0])
        log.info("MCP session cap (%d) reached: evicting the oldest idle session",
                 self.max_sessions)
        self._server_instances.pop(session_id, None)
        transport.idle_scope.cancel()  # its server task ends and terminates the transport
        self._on_evict(session_id)


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


class _BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer TOKEN`` (compared in
    constant time); others get 401 with a JSON-RPC error body."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self._expected):
                body = _error(None, types.INVALID_REQUEST, "Unauthorized: this server needs "
                              "'Authorization: Bearer TOKEN'", {"status": 401}
                              ).model_dump_json(by_alias=True, exclude_none=True).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="pyql mcp"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(face: PyqlMcp, *, host: str = "127.0.0.1", port: int = 8765,
               token: str | None = None, allowed_hosts: Iterable[str] = (),
               max_sessions: int = DEFAULT_MAX_SESSIONS,
               ready: Callable[[str], Any] | None = None) -> None:
    """Serve Streamable HTTP at ``http://HOST:PORT/mcp``, concurrent clients each in their own
    session; once it listens, ``ready`` gets the URL (``pyql mcp`` prints it on stderr).
    :class:`BindError` for a non-loopback ``host`` without ``token``."""
    import uvicorn

    app = http_app(face, host, token=token, allowed_hosts=allowed_hosts,
                   max_sessions=max_sessions)

    class _Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started and ready is not None:
                bound = self.servers[0].sockets[0].getsockname() if self.servers else (host, port)
                shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
                ready(f"http://{shown}:{bound[1]}/mcp")

    _Announcing(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
