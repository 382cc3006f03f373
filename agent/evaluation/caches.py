"""Opt-in caches for evaluation runs: LLM replies and KB/DB query results, in SQLite files.

Both caches are one SQLite file each (``--llm-cache PATH``, ``--kb-cache PATH``) in WAL mode, so
many threads of one run and several runs at once can read and write it: every thread opens its
own connection, writes are single ``INSERT OR REPLACE`` statements (atomic), and a writer waits
for another (``busy_timeout``) instead of failing. A value is stored whole or not at all; two
writers of the same key store the same value, so the last one winning is harmless.

- :class:`CachedLLM` wraps any :class:`~pyql.agent.llm.clients.LLM`. The key is the sha256 of the model,
  the messages, the stop sequences, the tool schemas and the sampling parameters
  (``temperature``, ``max_tokens``, ``seed``, ``extra_body`` when the client has them). A hit
  returns the recorded reply, with its recorded token usage and cost (so the metrics of a cached
  run equal those of the run that filled the cache) but ``latency=0`` and ``retries=0``. The
  server's address is not part of the key: one model name, one set of replies. Scoring calls
  (choose mode) are kept the same way, keyed by the messages and the candidates in order.
- :class:`KBView` and :class:`DBView` are per-question views of a shared backend: each counts
  its own queries (``query_count``, what the agent's QPQ reads, exact under concurrency) and,
  given a :class:`QueryCache`, answers a query it has seen before from the cache. The key is the
  backend's identity (a string the dataset gives: the KB source or endpoint and profile, the
  database file and its modification time) plus the query text (and, for SQL, the parameters).
  Failures (errors, timeouts) are never cached. A cached SQL query still passes the read-only
  guard first. Values are pickled :class:`~pyql.results.ResultSet` objects: only open cache files
  you made.

>>> import pathlib, shutil, tempfile
>>> from pyql.agent.llm.clients import ScriptedLLM
>>> folder = tempfile.mkdtemp()
>>> llm = CachedLLM(ScriptedLLM(["Thought 1: a\\nAction 1: execute()"]),
...                 LLMCache(pathlib.Path(folder) / "llm.sqlite"))
>>> llm.complete([{"role": "user", "content": "q"}]).text == llm.complete(
...     [{"role": "user", "content": "q"}]).text      # the second call is a hit
True
>>> (llm.cache.hits, llm.cache.misses)
(1, 1)
>>> llm.cache.close(); shutil.rmtree(folder)
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import pickle
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pyql.agent.llm.accounting import TokenUsage
from pyql.agent.llm.clients import LLM, LLMReply, Message, Scores, Stop, Tools, sampling_kwargs
from pyql.db.base import DB
from pyql.kb.base import KB
from pyql.results import ResultSet

if TYPE_CHECKING:
    from pyql.sql.schema import Schema

__all__ = ["SqliteStore", "LLMCache", "CachedLLM", "QueryCache", "KBView", "DBView", "cache_key"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: bump when the stored value format changes (old entries are then simply missed)
_FORMAT = 2
_BUSY_TIMEOUT_MS = 60_000


def cache_key(*parts: Any) -> str:
    """sha256 of the canonical JSON of ``parts`` (sorted keys, non-JSON values as ``str``)."""
    payload = json.dumps([_FORMAT, *parts], sort_keys=True, ensure_ascii=False, default=str,
                         separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class SqliteStore:
    """A ``key -> blob`` table in one SQLite file (WAL), shared by threads and processes.

    Each thread gets its own connection (opened on first use). ``hits`` and ``misses`` count the
    lookups of this object.
    """

    def __init__(self, path: str | os.PathLike[str], *, table: str = "cache") -> None:
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        self.path = Path(path).expanduser().resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.table = table
        self.hits = 0
        self.misses = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        conn = self._conn()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} "
                     "(key TEXT PRIMARY KEY, value BLOB NOT NULL)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                                   isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("%s: cannot use WAL mode (got %s)", self.path, mode)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def get(self, key: str) -> bytes | None:
        row = self._conn().execute(f"SELECT value FROM {self.table} WHERE key = ?",
                                   (key,)).fetchone()
        with self._lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        return None if row is None else bytes(row[0])

    def put(self, key: str, value: bytes) -> None:
        self._conn().execute(f"INSERT OR REPLACE INTO {self.table} (key, value) VALUES (?, ?)",
                             (key, sqlite3.Binary(value)))

    def __len__(self) -> int:
        return int(self._conn().execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        return {"path": str(self.path), "hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        """Close every thread's connection (the store reopens on next use)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()


# -- LLM replies --------------------------------------------------------------------------------

_LLM_PARAMS = ("temperature", "max_tokens", "seed", "extra_body", "parallel_tool_calls")


class LLMCache(SqliteStore):
    """Recorded LLM replies (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, table="llm_replies")

    def load(self, key: str) -> LLMReply | None:
        blob = self.get(key)
        if blob is None:
            return None
        return LLMReply.model_validate(json.loads(blob.decode()))

    def save(self, key: str, reply: LLMReply) -> None:
        data = reply.model_dump(mode="json", exclude={"raw"})
        self.put(key, json.dumps(data, ensure_ascii=False).encode())


class CachedLLM:
    """An :class:`~pyql.agent.llm.clients.LLM` answered from an :class:`LLMCache` when it can.

    ``params`` adds to the key; by default the wrapped client's sampling attributes
    (``temperature``, ``max_tokens``, ``seed``, ``extra_body``, ``parallel_tool_calls``) that
    it has.
    """

    def __init__(self, llm: LLM, cache: LLMCache, *, params: Mapping[str, Any] | None = None
                 ) -> None:
        self.llm = llm
        self.cache = cache
        self.model = getattr(llm, "model", "")
        inner = _innermost(llm)
        self.params = dict(params) if params is not None else {
            name: getattr(inner, name) for name in _LLM_PARAMS if hasattr(inner, name)}

    def __repr__(self) -> str:
        return f"CachedLLM({self.llm!r}, {self.cache!r})"

    def __getattr__(self, name: str) -> Any:
        # a stand-in's step hook (``observe``) stays reachable (its records are read from the
        # stand-in the runner holds)
        if name in ("observe", "structured_output", "scores_candidates"):
            return getattr(self.llm, name)
        raise AttributeError(name)

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> Scores:
        """The wrapped client's scores (choose mode), from the cache when the same call (model,
        messages, candidates in order, ``max_tokens``) was scored before. A scoring call is a
        prompt plus every candidate's tokens decoded one by one, so a re-run that walks the
        same steps (another ``prior_weight``, another metric) skips them. A hit returns the
        recorded scores, token usage, cost and requests, with ``latency=0`` and ``retries=0``
        (as :meth:`complete`)."""
        key = cache_key("score", self.model, [dict(m) for m in messages], list(candidates),
                        self.params, max_tokens)
        blob = self.cache.get(key)
        if blob is not None:
            hit = json.loads(blob.decode())
            return Scores([-math.inf if v is None else v for v in hit["values"]],
                          usage=(TokenUsage.model_validate(hit["usage"])
                                 if hit["usage"] is not None else None),
                          model=hit["model"], requests=hit["requests"],
                          tokens=hit["tokens"], cost=hit["cost"])
        raw = self.llm.score(messages, candidates,  # type: ignore[attr-defined]
                             max_tokens=max_tokens)
        scores = raw if isinstance(raw, Scores) else Scores(raw, model=self.model)
        self.cache.put(key, json.dumps({
            "values": [None if math.isinf(v) else v for v in scores],
            "usage": scores.usage.model_dump(mode="json") if scores.usage is not None else None,
            "model": scores.model, "requests": scores.requests, "tokens": list(scores.tokens),
            "cost": scores.cost}).encode())
        return scores

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        sampling = sampling_kwargs(self.llm, max_tokens=max_tokens, temperature=temperature)
        # a request's own sampling joins the key only when set: older keys stay valid
        params = {**self.params, **sampling}
        key = cache_key("llm", self.model, [dict(m) for m in messages], list(stop or ()),
                        list(tools or ()), params,
                        *([response_format] if response_format is not None else []))
        hit = self.cache.load(key)
        if hit is not None:
            return hit.model_copy(update={"latency": 0.0, "retries": 0})
        extra = {"response_format": response_format} if response_format is not None else {}
        reply = self.llm.complete(messages, stop=stop, tools=tools, **extra, **sampling)
        self.cache.save(key, reply)
        return reply


def _innermost(llm: Any) -> Any:
    seen = 0
    while hasattr(llm, "llm") and seen < 8:
        llm = llm.llm
        seen += 1
    return llm


# -- KB and DB queries --------------------------------------------------------------------------


class QueryCache(SqliteStore):
    """Recorded query results, keyed by backend identity and query text."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, table="query_results")

    def load(self, key: str) -> Any:
        blob = self.get(key)
        return None if blob is None else pickle.loads(blob)  # noqa: S301 - the user's own file

    def save(self, key: str, value: Any) -> None:
        self.put(key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


class _View:
    """What the per-question views share: the wrapped object, the cache and the cache identity."""

    inner: Any
    cache: QueryCache | None
    identity: str

    def _wrap(self, inner: Any, cache: QueryCache | None, identity: str) -> None:
        self.inner = inner
        self.cache = cache
        self.identity = identity or f"{type(inner).__name__}@{id(inner)}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def _cached(self, key_parts: tuple[Any, ...], kind: type[T], run: Callable[[], T]) -> T:
        """The cached result (keyed by ``key_parts``) when it has the expected type, else run
        and save it; without a cache the key is never computed."""
        if self.cache is None:
            return run()
        key = cache_key(*key_parts)
        hit = self.cache.load(key)
        if isinstance(hit, kind):
            return hit
        result = run()
        self.cache.save(key, result)
        return result


class KBView(_View, KB):
    """One question's view of a shared KB: its own ``query_count``, an optional cache, and
    ``timeout``: the seconds a query gets when its caller gives none (None: the KB's own).

    Everything else (the store, thread safety, errors) is the wrapped KB's; ``close`` does not
    close it.
    """

    def __init__(self, kb: KB, *, cache: QueryCache | None = None, identity: str = "",
                 timeout: float | None = None) -> None:
        super().__init__(kb.profile)
        self._wrap(kb, cache, identity)
        self.timeout = timeout

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]

    @property
    def shared(self) -> KB:
        return self.inner.shared  # type: ignore[no-any-return]

    def _key(self, form: str, query: str) -> tuple[str, ...]:
        return ("kb", self.identity, self.profile.name, form, query)

    # ``select``/``ask`` of this view already refused updates and counted the query: the
    # wrapped KB's own hooks run the query (its ``query_count`` is not touched)
    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        timeout = self.timeout if timeout is None else timeout
        return self._cached(self._key("select", query), ResultSet,
                            lambda: self.inner._select(query, timeout=timeout))

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        timeout = self.timeout if timeout is None else timeout
        return self._cached(self._key("ask", query), bool,
                            lambda: self.inner._ask(query, timeout=timeout))

    def close(self) -> None:
        """Nothing to release: the shared KB stays open."""


class DBView(_View, DB):
    """One question's view of a shared :class:`~pyql.db.SqlDB`: its own ``query_count`` and an
    optional cache. The guard and the count are :class:`~pyql.db.DB`'s; the wrapped database
    runs the verified text, and answers ``schema`` and ``table_names``."""

    def __init__(self, db: DB, *, cache: QueryCache | None = None, identity: str = "") -> None:
        super().__init__(db.dialect)
        self._wrap(db, cache, identity)

    # a query that reaches the engine counts on the shared database too (the verified text
    # passes its guard again): the database's count is the engine's work, hits excluded
    def _execute(self, text: str) -> ResultSet:
        return self._cached(("db", self.identity, text), ResultSet,
                            lambda: self.inner.execute(text))

    def table_names(self) -> list[str]:
        return self.inner.table_names()

    def schema(self, tables: Iterable[str] | None = None) -> Schema:
        return self.inner.schema(tables)

    def close(self) -> None:
        """Nothing to release: the shared database stays open."""
