"""Entity linking (pyql.agent.grounding.linking): exact, fuzzy and bracketed mentions, on the bundled movie
KB (generic profile, ``ex:`` ids) and on the MetaQA KB (the id is the label)."""

from __future__ import annotations

import pytest

from pyql.agent.grounding.linking import (
    Candidate,
    EntityLinker,
    LabelIndex,
    LabelLinker,
    Linking,
    bracketed,
    normalize,
    similarity,
)
from pyql.kb import OxigraphKB
from pyql.profiles import METAQA

# -- the index --------------------------------------------------------------------------------


def test_index_reads_the_profile_labels(movies_kb):
    index = LabelIndex.from_kb(movies_kb)
    entries = dict(index.entries())
    assert entries["ex:Christopher_Nolan"] == "Christopher Nolan"
    assert entries["ex:The_Dark_Knight"] == "The Dark Knight"
    assert all(kb_id.startswith("ex:") for kb_id in entries)
    assert len(index) == len(entries) == 20  # 6 films, 11 people, 3 languages
    assert index.max_words == 3


def test_paged_reading_gives_the_same_index(movies_kb):
    before = movies_kb.query_count
    paged = LabelIndex.from_kb(movies_kb, page_size=5)
    assert movies_kb.query_count - before == 5  # 20 labels: 4 full pages, then an empty one
    assert sorted(paged.entries()) == sorted(LabelIndex.from_kb(movies_kb).entries())
    assert not paged.truncated
    capped = LabelIndex.from_kb(movies_kb, page_size=5, limit=7)
    assert len(capped) == 7 and capped.truncated


def test_label_lang_filter():
    name = "<http://rdf.freebase.com/ns/type.object.name>"
    triples = [("m.01", '"Paris"@en'), ("m.01", '"Parigi"@it'), ("m.02", '"Texas"')]
    kb = OxigraphKB(profile="freebase")
    kb.load_bytes("".join(f"<http://rdf.freebase.com/ns/{mid}> {name} {label} .\n"
                          for mid, label in triples).encode(), format="ntriples")
    assert sorted(LabelIndex.from_kb(kb).entries()) == [("m.01", "Paris"), ("m.02", "Texas")]


def test_metaqa_profile_without_labels_uses_the_ids():
    def iri(kind: str, name: str) -> str:
        return f"<{METAQA.entity(name).iri if kind == 'e' else METAQA.relation(name).iri}>"

    kb = OxigraphKB(profile="metaqa")
    kb.load_bytes(
        f"{iri('e', 'Kismet')} {iri('r', 'directed_by')} {iri('e', 'William Dieterle')} .".encode(),
        format="ntriples",
    )
    index = LabelIndex.from_kb(kb)
    assert sorted(index.entries()) == [
        ("Kismet", "Kismet"), ("William Dieterle", "William Dieterle")]
    assert LabelLinker(index).link("who directed [Kismet]") == {"Kismet": "Kismet"}


def test_disk_cache(movies_kb, tmp_path, monkeypatch):
    cache = tmp_path / "labels.json.gz"
    built = LabelIndex.from_kb(movies_kb, cache=cache)
    assert cache.is_file()

    def no_queries(*args, **kwargs):
        raise AssertionError("the cached index must not query the KB")

    monkeypatch.setattr(movies_kb, "select", no_queries)
    assert LabelIndex.from_kb(movies_kb, cache=cache).entries() == built.entries()
    assert LabelIndex.load(cache, key="another KB") is None
    monkeypatch.undo()
    rebuilt = LabelIndex.from_kb(movies_kb, cache=cache, cache_key="v2")
    assert rebuilt.entries() == built.entries()
    assert LabelIndex.load(cache, key="v2") is not None
    cache.write_bytes(b"not gzip")
    assert LabelIndex.load(cache) is None


def test_normalize_and_similarity():
    assert normalize("The Dark-Knight’s  RETURN!") == "the dark knights return"
    assert normalize("Amélie") == "amelie"
    assert similarity("leonardo dicapprio", "leonardo dicaprio") > 0.9
    assert similarity("inceptoin", "inception") >= 0.8
    assert similarity("film silent", "silent film") == 0.0  # in order
    assert similarity("actor", "actors") == 0.0  # short words match exactly or not at all
    assert bracketed("who directed [ Kismet ] and [The Green Mile]") == [
        ("Kismet", 15, 21), ("The Green Mile", 29, 43)]


# -- linking on the movie KB ------------------------------------------------------------------


@pytest.fixture(scope="module")
def movies_linker(movies_kb) -> LabelLinker:
    return LabelLinker.from_kb(movies_kb)


def test_linker_is_an_entity_linker(movies_linker):
    assert isinstance(movies_linker, EntityLinker)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("which films did Christopher Nolan direct",
         {"Christopher Nolan": "ex:Christopher_Nolan"}),
        ("who directed the dark knight?", {"the dark knight": "ex:The_Dark_Knight"}),
        ("did Leonardo DiCaprio and Kate Winslet both star in Titanic",
         {"Leonardo DiCaprio": "ex:Leonardo_DiCaprio", "Kate Winslet": "ex:Kate_Winslet",
          "Titanic": "ex:Titanic"}),
        ("which films are in french?", {"french": "ex:French"}),
        ("what is the longest film of all", {}),
    ],
    ids=["person", "case-and-punctuation", "several", "language", "none"],
)
def test_exact(movies_linker, question, expected):
    linking = movies_linker.candidates(question)
    assert linking.entities == expected
    assert movies_linker.link(question) == expected
    for mention in linking.mentions:
        assert mention.source == "exact"
        assert question[mention.start:mention.end] == mention.text
        assert mention.best == Candidate(kb_id=expected[mention.text], label=mention.best.label,
                                         score=1.0, method="exact")


def test_exact_longest_first_and_stop_words():
    index = LabelIndex([("k1", "The Dark Knight"), ("k2", "The Dark Knight Rises"),
                        ("k3", "Knight"), ("the", "The"), ("of", "Of")])
    linker = LabelLinker(index, fuzzy=False)
    question = "is The Dark Knight Rises longer than The Dark Knight of the Knight"
    linking = linker.candidates(question)
    assert [(m.text, m.best.kb_id) for m in linking.mentions if m.best] == [
        ("The Dark Knight Rises", "k2"), ("The Dark Knight", "k1"), ("Knight", "k3")]
    assert linker.link("the of") == {}  # labels made only of stop words are not mentions


def test_lower_case_words_are_not_names_when_the_question_capitalises_names(movies_kb):
    index = LabelIndex.from_kb(movies_kb)
    question = "Did Christopher Nolan make films in english or in frensh"
    assert LabelLinker(index).link(question) == {"Christopher Nolan": "ex:Christopher_Nolan"}
    assert LabelLinker(index, use_case=False).link(question) == {
        "Christopher Nolan": "ex:Christopher_Nolan", "english": "ex:English",
        "frensh": "ex:French"}
    # a capital only at the start of the question says nothing about names
    assert LabelLinker(index).link("Did christopher nolan make films in english") == {
        "christopher nolan": "ex:Christopher_Nolan", "english": "ex:English"}


def test_exact_ambiguous_label_ranks_every_entity():
    index = LabelIndex([("ex:Paris_Texas", "Paris"), ("ex:Paris", "Paris"), ("ex:paris", "paris")])
    mention = LabelLinker(index).candidates("where is Paris").mentions[0]
    assert [c.kb_id for c in mention.candidates] == ["ex:Paris", "ex:Paris_Texas", "ex:paris"]
    assert {c.score for c in mention.candidates} == {1.0}


@pytest.mark.parametrize(
    ("question", "mention", "kb_id"),
    [
        ("which films star Leonardo DiCapprio", "Leonardo DiCapprio", "ex:Leonardo_DiCaprio"),
        ("who directed Inceptoin", "Inceptoin", "ex:Inception"),
        ("what did Christopher Nolen direct", "Christopher Nolen", "ex:Christopher_Nolan"),
        ("is Intersteller longer than Inception", "Intersteller", "ex:Interstellar"),
    ],
)
def test_fuzzy(movies_linker, question, mention, kb_id):
    linking = movies_linker.candidates(question)
    assert linking.entities[mention] == kb_id
    found = next(m for m in linking.mentions if m.text == mention)
    assert found.source == "fuzzy"
    best = found.best
    assert best is not None and best.method == "fuzzy"
    assert movies_linker.threshold <= best.score < 1.0
    scores = [c.score for c in found.candidates]
    assert scores == sorted(scores, reverse=True)


def test_fuzzy_threshold_and_switch(movies_kb):
    index = LabelIndex.from_kb(movies_kb)
    question = "which films star Leonardo DiCapprio"
    assert LabelLinker(index, threshold=0.99).link(question) == {}
    assert LabelLinker(index, fuzzy=False).link(question) == {}
    with pytest.raises(ValueError):
        LabelLinker(index, threshold=0)


def test_exact_beats_a_fuzzy_extension(movies_linker):
    # "Christopher Nolan direct" is close to the label too, but the exact span wins
    assert movies_linker.link("which films did Christopher Nolan direct after Inceptoin") == {
        "Christopher Nolan": "ex:Christopher_Nolan", "Inceptoin": "ex:Inception"}


def test_brackets(movies_linker):
    linking = movies_linker.candidates("who directed [Inception] and [Interstelar] and [Dune]")
    assert isinstance(linking, Linking)
    assert [m.source for m in linking.mentions] == ["bracket"] * 3
    assert linking.entities == {"Inception": "ex:Inception", "Interstelar": "ex:Interstellar"}
    inception, interstellar, dune = linking.mentions
    assert inception.best is not None and inception.best.method == "exact"
    assert interstellar.best is not None and interstellar.best.method == "fuzzy"
    assert dune.candidates == () and linking.unlinked == (dune,)
    # only the brackets are linked, even when other words are labels
    assert movies_linker.link("did [Titanic] win more than Inception") == {"Titanic": "ex:Titanic"}


# -- linking on MetaQA ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metaqa(pyql_data):
    from pyql.datasets.metaqa import load_kb, load_questions

    root = pyql_data / "metaqa"
    if not (root / "kb.txt").is_file():
        pytest.skip(f"no MetaQA kb.txt in {root}")
    kb = load_kb(root / "kb.txt")
    linker = LabelLinker(LabelIndex.from_kb(kb))
    items = []
    for hop in ("1-hop", "2-hop"):
        found = load_questions(root / hop / "qa_dev.txt", root / hop / "qa_dev_qtype.txt")
        items += [item for _, item in zip(range(40), found, strict=False)]
    return linker, items


def test_metaqa_index(metaqa):
    linker, _ = metaqa
    assert len(linker.index) > 40_000
    assert linker.index.exact("Kismet")[0].kb_id == "Kismet"  # the id is the label


def test_metaqa_brackets(metaqa):
    linker, items = metaqa
    for item in items:
        question = item.question.replace(item.topic, f"[{item.topic}]", 1)
        assert linker.link(question) == {item.topic: item.topic}, question


def test_metaqa_exact_without_brackets(metaqa):
    linker, items = metaqa
    sample = items[::3]
    found = sum(item.topic in linker.link(item.question).values() for item in sample)
    assert found >= 0.95 * len(sample)


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("what movies did Temuera Morisson act in", "Temuera Morrison"),
        ("what films did [Evelyn Venabel] act in", "Evelyn Venable"),
        ("who directed [Kismett]", "Kismet"),
    ],
)
def test_metaqa_fuzzy(metaqa, question, topic):
    linker, _ = metaqa
    assert topic in linker.link(question).values()
