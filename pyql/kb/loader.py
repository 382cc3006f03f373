"""Load RDF dumps into an on-disk Oxigraph store, streamed, with a manifest.

:func:`load_store` bulk-loads N-Triples / N-Quads / Turtle files (gzip or not; the format is
read from the suffix: ``.nt``, ``.nq``, ``.ttl``, each optionally ``.gz`` or ``.bz2``) into a store
directory with pyoxigraph's bulk loader, which reads its input as a stream and writes sorted
runs to disk: memory stays bounded by the loader's buffers whatever the size of the dump
(measured in ``benchmarks/kb_load.py``). A progress callback gets the bytes read so far (of
the files as stored, compressed or not) and the total.

A source already in the store (the same content: its SHA-256, or for a manifest written before
checksums, the same path and size) is refused with :class:`SourceAlreadyLoadedError` before
anything is loaded, unless ``force``: loading a file twice would copy its blank-node subgraphs
again and list it twice.

The store directory gets a manifest, ``pyql-manifest.json`` (:class:`Manifest`): each source's
path, size, SHA-256, format and the triples it added, the store's triple count, the time taken and the
pyoxigraph version. :func:`store_info` reads it back; :func:`open_store` reopens the store
read-only as an :class:`~pyql.kb.oxigraph.OxigraphKB` (any profile), so several processes can
query it at once.

>>> import tempfile, pathlib
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = (tmp / "a.nt").write_text('<http://e/a> <http://e/p> "x" .\\n')
>>> manifest = load_store([tmp / "a.nt"], tmp / "store")
>>> manifest.triples, manifest.sources[0].triples
(1, 1)
>>> len(open_store(tmp / "store"))
1
"""

from __future__ import annotations

import bz2
import datetime as _dt
import gzip
import hashlib
import io
import json
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyoxigraph as ox
from pydantic import BaseModel, ConfigDict

from pyql.errors import InputError
from pyql.kb.oxigraph import OxigraphKB
from pyql.profiles import Profile

__all__ = [
    "INCOMPLETE",
    "MANIFEST",
    "Manifest",
    "check_complete",
    "SourceInfo",
    "IncompleteStoreError",
    "SourceAlreadyLoadedError",
    "StoreError",
    "rdf_format",
    "compression",
    "load_store",
    "store_info",
    "open_store",
]

#: the manifest's file name inside a store directory
MANIFEST = "pyql-manifest.json"
#: a file in a store directory while a load into it runs; left behind, it marks the store as
#: incomplete (the load failed or was killed) and the store is not opened
INCOMPLETE = "pyql-incomplete"

_FORMATS = {
    ".nt": ox.RdfFormat.N_TRIPLES,
    ".ntriples": ox.RdfFormat.N_TRIPLES,
    ".nq": ox.RdfFormat.N_QUADS,
    ".ttl": ox.RdfFormat.TURTLE,
    ".turtle": ox.RdfFormat.TURTLE,
    ".trig": ox.RdfFormat.TRIG,
}

Progress = Callable[[int, int], None]


class StoreError(InputError):
    """A source or a store directory that cannot be used (``path`` says which)."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(message)


class IncompleteStoreError(StoreError):
    """A store directory a load into did not finish (it holds part of its sources, or none)."""


class SourceAlreadyLoadedError(StoreError):
    """A source whose content the store holds already: ``path`` the file given, ``loaded_as``
    the source of the manifest (or of the same command) with that content."""

    def __init__(self, path: str, loaded_as: str) -> None:
        self.loaded_as = loaded_as
        same = "" if Path(path).resolve() == Path(loaded_as) else f" (as {loaded_as})"
        super().__init__(f"{path} is already loaded in this store{same}", path=path)


class SourceInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    bytes: int
    #: SHA-256 of the file as stored (compressed or not); empty in manifests made before it
    sha256: str = ""
    format: str
    compressed: bool
    #: ``gzip`` or ``bzip2`` when compressed (manifests made before it: gzip when compressed)
    compression: str = ""
    triples: int
    seconds: float


class Manifest(BaseModel):
    """What a store directory holds and how it was built."""

    model_config = ConfigDict(frozen=True)

    sources: tuple[SourceInfo, ...] = ()
    triples: int = 0
    seconds: float = 0.0
    pyoxigraph: str = ""
    created: str = ""

    @property
    def source_bytes(self) -> int:
        return sum(s.bytes for s in self.sources)


#: compressed-file suffixes and the compression each names
COMPRESSIONS = {".gz": "gzip", ".bz2": "bzip2"}


def compression(path: str | Path) -> str:
    """``gzip`` or ``bzip2`` by the file's last suffix (``.gz``, ``.bz2``: Wikidata's truthy
    dumps come as ``.nt.bz2`` and ``.nt.gz``), else ``""``."""
    suffixes = Path(path).suffixes
    return COMPRESSIONS.get(suffixes[-1].lower(), "") if suffixes else ""


def rdf_format(path: str | Path) -> tuple[ox.RdfFormat, bool]:
    """The RDF format of a file by its suffix, and whether it is compressed (gzip or bzip2:
    :func:`compression` says which)."""
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    compressed = bool(compression(p))
    if compressed:
        suffixes = suffixes[:-1]
    fmt = _FORMATS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise StoreError(
            f"{p.name}: unknown RDF format (expected .nt, .nq, .ttl or .trig, optionally .gz "
            "or .bz2)",
            path=str(p),
        )
    return fmt, compressed


class _Counting(io.RawIOBase):
    """A readable file that reports how many bytes were read from it."""

    def __init__(self, handle: Any, on_read: Callable[[int, memoryview], None]) -> None:
        self._handle = handle
        self._on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._handle.readinto(buffer)
        if n:
            self._on_read(n, memoryview(buffer)[:n])
        return n or 0


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _check_new(plan: list[tuple[Path, Any, bool, int]], previous: Manifest) -> None:
    """Raise :class:`SourceAlreadyLoadedError` for a source of ``plan`` whose content is in
    ``previous`` or earlier in ``plan``. A file is hashed only when a source of its size is
    there already: a new dump is read once, by the loader."""
    # (resolved path, size, SHA-256 or "" when unknown, the file to hash for it, if any)
    seen: list[tuple[str, int, str, Path | None]] = [
        (s.path, s.bytes, s.sha256, None) for s in previous.sources]
    for path, _fmt, _compressed, size in plan:
        resolved = str(path.resolve())
        digest = ""
        for i, (loaded_as, other_size, known, other) in enumerate(seen):
            if other_size != size:
                continue
            if not known and other is not None:
                known = _sha256(other)
                seen[i] = (loaded_as, other_size, known, other)
            digest = digest or _sha256(path)
            if (known and known == digest) or (not known and loaded_as == resolved):
                raise SourceAlreadyLoadedError(str(path), loaded_as)
        seen.append((resolved, size, digest, path))


def load_store(
    sources: Iterable[str | Path],
    store_dir: str | Path,
    *,
    progress: Progress | None = None,
    base_iri: str | None = None,
    force: bool = False,
) -> Manifest:
    """Bulk-load ``sources`` into the store at ``store_dir`` (created if missing; an existing
    store is added to) and write its manifest. Raises :class:`StoreError` for a missing or
    unknown source and :class:`SourceAlreadyLoadedError` for one the store holds already
    (unless ``force``), both before anything is loaded, and for a syntax error (naming the
    file)."""
    paths = [Path(s) for s in sources]
    if not paths:
        raise StoreError("no source to load")
    plan = []
    for path in paths:
        if not path.is_file():
            raise StoreError(f"no such file: {path}", path=str(path))
        plan.append((path, *rdf_format(path), path.stat().st_size))
    target = Path(store_dir)
    check_complete(target)
    previous = store_info(target) if (target / MANIFEST).exists() else Manifest()
    if not force:
        _check_new(plan, previous)
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    marker = target / INCOMPLETE
    try:
        store = ox.Store(str(target))  # fails (locked, not a store) before anything changes
        try:
            marker.write_text("a `pyql kb load` into this store has not finished\n")
            count = _load(store, plan, previous, progress, base_iri)
        finally:
            del store  # release the directory lock before anyone reopens it
    except BaseException:
        if created:  # a new store that failed half-way: nothing of it is kept
            shutil.rmtree(target, ignore_errors=True)
        raise  # an existing store keeps the marker once loading began: it holds part of it
    manifest = Manifest(
        sources=tuple(count[1]), triples=count[0],
        seconds=round(previous.seconds + count[2], 3),
        pyoxigraph=ox.__version__,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    (target / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
    marker.unlink()
    return manifest


def check_complete(store_dir: str | Path) -> None:
    """Raise :class:`IncompleteStoreError` when a load into ``store_dir`` did not finish."""
    path = Path(store_dir)
    if (path / INCOMPLETE).exists():
        raise IncompleteStoreError(
            f"{path}: the store is incomplete (a `pyql kb load` into it failed or was stopped); "
            "remove the directory and load it again", path=str(path))


def _load(store: ox.Store, plan: list[tuple[Path, Any, bool, int]], previous: Manifest,
          progress: Progress | None, base_iri: str | None
          ) -> tuple[int, list[SourceInfo], float]:
    """Load ``plan`` into ``store``: the store's triple count, every source's info (the
    previous ones first) and the seconds taken."""
    total = sum(size for *_, size in plan)
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    started = time.perf_counter()
    infos = list(previous.sources)
    count = len(store)
    for path, fmt, compressed, size in plan:
        t0 = time.perf_counter()
        digest = hashlib.sha256()

        def read(n: int, chunk: memoryview, digest: Any = digest) -> None:
            digest.update(chunk)
            advance(n)

        with open(path, "rb") as raw:
            counted = io.BufferedReader(_Counting(raw, read), buffer_size=1 << 20)
            kind = compression(path)
            stream: Any = (gzip.GzipFile(fileobj=counted) if kind == "gzip"
                           else bz2.BZ2File(counted) if kind == "bzip2" else counted)
            try:
                store.bulk_load(stream, fmt, base_iri=base_iri)
            except SyntaxError as exc:
                raise StoreError(f"{path}: {exc}", path=str(path)) from None
            except MemoryError as exc:  # pyoxigraph: a term over its 16 MiB parse buffer
                raise StoreError(
                    f"{path}: too large to load ({exc}): a literal, IRI or line longer "
                    "than the parser's buffer, or out of memory", path=str(path)) from None
        store.flush()
        after = len(store)
        infos.append(SourceInfo(path=str(path.resolve()), bytes=size,
                                sha256=digest.hexdigest(), format=fmt.name,
                                compressed=compressed, compression=kind,
                                triples=after - count,
                                seconds=round(time.perf_counter() - t0, 3)))
        count = after
    store.optimize()
    return count, infos, time.perf_counter() - started


def store_info(store_dir: str | Path) -> Manifest:
    """The manifest of a store built by :func:`load_store`."""
    path = Path(store_dir) / MANIFEST
    if not path.is_file():
        raise StoreError(f"{store_dir}: no {MANIFEST} (not a store built by `pyql kb load`)",
                         path=str(store_dir))
    try:
        return Manifest.model_validate(json.loads(path.read_text()))
    except (ValueError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: not a valid manifest: {exc}", path=str(path)) from None


def open_store(store_dir: str | Path, *, profile: str | Profile = "generic") -> OxigraphKB:
    """The store at ``store_dir``, read-only (other readers may open it at the same time)."""
    path = Path(store_dir)
    if not path.is_dir():
        raise StoreError(f"no store directory at {path}", path=str(path))
    check_complete(path)
    try:
        return OxigraphKB(path=path, profile=profile, read_only=True)
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc}", path=str(path)) from None
