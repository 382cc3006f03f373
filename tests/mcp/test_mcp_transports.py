"""``pyql mcp``'s transports under hostile input (issue 36 items 7-11, 13, 14): stdio from a
file, the null device and a pipe closed at once; malformed lines; a host that dies; HTTP binds,
Host/Origin, bearer tokens, the session cap and one session's hung calls. Raw JSON-RPC over pipes
and HTTP where the SDK's client would refuse to send the input, the SDK's client elsewhere."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.conftest import REPO
from tests.mcp.conftest import PYQL, free_port, stop_process
from tests.support.hostile_sparql import HungEndpoint

Client = pytest.importorskip("mcp").Client

MOVIES = str(REPO / "pyql" / "data" / "movies.ttl")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def replies(stdout: bytes) -> list[dict[str, Any]]:
    return [json.loads(text) for text in stdout.decode().splitlines() if text.strip()]


def read_line(stream: Any, seconds: float) -> bytes:
    """The next line of ``stream``, or ``b""`` when none comes within ``seconds``."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return got[0] if got else b""


def stdio_run(stdin: Any, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*PYQL, "mcp", "--kb", MOVIES, *args], stdin=stdin, cwd=REPO,
                          capture_output=True, timeout=timeout)


def requests_file(tmp_path: Path) -> tuple[Path, set[int]]:
    """A host's whole conversation as a file: the handshake, calls, and last a threaded one
    (``start_question`` links in a worker thread) and a prompt."""
    messages = [INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                call(3, "show_program", {}),
                {"jsonrpc": "2.0", "id": 4, "method": "prompts/get",
                 "params": {"name": "queryagent", "arguments": {"question": "who directed "
                                                                "Inception"}}},
                call(5, "start_question", {"question": "which films did Christopher Nolan "
                                                       "direct"})]
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"".join(line(m) for m in messages))
    return path, {1, 2, 3, 4, 5}


def test_stdio_from_the_null_device_ends_cleanly():
    done = stdio_run(subprocess.DEVNULL, timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"" and b"Error" not in done.stderr and b"Traceback" not in done.stderr


def test_stdio_from_a_file_answers_every_request(tmp_path):
    path, ids = requests_file(tmp_path)
    with path.open("rb") as stdin:
        done = stdio_run(stdin)
    assert done.returncode == 0, done.stderr.decode()
    got = replies(done.stdout)
    assert {r["id"] for r in got} == ids and all("result" in r for r in got)
    assert b"Traceback" not in done.stderr


def test_a_pipe_closed_after_the_last_request_gets_every_reply(tmp_path):
    path, ids = requests_file(tmp_path)
    for _ in range(3):  # `cat requests.jsonl | pyql mcp ...`: the pipe ends right after
        process = subprocess.Popen([*PYQL, "mcp", "--kb", MOVIES], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
        out, err = process.communicate(path.read_bytes(), timeout=60)
        assert process.returncode == 0, err.decode()
        got = {r["id"]: r for r in replies(out)}
        assert set(got) == ids, err.decode()
        assert got[5]["result"]["structuredContent"]["entities"]  # the threaded call's reply


MALFORMED: list[tuple[str, bytes, int | None, int]] = [
    # (what, the line, the id the reply carries, the error code)
    ("bad JSON", b'{"jsonrpc": "2.0", "id": 10, "method": ', None, -32700),
    ("a lone surrogate", line(call(11, "get_relation", {"node": "x"})).replace(
        b'"x"', b'"\\ud800"'), 11, -32700),
    ("a raw NUL", line(call(12, "get_relation", {"node": "x"})).replace(b'"x"', b'"a\x00b"'),
     12, -32700),
    ("nesting 1000 deep", line(call(13, "get_relation", {"node": "x"})).replace(
        b'"x"', b"[" * 1000 + b"]" * 1000), None, -32700),
    ("a 5,000-digit number", line(call(14, "get_relation", {"node": "x"})).replace(
        b'"x"', b"9" * 5000), 14, -32700),
    ("not UTF-8", line(call(15, "get_relation", {"node": "x"})).replace(b'"x"', b'"\xff\xfe"'),
     15, -32700),
    ("not a message", b'{"hello": "world"}\n', None, -32600),
    ("a line over 16 MiB", b'{"jsonrpc": "2.0", "id": 16, "method": "tools/call", "params": '
     b'{"name": "get_relation", "arguments": {"node": "' + b"x" * (17 * 1024 * 1024) + b'"}}}',
     None, -32600),
]


def test_every_malformed_line_gets_a_json_rpc_error_and_the_server_lives():
    process = subprocess.Popen([*PYQL, "mcp", "--kb", MOVIES], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdin is not None and process.stdout is not None

    def send(raw: bytes) -> dict[str, Any]:
        process.stdin.write(raw if raw.endswith(b"\n") else raw + b"\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
        reply = read_line(process.stdout, 30)
        assert reply, "no reply within 30 s"
        return json.loads(reply)

    try:
        assert "result" in send(line(INITIALIZE))
        process.stdin.write(line(INITIALIZED))
        for what, raw, request_id, code in MALFORMED:
            reply = send(raw)
            assert reply.get("error", {}).get("code") == code, (what, reply)
            assert reply["id"] == request_id, what
            alive = send(line(call(100, "show_program", {})))  # and the server still serves
            assert alive["id"] == 100 and not alive["result"]["isError"], what
    finally:
        if process.poll() is None:
            process.stdin.close()
        try:
            process.wait(timeout=30)
        finally:
            process.kill()
        err = process.stderr.read()  # type: ignore[union-attr]
    assert process.returncode == 0 and b"Traceback" not in err, err.decode()[-2000:]


def test_the_host_dying_mid_call_ends_the_server_quietly():
    process = subprocess.Popen([*PYQL, "mcp", "--kb", MOVIES], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line(INITIALIZE))
    process.stdin.flush()
    assert b'"result"' in process.stdout.readline()
    process.stdout.close()  # the host is gone: the replies to these have nowhere to go
    process.stdin.write(line(INITIALIZED) + b"".join(
        line({"jsonrpc": "2.0", "id": n, "method": "tools/list"}) for n in range(2, 200)))
    process.stdin.flush()
    time.sleep(1)
    process.stdin.close()
    err = process.stderr.read()  # type: ignore[union-attr]
    process.wait(timeout=30)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()[-2000:]
    assert b"Exception ignored" not in err


# -- HTTP -----------------------------------------------------------------------------------------


class Http:
    """``pyql mcp --transport http`` started with ``args``: its URL from the line it prints
    when it is ready."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [*PYQL, "mcp", "--kb", MOVIES, "--transport", "http", "--port", str(self.port),
             *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})})
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.ready = read_line(self.process.stderr, 30).decode().strip()
        if not self.ready:
            self.stop()
            raise AssertionError("pyql mcp printed nothing within 30 s")

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture
def http_server(request: pytest.FixtureRequest) -> Iterator[Http]:
    server = Http(*getattr(request, "param", ()))
    yield server
    server.stop()


def test_the_http_transport_says_where_it_serves(http_server):
    assert http_server.ready == f"pyql mcp: serving http://127.0.0.1:{http_server.port}/mcp"


def test_a_non_loopback_bind_needs_a_bearer_token():
    refused = subprocess.run([*PYQL, "mcp", "--kb", MOVIES, "--transport", "http", "--host",
                              "0.0.0.0", "--port", str(free_port())], cwd=REPO,
                             capture_output=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if k != "PYQL_MCP_TOKEN"})
    assert refused.returncode == 2
    assert b"bearer token" in refused.stderr

    server = Http("--host", "0.0.0.0", "--allow-host", "kb.example",
                  env={"PYQL_MCP_TOKEN": "s3cret"})
    try:
        assert server.ready.startswith("pyql mcp: serving http://0.0.0.0:")
        auth = {**HEADERS, "authorization": "Bearer s3cret"}
        for headers in (HEADERS, {**HEADERS, "authorization": "Bearer wrong"}):
            answer = httpx.post(server.url, json=INITIALIZE, headers=headers)
            assert answer.status_code == 401 and answer.json()["error"]["code"] == -32600
            assert answer.headers["www-authenticate"].startswith("Bearer")
        assert httpx.post(server.url, json=INITIALIZE, headers=auth).status_code == 200
        # Host/Origin are checked on this bind too (DNS rebinding), the token notwithstanding
        forged = httpx.post(server.url, json=INITIALIZE,
                            headers={**auth, "host": "evil.example"})
        assert forged.status_code == 421
        origin = httpx.post(server.url, json=INITIALIZE,
                            headers={**auth, "origin": "http://evil.example"})
        assert origin.status_code == 403
        allowed = httpx.post(server.url, json=INITIALIZE,
                             headers={**auth, "host": f"kb.example:{server.port}",
                                      "origin": f"https://kb.example:{server.port}"})
        assert allowed.status_code == 200
    finally:
        server.stop()


def test_forged_host_and_origin_are_refused_on_loopback(http_server):
    assert httpx.post(http_server.url, json=INITIALIZE,
                      headers={**HEADERS, "host": "evil.example"}).status_code == 421
    assert httpx.post(http_server.url, json=INITIALIZE,
                      headers={**HEADERS, "origin": "http://evil.example"}).status_code == 403


@pytest.mark.parametrize("http_server", [("--max-sessions", "3")], indirect=True)
def test_throwaway_initializes_cannot_lock_other_clients_out(http_server):
    thrown = []
    for _ in range(10):  # far past the cap: each evicts the oldest idle one
        answer = httpx.post(http_server.url, json=INITIALIZE, headers=HEADERS)
        assert answer.status_code == 200
        thrown.append(answer.headers["mcp-session-id"])
    gone = httpx.post(http_server.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                      headers={**HEADERS, "mcp-session-id": thrown[0],
                               "mcp-protocol-version": "2025-06-18"})
    assert gone.status_code == 404  # the oldest went first

    async def other_client() -> bool:
        async with Client(http_server.url) as client:
            return not (await client.call_tool("show_program", {})).is_error

    assert asyncio.run(other_client())


def test_one_sessions_hung_calls_do_not_delay_another_session():
    from pyql.apps.mcp import PyqlMcp
    from pyql.apps.mcp.serve import http_app
    from pyql.kb import open_kb
    from tests.support.threaded_server import served_in_thread

    with HungEndpoint() as hung:
        face = PyqlMcp(open_kb(hung.url, profile="metaqa"), timeout=8.0)
        with served_in_thread(http_app(face), start_seconds=30, stop_seconds=30) as running:
            url = f"{running.url}/mcp"

            async def go() -> float:
                async with Client(url) as stuck, Client(url) as other:
                    await stuck.call_tool("start_question", {
                        "question": "who directed Inception",
                        "entities": {"Inception": "Inception"}})
                    calls = [asyncio.create_task(stuck.call_tool(
                        "get_relation", {"node": "Inception"})) for _ in range(45)]
                    await asyncio.sleep(1.0)  # the 45 calls are in: one hangs, 44 wait
                    assert hung.requests >= 1
                    start = time.perf_counter()
                    program = await other.call_tool("show_program", {})
                    waited = time.perf_counter() - start
                    assert not program.is_error
                    for task in calls:
                        task.cancel()
                    await asyncio.gather(*calls, return_exceptions=True)
                    return waited

            waited = asyncio.run(go())
            assert waited < 2.0, f"show_program waited {waited:.1f} s behind another session"
