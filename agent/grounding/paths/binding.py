"""Relation binding (Readi §4.3): each natural-language relation of a path is bound to the
``top_k`` most similar relations of the KB's vocabulary, through the existing rankers
(:mod:`pyql.agent.grounding.ranking`: BM25 by default, OpenAI or MiniLM embeddings).

The vocabulary is every relation of the KB (asked once with a compiled query) or a given list
(Freebase: ``fb_relation.txt.gz``, one relation per line). Bindings are cached per binder.

>>> binder = RelationBinder(RelationVocabulary(["film.film.directed_by", "film.film.country",
...                                             "people.person.place_of_birth"]), top_k=2)
>>> binder.bind("directed by")
('film.film.directed_by',)
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from weakref import WeakKeyDictionary

from pyql.agent.grounding.ranking import RelationRanker, get_ranker
from pyql.kb.base import KB
from pyql.sparql import Sparql
from pyql.sparql.compile import compile_relations
from pyql.terms import Entity, Var

__all__ = ["BINDING_TOP_K", "RelationBinder", "RelationVocabulary"]

#: candidates per natural-language relation (the paper's default)
BINDING_TOP_K = 5

_SEP = re.compile(r"[\s._/:\-]+")


def _key(name: str) -> str:
    return _SEP.sub("_", name.strip().casefold()).strip("_")


class RelationVocabulary:
    """The relations a path may be bound to (short names, as the Session shows them)."""

    def __init__(self, relations: Iterable[str]) -> None:
        self.relations: tuple[str, ...] = tuple(dict.fromkeys(r.strip() for r in relations
                                                             if r.strip()))
        self._by_key: dict[str, list[str]] = {}
        for r in self.relations:
            self._by_key.setdefault(_key(r), []).append(r)

    def __len__(self) -> int:
        return len(self.relations)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.relations

    def exact(self, name: str) -> list[str]:
        """Relations written like ``name`` up to case and separators (``directed by`` ->
        ``directed_by``)."""
        return list(self._by_key.get(_key(name), ()))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> RelationVocabulary:
        """One relation per line; ``.gz`` files are read compressed."""
        p = Path(path)
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
            return cls(line for line in handle)

    @classmethod
    def from_kb(cls, kb: KB, *, timeout: float | None = None) -> RelationVocabulary:
        """Every relation of ``kb`` (its profile's hidden relations left out)."""
        query = Sparql(profile=kb.profile)
        rs = kb.select(compile_relations(query, Var("s"), "forward"), timeout=timeout)
        hidden = kb.profile.hidden_relations
        names = sorted({c.iri for (c,) in rs.rows if isinstance(c, Entity)} - hidden)
        return cls(kb.profile.compact(iri) for iri in names)

    @classmethod
    def from_file_shared(cls, path: str | os.PathLike[str]) -> RelationVocabulary:
        """:meth:`from_file`, read once per file (by resolved path) and shared: strategies are
        built once per question of a run."""
        return _vocabulary_file(str(Path(path).resolve()))

    @classmethod
    def of_kb(cls, kb: KB) -> RelationVocabulary:
        """:meth:`from_kb`, asked once per KB and shared (an evaluation's per-question view of
        a KB shares its KB's vocabulary)."""
        base = kb.shared
        found = _VOCABULARIES.get(base)
        if found is None:
            found = _VOCABULARIES[base] = cls.from_kb(kb)
        return found


# one vocabulary per KB (the relations of a whole KB are asked once)
_VOCABULARIES: WeakKeyDictionary[KB, RelationVocabulary] = WeakKeyDictionary()


class RelationBinder:
    """Binds NL relations to vocabulary relations: exact spellings first, then the ranker's best,
    at most ``top_k``; relations the ranker scores 0 or less (no word in common, for BM25) are
    not candidates. ``bind`` is cached."""

    def __init__(self, vocabulary: RelationVocabulary | Sequence[str],
                 ranker: RelationRanker | str | None = "bm25", *,
                 top_k: int = BINDING_TOP_K) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        self.vocabulary = (vocabulary if isinstance(vocabulary, RelationVocabulary)
                           else RelationVocabulary(vocabulary))
        self.ranker = get_ranker(ranker)
        self.top_k = top_k
        self._cache: dict[str, tuple[str, ...]] = {}

    @classmethod
    def shared(cls, vocabulary: RelationVocabulary, ranker: RelationRanker | str | None = "bm25",
               *, top_k: int = BINDING_TOP_K) -> RelationBinder:
        """One binder (and its cache of bindings) per vocabulary, ranker name and ``top_k``:
        Readi and SRP are built once per question of a run, their bindings outlive it. A
        ranker object of the caller's gets a binder of its own."""
        if ranker is not None and not isinstance(ranker, str):
            return cls(vocabulary, ranker, top_k=top_k)
        binders = _BINDERS.setdefault(vocabulary, {})
        key = (str(ranker), top_k)
        if key not in binders:
            binders[key] = cls(vocabulary, ranker, top_k=top_k)
        return binders[key]

    def bind(self, relation: str) -> tuple[str, ...]:
        """The candidates of ``relation``, best first."""
        cached = self._cache.get(relation)
        if cached is not None:
            return cached
        out = self.vocabulary.exact(relation)
        if len(out) < self.top_k and self.ranker is not None:
            names = self.vocabulary.relations
            scores = self.ranker.scores(relation.replace("_", " "), names)
            order = sorted(range(len(names)), key=lambda i: (-scores[i], i))
            for i in order:
                if len(out) >= self.top_k or scores[i] <= 0:
                    break
                if names[i] not in out:
                    out.append(names[i])
        bound = tuple(out[: self.top_k])
        self._cache[relation] = bound
        return bound

    def rank(self, text: str, relations: Sequence[str], *, limit: int) -> list[str]:
        """``relations`` ordered by similarity to ``text`` (the question), at most ``limit``
        (the editing candidates; the order of the input for ties, or without a ranker)."""
        rels = list(dict.fromkeys(relations))
        if self.ranker is None or len(rels) <= 1:
            return rels[:limit]
        scores = self.ranker.scores(text, rels)
        order = sorted(range(len(rels)), key=lambda i: (-scores[i], i))
        return [rels[i] for i in order[:limit]]


_BINDERS: WeakKeyDictionary[RelationVocabulary, dict[tuple[str, int], RelationBinder]] = (
    WeakKeyDictionary())


@lru_cache(maxsize=8)
def _vocabulary_file(path: str) -> RelationVocabulary:
    return RelationVocabulary.from_file(path)
