"""The MCP server driven by the ``mcp`` SDK's own client, over stdio and Streamable HTTP.

The KB is a tiny ``kb.txt`` cut from MetaQA's (the lines about one 2-hop dev question's
entities), so the server starts in well under a second; the database is a copy of
``pyql/data/demo.sqlite``.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, require_data
from tests.support.fake_openai import fake_openai  # noqa: F401 - a fixture

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402

from pyql.datasets.metaqa import MetaQAItem, gold_program, load_questions  # noqa: E402
from pyql.program import Call  # noqa: E402

PYQL = [sys.executable, "-m", "pyql"]


@dataclass(frozen=True)
class MetaQACase:
    """One MetaQA 2-hop dev question, its gold program and a kb.txt with its entities' lines."""

    item: MetaQAItem
    program: list[Call]
    kb: Path


def tool_arguments(call: Call, schemas: dict[str, Any]) -> dict[str, str]:
    """A DSL call as the tool arguments its schema names."""
    names = list(schemas[call.name]["properties"])
    return {name: str(arg) for name, arg in zip(names, call.args)}


@pytest.fixture(scope="session")
def metaqa_case(tmp_path_factory: pytest.TempPathFactory) -> MetaQACase:
    base = require_data("metaqa")
    item = next(load_questions(base / "2-hop" / "qa_dev.txt", base / "2-hop" / "qa_dev_qtype.txt"))
    program = list(gold_program(item))
    wanted = {item.topic}
    lines = (base / "kb.txt").read_text(encoding="utf-8").splitlines()
    first = [line for line in lines if item.topic in line.split("|")[::2]]
    wanted |= {part for line in first for part in line.split("|")[::2]}
    kept = [line for line in lines if set(line.split("|")[::2]) & wanted]
    kb = tmp_path_factory.mktemp("metaqa") / "kb.txt"
    kb.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return MetaQACase(item, program, kb)


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    copy = tmp_path / "demo.sqlite"
    copy.write_bytes((REPO / "pyql" / "data" / "demo.sqlite").read_bytes())
    return copy


def checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stdio_server(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=PYQL[0], args=[*PYQL[1:], "mcp", *args],
                                 cwd=str(REPO), env=dict(os.environ))


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[bytes]


def start_http(*args: str) -> HttpServer:
    """``pyql mcp ... --transport http`` on a free loopback port, once it accepts connections."""
    port = free_port()
    process = subprocess.Popen([*PYQL, "mcp", *args, "--transport", "http", "--port", str(port)],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read().decode()  # type: ignore[union-attr]
            raise RuntimeError(f"pyql mcp exited: {error}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return HttpServer(f"http://127.0.0.1:{port}/mcp", process)
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("pyql mcp did not listen in 30 s")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Terminate ``process``; kill it when it has not exited within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop(server: HttpServer) -> None:
    stop_process(server.process)


@pytest.fixture(scope="module")
def kb_http(metaqa_case: MetaQACase) -> Iterator[HttpServer]:
    server = start_http("--kb", str(metaqa_case.kb))
    yield server
    stop(server)


@asynccontextmanager
async def connected(transport: str, kb_http: HttpServer | None, *args: str
                    ) -> AsyncIterator[Client]:
    """The SDK's client on a stdio server started with ``args``, or on ``kb_http``."""
    target: Any = (stdio_server(*args) if transport == "stdio"
                   else kb_http.url)  # type: ignore[union-attr]
    async with Client(target) as client:
        yield client
