"""Entity linking: find the KB entities a question mentions, from the KB's own labels.

A linker is anything with the :class:`EntityLinker` shape: ``link(question)`` gives the
``{mention: kb_id}`` table a :class:`~pyql.session.Session` takes, and ``candidates(question)``
gives the whole :class:`Linking` (every mention, its position, and its ranked candidates with
scores) for display, logging or a smarter choice.

:class:`LabelLinker` is the built-in one. It works over a :class:`LabelIndex`, the labels of a
KB read by one SPARQL query (:func:`pyql.sparql.compile.compile_label_scan`: every entity and
label of the profile's label predicates; paged on endpoints) and kept in memory with normalised forms (case-folded, accents
and punctuation removed). The entity id is what the LLM writes for the entity: the profile's
short form (``ex:Inception``, ``m.0crbvqz``, and for the ``metaqa`` profile the label itself).

- **Brackets**: a question with bracketed mentions (MetaQA's ``what films did [Kismet] ...``)
  links exactly those, each to its best candidate.
- **Exact**: otherwise the question's word n-grams are looked up among the normalised labels,
  longest first, without overlaps; n-grams made only of stop words are skipped.
- **Fuzzy**: spans of the question are compared with the labels in two stages. A trigram
  inverted index prefilters the labels (a label must share at least ``min_overlap`` of its
  word-bounded character trigrams with the question: a token-set similarity at character
  level), and pairs whose trigram Dice passes 0.5 are scored by :func:`similarity`, a
  word-aligned, typo-tolerant ``difflib`` ratio. Matches scoring at least ``threshold`` are
  ranked; spans are kept without overlaps, the heaviest (letters x score²) first, so an exact
  match of the whole beats a close match of more words, and a close match of a whole name beats
  an exact match of a part of it. Tens of thousands of labels link in milliseconds per
  question, in pure Python.

SQL questions need no linking: the columns are in the schema part of the prompt.

>>> pairs = [("ex:Inception", "Inception"), ("ex:Christopher_Nolan", "Christopher Nolan")]
>>> linker = LabelLinker(LabelIndex(pairs))
>>> linker.link("which films did Christopher Nolan direct after Inceptoin")
{'Christopher Nolan': 'ex:Christopher_Nolan', 'Inceptoin': 'ex:Inception'}
>>> linker.link("who directed [Inception]")
{'Inception': 'ex:Inception'}
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from itertools import compress
from operator import ge
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from pyql.kb.base import KB
from pyql.kb.labels import read_label_index
from pyql.sparql.compile import compile_entity_scan, compile_label_scan
from pyql.terms import Entity
from pyql.terms import Literal as RdfLiteral

__all__ = [
    "Candidate",
    "Mention",
    "Linking",
    "EntityLinker",
    "LabelIndex",
    "LabelLinker",
    "STOP_WORDS",
    "normalize",
    "similarity",
    "bracketed",
]

log = logging.getLogger(__name__)

#: words that never make a mention on their own (a label made only of them is not looked for)
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are as at be been before being
    below between both but by can could did do does doing done down during each either else
    ever every few for from further had has have having he her here hers herself him himself
    his how i if in into is it its itself just me might more most must my myself neither no
    nor not now of off on once one only or other our ours out over own same shall she should
    so some such than that the their theirs them themselves then there these they this those
    through to too under until up upon us very was we were what whatever when where whether
    which while who whom whose why will with within without would yet you your yours
    """.split()
)

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_APOSTROPHES = str.maketrans("", "", "'\u2019")
_BRACKET = re.compile(r"\[([^\[\]]+)\]")
#: trigram Dice below which a pair is not compared further
_GATE = 0.5
#: texts shorter than this (letters) match exactly or not at all: "actor" is not "actors"
_FUZZY_MIN_LETTERS = 6
#: word pairs less similar than this count as unmatched
_WORD_FLOOR = 0.75
#: what a word split or merged costs (``jo hn`` for ``john``)
_SPLIT_COST = 0.1
#: the cache file format
_CACHE_VERSION = 1


def _norm_word(word: str) -> str:
    if not word.isascii():
        decomposed = unicodedata.normalize("NFKD", word)
        word = "".join(c for c in decomposed if not unicodedata.combining(c))
    word = word.casefold()
    return word.translate(_APOSTROPHES) if "'" in word or "\u2019" in word else word


def _words(text: str) -> list[tuple[str, int, int]]:
    """(normalised word, start, end) for each word of ``text``."""
    out = []
    for m in _WORD.finditer(text):
        word = _norm_word(m.group())
        if word:
            out.append((word, m.start(), m.end()))
    return out


def _label_words(text: str) -> list[str]:
    """The normalised words of ``text`` (like :func:`_words`, without positions)."""
    if text.isascii():
        return _ASCII_WORD.findall(text.casefold().replace("'", ""))
    return [w for w in map(_norm_word, _WORD.findall(text)) if w]


def normalize(text: str) -> str:
    """The form labels are matched by: words case-folded, accents, apostrophes and punctuation
    removed, one space between words.

    >>> normalize("  Schindler’s List (Élite-Edition) ")
    'schindlers list elite edition'
    """
    return " ".join(_label_words(text))


def _grams(words: Iterable[str]) -> frozenset[str]:
    """Word-bounded character trigrams: ``nolan`` -> `` no``, ``nol``, ``ola``, ``lan``, ``an ``."""
    out: set[str] = set()
    for word in words:
        padded = f" {word} "
        out.update(padded[i:i + 3] for i in range(len(padded) - 2))
    return frozenset(out)


def _has_upper(text: str) -> bool:
    return any(c.isupper() for c in text)


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 0.0


@lru_cache(maxsize=1 << 16)
def _ratio(a: str, b: str) -> float:
    """difflib's similarity of two strings (2 x matched characters / total)."""
    if a == b:
        return 1.0
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < _GATE or matcher.quick_ratio() < _GATE:
        return 0.0
    return matcher.ratio()


def similarity(text: str, label: str) -> float:
    """How close two normalised texts are, in order, allowing typos: word by word (each pair's
    difflib ratio, weighted by the longer word; pairs below 0.75 count as unmatched) when they
    have as many words, else the ratio of the texts without spaces less 0.1 (a word split or
    merged). Texts of fewer than 6 letters are equal or not similar.

    >>> round(similarity("christopher nolen", "christopher nolan"), 2)
    0.94
    >>> similarity("film silent", "silent film"), similarity("actor", "actors")
    (0.0, 0.0)
    >>> round(similarity("jo hn godey", "john godey"), 2)
    0.9
    """
    if text == label:
        return 1.0
    a, b = text.split(), label.split()
    if sum(map(len, a)) < _FUZZY_MIN_LETTERS or sum(map(len, b)) < _FUZZY_MIN_LETTERS:
        return 0.0
    if len(a) != len(b):
        return max(0.0, _ratio("".join(a), "".join(b)) - _SPLIT_COST)
    total = matched = 0.0
    for x, y in zip(a, b, strict=True):
        weight = max(len(x), len(y))
        total += weight
        sim = _ratio(x, y)
        if sim >= _WORD_FLOOR:
            matched += weight * sim
    return matched / total if total else 0.0


def bracketed(question: str) -> list[tuple[str, int, int]]:
    """The bracketed mentions of a question (MetaQA style): (text, start, end) of the text
    inside each ``[...]``.

    >>> bracketed("which person directed the movies written by [John Godey]")
    [('John Godey', 45, 55)]
    """
    out = []
    for m in _BRACKET.finditer(question):
        text = m.group(1)
        lead = len(text) - len(text.lstrip())
        stripped = text.strip()
        if stripped:
            out.append((stripped, m.start(1) + lead, m.start(1) + lead + len(stripped)))
    return out


# -- results ------------------------------------------------------------------------------------


class Candidate(BaseModel):
    """One KB entity a mention may stand for."""

    model_config = ConfigDict(frozen=True)

    #: the id the LLM writes (``ex:Inception``, ``m.0crbvqz``, ``Kismet``)
    kb_id: str
    #: the label that matched
    label: str
    #: similarity in [0, 1]; 1.0 for an exact (normalised) match
    score: float
    method: Literal["exact", "fuzzy"]


class Mention(BaseModel):
    """A span of the question and the entities it may name, best first."""

    model_config = ConfigDict(frozen=True)

    #: the text as written in the question (inside the brackets for a bracketed mention)
    text: str
    start: int
    end: int
    #: how the span was found
    source: Literal["bracket", "exact", "fuzzy"]
    candidates: tuple[Candidate, ...] = ()

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None


class Linking(BaseModel):
    """Everything a linker found in one question."""

    model_config = ConfigDict(frozen=True)

    question: str
    mentions: tuple[Mention, ...] = ()

    @property
    def entities(self) -> dict[str, str]:
        """``{mention: kb_id}`` of the best candidate of every mention that has one."""
        out: dict[str, str] = {}
        for mention in self.mentions:
            if mention.best is not None:
                out.setdefault(mention.text, mention.best.kb_id)
        return out

    @property
    def unlinked(self) -> tuple[Mention, ...]:
        """Mentions without any candidate (a bracket the KB has no label for)."""
        return tuple(m for m in self.mentions if not m.candidates)


@runtime_checkable
class EntityLinker(Protocol):
    """Links the entity mentions of a question to KB ids."""

    def link(self, question: str) -> dict[str, str]:
        """``{mention: kb_id}``, ready for ``Session(kb, entities=...)``."""
        ...

    def candidates(self, question: str) -> Linking:
        """Every mention with its ranked, scored candidates."""
        ...


# -- the label index ----------------------------------------------------------------------------


class LabelIndex:
    """The labels of a KB in memory, with their normalised forms and a trigram index.

    Build it from ``(kb_id, label)`` pairs, or from a KB with :meth:`from_kb`; :meth:`save` and
    :meth:`load` keep it on disk (``from_kb(kb, cache=path)`` does both).
    """

    def __init__(self, entries: Iterable[tuple[str, str]], *,
                 stop_words: frozenset[str] = STOP_WORDS, truncated: bool = False) -> None:
        start = time.perf_counter()
        self.stop_words = stop_words
        seen: set[tuple[str, str]] = set()
        ids: list[str] = []
        labels: list[str] = []
        norms: list[str] = []
        sizes: list[int] = []
        exact: dict[str, list[int]] = {}
        postings: dict[str, list[int]] = {}
        max_words = 0
        for kb_id, label in entries:
            if (kb_id, label) in seen:
                continue
            seen.add((kb_id, label))
            words = _label_words(label)
            if not words:
                continue
            index = len(ids)
            norm = " ".join(words)
            grams = _grams(words)
            ids.append(kb_id)
            labels.append(label)
            norms.append(norm)
            sizes.append(len(grams))
            exact.setdefault(norm, []).append(index)
            for gram in grams:
                postings.setdefault(gram, []).append(index)
            max_words = max(max_words, len(words))
        self._ids = ids
        self._labels = labels
        self._norms = norms
        self._sizes = sizes
        self._exact = exact
        self._postings = postings
        self._need: dict[float, list[float]] = {}
        #: the most words of any label (longer n-grams are never looked up)
        self.max_words = max_words
        #: the KB has more labels than were read (``limit`` was reached)
        self.truncated = truncated
        log.debug("label index: %d labels in %.2fs", len(ids), time.perf_counter() - start)

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"LabelIndex({len(self)} labels)"

    def entries(self) -> list[tuple[str, str]]:
        """The ``(kb_id, label)`` pairs, in index order."""
        return list(zip(self._ids, self._labels, strict=True))

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def from_kb(
        cls,
        kb: KB,
        *,
        page_size: int | None = None,
        limit: int | None = None,
        timeout: float | None = None,
        cache: str | os.PathLike[str] | None = None,
        cache_key: str | None = None,
    ) -> LabelIndex:
        """The labels of ``kb`` by its profile's label predicates.

        ``page_size`` pages the query with ``ORDER BY ... LIMIT ... OFFSET`` (default: one
        query for the embedded store, 10,000 rows per page for other backends, e.g. SPARQL
        endpoints); ``limit`` caps the labels read (:attr:`truncated` tells when it was
        reached). A profile whose ids are labels (``metaqa``)
        falls back to the entity IRIs when the KB has no label triples. A store with a label
        index for the KB's profile (``pyql kb load --labels PROFILE``,
        :mod:`pyql.kb.labels`) is read from that file, without a query.

        With ``cache`` (a file), the pairs are read from it when its key matches
        ``cache_key`` (default: derived from the backend: endpoint URL and graph, or store path,
        with the profile, the predicates and, for stores, the triple count), else built and
        written there.
        """
        key = cache_key if cache_key is not None else _default_key(kb)
        if cache is not None:
            cached = cls.load(cache, key=key)
            if cached is not None:
                return cached
        start = time.perf_counter()
        if page_size is None and not _is_embedded(kb):
            page_size = 10_000
        stored = read_label_index(kb) if limit is None else None  # `pyql kb load --labels`
        if stored is not None:
            index = cls(stored)
            log.info("label index of %s read from its store: %d labels", kb, len(index))
            if cache is not None:
                index.save(cache, key=key)
            return index
        pairs, rows = _read_labels(kb, page_size=page_size, limit=limit, timeout=timeout)
        if not rows and kb.profile.id_encoding == "label" and kb.profile.entity_base:
            pairs, rows = _read_label_ids(kb, limit=limit, timeout=timeout)
        index = cls(pairs, truncated=limit is not None and rows >= limit)
        log.info("label index of %s: %d labels in %.2fs", type(kb).__name__, len(index),
                 time.perf_counter() - start)
        if cache is not None:
            index.save(cache, key=key)
        return index

    def save(self, path: str | os.PathLike[str], *, key: str = "") -> Path:
        """Write the ``(kb_id, label)`` pairs as gzipped JSON, with ``key`` to check on load."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"version": _CACHE_VERSION, "key": key, "truncated": self.truncated,
                   "entries": self.entries()}
        tmp = path.with_name(path.name + ".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8") as handle:
            json.dump(payload, handle, ensure_ascii=False)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, key: str | None = None) -> LabelIndex | None:
        """The index saved in ``path``, or None when there is none, it is unreadable, or its key
        differs from ``key`` (``None``: any key)."""
        path = Path(path)
        if not path.is_file():
            return None
        try:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                payload = json.load(handle)
        except (OSError, ValueError, EOFError) as exc:
            log.warning("ignoring the label cache %s: %s", path, exc)
            return None
        if not isinstance(payload, dict) or payload.get("version") != _CACHE_VERSION:
            return None
        if key is not None and payload.get("key") != key:
            log.info("label cache %s is for another KB; rebuilding", path)
            return None
        entries = payload.get("entries")
        if not isinstance(entries, list):
            return None
        return cls(((str(i), str(label)) for i, label in entries),
                   truncated=bool(payload.get("truncated")))

    # -- lookups --------------------------------------------------------------------------------
    def exact(self, text: str) -> list[Candidate]:
        """Entities whose normalised label is that of ``text`` (a label written exactly as in
        ``text`` first)."""
        hits = self._exact.get(normalize(text), [])
        ranked = sorted(hits, key=lambda i: (self._labels[i] != text.strip(), self._ids[i]))
        return [Candidate(kb_id=self._ids[i], label=self._labels[i], score=1.0, method="exact")
                for i in ranked]

    def search(self, text: str, *, k: int = 5, threshold: float = 0.8,
               min_overlap: float = 0.5) -> list[Candidate]:
        """The ``k`` best entities for ``text``: exact matches (score 1.0), then fuzzy ones
        scoring at least ``threshold``."""
        found = self.exact(text)
        words = normalize(text).split()
        if not words or len(found) >= k:
            return found[:k]
        grams = _grams(words)
        norm = " ".join(words)
        taken = {c.kb_id for c in found}
        scored: list[tuple[float, int]] = []
        for i in self._prefilter(grams, min_overlap):
            if self._ids[i] in taken or self._norms[i] == norm:
                continue
            score = self._score(grams, norm, i)
            if score >= threshold:
                scored.append((score, i))
        scored.sort(key=lambda si: (-si[0], abs(len(self._norms[si[1]]) - len(norm)),
                                    self._ids[si[1]]))
        for score, i in scored:
            if self._ids[i] in taken:
                continue
            taken.add(self._ids[i])
            found.append(Candidate(kb_id=self._ids[i], label=self._labels[i],
                                   score=round(score, 4), method="fuzzy"))
            if len(found) >= k:
                break
        return found

    # -- internals ------------------------------------------------------------------------------
    def _prefilter(self, grams: Iterable[str], min_overlap: float) -> list[int]:
        """Labels sharing at least ``min_overlap`` of their own trigrams with ``grams``."""
        counts: Counter[int] = Counter()
        postings = self._postings
        for gram in grams:
            hits = postings.get(gram)
            if hits:
                counts.update(hits)
        need = self._needed(min_overlap)
        # C-level iteration: this runs over every label sharing a trigram (thousands)
        return list(compress(counts.keys(), map(ge, counts.values(),
                                                map(need.__getitem__, counts.keys()))))

    def _needed(self, min_overlap: float) -> list[float]:
        """Per label, the trigrams it must share to pass the prefilter."""
        need = self._need.get(min_overlap)
        if need is None:
            need = self._need[min_overlap] = [min_overlap * n for n in self._sizes]
        return need

    def _label_grams(self, i: int) -> frozenset[str]:
        return _grams(self._norms[i].split())

    def _score(self, grams: frozenset[str], norm: str, i: int,
               label_grams: frozenset[str] | None = None) -> float:
        """:func:`similarity`, for pairs whose trigram Dice passes the gate."""
        dice = _dice(grams, label_grams if label_grams is not None else self._label_grams(i))
        if dice < _GATE:
            return 0.0
        return similarity(norm, self._norms[i])


# -- the linker ---------------------------------------------------------------------------------


class LabelLinker:
    """Links mentions to entities by their labels (see the module docstring).

    ``threshold`` is the least fuzzy score kept; ``k`` the candidates kept per mention;
    ``fuzzy=False`` keeps exact matches only; ``min_fuzzy_chars`` the shortest span (in letters)
    compared fuzzily; ``min_overlap`` the prefilter's share of a label's trigrams. With
    ``use_case`` (the default), a question that capitalises words past its first one is taken to
    capitalise names: a span it writes in lower case is not linked to a label with capitals.
    Bracketed mentions are always linked as written.
    """

    def __init__(
        self,
        index: LabelIndex,
        *,
        threshold: float = 0.8,
        k: int = 5,
        fuzzy: bool = True,
        min_fuzzy_chars: int = 4,
        min_overlap: float = 0.5,
        max_span_words: int = 10,
        use_case: bool = True,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], not {threshold!r}")
        if k < 1:
            raise ValueError("k must be at least 1")
        self.index = index
        self.threshold = threshold
        self.k = k
        self.fuzzy = fuzzy
        self.min_fuzzy_chars = min_fuzzy_chars
        self.min_overlap = min_overlap
        self.max_span_words = max_span_words
        self.use_case = use_case

    def __repr__(self) -> str:
        return f"LabelLinker({self.index!r}, threshold={self.threshold}, fuzzy={self.fuzzy})"

    @classmethod
    def from_kb(cls, kb: KB, **options: Any) -> LabelLinker:
        """A linker over a fresh :meth:`LabelIndex.from_kb` (options of both accepted)."""
        index_keys = {"page_size", "limit", "timeout", "cache", "cache_key"}
        index = LabelIndex.from_kb(kb, **{k: v for k, v in options.items() if k in index_keys})
        return cls(index, **{k: v for k, v in options.items() if k not in index_keys})

    def link(self, question: str) -> dict[str, str]:
        return self.candidates(question).entities

    def candidates(self, question: str) -> Linking:
        marks = bracketed(question)
        if marks:
            mentions = [self._mention(text, start, end, "bracket") for text, start, end in marks]
            return Linking(question=question, mentions=tuple(mentions))
        words = _words(question)
        # names are capitalised in this question (past its first word): a span written in lower
        # case is then not taken for a label with capitals ("directed" is not "Redirected")
        cased = self.use_case and len(words) > 1 and any(
            c.isupper() for c in question[words[1][1]:])
        lower = [cased and not any(c.isupper() for c in question[start:end])
                 for _, start, end in words]
        spans = self._exact_spans(words, lower)
        if self.fuzzy:
            spans += self._fuzzy_spans(words, lower)
        mentions = []
        for lo, hi, ranked in self._select(spans, len(words)):
            start, end = words[lo][1], words[hi - 1][2]
            text = question[start:end]
            if ranked:
                mentions.append(Mention(text=text, start=start, end=end, source="fuzzy",
                                        candidates=tuple(ranked[:self.k])))
            else:  # exact hits first, then fuzzy alternatives
                mentions.append(self._mention(text, start, end, "exact"))
        return Linking(question=question, mentions=tuple(mentions))

    # -- internals ------------------------------------------------------------------------------
    def _mention(self, text: str, start: int, end: int,
                 source: Literal["bracket", "exact", "fuzzy"]) -> Mention:
        threshold = self.threshold if self.fuzzy else 1.01
        found = self.index.search(text, k=self.k, threshold=threshold,
                                  min_overlap=self.min_overlap)
        return Mention(text=text, start=start, end=end, source=source, candidates=tuple(found))

    def _is_stop(self, words: Sequence[tuple[str, int, int]]) -> bool:
        stop = self.index.stop_words
        return all(w in stop for w, _, _ in words)

    def _exact_spans(self, words: list[tuple[str, int, int]], lower: list[bool]) -> list[_Span]:
        """Every n-gram whose normalised text is a label (not made only of stop words; for a
        span in ``lower`` case, a label without capitals)."""
        out: list[_Span] = []
        exact = self.index._exact
        labels = self.index._labels
        longest = min(self.index.max_words, len(words))
        for lo in range(len(words)):
            for hi in range(lo + 1, min(lo + longest, len(words)) + 1):
                span = words[lo:hi]
                text = [w for w, _, _ in span]
                hits = exact.get(" ".join(text))
                if not hits or self._is_stop(span):
                    continue
                if all(lower[lo:hi]) and all(_has_upper(labels[i]) for i in hits):
                    continue
                out.append(_Span(1.0, lo, hi, sum(map(len, text)), []))
        return out

    def _fuzzy_spans(self, words: list[tuple[str, int, int]], lower: list[bool]
                     ) -> list[_Span]:
        """Spans (not starting or ending with a stop word) with fuzzy matches over threshold,
        each with its candidates ranked."""
        index = self.index
        stop = index.stop_words
        # stop words are left out of the prefilter (a span never starts or ends with one): their
        # trigrams are the most frequent ones, and would make most labels candidates
        grams = _grams(w for w, _, _ in words if w not in stop)
        candidates = index._prefilter(grams, self.min_overlap)
        if not candidates:
            return []
        longest = min(self.max_span_words, index.max_words + 1)
        by_size: dict[int, list[tuple[int, int, frozenset[str], str]]] = {}
        letters: dict[tuple[int, int], int] = {}
        for lo in range(len(words)):
            if words[lo][0] in stop:
                continue
            for hi in range(lo + 1, min(lo + longest, len(words)) + 1):
                if words[hi - 1][0] in stop:
                    continue
                text = [w for w, _, _ in words[lo:hi]]
                letters[lo, hi] = sum(map(len, text))
                if letters[lo, hi] < self.min_fuzzy_chars:
                    continue
                by_size.setdefault(hi - lo, []).append((lo, hi, _grams(text), " ".join(text)))
        scores: dict[tuple[int, int], dict[int, float]] = {}
        norms = index._norms
        for i in candidates:
            n = norms[i].count(" ") + 1
            label_grams = index._label_grams(i)
            for size in (n - 1, n, n + 1):
                for lo, hi, span_grams, text in by_size.get(size, ()):
                    if f" {norms[i]} " in f" {text} ":
                        continue  # the label is in the span as is: the exact pass has it
                    score = index._score(span_grams, text, i, label_grams)
                    if score >= self.threshold:
                        per = scores.setdefault((lo, hi), {})
                        per[i] = max(score, per.get(i, 0.0))
        out: list[_Span] = []
        for (lo, hi), per in scores.items():
            ranked: list[Candidate] = []
            seen: set[str] = set()
            lower_span = all(lower[lo:hi])
            for i, score in sorted(per.items(), key=lambda kv: (-kv[1], index._ids[kv[0]])):
                if lower_span and _has_upper(index._labels[i]):
                    continue
                if index._ids[i] not in seen:
                    seen.add(index._ids[i])
                    ranked.append(Candidate(kb_id=index._ids[i], label=index._labels[i],
                                            score=round(score, 4), method="fuzzy"))
            if ranked:
                out.append(_Span(ranked[0].score, lo, hi, letters[lo, hi], ranked))
        return out

    @staticmethod
    def _select(spans: list[_Span], size: int) -> list[tuple[int, int, list[Candidate]]]:
        """Non-overlapping spans, the heaviest first: weight = letters covered x score², so the
        longest exact match wins, and a long close match beats an exact match of a part of it
        (``Evelyn Venalbe`` over the label ``Evelyn``)."""
        taken = [False] * size
        linked: set[str] = set()
        out = []
        for span in sorted(spans, key=lambda sp: (-sp.weight, -sp.score, sp.lo)):
            if any(taken[span.lo:span.hi]):
                continue
            ranked = [c for c in span.ranked if c.kb_id not in linked]
            if span.ranked and not ranked:
                continue  # every candidate is linked already, to a better span
            if ranked:
                linked.add(ranked[0].kb_id)
            taken[span.lo:span.hi] = [True] * (span.hi - span.lo)
            out.append((span.lo, span.hi, ranked))
        out.sort(key=lambda r: r[0])
        return out


@dataclass(frozen=True)
class _Span:
    """Question words ``lo``..``hi`` that matched with ``score``, covering ``letters`` letters;
    ``ranked`` is empty for an exact match, else the fuzzy candidates, best first."""

    score: float
    lo: int
    hi: int
    letters: int
    ranked: list[Candidate]

    @property
    def weight(self) -> float:
        return self.score * self.score * self.letters


# -- reading labels from a KB -------------------------------------------------------------------


def _is_embedded(kb: KB) -> bool:
    from pyql.kb.oxigraph import OxigraphKB

    return isinstance(kb, OxigraphKB)


def _default_key(kb: KB) -> str:
    profile = kb.profile
    parts: list[Any] = [type(kb).__name__, profile.name, sorted(profile.label_predicates),
                        profile.label_lang]
    url = getattr(kb, "url", None)
    if url:
        parts += [url, getattr(kb, "graph", None)]
    else:
        path = getattr(kb, "path", None)
        parts.append(str(Path(path).resolve()) if path else None)
        try:
            parts.append(len(kb))  # type: ignore[arg-type]
        except TypeError:
            pass
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _pages(kb: KB, build: Callable[..., str], *, page_size: int | None, limit: int | None,
           timeout: float | None) -> Iterable[tuple[Any, ...]]:
    """The rows of ``build(kb.profile, limit=..., offset=...)`` (a compiler scan), in pages of
    ``page_size`` when given (endpoints cap result sizes)."""
    profile = kb.profile
    if page_size is None:
        yield from kb.select(build(profile, limit=limit), timeout=timeout).rows
        return
    offset = 0
    while limit is None or offset < limit:
        size = page_size if limit is None else min(page_size, limit - offset)
        rows = kb.select(build(profile, limit=size, offset=offset), timeout=timeout).rows
        yield from rows
        if len(rows) < size:
            return
        offset += size


def _read_labels(kb: KB, *, page_size: int | None, limit: int | None,
                 timeout: float | None) -> tuple[list[tuple[str, str]], int]:
    """``(kb_id, label)`` for every labelled entity of ``kb``, and the rows read."""
    if not kb.profile.label_predicates:
        return [], 0
    pairs = []
    rows = 0
    for entity, label in _pages(kb, compile_label_scan, page_size=page_size, limit=limit,
                                timeout=timeout):
        rows += 1
        if isinstance(entity, Entity) and isinstance(label, RdfLiteral) and label.lexical.strip():
            pairs.append((entity.short, label.lexical))
    return pairs, rows


def _read_label_ids(kb: KB, *, limit: int | None, timeout: float | None
                    ) -> tuple[list[tuple[str, str]], int]:
    """For profiles whose id is the label: every entity IRI under the entity base."""
    pairs = []
    rows = 0
    for (entity,) in _pages(kb, compile_entity_scan, page_size=None, limit=limit,
                            timeout=timeout):
        rows += 1
        if isinstance(entity, Entity):
            pairs.append((entity.short, entity.short))
    return pairs, rows
