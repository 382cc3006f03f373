"""The LLM and KB/DB caches: hits and misses, threads, processes, and whole runs."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pyql.agent.evaluation.caches import CachedLLM, DBView, KBView, LLMCache, QueryCache
from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.runner import evaluate
from pyql.agent.llm.clients import LLMReply, Message, ToolCall
from pyql.db import SqlDB
from pyql.errors import BackendQueryError, ReadOnlyError
from pyql.kb import OxigraphKB
from tests.conftest import REPO
from tests.evaluation.support import (
    comparable_metrics,
    comparable_run,
)


class EchoLLM:
    """Replies with the last message and counts its calls (thread-safe)."""

    model = "echo"

    def __init__(self, temperature: float = 0.0) -> None:
        self.temperature = temperature
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, messages: Sequence[Message], *, stop: Sequence[str] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
        with self._lock:
            self.calls += 1
        text = str(messages[-1]["content"]) if messages else ""
        calls = (ToolCall(id="c1", name="execute", arguments="{}"),) if tools else ()
        return LLMReply(text=text, tool_calls=calls, model="echo", cost=0.25, latency=1.5)


def _msg(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_llm_cache_hits_and_misses(tmp_path: Path) -> None:
    inner = EchoLLM()
    llm = CachedLLM(inner, LLMCache(tmp_path / "llm.sqlite"))
    first = llm.complete(_msg("a"), stop=["\nObservation"])
    again = llm.complete(_msg("a"), stop=["\nObservation"])
    assert inner.calls == 1 and again.text == first.text == "a"
    assert again.cost == 0.25 and again.latency == 0.0  # recorded cost, no time spent
    llm.complete(_msg("b"), stop=["\nObservation"])  # other messages
    llm.complete(_msg("a"))  # other stop sequences
    tooled = llm.complete(_msg("a"), tools=[{"type": "function", "function": {"name": "x"}}])
    assert inner.calls == 4
    assert llm.complete(_msg("a"), tools=[{"type": "function", "function": {"name": "x"}}]
                        ).tool_calls == tooled.tool_calls
    hot = CachedLLM(EchoLLM(temperature=0.7), LLMCache(tmp_path / "llm.sqlite"))
    hot.complete(_msg("a"), stop=["\nObservation"])  # another temperature: a miss
    assert hot.llm.calls == 1  # type: ignore[attr-defined]
    assert (llm.cache.hits, llm.cache.misses) == (2, 4)
    # another process (here: another cache object) sees the entries
    reopened = CachedLLM(EchoLLM(), LLMCache(tmp_path / "llm.sqlite"))
    reopened.complete(_msg("b"), stop=["\nObservation"])
    assert reopened.llm.calls == 0  # type: ignore[attr-defined]


def test_llm_cache_under_threads(tmp_path: Path) -> None:
    inner = EchoLLM()
    llm = CachedLLM(inner, LLMCache(tmp_path / "llm.sqlite"))

    def call(i: int) -> str:
        return llm.complete(_msg(f"m{i % 25}")).text

    with ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(call, range(400)))
    assert texts == [f"m{i % 25}" for i in range(400)]
    assert 25 <= inner.calls < 400  # each key computed at least once, most calls hit
    assert llm.cache.hits + llm.cache.misses == 400
    assert len(llm.cache) == 25


_WRITER = """
import sys
from pyql.agent.evaluation.caches import LLMCache
from pyql.agent.llm.clients import LLMReply
cache = LLMCache(sys.argv[1])
for i in range(300):
    key = f"k{i % 60}"
    cache.save(key, LLMReply(text=key))
    assert cache.load(key).text == key
"""


def test_llm_cache_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], cwd=REPO,
                              stderr=subprocess.PIPE) for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    cache = LLMCache(path)
    assert len(cache) == 60
    assert cache.load("k7").text == "k7"  # type: ignore[union-attr]


class CountingKB(OxigraphKB):
    """Counts the queries that reach the store."""

    def __init__(self) -> None:
        super().__init__(profile="metaqa")
        self.ran = 0
        self._lock = threading.Lock()

    def _select(self, query: str, *, timeout: float | None) -> Any:
        with self._lock:
            self.ran += 1
        return super()._select(query, timeout=timeout)

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        with self._lock:
            self.ran += 1
        return super()._ask(query, timeout=timeout)


def _kb() -> CountingKB:
    kb = CountingKB()
    kb.load_bytes(b"<http://pyql.dev/metaqa/entity/Kismet> "
                  b"<http://pyql.dev/metaqa/relation/directed_by> "
                  b"<http://pyql.dev/metaqa/entity/William_Dieterle> .", format="ntriples")
    return kb


QUERY = "SELECT ?o WHERE { ?s ?p ?o }"


def test_kb_view_counts_its_own_queries_and_caches(tmp_path: Path) -> None:
    kb = _kb()
    cache = QueryCache(tmp_path / "kb.sqlite")
    one, two = (KBView(kb, cache=cache, identity="test-kb") for _ in range(2))
    rows = one.select(QUERY).rows
    assert two.select(QUERY).rows == rows
    assert one.ask("ASK { ?s ?p ?o }") is True and two.ask("ASK { ?s ?p ?o }") is True
    assert (one.query_count, two.query_count) == (2, 2)  # the agent's QPQ counts every query
    assert kb.ran == 2  # the store ran each query once
    assert (cache.hits, cache.misses) == (2, 2)
    other = KBView(kb, cache=cache, identity="another-kb")
    other.select(QUERY)
    assert kb.ran == 3  # another identity: a miss
    with pytest.raises(BackendQueryError):
        one.select("SELECT ?x WHERE { ?x ")
    with pytest.raises(BackendQueryError):  # failures are not cached
        two.select("SELECT ?x WHERE { ?x ")
    with pytest.raises(ReadOnlyError):
        one.select("DELETE WHERE { ?s ?p ?o }")
    assert KBView(kb).select(QUERY).rows == rows  # without a cache: a plain counting view


def test_kb_cache_under_threads(tmp_path: Path) -> None:
    kb = _kb()
    cache = QueryCache(tmp_path / "kb.sqlite")
    queries = [f"SELECT ?o WHERE {{ ?s ?p ?o }} LIMIT {i % 10 + 1}" for i in range(200)]

    def run(query: str) -> int:
        return len(KBView(kb, cache=cache, identity="kb").select(query).rows)

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(n == 1 for n in pool.map(run, queries))
    assert cache.hits + cache.misses == 200 and len(cache) == 10
    assert 10 <= kb.ran < 200


def test_db_view_caches_and_keeps_the_guard(tmp_path: Path) -> None:
    db = SqlDB.sqlite_memory(lambda c: c.executescript(
        "CREATE TABLE t(a INT, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'y');"))
    cache = QueryCache(tmp_path / "db.sqlite")
    view = DBView(db, cache=cache, identity="mem")
    first = view.execute("SELECT b FROM t WHERE a > 0")
    second = DBView(db, cache=cache, identity="mem").execute("SELECT b FROM t WHERE a > 0")
    assert first.rows == second.rows == (("x",), ("y",))
    assert db.query_count == 1 and view.query_count == 1
    assert view.execute("SELECT b FROM t WHERE a = :a", {"a": 2}).rows == (("y",),)
    assert view.execute("SELECT b FROM t WHERE a = :a", {"a": 1}).rows == (("x",),)
    with pytest.raises(ReadOnlyError):
        view.execute("DROP TABLE t")
    assert view.schema().table("t").column_names == ("a", "b")  # delegated
    assert view.dialect == "sqlite"


def test_a_cached_run_equals_the_first(tmp_path: Path, mini_metaqa: Path) -> None:
    llm_cache, kb_cache = tmp_path / "llm.sqlite", tmp_path / "kb.sqlite"
    runs = []
    for name in ("first", "second"):
        config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa),
                           limit=12, concurrency=3, llm_cache=str(llm_cache),
                           kb_cache=str(kb_cache))
        metrics = evaluate(config, tmp_path / name, progress=False)
        runs.append((metrics, comparable_run(tmp_path / name)))
    (m1, r1), (m2, r2) = runs
    assert r1 == r2 and comparable_metrics(m1) == comparable_metrics(m2)
    assert m1["run"]["llm_cache"]["hits"] == 0  # (a question may repeat a KB query: hits)
    assert m2["run"]["llm_cache"]["misses"] == 0 and m2["run"]["kb_cache"]["misses"] == 0
    assert m2["run"]["llm_cache"]["hits"] == m1["run"]["llm_cache"]["misses"] > 0
