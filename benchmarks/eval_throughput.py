"""Evaluation throughput against a slow LLM API: sequential vs concurrent questions.

Answers ``--n`` MetaQA 1-hop dev questions with :class:`pyql.agent.QueryAgent` in text mode,
talking to the real :class:`pyql.agent.llm.clients.OpenAIChat` client (the ``openai`` SDK over HTTP)
against the fake OpenAI-compatible server of ``tests/support/fake_openai.py``, started in this
process. Every chat completion waits ``--latency`` seconds (default 0.3) before it answers, like a
remote model. The server replays each question's gold program: it finds the question in the
request's messages and answers with the gold call whose index is the number of assistant turns
so far (``Thought n: ...`` / ``Action n: ...``), so every question gets its own script whatever
the interleaving of concurrent requests. It replies with ``TCP_NODELAY`` (otherwise each reply
body waits ~40 ms for the client's delayed ACK of the headers).

The same questions run twice: with one worker and with ``--concurrency`` workers (default 16),
through ``--runner``:

- ``harness`` (default): the evaluation harness itself,
  :func:`pyql.agent.evaluation.runner.evaluate` — asyncio workers running the agent in a thread
  pool, the shared ``openai:`` provider behind its rate gate, the dataset's backend, a run
  directory (``results.jsonl`` synced per question, ``trajectories.jsonl``) in a temporary folder;
- ``minimal``: the same worker-pool shape in this file (asyncio tasks, ``run_in_executor``), no
  run directory: the agent alone.

Wall time is measured from the first chat request to the end of the run (the harness opens its
KB before that); the total with the opening is shown too.

Memory: RSS (``/proc/self/statm``) before each run, after 50 questions and after all of them;
with ``--tracemalloc`` also the traced Python memory at the same points and its peak per run
(tracing slows every allocation: the SDK's per-call overhead grows from ~12 ms to ~30 ms, so the
default run is timed without it).

By default each question is 3 calls: ``get_relation``, ``add_fact`` and ``execute()`` (the gold
program without ``set_answer``: with one variable, ``execute()`` returns it — the same answers);
``--full-programs`` sends the 4-call gold programs. Usage (from the repository root)::

    python benchmarks/eval_throughput.py [--n 200] [--latency 0.3] [--concurrency 16]
        [--runner harness|minimal] [--full-programs] [--tracemalloc] [--seed 0] [--json out.json]

Target: concurrency 16 at least 10x faster than 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pyql.agent import QueryAgent  # noqa: E402
from pyql.agent.llm.clients import OpenAIChat  # noqa: E402
from pyql.datasets import metaqa  # noqa: E402
from pyql.datasets.gold import score  # noqa: E402
from pyql.kb import KB  # noqa: E402
from tests.support.fake_openai import FakeOpenAI, Slow, Text  # noqa: E402

log = logging.getLogger("eval_throughput")

MODEL = "gpt-test"
PRICES = {MODEL: {"input": 0.0, "output": 0.0}}
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """Resident set size of this process, MB (Linux ``/proc/self/statm``; else peak RSS)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def traced_mb() -> float:
    return tracemalloc.get_traced_memory()[0] / 2**20 if tracemalloc.is_tracing() else 0.0


@dataclass(frozen=True)
class MemoryReading:
    """Memory at one point of a run, MB: the resident set and the traced Python memory (0.0
    without ``--tracemalloc``)."""

    rss: float = 0.0
    traced: float = 0.0

    @classmethod
    def now(cls) -> MemoryReading:
        return cls(rss_mb(), traced_mb())


@dataclass(frozen=True)
class Question:
    id: str
    #: the question as the agent's first user message writes it
    text: str
    entities: dict[str, str]
    answers: tuple[str, ...]
    #: the calls the server replays
    calls: tuple[str, ...]


class GoldServer(FakeOpenAI):
    """The fake OpenAI server answering every chat request with the next gold call of the
    question found in its messages, after ``latency`` seconds."""

    def __init__(self, questions: Sequence[Question], latency: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.latency = latency
        self.by_text = {q.text: q for q in questions}
        self.served = 0
        self.unknown = 0
        self.first: float | None = None

    def start(self) -> GoldServer:
        super().start()
        server = self._server
        assert server is not None
        server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
        return self

    def handle(self, path: str, headers: dict[str, str], raw: bytes
               ) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            if self.first is None:
                self.first = time.perf_counter()
        out = super().handle(path, headers, raw)
        with self._lock:  # keep the request log from growing: count, then forget
            self.served += len(self.requests)
            self.requests.clear()
        return out

    def _behave(self, behaviour: Any, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if behaviour is not None:  # something was pushed explicitly: the base behaviour
            return super()._behave(behaviour, body)
        messages = body.get("messages") or []
        first = str(messages[1].get("content") or "") if len(messages) > 1 else ""
        text = first.splitlines()[0].partition(":")[2].strip() if first else ""
        question = self.by_text.get(text)
        if question is None:
            with self._lock:
                self.unknown += 1
            return super()._behave(None, body)  # 400 script_exhausted
        n = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        call = question.calls[n - 1] if n <= len(question.calls) else "execute()"
        reply = Text(f"Thought {n}: I follow the plan.\nAction {n}: {call}", usage=(200, 20))
        return super()._behave(Slow(self.latency, reply), body)


def _calls(program: str, full: bool) -> tuple[str, ...]:
    lines = [line.strip() for line in program.splitlines() if line.strip()]
    return tuple(lines if full else [c for c in lines if not c.startswith("set_answer(")])


def load_questions(runner: str, data_dir: str | None, n: int, seed: int, full: bool
                   ) -> list[Question]:
    """``n`` 1-hop dev questions: the harness's own selection (``sample=n, seed``) for the
    harness runner, else a seeded sample read with :mod:`pyql.datasets.metaqa`."""
    if runner == "harness":
        from pyql.agent.evaluation.datasets import get_dataset

        items = get_dataset("metaqa-1hop", data_dir).items("dev", sample=n, seed=seed)
        out = [Question(i.id, i.question, dict(i.entities), tuple(map(str, i.answers)),
                        _calls(i.program or "", full)) for i in items]
    else:
        qa, qtype = metaqa.paths(data_dir, 1, "dev")
        all_items = list(metaqa.load_questions(qa, qtype))
        picked = sorted(random.Random(seed).sample(range(len(all_items)), n))
        out = [Question(q.id, q.question, {q.topic: q.topic}, q.answers,
                        _calls(str(metaqa.gold_program(q)), full))
               for q in (all_items[i] for i in picked)]
    scripts: dict[str, tuple[str, ...]] = {}
    for q in out:  # the server tells questions apart by their text
        if scripts.setdefault(q.text, q.calls) != q.calls:
            raise SystemExit(f"two sampled questions read {q.text!r} with different programs; "
                             "choose another --seed")
    return out


@dataclass
class RunStats:
    runner: str
    concurrency: int
    questions: int = 0
    llm_calls: int = 0
    #: first chat request -> end of the run
    wall: float = 0.0
    #: with opening the KB (harness)
    total: float = 0.0
    hit1: float = 0.0
    finished: int = 0
    errors: int = 0
    question_seconds: list[float] = field(default_factory=list)
    before: MemoryReading = MemoryReading()
    at_50: MemoryReading = MemoryReading()
    after: MemoryReading = MemoryReading()
    traced_peak: float = 0.0

    def count(self, *, calls: int, seconds: float, error: bool, hit1: float = 0.0,
              finished: bool = False) -> None:
        """One question's outcome, whichever runner answered it (a failed question counts
        its calls and time, no hit and no finish)."""
        self.questions += 1
        self.llm_calls += calls
        self.question_seconds.append(seconds)
        if error:
            self.errors += 1
        else:
            self.hit1 += hit1
            self.finished += int(finished)

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        del data["question_seconds"]
        data["mean_question_seconds"] = self.mean_seconds
        return data

    @property
    def mean_seconds(self) -> float:
        secs = self.question_seconds
        return sum(secs) / len(secs) if secs else 0.0


# -- the minimal worker pool -------------------------------------------------------------------


async def run_pool(items: Sequence[Question], concurrency: int,
                   work: Callable[[Question], dict[str, Any]],
                   done: Callable[[dict[str, Any]], None]) -> None:
    """``concurrency`` asyncio workers; each runs ``work(item)`` in a thread, then ``done``."""
    queue: asyncio.Queue[Question] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="agent") as pool:

        async def worker() -> None:
            while True:
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                done(await loop.run_in_executor(pool, work, item))

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def run_minimal(kb: KB, server: GoldServer, items: Sequence[Question], concurrency: int
                ) -> RunStats:
    llm = OpenAIChat(MODEL, base_url=server.base_url, api_key=server.api_key, timeout=30.0,
                     max_retries=2, price_table=PRICES)
    llm.client  # noqa: B018 - import the SDK and build the client before timing
    agent = QueryAgent(llm, kb, guidelines=True, max_steps=10)
    stats = RunStats("minimal", concurrency)

    def work(q: Question) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            result = agent.run(q.text, q.entities)
        except Exception as exc:  # noqa: BLE001 - a benchmark counts failures and goes on
            log.warning("%s failed: %s", q.id, exc)
            return {"error": str(exc), "seconds": time.perf_counter() - start, "calls": 0}
        return {"hit1": score(result.answers, q.answers).hit1, "finished": result.finished,
                "calls": result.usage.llm_calls, "seconds": time.perf_counter() - start}

    def done(summary: dict[str, Any]) -> None:
        stats.count(calls=summary["calls"], seconds=summary["seconds"],
                    error="error" in summary, hit1=summary.get("hit1", 0.0),
                    finished=summary.get("finished", False))
        if stats.questions == 50:
            stats.at_50 = MemoryReading.now()

    _begin(stats, server)
    start = time.perf_counter()
    asyncio.run(run_pool(items, concurrency, work, done))
    stats.total = time.perf_counter() - start
    _end(stats, server)
    stats.hit1 /= max(1, stats.questions - stats.errors)
    return stats


# -- the evaluation harness ----------------------------------------------------------------------


def run_harness(server: GoldServer, n: int, seed: int, concurrency: int,
                data_dir: str | None) -> RunStats:
    from pyql.agent.evaluation.records import RunConfig
    from pyql.agent.evaluation.rundir import RunDir
    from pyql.agent.evaluation.runner import evaluate
    from pyql.agent.evaluation.specs import build_provider

    spec = f"openai:{MODEL}"
    provider = build_provider(spec, base_url=server.base_url, openai_options={
        "api_key": server.api_key, "timeout": 30.0, "price_table": PRICES})
    config = RunConfig(dataset="metaqa-1hop", split="dev", data_dir=data_dir, llm=spec,
                       base_url=server.base_url, sample=n, seed=seed, concurrency=concurrency,
                       max_steps=10)
    stats = RunStats("harness", concurrency)
    with tempfile.TemporaryDirectory(prefix="pyql-throughput-") as tmp:
        results = RunDir(tmp).results_path
        stop = threading.Event()

        def watch() -> None:  # RSS once 50 result lines are written
            while not stop.wait(0.05):
                try:
                    lines = results.read_bytes().count(b"\n")
                except OSError:
                    continue
                if lines >= 50:
                    stats.at_50 = MemoryReading.now()
                    return

        watcher = threading.Thread(target=watch, name="rss-watch", daemon=True)
        _begin(stats, server)
        watcher.start()
        start = time.perf_counter()
        try:
            evaluate(config, tmp, progress=False, provider=provider)
        finally:
            stop.set()
            watcher.join()
        stats.total = time.perf_counter() - start
        _end(stats, server)
        for result in RunDir(tmp).results():
            stats.count(calls=int(result.usage.get("llm_calls", 0)),
                        seconds=float(result.usage.get("seconds", 0.0)),
                        error=result.error is not None, hit1=result.metrics.get("hit@1", 0.0),
                        finished=result.finished)
    stats.hit1 /= max(1, stats.questions - stats.errors)
    return stats


def _begin(stats: RunStats, server: GoldServer) -> None:
    stats.before = MemoryReading.now()
    server.first = None
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()


def _end(stats: RunStats, server: GoldServer) -> None:
    now = time.perf_counter()
    stats.wall = now - server.first if server.first is not None else stats.total
    stats.after = MemoryReading.now()
    if tracemalloc.is_tracing():
        stats.traced_peak = tracemalloc.get_traced_memory()[1] / 2**20


# -- report ---------------------------------------------------------------------------------------


def table(rows: Sequence[RunStats], latency: float, calls: int, traced: bool) -> str:
    head = (f"| runner | workers | questions | LLM calls | wall s | total s | questions/s | "
            f"mean s/question | Hit@1 | RSS before MB | RSS after 50 | "
            f"RSS after {rows[0].questions} |")
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    if traced:
        head += " tracemalloc after 50 / end / peak MB |"
        rule += "---|"
    lines = [head, rule]
    for r in rows:
        line = (f"| {r.runner} | {r.concurrency} | {r.questions} | {r.llm_calls} | "
                f"{r.wall:.1f} | {r.total:.1f} | {r.questions / r.wall:.2f} | "
                f"{r.mean_seconds:.2f} | {r.hit1:.3f} | {r.before.rss:.0f} | "
                f"{r.at_50.rss:.0f} | {r.after.rss:.0f} |")
        if traced:
            line += f" {r.at_50.traced:.1f} / {r.after.traced:.1f} / {r.traced_peak:.1f} |"
        lines.append(line)
    ratio = rows[0].wall / rows[-1].wall if len(rows) > 1 else 1.0
    lines += ["", f"{latency * 1000:.0f} ms per LLM call, {calls} calls per question. "
              f"Speedup {rows[-1].concurrency} workers vs 1: **{ratio:.1f}x** (target >= 10x)."]
    return "\n".join(lines)


def _harness_available() -> bool:
    try:
        import pyql.agent.evaluation.runner  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runner", choices=("harness", "minimal"), default=None,
                        help="the evaluation harness (default when installed) or this file's "
                             "minimal worker pool")
    parser.add_argument("--full-programs", action="store_true",
                        help="4 calls per question (with set_answer) instead of 3")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="also trace Python allocations (slower calls)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None, help="write the numbers to this file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    runner = args.runner or ("harness" if _harness_available() else "minimal")

    started = time.perf_counter()
    items = load_questions(runner, args.data_dir, args.n, args.seed, args.full_programs)
    kb = metaqa.load_kb(metaqa.kb_path(args.data_dir)) if runner == "minimal" else None
    calls = len(items[0].calls)
    print(f"{len(items)} MetaQA 1-hop dev questions ({runner} runner) ready in "
          f"{time.perf_counter() - started:.1f}s; {calls} LLM calls per question, "
          f"{args.latency * 1000:.0f} ms each", flush=True)
    if args.tracemalloc:
        tracemalloc.start()
    rows = []
    server = GoldServer(items, args.latency, max_requests=10**9, lifetime=3600.0).start()
    try:
        for concurrency in (1, args.concurrency):
            print(f"running {len(items)} questions with {concurrency} worker(s) ...", flush=True)
            if kb is not None:
                rows.append(run_minimal(kb, server, items, concurrency))
            else:
                rows.append(run_harness(server, args.n, args.seed, concurrency, args.data_dir))
    finally:
        server.stop()
        if tracemalloc.is_tracing():
            tracemalloc.stop()
    print()
    print(table(rows, args.latency, calls, args.tracemalloc))
    if server.unknown:
        print(f"warning: {server.unknown} requests named no known question", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "runner": runner, "latency": args.latency, "calls_per_question": calls,
            "n": len(items), "tracemalloc": args.tracemalloc, "runs": [r.row() for r in rows],
            "speedup": rows[0].wall / rows[-1].wall,
        }, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
