"""The reference base: labelled paths, build, clustering, save/reopen, retrieval, leak guard."""

from __future__ import annotations

import json

import pytest

from pyql.agent.evaluation.records import EvalItem
from pyql.agent.llm.clients import OpenAIEmbeddings
from pyql.agent.strategies.srp.labelled import LabelledQuestion, evaluation_part, id_part, labelled
from pyql.agent.strategies.srp.references import (
    FORMAT,
    ReferenceBase,
    ReferenceBaseError,
    ReferenceLeakError,
    build_reference_base,
    kmeans,
    masked,
)

TEMPLATES = {
    ("directed_by",): "who directed [{}]",
    ("^starred_actors",): "what movies did [{}] act in",
    ("release_year",): "when was [{}] released",
}
NAMES = ["Kismet", "Johnny Handsome", "Never a Dull Moment", "The Sting", "Cake", "Retroactive",
         "After Dark", "Moulin Rouge", "Tracker", "River Queen", "Black Snake Moan", "Heat"]


def _questions() -> list[LabelledQuestion]:
    out = []
    for t, (relations, text) in enumerate(TEMPLATES.items()):
        for i, name in enumerate(NAMES):
            out.append(LabelledQuestion(
                id=f"q{t}-{i}", question=text.format(name), topic=name, topic_id=name,
                path=relations,
                answers=(f"answer {t}-{i}",), mentions=(name,), dataset="toy"))
    return out


def _template(ref) -> str:
    return ref.path[0]


# -- labelled questions -------------------------------------------------------------------------

def test_a_labelled_question_takes_the_path_cores_relation_path_of_its_gold_program() -> None:
    program = ("get_relation(Kismet)\nadd_fact(Kismet, directed_by, ?x1)\n"
               "add_fact(?x2, directed_by, ?x1)\nadd_filter(?x2, !=, Kismet)\n"
               "add_fact(?x2, has_genre, ?x3)\nset_answer(?x3)\nexecute()")
    item = EvalItem(id="3hop-dev-0", question="q [Kismet]", entities={"Kismet": "Kismet"},
                    answers=("Drama",), program=program)
    q = labelled(item, dataset="metaqa-3hop")
    assert (q.topic, q.topic_id, q.path) == ("Kismet", "Kismet",
                                            ("directed_by", "^directed_by", "has_genre"))
    assert (q.answers, q.mentions, q.dataset) == (("Drama",), ("Kismet",), "metaqa-3hop")


def test_a_webqsp_program_gives_the_chain_from_its_topic() -> None:
    program = ("add_fact(m.0d3k14, government.political_district.representatives, ?c)\n"
               "add_fact(?c, government.government_position_held.office_holder, ?x)\n"
               "set_answer(?x)\nexecute()")
    q = labelled(EvalItem(id="w", question="q", entities={"Ohio": "m.0d3k14"}, program=program))
    assert (q.topic, q.topic_id) == ("Ohio", "m.0d3k14")
    assert q.path == ("government.political_district.representatives",
                      "government.government_position_held.office_holder")


def test_an_item_without_a_program_or_a_chain_from_its_entities_has_no_labelled_question(
) -> None:
    assert labelled(EvalItem(id="a", question="q", entities={"X": "X"})) is None
    unreachable = EvalItem(id="b", question="q", entities={"X": "X"},
                           program="add_fact(?y, r, ?z)\nset_answer(?z)")
    assert labelled(unreachable) is None


def test_id_part_is_deterministic_and_splits_by_the_fraction() -> None:
    ids = [f"2hop-dev-{i}" for i in range(2000)]
    first = [id_part(i, 0.3) for i in ids]
    assert first == [id_part(i, 0.3) for i in ids]
    assert 500 < sum(first) < 700
    assert not any(id_part(i, 0.0) for i in ids) and all(id_part(i, 1.0) for i in ids)
    assert [id_part(i, 0.3, salt="other") for i in ids] != first
    with pytest.raises(ValueError):
        id_part("x", 1.5)


def test_masking_hides_the_topic_whatever_its_case() -> None:
    assert masked("Who directed [kismet]?", ["Kismet"]) == "Who directed [ENTITY]?"


# -- clustering ---------------------------------------------------------------------------------

def test_kmeans_is_deterministic_for_a_seed_and_separates_clear_groups() -> None:
    vectors = [{0: 1.0}, {0: 0.95, 1: 0.05}, {1: 1.0}, {1: 0.9, 2: 0.1}, {2: 1.0},
               {2: 0.97, 0: 0.03}]
    first = kmeans(vectors, 3, seed=7)
    assert first == kmeans(vectors, 3, seed=7)
    assert first[0] == first[1] and first[2] == first[3] and first[4] == first[5]
    assert len(set(first)) == 3
    assert kmeans([], 3) == [] and kmeans([{0: 1.0}], 3) == [0]


def test_the_paper_construction_keeps_the_same_number_per_cluster() -> None:
    base = build_reference_base(_questions(), datasets=["toy"], split="dev", embedding="bm25",
                                size=6, clusters=3, seed=0)
    m = base.manifest
    assert (m.format, m.embedding, m.model, m.clusters, m.per_cluster, m.size) == \
        (FORMAT, "bm25", "bm25", 3, 2, 6)
    assert m.source_size == m.pool == 36 and sum(m.cluster_sizes) == 36
    # the three templates are the three clusters, two references drawn from each
    by_cluster: dict[int, set[str]] = {}
    for ref in base:
        by_cluster.setdefault(ref.cluster, set()).add(_template(ref))
    assert sorted(len(v) for v in by_cluster.values()) == [1, 1, 1]
    assert sorted(_template(r) for r in base) == sorted(r[0] for r in TEMPLATES for _ in (0, 1))


def test_building_twice_with_a_seed_gives_the_same_base_and_another_seed_may_not() -> None:
    one = build_reference_base(_questions(), datasets=["toy"], split="dev", embedding="bm25",
                               size=6, clusters=3, seed=3)
    two = build_reference_base(_questions(), datasets=["toy"], split="dev", embedding="bm25",
                               size=6, clusters=3, seed=3)
    assert [(r.id, r.cluster) for r in one] == [(r.id, r.cluster) for r in two]
    others = {tuple(r.id for r in build_reference_base(
        _questions(), datasets=["toy"], split="dev", embedding="bm25", size=6, clusters=3,
        seed=s)) for s in range(4)}
    assert len(others) > 1


def test_the_pool_is_a_seeded_sample() -> None:
    base = build_reference_base(_questions(), datasets=["toy"], split="dev", embedding="bm25",
                                size=3, clusters=3, pool=12, seed=0)
    assert base.manifest.pool == 12 and base.manifest.source_size == 36
    assert len(base.source_ids) == 36  # every source question is refused, sampled or not


# -- retrieval, disk ----------------------------------------------------------------------------

def test_retrieval_ranks_the_same_template_first_with_bm25(tmp_path) -> None:
    base = build_reference_base(_questions(), datasets=["toy"], split="dev", embedding="bm25",
                                size=6, clusters=3, seed=0)
    hits = base.retrieve("what movies did [Tom Hanks] act in", k=2, mentions=["Tom Hanks"])
    assert [_template(h.reference) for h in hits] == ["^starred_actors", "^starred_actors"]
    assert hits[0].score >= hits[1].score
    assert base.retrieve("x", k=0) == []
    reopened = ReferenceBase.open(base.save(tmp_path / "refs"))
    again = reopened.retrieve("what movies did [Tom Hanks] act in", k=2, mentions=["Tom Hanks"])
    assert [h.reference for h in again] == [h.reference for h in hits]


def test_save_and_reopen_with_embeddings_embeds_only_the_new_question(fake_openai, tmp_path
                                                                      ) -> None:
    embedder = OpenAIEmbeddings(base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    base = build_reference_base(_questions(), datasets=["toy"], split="dev", embedding=embedder,
                                size=6, clusters=3, seed=0)
    assert (base.manifest.embedding, base.manifest.model, base.manifest.dim) == \
        ("openai", "text-embedding-ada-002", 64)
    directory = base.save(tmp_path / "refs")
    assert sorted(p.name for p in directory.iterdir()) == [
        "manifest.json", "references.jsonl", "source_ids.txt", "vectors.f32"]
    assert (directory / "vectors.f32").stat().st_size == 6 * 64 * 4
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["datasets"] == ["toy"] and manifest["split"] == "dev"
    calls = len(fake_openai.requests)
    reopened = ReferenceBase.open(directory, embedder=embedder)
    assert [r.id for r in reopened] == [r.id for r in base]
    flat = [x for v in reopened.vectors for x in v]
    assert flat == pytest.approx([x for v in base.vectors for x in v], abs=1e-6)
    assert len(fake_openai.requests) == calls  # nothing embedded on opening
    hits = reopened.retrieve("when was the film [Heat 2] released", k=2,
                               mentions=["Heat 2"])
    assert [_template(h.reference) for h in hits] == ["release_year", "release_year"]
    new = fake_openai.requests[calls:]
    assert len(new) == 1 and new[0].body["input"] == ["when was the film [ENTITY] released"]


def test_reopening_refuses_another_model_a_wrong_format_and_a_truncated_file(fake_openai,
                                                                            tmp_path) -> None:
    embedder = OpenAIEmbeddings(base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    directory = build_reference_base(
        _questions(), datasets=["toy"], split="dev", embedding=embedder, size=6, clusters=3
    ).save(tmp_path / "refs")
    other = OpenAIEmbeddings("text-embedding-3-small", base_url=fake_openai.base_url,
                             api_key=fake_openai.api_key)
    with pytest.raises(ReferenceBaseError) as err:
        ReferenceBase.open(directory, embedder=other)
    assert err.value.reason == "model"
    blob = (directory / "vectors.f32").read_bytes()
    (directory / "vectors.f32").write_bytes(blob[:-4])
    with pytest.raises(ReferenceBaseError) as err:
        ReferenceBase.open(directory)
    assert err.value.reason == "corrupt"
    manifest = json.loads((directory / "manifest.json").read_text())
    (directory / "manifest.json").write_text(json.dumps({**manifest, "format": "other/9"}))
    with pytest.raises(ReferenceBaseError) as err:
        ReferenceBase.open(directory)
    assert err.value.reason == "format"
    with pytest.raises(ReferenceBaseError) as err:
        ReferenceBase.open(tmp_path / "nowhere")
    assert err.value.reason == "missing"


def test_saving_over_a_base_needs_overwrite(tmp_path) -> None:
    base = build_reference_base(_questions(), datasets=["toy"], split="dev", embedding="bm25",
                                size=3, clusters=3)
    base.save(tmp_path / "refs")
    with pytest.raises(ReferenceBaseError) as err:
        base.save(tmp_path / "refs")
    assert err.value.reason == "exists"
    base.save(tmp_path / "refs", overwrite=True)


def test_nothing_to_build_from_is_an_error() -> None:
    with pytest.raises(ReferenceBaseError) as err:
        build_reference_base([], datasets=["toy"], split="dev", embedding="bm25")
    assert err.value.reason == "empty"
    with pytest.raises(ReferenceBaseError) as err:
        build_reference_base(_questions(), datasets=["toy"], split="dev", embedding="glove")
    assert err.value.reason == "embedding"


# -- the leak guard -----------------------------------------------------------------------------

def test_evaluating_the_questions_a_base_was_built_from_is_refused(tmp_path) -> None:
    items = [EvalItem(id=q.id, question=q.question, entities={q.topic: q.topic},
                      answers=q.answers, program=(
                          f"add_fact({q.topic}, {q.path[0].lstrip('^')}, ?x)\nset_answer(?x)"))
             for q in _questions()]
    source = [i for i in items if id_part(i.id, 0.5)]
    built_from = [q for q in (labelled(i, dataset="toy") for i in source) if q is not None]
    base = build_reference_base(built_from, datasets=["toy"], split="dev", fraction=0.5,
                                source_ids=[i.id for i in source], embedding="bm25", size=3,
                                clusters=3)
    reopened = ReferenceBase.open(base.save(tmp_path / "refs"))
    with pytest.raises(ReferenceLeakError) as err:
        reopened.check_disjoint(i.id for i in items)
    assert err.value.count == len(source) and set(err.value.ids) <= {i.id for i in source}
    assert "toy dev, part 0.5" in err.value.source
    held_out = evaluation_part(items, 0.5)
    assert held_out and len(held_out) + len(source) == len(items)
    reopened.check_disjoint(i.id for i in held_out)  # the other part is fine


def test_auto_is_bm25_without_the_embed_extra_and_minilm_says_what_to_install(monkeypatch
                                                                               ) -> None:
    from pyql.agent.strategies.srp import references

    monkeypatch.setattr(references, "_minilm_installed", lambda: False)
    assert references.resolve_embedding("auto") == ("bm25", None)
    with pytest.raises(ReferenceBaseError) as err:
        references.resolve_embedding("minilm")
    assert err.value.reason == "embedding" and "embed" in str(err.value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the client is made, nothing is sent
    kind, embedder = references.resolve_embedding("openai:text-embedding-3-small")
    assert (kind, embedder.model) == ("openai", "text-embedding-3-small")
