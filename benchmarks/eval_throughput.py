"""Evaluation throughput against a slow LLM API: sequential vs concurrent questions.

Answers ``--n`` MetaQA 1-hop dev questions with :class:`pyql.agent.QueryAgent` in text mode,
talking to the real :class:`pyql.agent.llm.OpenAIChat` client (the ``openai`` SDK over HTTP)
against the fake OpenAI-compatible server of ``tests/support/fake_openai.py``, started in this
process. Every chat completion waits ``--latency`` seconds (default 0.3) before it answers, like a
remote model. The server replays each question's gold program: it finds the question in the
request's messages and answers with the gold call whose index is the number of assistant turns
so far (``Thought n: ...`` / ``Action n: ...``), so every question gets its own script whatever
the interleaving of concurrent requests.

The same questions run twice: with one worker and with ``--concurrency`` workers (default 16).
The workers are asyncio tasks that run each question's agent in a thread pool
(``loop.run_in_executor``): ``agent/evaluation/runner.py`` does not exist yet, so this is a
minimal equivalent of an evaluation runner's worker pool. The KB (the full MetaQA KB in the
embedded store) and the LLM client are shared by all workers; each question has its own Session.

Memory: RSS (``/proc/self/statm``) before each run, after 50 questions and after all of them,
and the ``tracemalloc`` peak of each run. Only a small summary of each question is kept (a
runner writes results to disk), the fake server's request log is trimmed as it goes, and the
client keeps a bounded history, so memory should stay flat from 50 to 200 questions.

By default each question is 3 calls: ``get_relation``, ``add_fact`` and ``execute()`` (the gold
program without ``set_answer``: with one variable, ``execute()`` returns it — the same answers);
``--full-programs`` sends the 4-call gold programs. Usage (from the repository root)::

    python benchmarks/eval_throughput.py [--n 200] [--latency 0.3] [--concurrency 16]
        [--full-programs] [--seed 0] [--json out.json]

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
from pyql.agent.llm import OpenAIChat  # noqa: E402
from pyql.datasets import metaqa  # noqa: E402
from pyql.datasets.gold import score  # noqa: E402
from pyql.kb import KB  # noqa: E402
from tests.support.fake_openai import FakeOpenAI, Slow, Text  # noqa: E402

log = logging.getLogger("eval_throughput")

MODEL = "gpt-test"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """Resident set size of this process, MB (Linux ``/proc/self/statm``; else peak RSS)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    topic: str
    answers: tuple[str, ...]
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

    def start(self) -> GoldServer:
        super().start()
        # reply in one go: without TCP_NODELAY the body waits ~40 ms for the client's delayed
        # ACK of the headers (Nagle), which would add to every call's latency
        server = self._server
        assert server is not None
        server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
        return self

    def handle(self, path: str, headers: dict[str, str], raw: bytes
               ) -> tuple[int, dict[str, str], bytes]:
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


def load_questions(data_dir: str | None, n: int, seed: int, full: bool) -> list[Question]:
    qa, qtype = metaqa.paths(data_dir, 1, "dev")
    items = list(metaqa.load_questions(qa, qtype))
    random.Random(seed).shuffle(items)
    out: list[Question] = []
    seen: set[str] = set()
    for item in items:
        if item.question in seen:  # the server tells questions apart by their text
            continue
        seen.add(item.question)
        calls = [str(c) for c in metaqa.gold_program(item)]
        if not full:
            calls = [c for c in calls if not c.startswith("set_answer(")]
        out.append(Question(item.id, item.question, item.topic, item.answers, tuple(calls)))
        if len(out) == n:
            break
    return out


@dataclass
class RunStats:
    concurrency: int
    questions: int = 0
    llm_calls: int = 0
    wall: float = 0.0
    hit1: float = 0.0
    finished: int = 0
    errors: int = 0
    question_seconds: list[float] = field(default_factory=list)
    rss_before: float = 0.0
    rss_at_50: float = 0.0
    rss_after: float = 0.0
    traced_at_50: float = 0.0
    traced_after: float = 0.0
    traced_peak: float = 0.0

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        secs = data.pop("question_seconds")
        data["mean_question_seconds"] = sum(secs) / len(secs) if secs else 0.0
        return data


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


def run(kb: KB, server: GoldServer, items: Sequence[Question], concurrency: int) -> RunStats:
    llm = OpenAIChat(MODEL, base_url=server.base_url, api_key=server.api_key, timeout=30.0,
                     max_retries=2, price_table={MODEL: {"input": 0.0, "output": 0.0}})
    llm.client  # noqa: B018 - import the SDK and build the client before timing
    agent = QueryAgent(llm, kb, guidelines=True, max_steps=10)
    stats = RunStats(concurrency)

    def work(q: Question) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            result = agent.run(q.text, {q.topic: q.topic})
        except Exception as exc:  # noqa: BLE001 - a benchmark counts failures and goes on
            log.warning("%s failed: %s", q.id, exc)
            return {"error": str(exc), "seconds": time.perf_counter() - start, "calls": 0}
        return {"hit1": score(result.answers, q.answers).hit1, "finished": result.finished,
                "calls": result.usage.llm_calls, "seconds": time.perf_counter() - start}

    def done(summary: dict[str, Any]) -> None:
        stats.questions += 1
        stats.llm_calls += summary["calls"]
        stats.question_seconds.append(summary["seconds"])
        if "error" in summary:
            stats.errors += 1
        else:
            stats.hit1 += summary["hit1"]
            stats.finished += int(summary["finished"])
        if stats.questions == 50:
            stats.rss_at_50 = rss_mb()
            stats.traced_at_50 = tracemalloc.get_traced_memory()[0] / 2**20

    stats.rss_before = rss_mb()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    asyncio.run(run_pool(items, concurrency, work, done))
    stats.wall = time.perf_counter() - start
    current, peak = tracemalloc.get_traced_memory()
    stats.rss_after = rss_mb()
    stats.traced_after = current / 2**20
    stats.traced_peak = peak / 2**20
    stats.hit1 /= max(1, stats.questions - stats.errors)
    return stats


def table(rows: Sequence[RunStats], latency: float, calls: int) -> str:
    lines = [
        f"| workers | questions | LLM calls | wall s | questions/s | mean s/question | Hit@1 | "
        f"RSS before MB | RSS after 50 | RSS after {rows[0].questions} | "
        "tracemalloc after 50 / end / peak MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        mean = sum(r.question_seconds) / len(r.question_seconds) if r.question_seconds else 0.0
        lines.append(
            f"| {r.concurrency} | {r.questions} | {r.llm_calls} | {r.wall:.1f} | "
            f"{r.questions / r.wall:.2f} | {mean:.2f} | {r.hit1:.3f} | {r.rss_before:.0f} | "
            f"{r.rss_at_50:.0f} | {r.rss_after:.0f} | {r.traced_at_50:.1f} / "
            f"{r.traced_after:.1f} / {r.traced_peak:.1f} |")
    ratio = rows[0].wall / rows[-1].wall if len(rows) > 1 else 1.0
    lines += ["", f"{latency * 1000:.0f} ms per LLM call, {calls} calls per question. "
              f"Speedup {rows[-1].concurrency} workers vs 1: **{ratio:.1f}x** (target >= 10x)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full-programs", action="store_true",
                        help="4 calls per question (with set_answer) instead of 3")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None, help="write the numbers to this file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    started = time.perf_counter()
    kb = metaqa.load_kb(metaqa.kb_path(args.data_dir))
    items = load_questions(args.data_dir, args.n, args.seed, args.full_programs)
    calls = len(items[0].calls)
    print(f"MetaQA KB and {len(items)} 1-hop dev questions loaded in "
          f"{time.perf_counter() - started:.1f}s; {calls} LLM calls per question, "
          f"{args.latency * 1000:.0f} ms each", flush=True)
    tracemalloc.start()
    rows = []
    server = GoldServer(items, args.latency, max_requests=10**9, lifetime=3600.0).start()
    try:
        for concurrency in (1, args.concurrency):
            print(f"running {len(items)} questions with {concurrency} worker(s) ...", flush=True)
            rows.append(run(kb, server, items, concurrency))
    finally:
        server.stop()
        tracemalloc.stop()
    print()
    print(table(rows, args.latency, calls))
    if server.unknown:
        print(f"warning: {server.unknown} requests named no known question", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "latency": args.latency, "calls_per_question": calls, "n": len(items),
            "runs": [r.row() for r in rows],
            "speedup": rows[0].wall / rows[-1].wall,
        }, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
