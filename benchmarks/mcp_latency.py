"""A tool call's overhead over ``Session.run`` on the same step (``pyql mcp``, issue 23).

Runs the gold programs of ``--n`` sampled MetaQA 2-hop dev questions on the same KB four ways,
**interleaved step by step** (in a random order each step), so that every way sees the same
load on a shared machine:

- **direct**: ``Session.run`` in this process, on a Session built as the server builds one
  (``PyqlMcp.new_session``: guidelines on, the ``metaqa`` profile's functions) with the very
  call the server makes of the tool arguments;
- **in process**: ``PyqlMcp.call`` in this process (pyql's MCP layer without a transport:
  arguments to a call, the step, rendering, structured content);
- **MCP**: ``pyql mcp --kb KB`` as a subprocess driven by the ``mcp`` SDK's own ``Client``, one
  ``call_tool`` per call, timed on the client from request to result;
- **SDK floor**: the same client calling the same tools with the same arguments on a no-op SDK
  server (``--serve-floor``: a low-level ``Server`` served the way ``pyql mcp`` serves, that
  answers every call with one canned result of a step's size): what the SDK's two ends and the
  transport cost with no work at all.

Each question is ``start_question`` (entities given: linking is not a step) and then the calls;
the first 10 questions run untimed on every side (caches, lazy imports, the client's tool
list). Prints p50 and mean per step, the ratio MCP / direct (target for stdio: <= 2x) and the
best ratio the SDK allows, (floor + direct) / direct, with the load average.

Usage (from the repository root)::

    python benchmarks/mcp_latency.py [--n 50] [--seed 0] [--kb PATH] [--transport stdio|http]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from pyql.agent.prompting import call_from_arguments, get_prompt_profile, tool_schemas
from pyql.datasets.metaqa import gold_program, load_questions
from pyql.datasets.paths import default_data_dir
from pyql.kb import open_kb
from pyql.mcp import PyqlMcp

REPO = Path(__file__).resolve().parent.parent
WARM = 10
#: the SDK floor's canned result: the size of a MetaQA step's (text ~150 characters, structured
#: content ~450 bytes: 600 bytes on the wire, as measured for the p50 step)
FLOOR_CONTENT = {"status": "ok", "ok": True, "step": 2,
                 "values": {"?x1": {"values": ["My Big Fat Greek Wedding", "Finding Neverland"],
                                    "total": 2}},
                 "relations": None, "answers": None, "hint": None, "error": None,
                 "query": "SELECT DISTINCT ?x1\nWHERE {\n  ?x1 <http://pyql.dev/metaqa/relation/"
                          "directed_by> <http://pyql.dev/metaqa/entity/Joel_Zwick> .\n}"}
FLOOR_TEXT = "?x1: My Big Fat Greek Wedding, Finding Neverland (2 values)\n" + "x" * 90


def _schemas() -> dict[str, Any]:
    profile = get_prompt_profile("metaqa")
    return {t["function"]["name"]: t["function"] for t in tool_schemas(profile.signatures, profile)}


def _arguments(call: Any, schemas: dict[str, Any]) -> dict[str, str]:
    names = schemas[call.name]["parameters"]["properties"]
    return {name: str(arg) for name, arg in zip(names, call.args)}


def _stats(times: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(times) * 1e3, "mean_ms": statistics.fmean(times) * 1e3,
            "steps": len(times)}


def floor_server() -> Any:
    """A low-level SDK server with the MetaQA tools that answers every call at once."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=name, description=f["description"], input_schema=f["parameters"])
             for name, f in _schemas().items()]
    tools.append(types.Tool(name="start_question", input_schema={"type": "object"}))
    result = types.CallToolResult(content=[types.TextContent(type="text", text=FLOOR_TEXT)],
                                  structured_content=FLOOR_CONTENT)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return result

    server: Server[Any] = Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware = []  # as pyql mcp's server when no tracing is configured
    return server


async def interleaved(kb: Any, items: list[Any], targets: dict[str, Any], seed: int
                      ) -> dict[str, list[float]]:
    """Every step timed on every side, in a random order each step (a side that runs right after
    another in this process finds the same query's data in the caches; one that runs right after
    a round trip finds them cold: a fixed order would favour some sides)."""
    shuffle = random.Random(seed)
    schemas = _schemas()
    signatures = {s.name: s for s in get_prompt_profile("metaqa").signatures}
    face = PyqlMcp(kb)
    key = object()
    times: dict[str, list[float]] = {"direct": [], "in_process": [], "mcp": [], "floor": []}
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(Client(target))
                   for name, target in targets.items()}
        for n, item in enumerate(items):
            timed = n >= WARM
            start = {"question": item.question, "entities": {item.topic: item.topic}}
            session = face.new_session({item.topic: item.topic})  # as the server builds it
            face.call(key, "start_question", start)
            for client in clients.values():
                await client.call_tool("start_question", start)
            for call in gold_program(item):
                args = _arguments(call, schemas)
                # the very call the server runs for these arguments (typed atoms, not text)
                call = call_from_arguments(call.name, args, signatures, json.dumps(args))
                order = shuffle.sample(list(times), len(times))
                for side in order:
                    begin = time.perf_counter()
                    if side == "direct":
                        obs = session.run(call)
                        ok = obs.error is None
                    elif side == "in_process":
                        ok = not face.call(key, call.name, args).is_error
                    else:
                        ok = not (await clients[side].call_tool(call.name, args)).is_error
                    if timed:
                        times[side].append(time.perf_counter() - begin)
                    assert ok, (side, call)
    return times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int, process: subprocess.Popen[bytes]) -> None:
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kb", type=Path, default=None, help="MetaQA kb.txt (default: the "
                        "shared data's)")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--serve-floor", action="store_true",
                        help="(internal) serve the SDK floor's no-op server, then exit")
    parser.add_argument("--port", type=int, default=0, help="(with --serve-floor) HTTP port")
    args = parser.parse_args(argv)
    if args.serve_floor:
        if args.port:
            import uvicorn

            uvicorn.run(floor_server().streamable_http_app(), host="127.0.0.1", port=args.port,
                        log_level="warning")
        else:
            from pyql.mcp.serve import stdio

            stdio(floor_server())
        return 0

    base = default_data_dir() / "metaqa"
    kb_path = args.kb or base / "kb.txt"
    items = list(load_questions(base / "2-hop" / "qa_dev.txt", base / "2-hop" / "qa_dev_qtype.txt"))
    items = random.Random(args.seed).sample(items, min(args.n, len(items)))
    kb = open_kb(str(kb_path))

    pyql_cmd = [sys.executable, "-m", "pyql", "mcp", "--kb", str(kb_path)]
    floor_cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-floor"]
    servers: list[subprocess.Popen[bytes]] = []
    targets: dict[str, Any] = {}
    load_before = os.getloadavg()
    try:
        for name, command in (("mcp", pyql_cmd), ("floor", floor_cmd)):
            if args.transport == "stdio":
                targets[name] = StdioServerParameters(command=command[0], args=command[1:],
                                                      cwd=str(REPO))
                continue
            port = _free_port()
            extra = ["--transport", "http", "--port", str(port)] if name == "mcp" else [
                "--port", str(port)]
            servers.append(subprocess.Popen([*command, *extra], cwd=REPO))
            _listening(port, servers[-1])
            targets[name] = f"http://127.0.0.1:{port}/mcp"
        times = asyncio.run(interleaved(kb, items[:WARM] + items, targets, args.seed))
    finally:
        for server in servers:
            server.terminate()
            server.wait()
    load_after = os.getloadavg()

    s = {side: _stats(t) for side, t in times.items()}
    d, m, f = s["direct"], s["mcp"], s["floor"]
    report = {
        "questions": len(items), "transport": args.transport, "kb": str(kb_path), **s,
        "ratio_p50": m["p50_ms"] / d["p50_ms"], "ratio_mean": m["mean_ms"] / d["mean_ms"],
        "best_ratio_p50": (f["p50_ms"] + d["p50_ms"]) / d["p50_ms"],
        "best_ratio_mean": (f["mean_ms"] + d["mean_ms"]) / d["mean_ms"],
        "in_process_ratio_p50": s["in_process"]["p50_ms"] / d["p50_ms"],
        "load_average_1min": [load_before[0], load_after[0]],
    }
    print(f"{len(items)} MetaQA 2-hop gold programs, {d['steps']} steps, {kb_path}, "
          f"{args.transport}; load average {load_before[0]:.1f} -> {load_after[0]:.1f}")
    for side, label in (("direct", "Session.run"), ("in_process", "PyqlMcp.call, no transport"),
                        ("mcp", f"MCP tool call ({args.transport})"),
                        ("floor", "SDK floor (no-op server)")):
        print(f"  {label:28} p50 {s[side]['p50_ms']:7.3f} ms   mean {s[side]['mean_ms']:7.3f} ms")
    print(f"  ratio MCP / Session.run: p50 {report['ratio_p50']:.2f}x, mean "
          f"{report['ratio_mean']:.2f}x (target <= 2x for stdio)")
    print(f"  best the SDK allows, (floor + Session.run) / Session.run: p50 "
          f"{report['best_ratio_p50']:.2f}x, mean {report['best_ratio_mean']:.2f}x; "
          f"without a transport: p50 {report['in_process_ratio_p50']:.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
