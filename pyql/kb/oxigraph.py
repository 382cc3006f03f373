"""The embedded default KB: a pyoxigraph store, in memory or in a directory on disk."""

from __future__ import annotations

import gzip
import logging
import time
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from pyql.errors import BackendError, BackendQueryError, BackendTimeoutError
from pyql.kb.base import KB
from pyql.profiles import Profile
from pyql.results import ResultSet
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

    def __init__(self, profile: Profile) -> None:
        super().__init__({None: None})
        self.profile = profile

    def __missing__(self, term: object) -> Entity | Literal | BlankNode | None:
        converted = self[term] = from_oxigraph_term(term, self.profile)
        return converted


class OxigraphKB(KB):
    """A pyoxigraph store.

    ``OxigraphKB()`` is an empty in-memory store; ``OxigraphKB(path=DIR)`` opens (or creates) an
    on-disk store, which reopens fast; ``OxigraphKB.from_file(path, profile=...)`` loads one
    N-Triples/Turtle/... file into a fresh in-memory store. Queries are read-only: SPARQL
    Update is refused before reaching the store.

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
    ) -> None:
        super().__init__(profile)
        if store is not None:
            self.store = store
        elif path is not None:
            self.store = ox.Store.read_only(str(path)) if read_only else ox.Store(str(path))
        else:
            self.store = ox.Store()
        self.path = Path(path) if path is not None else None
        self.read_only = read_only
        self._terms = _TermCache(self.profile)

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
        self._terms = _TermCache(self.profile)

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
        except TimeoutError as exc:  # pragma: no cover - pyoxigraph has no timeouts yet
            raise BackendTimeoutError(str(exc), backend="oxigraph", query=query) from None
        except OSError as exc:
            raise BackendError(f"store error: {exc}", backend="oxigraph", query=query) from None

    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        start = time.perf_counter()
        clock = self.engine_clock
        engine_start = clock()
        solutions = self._run(query)
        if not isinstance(solutions, ox.QuerySolutions):
            raise BackendQueryError("not a SELECT query", backend="oxigraph", query=query)
        columns = tuple(v.value for v in solutions.variables)
        try:  # the store evaluates lazily: reading the solutions is the engine's work
            raw = [tuple(solution) for solution in solutions]
        except OSError as exc:
            raise BackendError(f"store error: {exc}", backend="oxigraph", query=query) from None
        except SyntaxError as exc:  # evaluation-time errors surface while iterating
            raise BackendQueryError(str(exc), backend="oxigraph", query=query) from None
        self.engine_seconds += clock() - engine_start
        get = self._term_cache().__getitem__
        if not columns or not raw:  # no columns: one empty row per solution
            rows: tuple[tuple[object, ...], ...] = tuple(() for _ in raw)
        else:  # column by column, in C: one cached conversion a cell, no Python call a row
            rows = tuple(zip(*[map(get, column) for column in zip(*raw)]))
        return ResultSet(columns, rows, elapsed=time.perf_counter() - start, query=query)

    def _term_cache(self) -> _TermCache:
        """The pyql terms already made for pyoxigraph terms: results repeat the same nodes step
        after step, and a term is a frozen value. Emptied when full or when the profile changes."""
        profile = self.profile
        if self._terms.profile is not profile or len(self._terms) >= _TERM_CACHE:
            self._terms = _TermCache(profile)
        return self._terms

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        result = self._run(query)
        if not isinstance(result, ox.QueryBoolean):
            raise BackendQueryError("not an ASK query", backend="oxigraph", query=query)
        return bool(result)

    def close(self) -> None:
        if self.path is not None and not self.read_only:  # flush() raises on read-only stores
            self.store.flush()
