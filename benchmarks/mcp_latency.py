"""A tool call's overhead over ``Session.run`` on the same step (``pyql mcp``, issue 23).

Runs the gold programs of ``--n`` sampled MetaQA 2-hop dev questions twice on the same KB:

- **direct**: ``pyql.Session`` in this process (guidelines on, the ``metaqa`` prompt profile's
  functions, as the server builds it), timing every ``Session.run``;
- **MCP over stdio**: ``pyql mcp --kb KB`` started as a subprocess and driven by the ``mcp``
  SDK's own client; each question is ``start_question`` (entities given: linking is not a
  step) and then one ``call_tool`` per call, timed on the client from request to result
  (JSON-RPC, the server's worker thread, ``Session.run``, rendering, structured content).

and, to separate pyql's layer from the SDK's transport, ``PyqlMcp.call`` in this process (no
transport). Prints p50 and mean per step and the ratio MCP / direct (target for stdio: <= 2x).
With ``--transport http`` the server is started on a loopback port instead.

Usage (from the repository root)::

    python benchmarks/mcp_latency.py [--n 50] [--seed 0] [--kb PATH] [--transport stdio|http]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from pyql.agent.prompting import get_prompt_profile, tool_schemas
from pyql.datasets.metaqa import gold_program, load_questions
from pyql.datasets.paths import default_data_dir
from pyql.kb import open_kb
from pyql.mcp import PyqlMcp
from pyql.session import Session

REPO = Path(__file__).resolve().parent.parent


def _arguments(call: Any, schemas: dict[str, Any]) -> dict[str, str]:
    return {name: str(arg) for name, arg in zip(schemas[call.name]["properties"], call.args)}


def _stats(times: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(times) * 1e3, "mean_ms": statistics.fmean(times) * 1e3,
            "steps": len(times)}


def direct(kb: Any, items: list[Any]) -> list[float]:
    profile = get_prompt_profile("metaqa")
    times = []
    for item in items:
        session = Session(kb, entities={item.topic: item.topic}, guidelines=True,
                          functions=profile.functions)
        for call in gold_program(item):
            start = time.perf_counter()
            obs = session.run(call)
            times.append(time.perf_counter() - start)
            assert obs.error is None, obs.text
    return times


def in_process(kb: Any, items: list[Any]) -> list[float]:
    """The server's own layer without a transport: ``PyqlMcp.call`` (arguments to a call, the
    step, rendering, structured content) in this process."""
    face = PyqlMcp(kb)
    profile = get_prompt_profile("metaqa")
    schemas = {t["function"]["name"]: t["function"]["parameters"]
               for t in tool_schemas(profile.signatures, profile)}
    key = object()
    times = []
    for item in items:
        face.call(key, "start_question", {"question": item.question,
                                          "entities": {item.topic: item.topic}})
        for call in gold_program(item):
            args = _arguments(call, schemas)
            start = time.perf_counter()
            result = face.call(key, call.name, args)
            times.append(time.perf_counter() - start)
            assert not result.is_error, result.content
    return times


async def over_mcp(target: Any, items: list[Any], warm: list[Any]) -> list[float]:
    """The steps' times over one connection, after ``warm`` questions on it (untimed)."""
    profile = get_prompt_profile("metaqa")
    schemas = {t["function"]["name"]: t["function"]["parameters"]
               for t in tool_schemas(profile.signatures, profile)}
    times: list[float] = []
    async with Client(target) as client:
        for timed, item in [(False, i) for i in warm] + [(True, i) for i in items]:
            await client.call_tool("start_question", {"question": item.question,
                                                      "entities": {item.topic: item.topic}})
            for call in gold_program(item):
                args = _arguments(call, schemas)
                start = time.perf_counter()
                result = await client.call_tool(call.name, args)
                if timed:
                    times.append(time.perf_counter() - start)
                assert not result.is_error, result.content
    return times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kb", type=Path, default=None, help="MetaQA kb.txt (default: the "
                        "shared data's)")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    base = default_data_dir() / "metaqa"
    kb_path = args.kb or base / "kb.txt"
    items = list(load_questions(base / "2-hop" / "qa_dev.txt", base / "2-hop" / "qa_dev_qtype.txt"))
    items = random.Random(args.seed).sample(items, min(args.n, len(items)))

    warm = items[: min(10, len(items))]  # one pass on each side first (caches, lazy imports)
    kb = open_kb(str(kb_path))
    direct(kb, warm)
    direct_times = direct(kb, items)
    in_process(kb, warm)
    layer_times = in_process(kb, items)

    command = [sys.executable, "-m", "pyql", "mcp", "--kb", str(kb_path)]
    server = None
    if args.transport == "stdio":
        target: Any = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
    else:
        port = _free_port()
        server = subprocess.Popen([*command, "--transport", "http", "--port", str(port)],
                                  cwd=REPO)
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        target = f"http://127.0.0.1:{port}/mcp"
    try:
        mcp_times = asyncio.run(over_mcp(target, items, warm))
    finally:
        if server is not None:
            server.terminate()
            server.wait()

    d, layer, m = _stats(direct_times), _stats(layer_times), _stats(mcp_times)
    report = {"questions": len(items), "transport": args.transport, "kb": str(kb_path),
              "direct": d, "in_process": layer, "mcp": m,
              "ratio_mean": m["mean_ms"] / d["mean_ms"], "ratio_p50": m["p50_ms"] / d["p50_ms"],
              "in_process_ratio_mean": layer["mean_ms"] / d["mean_ms"]}
    print(f"{len(items)} MetaQA 2-hop gold programs, {d['steps']} steps, {kb_path}")
    print(f"  Session.run                p50 {d['p50_ms']:7.3f} ms   mean {d['mean_ms']:7.3f} ms")
    print(f"  PyqlMcp.call, no transport p50 {layer['p50_ms']:7.3f} ms   "
          f"mean {layer['mean_ms']:7.3f} ms")
    print(f"  MCP tool call ({args.transport:5}) p50 {m['p50_ms']:7.3f} ms   "
          f"mean {m['mean_ms']:7.3f} ms")
    print(f"  ratio MCP / Session: p50 {report['ratio_p50']:.2f}x, mean "
          f"{report['ratio_mean']:.2f}x (target <= 2x for stdio); without the transport: "
          f"mean {report['in_process_ratio_mean']:.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
