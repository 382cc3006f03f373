"""The embedded default KB: a pyoxigraph store, in memory or in a directory on disk."""

from __future__ import annotations

import gzip
import logging
import os
import pickle
import select
import signal
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from pyql.errors import BackendError, BackendQueryError, BackendTimeoutError
from pyql.kb.base import KB
from pyql.kb.workers import QueryWorkers
from pyql.orphans import die_with_parent, prepare
from pyql.profiles import Profile
from pyql.results import KB_LIMITS, Limits, ResultSet
from pyql.terms import BlankNode, Entity, Literal

__all__ = ["OxigraphKB", "from_oxigraph_term"]

log = logging.getLogger(__name__)

#: how many converted result terms a KB remembers (distinct nodes and literals)
_TERM_CACHE = 1 << 18

_FORMATS = {
    ".nt": ox.RdfFormat.N_TRIPLES,
    ".ttl": ox.RdfFormat.TURTLE,
    ".nq": ox.RdfFormat.N_QUADS,
    ".trig": ox.RdfFormat.TRIG,
    ".rdf": ox.RdfFormat.RDF_XML,
    ".xml": ox.RdfFormat.RDF_XML,
    ".n3": ox.RdfFormat.N3,
}


def _format_of(path: Path) -> ox.RdfFormat:
    suffixes = [s for s in path.suffixes if s != ".gz"]
    if suffixes and suffixes[-1] in _FORMATS:
        return _FORMATS[suffixes[-1]]
    raise BackendError(
        f"cannot tell the RDF format of {path.name!r} (use one of {', '.join(_FORMATS)})"
    )


def from_oxigraph_term(term: object, profile: Profile) -> Entity | Literal | BlankNode | None:
    """A pyql term for a pyoxigraph term (None for an unbound value)."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return Entity(term.value, profile.compact(term.value))
    if isinstance(term, ox.Literal):
        lang = term.language
        if lang:
            return Literal(term.value, None, lang)
        return Literal(term.value, term.datatype.value)
    if isinstance(term, ox.BlankNode):
        return BlankNode(term.value)
    raise BackendQueryError(f"unsupported result term {term!r}", backend="oxigraph")


class _TermCache(dict[object, "Entity | Literal | BlankNode | None"]):
    """pyoxigraph term -> pyql term for one profile, converting on a miss (``None``: unbound)."""

    def __init__(self, profile: Profile, max_cell: int) -> None:
        super().__init__({None: None})
        self.profile = profile
        self.max_cell = max_cell
        #: the literals cut to ``max_cell`` characters
        self.cut: set[Literal] = set()

    def __missing__(self, term: object) -> Entity | Literal | BlankNode | None:
        converted = from_oxigraph_term(term, self.profile)
        if isinstance(converted, Literal) and len(converted.lexical) > self.max_cell:
            converted = Literal(converted.lexical[: self.max_cell], converted.datatype,
                                converted.lang)
            self.cut.add(converted)
        self[term] = converted
        return converted


class OxigraphKB(KB):
    """A pyoxigraph store.

    ``OxigraphKB()`` is an empty in-memory store; ``OxigraphKB(path=DIR)`` opens (or creates) an
    on-disk store, which reopens fast; ``OxigraphKB.from_file(path, profile=...)`` loads one
    N-Triples/Turtle/... file into a fresh in-memory store. Queries are read-only: SPARQL
    Update is refused before reaching the store.

    A query with a timeout (``select(..., timeout=)`` or the KB's ``timeout``) runs in another
    process that is killed when the time is up (:class:`~pyql.errors.BackendTimeoutError`):
    pyoxigraph cannot stop an evaluation, and one ``next()`` of its solutions can run for minutes
    (a ``DISTINCT`` or an aggregate over a long join), so checking the clock between rows would
    not bound it. A store in memory forks a child per timed query (it shares the store
    copy-on-write); a store directory opened read-only hands them to long-lived worker processes
    (:class:`~pyql.kb.workers.QueryWorkers`), a pipe round trip a query. Without a timeout the
    query runs in this process. Results are bounded by
    ``limits`` (:class:`~pyql.results.Limits`: rows, characters per cell) either way.

    >>> kb = OxigraphKB(profile="generic")
    >>> len(kb)
    0
    """

    def __init__(
        self,
        store: ox.Store | None = None,
        *,
        path: str | Path | None = None,
        profile: str | Profile = "generic",
        read_only: bool = False,
        timeout: float | None = None,
        limits: Limits = KB_LIMITS,
    ) -> None:
        super().__init__(profile)
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        #: seconds a query gets when its caller gives none (None: no limit)
        self.timeout = timeout
        #: rows and cell sizes one query may return
        self.limits = limits
        if store is not None:
            self.store = store
        elif path is not None:
            self.store = ox.Store.read_only(str(path)) if read_only else ox.Store(str(path))
        else:
            self.store = ox.Store()
        self.path = Path(path) if path is not None else None
        self.read_only = read_only
        # timed queries of a read-only directory (no process starts before the first one)
        self._workers = (QueryWorkers(self.path, self.limits)
                         if self.path is not None and read_only else None)
        self._terms = _TermCache(self.profile, self.limits.max_cell)

    @classmethod
    def from_file(cls, path: str | Path, *, profile: str | Profile = "generic") -> OxigraphKB:
        """A fresh in-memory KB holding the triples of one RDF file.

        Blank nodes get ids by their order in the file (``_:b0``, ``_:b1``, ...), the same on
        every load, so a nameless answer has one id across runs (pyoxigraph's loader draws
        random ones). Only a file that has blank nodes pays for it: it is read once more."""
        kb = cls(profile=profile)
        kb.load(path)
        if kb.store.query("ASK { ?s ?p ?o FILTER(isBlank(?s) || isBlank(?o)) }"):
            kb._reload_with_stable_blank_ids(Path(path))
        return kb

    def _reload_with_stable_blank_ids(self, path: Path) -> None:
        ids: dict[str, ox.BlankNode] = {}

        def stable(term: Any) -> Any:
            if not isinstance(term, ox.BlankNode):
                return term
            node = ids.get(term.value)
            if node is None:
                node = ids[term.value] = ox.BlankNode(f"b{len(ids)}")
            return node

        fmt = _format_of(path)
        store = ox.Store()
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as handle:
            store.bulk_extend(ox.Quad(stable(q.subject), q.predicate, stable(q.object),
                                      q.graph_name) for q in ox.parse(handle, fmt))
        self.store = store
        self._terms = _TermCache(self.profile, self.limits.max_cell)

    def load(self, path: str | Path, *, graph: str | None = None) -> None:
        """Bulk-load an RDF file (format from the extension, ``.gz`` allowed) into the store."""
        path = Path(path)
        fmt = _format_of(path)
        start = time.perf_counter()
        to_graph = ox.NamedNode(graph) if graph else None
        if path.suffix == ".gz":
            import gzip

            with gzip.open(path, "rb") as handle:
                self.store.bulk_load(handle, format=fmt, to_graph=to_graph)
        else:
            self.store.bulk_load(path=str(path), format=fmt, to_graph=to_graph)
        if self.path is not None:
            self.store.optimize()
        log.info("loaded %s in %.2fs", path, time.perf_counter() - start)

    def load_bytes(self, data: bytes, *, format: str = "turtle") -> None:
        """Load RDF from memory (``format``: ``turtle`` or ``ntriples``)."""
        fmt = {"turtle": ox.RdfFormat.TURTLE, "ntriples": ox.RdfFormat.N_TRIPLES}[format]
        self.store.bulk_load(data, format=fmt)

    def __len__(self) -> int:
        return len(self.store)

    def _run(self, query: str) -> object:
        try:
            return self.store.query(query)
        except SyntaxError as exc:
            raise BackendQueryError(f"SPARQL syntax error: {exc}", backend="oxigraph", query=query) from None
        except OSError as exc:
            raise BackendError(f"store error: {exc}", backend="oxigraph", query=query) from None

    def _solutions(self, query: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]], bool]:
        """The columns and raw rows (pyoxigraph terms, at most ``limits.max_rows``) of a
        SELECT query, and whether more rows existed; evaluated in this process."""
        solutions = self._run(query)
        if not isinstance(solutions, ox.QuerySolutions):
            raise BackendQueryError("not a SELECT query", backend="oxigraph", query=query)
        columns = tuple(v.value for v in solutions.variables)
        cap = self.limits.max_rows
        try:  # the store evaluates lazily: reading the solutions is the engine's work
            raw = [tuple(solution) for solution in islice(solutions, cap + 1)]
        except OSError as exc:
            raise BackendError(f"store error: {exc}", backend="oxigraph", query=query) from None
        except SyntaxError as exc:  # evaluation-time errors surface while iterating
            raise BackendQueryError(str(exc), backend="oxigraph", query=query) from None
        return columns, raw[:cap], len(raw) > cap

    def _budget(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else float(timeout)

    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        start = time.perf_counter()
        clock = self.engine_clock
        engine_start = clock()
        seconds = self._budget(timeout)
        if seconds is None:  # long literals are cut once each, by the term cache
            columns, raw, truncated = self._solutions(query)
            cut = 0
        else:
            columns, raw, truncated, cut = self._forked(query, seconds, "select")  # type: ignore[misc]
        self.engine_seconds += clock() - engine_start
        get = self._term_cache().__getitem__
        if not columns or not raw:  # no columns: one empty row per solution
            rows: tuple[tuple[object, ...], ...] = tuple(() for _ in raw)
        else:  # column by column, in C: one cached conversion a cell, no Python call a row
            rows = tuple(zip(*[map(get, column) for column in zip(*raw)]))
        long = self._terms.cut
        if long and seconds is None:
            cut = sum(cell in long for row in rows for cell in row)
        if truncated or cut:
            log.info("oxigraph: result bounded (%d rows%s, %d cell(s) cut to %d characters)",
                     len(rows), " and more" if truncated else "", cut, self.limits.max_cell)
        return ResultSet(columns, rows, truncated=truncated, elapsed=time.perf_counter() - start,
                         query=query, cells_cut=cut)

    def _term_cache(self) -> _TermCache:
        """The pyql terms already made for pyoxigraph terms: results repeat the same nodes step
        after step, and a term is a frozen value. Emptied when full or when the profile changes."""
        profile = self.profile
        if self._terms.profile is not profile or len(self._terms) >= _TERM_CACHE:
            self._terms = _TermCache(profile, self.limits.max_cell)
        return self._terms

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        seconds = self._budget(timeout)
        if seconds is not None:
            return self._forked(query, seconds, "ask")  # type: ignore[return-value]
        result = self._run(query)
        if not isinstance(result, ox.QueryBoolean):
            raise BackendQueryError("not an ASK query", backend="oxigraph", query=query)
        return bool(result)

    def _forked(self, query: str, seconds: float, form: str) -> object:
        """Evaluate ``query`` in a forked child (which shares the store copy-on-write) and read
        its answer through a pipe; kill the child when ``seconds`` are up."""
        if not hasattr(os, "fork"):  # pragma: no cover - Windows: no way to stop the engine
            log.warning("no fork() here: the query runs without its %gs timeout", seconds)
            return _answer(self._child_answer(query, form), query, form)
        if self._workers is not None:  # a store no one changes: long-lived workers
            return _answer(self._workers.ask(query, form, seconds), query, form)
        deadline = time.monotonic() + seconds
        prepare()
        read_end, write_end = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: evaluate, write one pickled answer, exit without cleanup
            status = 0
            try:
                os.close(read_end)
                die_with_parent()
                payload = self._child_answer(query, form)
                data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
                view = memoryview(data)
                while view:
                    view = view[os.write(write_end, view):]
            except BaseException:  # noqa: BLE001 - the child must never return into the caller
                status = 1
            finally:
                os._exit(status)
        os.close(write_end)
        chunks: list[bytes] = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([read_end], [], [], left)[0]:
                    raise BackendTimeoutError(
                        f"the embedded store did not answer within {seconds:g}s (query stopped)",
                        backend="oxigraph", query=query)
                chunk = os.read(read_end, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        except BaseException:  # the deadline, or the caller interrupted: stop the evaluation
            _kill(pid)
            raise
        finally:
            os.close(read_end)
        _, status = os.waitpid(pid, 0)
        if not chunks or status != 0:
            raise BackendError(f"the query process ended without an answer (status {status})",
                               backend="oxigraph", query=query)
        return _answer(pickle.loads(b"".join(chunks)), query, form)

    def _child_answer(self, query: str, form: str) -> tuple[Any, ...]:
        try:
            if form == "ask":
                result = self._run(query)
                if not isinstance(result, ox.QueryBoolean):
                    raise BackendQueryError("not an ASK query", backend="oxigraph", query=query)
                return ("ok", bool(result))
            columns, raw, truncated = self._solutions(query)
            raw, cut = _cut_literals(raw, self.limits.max_cell)
            return ("ok", columns, raw, truncated, cut)
        except BackendQueryError as exc:
            return ("syntax", str(exc))
        except BackendError as exc:
            return ("store", str(exc))

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
        if self.path is not None and not self.read_only:  # flush() raises on read-only stores
            self.store.flush()


def _cut_literals(raw: list[tuple[Any, ...]], max_cell: int) -> tuple[list[tuple[Any, ...]], int]:
    """``raw`` rows with every literal longer than ``max_cell`` characters cut to it, and how
    many cells were cut (the rows are returned as they are when none is too long)."""
    long = [i for i, row in enumerate(raw)
            if any(isinstance(c, ox.Literal) and len(c.value) > max_cell for c in row)]
    if not long:
        return raw, 0
    cut = 0
    rows = list(raw)
    for i in long:
        cells = []
        for c in rows[i]:
            if isinstance(c, ox.Literal) and len(c.value) > max_cell:
                cut += 1
                c = (ox.Literal(c.value[:max_cell], language=c.language) if c.language
                     else ox.Literal(c.value[:max_cell], datatype=c.datatype))
            cells.append(c)
        rows[i] = tuple(cells)
    return rows, cut


def _answer(answer: tuple[Any, ...], query: str, form: str) -> Any:
    """What a query's evaluation answered (:meth:`OxigraphKB._child_answer`), or its error."""
    kind = answer[0]
    if kind == "syntax":
        raise BackendQueryError(answer[1], backend="oxigraph", query=query)
    if kind == "store":
        raise BackendError(answer[1], backend="oxigraph", query=query)
    return answer[1] if form == "ask" else answer[1:]


def _kill(pid: int) -> None:
    """Kill a query's child process and collect it."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone
        pass
    os.waitpid(pid, 0)
