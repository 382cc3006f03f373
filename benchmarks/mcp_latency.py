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

The same four ways on other backends, where a step costs more:

- ``--kb http://HOST:PORT/sparql``: the same MetaQA gold programs on a SPARQL endpoint holding
  the MetaQA KB (e.g. a local Virtuoso: ``pyql kb virtuoso``), the server started with
  ``--profile metaqa``;
- ``--db wikisql``: the gold programs of ``--n`` sampled WikiSQL dev questions, each after an
  ``add_join(<its table>)``, on the SQLite database of all dev tables
  (:func:`pyql.datasets.wikisql.load_db`, built once into ``<cache>/wikisql``) served by
  ``pyql mcp --db`` (the ``spider`` profile: no ``--table``, the join picks it);
- ``--db demo``: the SQL tours' programs (``pyql/data/tours-sql.json``) on the bundled
  ``pyql/data/demo.sqlite``, each after an ``add_join(<its table>)``, repeated to ``--n``;
- ``--db URL --programs wikisql|tours``: the same programs on another copy of those tables.

Programs a direct Session does not run through are left out before timing (reported).

Usage (from the repository root)::

    python benchmarks/mcp_latency.py [--n 50] [--seed 0] [--kb PATH_OR_URL | --db demo|wikisql|URL]
        [--programs wikisql|tours] [--transport stdio|http] [--json out.json]
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from pyql.agent.strategies.queryagent.prompts import get_prompt_profile
from pyql.apps.mcp import PyqlMcp
from pyql.datasets import metaqa, wikisql
from pyql.datasets.paths import cache_dir, default_data_dir
from pyql.kb import open_kb
from pyql.program import Call, parse_call
from pyql.schemas import call_from_arguments, tool_schemas

REPO = Path(__file__).resolve().parent.parent
WARM = 10
DEMO_DB = REPO / "pyql" / "data" / "demo.sqlite"
SQL_TOURS = REPO / "pyql" / "data" / "tours-sql.json"
#: the SDK floor's canned result: the size of a MetaQA step's (text ~150 characters, structured
#: content ~450 bytes: 600 bytes on the wire, as measured for the p50 step)
FLOOR_CONTENT = {"status": "ok", "ok": True, "step": 2,
                 "values": {"?x1": {"values": ["My Big Fat Greek Wedding", "Finding Neverland"],
                                    "total": 2}},
                 "relations": None, "answers": None, "hint": None, "error": None,
                 "query": "SELECT DISTINCT ?x1\nWHERE {\n  ?x1 <http://pyql.dev/metaqa/relation/"
                          "directed_by> <http://pyql.dev/metaqa/entity/Joel_Zwick> .\n}"}
FLOOR_TEXT = "?x1: My Big Fat Greek Wedding, Finding Neverland (2 values)\n" + "x" * 90


@dataclass(frozen=True)
class Question:
    """One question of the workload: the ``start_question`` arguments, then the gold calls."""

    start: dict[str, Any]
    calls: tuple[Call, ...]


def metaqa_questions(n: int, seed: int) -> list[Question]:
    """``n`` sampled MetaQA 2-hop dev questions (entities given) and their gold programs."""
    base = default_data_dir() / "metaqa"
    items = list(metaqa.load_questions(base / "2-hop" / "qa_dev.txt",
                                       base / "2-hop" / "qa_dev_qtype.txt"))
    items = random.Random(seed).sample(items, min(n, len(items)))
    return [Question({"question": item.question, "entities": {item.topic: item.topic}},
                     metaqa.gold_program(item).calls) for item in items]


def _join(table: str) -> Call:
    return parse_call(f"add_join({table})", "sql")


def wikisql_questions(n: int, seed: int) -> list[Question]:
    """``n`` sampled WikiSQL dev questions: ``add_join(<table>)``, then the gold program."""
    base = default_data_dir() / "wikisql"
    items = list(wikisql.load_questions(base / "dev.jsonl", base / "dev.tables.jsonl.gz"))
    items = random.Random(seed).sample(items, min(n, len(items)))
    return [Question({"question": item.question}, (_join(item.table), *item.program.calls))
            for item in items]


def tour_questions(n: int, seed: int) -> list[Question]:
    """The SQL tours' programs (``add_join(<table>)``, then the steps), shuffled, repeated to
    ``n``."""
    tours = json.loads(SQL_TOURS.read_text())["tours"]
    once = [Question({"question": t["question"]},
                     (_join(t["table"]), *(parse_call(step, "sql") for step in t["steps"])))
            for t in tours]
    shuffle = random.Random(seed)
    out: list[Question] = []
    while len(out) < n:
        out += shuffle.sample(once, len(once))
    return out[:n]


def wikisql_db() -> str:
    """The SQLite database of all WikiSQL dev tables, built once into ``<cache>/wikisql``."""
    tables = default_data_dir() / "wikisql" / "dev.tables.jsonl.gz"
    built = wikisql.load_db(tables, cache_dir=cache_dir() / "wikisql")
    return str(built.url)


def runnable(face: PyqlMcp, questions: list[Question]) -> list[Question]:
    """The questions whose every call a direct Session runs without an error."""
    signatures = {s.name: s for s in face.profile.signatures}
    schemas = _schemas(face.profile.name)
    out = []
    for q in questions:
        session = face.new_session(q.start.get("entities"))
        for call in q.calls:
            args = _arguments(call, schemas)
            call = call_from_arguments(call.name, args, signatures, json.dumps(args))
            if not isinstance(call, Call) or session.run(call).error is not None:
                break
        else:
            out.append(q)
    return out


def _schemas(profile_name: str) -> dict[str, Any]:
    profile = get_prompt_profile(profile_name)
    return {t["function"]["name"]: t["function"] for t in tool_schemas(profile.signatures, profile)}


def _arguments(call: Any, schemas: dict[str, Any]) -> dict[str, str]:
    names = schemas[call.name]["parameters"]["properties"]
    return {name: str(arg) for name, arg in zip(names, call.args)}


def _stats(times: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(times) * 1e3, "mean_ms": statistics.fmean(times) * 1e3,
            "steps": len(times)}


def floor_server(profile_name: str = "metaqa") -> Any:
    """A low-level SDK server with the profile's tools that answers every call at once."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=name, description=f["description"], input_schema=f["parameters"])
             for name, f in _schemas(profile_name).items()]
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


async def interleaved(face: PyqlMcp, questions: list[Question], targets: dict[str, Any],
                      seed: int) -> dict[str, list[float]]:
    """Every step timed on every side, in a random order each step (a side that runs right after
    another in this process finds the same query's data in the caches; one that runs right after
    a round trip finds them cold: a fixed order would favour some sides)."""
    shuffle = random.Random(seed)
    schemas = _schemas(face.profile.name)
    signatures = {s.name: s for s in face.profile.signatures}
    key = object()
    times: dict[str, list[float]] = {"direct": [], "in_process": [], "mcp": [], "floor": []}
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(Client(target))
                   for name, target in targets.items()}
        for n, question in enumerate(questions):
            timed = n >= WARM
            start = question.start
            session = face.new_session(start.get("entities"))  # as the server builds it
            face.call(key, "start_question", start)
            for client in clients.values():
                await client.call_tool("start_question", start)
            for call in question.calls:
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


def _workload(args: argparse.Namespace, parser: argparse.ArgumentParser
              ) -> tuple[str, str, list[str], list[Question]]:
    """The backend's location, its description, the ``pyql mcp`` options that serve it, and the
    questions."""
    if args.db is None:
        if args.programs not in (None, "metaqa"):
            parser.error("--programs wikisql|tours needs --db")
        kb = args.kb or str(default_data_dir() / "metaqa" / "kb.txt")
        # an endpoint has no profile of its own: the MetaQA one, as kb.txt gets by its name
        options = ["--kb", kb, *(["--profile", "metaqa"] if "://" in kb else [])]
        return kb, "MetaQA 2-hop gold programs", options, metaqa_questions(args.n, args.seed)
    if args.kb is not None:
        parser.error("give --kb or --db, not both")
    programs = args.programs or ("tours" if args.db == "demo" else "wikisql")
    if programs == "metaqa":
        parser.error("--programs metaqa needs --kb, not --db")
    db = {"demo": str(DEMO_DB), "wikisql": None}.get(args.db, args.db) or wikisql_db()
    if programs == "tours":
        return db, "SQL tour programs", ["--db", db], tour_questions(args.n, args.seed)
    return db, "WikiSQL dev gold programs", ["--db", db], wikisql_questions(args.n, args.seed)


def _backend(location: str, is_db: bool) -> Any:
    if is_db:
        from pyql.db import open_db

        return open_db(location)
    return open_kb(location, profile="metaqa" if "://" in location else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kb", default=None, help="MetaQA kb.txt or a SPARQL endpoint URL holding "
                        "the MetaQA KB (default: the shared data's kb.txt)")
    parser.add_argument("--db", default=None, help="SQL instead: demo (pyql/data/demo.sqlite), "
                        "wikisql (the WikiSQL dev tables, built once into the cache) or a "
                        "database URL holding either's tables")
    parser.add_argument("--programs", choices=("metaqa", "wikisql", "tours"), default=None,
                        help="the gold programs (default: metaqa with --kb, tours with --db "
                        "demo, else wikisql)")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--serve-floor", action="store_true",
                        help="(internal) serve the SDK floor's no-op server, then exit")
    parser.add_argument("--floor-prompt", default="metaqa",
                        help="(with --serve-floor) the prompt profile whose tools it lists")
    parser.add_argument("--port", type=int, default=0, help="(with --serve-floor) HTTP port")
    args = parser.parse_args(argv)
    if args.serve_floor:
        if args.port:
            import uvicorn

            uvicorn.run(floor_server(args.floor_prompt).streamable_http_app(), host="127.0.0.1",
                        port=args.port, log_level="warning")
        else:
            from pyql.apps.mcp.serve import stdio

            stdio(floor_server(args.floor_prompt))
        return 0

    location, what, serve_options, questions = _workload(args, parser)
    face = PyqlMcp(_backend(location, args.db is not None))
    kept = runnable(face, questions)
    dropped = len(questions) - len(kept)
    if len(kept) <= WARM:
        parser.error(f"only {len(kept)} of {len(questions)} programs run: too few to time")

    pyql_cmd = [sys.executable, "-m", "pyql", "mcp", *serve_options]
    floor_cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-floor",
                 "--floor-prompt", face.profile.name]
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
        times = asyncio.run(interleaved(face, kept[:WARM] + kept, targets, args.seed))
    finally:
        for server in servers:
            server.terminate()
            server.wait()
    load_after = os.getloadavg()

    s = {side: _stats(t) for side, t in times.items()}
    d, m, f = s["direct"], s["mcp"], s["floor"]
    report = {
        "questions": len(kept), "dropped": dropped, "programs": what,
        "transport": args.transport, "backend": location, **s,
        "ratio_p50": m["p50_ms"] / d["p50_ms"], "ratio_mean": m["mean_ms"] / d["mean_ms"],
        "best_ratio_p50": (f["p50_ms"] + d["p50_ms"]) / d["p50_ms"],
        "best_ratio_mean": (f["mean_ms"] + d["mean_ms"]) / d["mean_ms"],
        "in_process_ratio_p50": s["in_process"]["p50_ms"] / d["p50_ms"],
        "load_average_1min": [load_before[0], load_after[0]],
    }
    left_out = f" ({dropped} left out: a direct Session stops on them)" if dropped else ""
    print(f"{len(kept)} {what}{left_out}, {d['steps']} steps, {location}, "
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
