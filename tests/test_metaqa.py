"""MetaQA: KB loader, question reader, gold programs and gold-program fidelity."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyql import Program, Session
from pyql.datasets import gold, metaqa
from pyql.datasets.metaqa import MetaQAItem
from pyql.kb import OxigraphKB
from pyql.profiles import METAQA, RDFS
from pyql.program import Call
from pyql.syntax import AtomKind

KB_LINES = 133_582
KB_ENTITIES = 43_234
DEV_SIZES = {1: 9_992, 2: 14_872, 3: 14_274}
#: full-dev figures of the gold programs (topic exclusion "same_type"), see benchmarks/README.md
CEILING_F1 = {1: 0.9815, 2: 0.9918, 3: 1.0}
SAMPLE = 200


@pytest.fixture(scope="module")
def metaqa_dir(pyql_data: Path) -> Path:
    path = metaqa.metaqa_dir(pyql_data)
    if not (path / "kb.txt").is_file():
        pytest.skip(f"MetaQA not found under {pyql_data}")
    return path


@pytest.fixture(scope="module")
def kb(metaqa_dir: Path) -> Iterator[OxigraphKB]:
    store = metaqa.load_kb(metaqa_dir / "kb.txt")
    yield store
    store.close()


@pytest.fixture(scope="module")
def graph(metaqa_dir: Path) -> dict[tuple[str, str, bool], set[str]]:
    """kb.txt as plain dicts, independent of pyql: (node, relation, forward) -> neighbours."""
    out: dict[tuple[str, str, bool], set[str]] = defaultdict(set)
    with (metaqa_dir / "kb.txt").open(encoding="utf-8") as handle:
        for line in handle:
            s, r, o = line.rstrip("\n").split("|")
            out[(s, r, True)].add(o)
            out[(o, r, False)].add(s)
    return out


def reference_answers(graph: dict[tuple[str, str, bool], set[str]], item: MetaQAItem) -> set[str]:
    """Follow the question type in plain Python, dropping the topic at hops of its own type."""
    topic_type, steps = metaqa.relation_path(item.qtype)
    nodes = {item.topic}
    for step in steps:
        nodes = {n for node in nodes for n in graph.get((node, step.relation, step.forward), ())}
        if step.reaches.rstrip("s") == topic_type.rstrip("s"):
            nodes.discard(item.topic)
    return nodes


# -- KB -----------------------------------------------------------------------------------------
def test_kb_counts(kb: OxigraphKB) -> None:
    assert len(kb) == KB_LINES + KB_ENTITIES
    rs = kb.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s <{RDFS}label> ?l }}")
    assert int(rs.rows[0][0].lexical) == KB_ENTITIES
    assert kb.profile is METAQA


def test_kb_known_fact(kb: OxigraphKB) -> None:
    s = Session(kb, entities={"Kismet": "Kismet"})
    obs = s.run("add_fact(Kismet, directed_by, ?director)")
    assert obs.values["?director"].values == ("William Dieterle",)
    label = kb.select(f'SELECT ?e WHERE {{ ?e <{RDFS}label> "Sex, Lies, and Videotape" }}')
    assert label.rows[0][0].short == "Sex, Lies, and Videotape"


def _write_kb(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


ODD_KB = [
    'Say "Cheese"|directed_by|Back\\slash',
    "'night, Mother|starred_actors|Anne Bancroft",
    "1984|release_year|1956",
    "x1|has_genre|Drama",
    "Amélie|in_language|French",
    "100% Arabica|has_tags|50/50 <odd> {chars}",
]


def test_load_kb_escapes_odd_labels(tmp_path: Path) -> None:
    kb = metaqa.load_kb(_write_kb(tmp_path / "kb.txt", ODD_KB))
    assert len(kb) == len(ODD_KB) + 12
    rows = kb.select(f"SELECT ?e ?l WHERE {{ ?e <{RDFS}label> ?l }}").rows
    labels = {e.short: lit.lexical for e, lit in rows}
    assert labels["Back\\slash"] == "Back\\slash"
    assert labels['Say "Cheese"'] == 'Say "Cheese"'
    assert labels["50/50 <odd> {chars}"] == "50/50 <odd> {chars}"
    for topic, relation, expected in [
        ('Say "Cheese"', "directed_by", "Back\\slash"),
        ("'night, Mother", "starred_actors", "Anne Bancroft"),
        ("1984", "release_year", "1956"),
        ("x1", "has_genre", "Drama"),
        ("100% Arabica", "has_tags", "50/50 <odd> {chars}"),
    ]:
        item = MetaQAItem(id="t", question="q", topic=topic, answers=(expected,),
                          qtype={"directed_by": "movie_to_director",
                                 "starred_actors": "movie_to_actor",
                                 "release_year": "movie_to_year", "has_genre": "movie_to_genre",
                                 "has_tags": "movie_to_tags"}[relation], hops=1)
        program = metaqa.gold_program(item)
        assert Program.parse(str(program)) == program
        answers, error, _ = gold.run_program(kb, program, {topic: topic})
        assert error is None and answers == (expected,), (topic, str(program))


def test_load_kb_store_dir_reopens_and_rebuilds(tmp_path: Path) -> None:
    source = _write_kb(tmp_path / "kb.txt", ODD_KB[:3])
    store_dir = tmp_path / "store"
    first = metaqa.load_kb(source, store_dir=store_dir)
    count = len(first)
    del first
    manifest = (store_dir / "manifest.json").read_text()
    assert f'"triples": {count}' in manifest
    again = metaqa.load_kb(source, store_dir=store_dir)
    assert len(again) == count and again.read_only
    again.close()
    del again
    _write_kb(source, ODD_KB)  # the source changed: the store is rebuilt
    rebuilt = metaqa.load_kb(source, store_dir=store_dir)
    assert len(rebuilt) == len(ODD_KB) + 12


# -- questions ----------------------------------------------------------------------------------
def test_load_questions(metaqa_dir: Path) -> None:
    for hop, size in DEV_SIZES.items():
        items = list(metaqa.load_questions(*metaqa.paths(metaqa_dir, hop, "dev")))
        assert len(items) == size
        assert all(i.hops == hop and "[" not in i.question and i.answers for i in items)
    first = next(metaqa.load_questions(*metaqa.paths(metaqa_dir, 1, "dev")))
    assert first == MetaQAItem(
        id="1hop-dev-0", question="what movies did Temuera Morrison act in",
        topic="Temuera Morrison", answers=("Once Were Warriors", "Tracker", "River Queen"),
        qtype="actor_to_movie", hops=1,
    )
    ntm = next(metaqa.load_questions(*metaqa.paths(metaqa_dir, 1, "dev", ntm=True)))
    assert ntm.id == "1hop-dev-ntm-0" and ntm.topic == first.topic


def test_paths_accept_the_metaqa_dir_or_its_parent(metaqa_dir: Path) -> None:
    assert metaqa.paths(metaqa_dir.parent, 2) == metaqa.paths(metaqa_dir, 2)
    assert metaqa.kb_path(metaqa_dir.parent) == metaqa_dir / "kb.txt"


# -- gold programs ------------------------------------------------------------------------------
def test_gold_program_text() -> None:
    item = MetaQAItem(id="t", question="q", topic="Kismet", answers=("x",),
                      qtype="movie_to_director_to_movie_to_language", hops=3)
    assert str(metaqa.gold_program(item)) == "\n".join([
        "get_relation(Kismet)",
        "add_fact(Kismet, directed_by, ?x1)",
        "get_relation(?x1)",
        "add_fact(?x2, directed_by, ?x1)",
        "add_filter(?x2, !=, Kismet)",
        "get_relation(?x2)",
        "add_fact(?x2, in_language, ?x3)",
        "set_answer(?x3)",
        "execute()",
    ])
    original = metaqa.gold_program(item, topic_exclusion="original")
    assert sum(c.name == "add_filter" for c in original) == 3
    assert not any(c.name == "add_filter"
                   for c in metaqa.gold_program(item, topic_exclusion="none"))


@pytest.mark.parametrize("label, quoted", [
    ("Kismet", False), ("Sex, Lies, and Videotape", True), ("1984", True), ("x12", True),
    ("Ocean's Eleven", True), ("What? (1972)", True), ("?x", True), ("21 Jump Street", False),
])
def test_topic_atom(label: str, quoted: bool) -> None:
    atom = metaqa.topic_atom(label)
    assert (atom.kind is AtomKind.STRING) is quoted and atom.value == label
    call = Call.of("get_relation", atom)
    assert Call.parse(str(call)) == call


def test_every_dev_qtype_has_a_path_and_programs_round_trip(metaqa_dir: Path) -> None:
    rng = random.Random(0)
    for hop in DEV_SIZES:
        items = list(metaqa.load_questions(*metaqa.paths(metaqa_dir, hop, "dev")))
        for qtype in {i.qtype for i in items}:
            _, steps = metaqa.relation_path(qtype)
            assert len(steps) == hop
        odd = [i for i in items if re.search(r"[,()'\"]|^\d|^x\d+$", i.topic)]
        for item in odd + rng.sample(items, 300):
            program = metaqa.gold_program(item)
            assert Program.parse(str(program)) == program


def test_unknown_qtype() -> None:
    with pytest.raises(ValueError, match="unknown hop"):
        metaqa.relation_path("movie_to_budget")


# -- fidelity -----------------------------------------------------------------------------------
@pytest.mark.parametrize("hop", [1, 2, 3])
def test_fidelity_sample(
    hop: int, kb: OxigraphKB, metaqa_dir: Path,
    graph: dict[tuple[str, str, bool], set[str]],
) -> None:
    report = gold.metaqa_fidelity(metaqa_dir, hops=(hop,), sample=SAMPLE, seed=hop, kb=kb,
                                  keep_results=True)
    h = report["hops"][hop]
    assert h["n"] == SAMPLE and h["errors"] == 0
    assert h["hit1"] == 1.0
    assert h["gold_empty"] == 0 and f"0 of {SAMPLE} ({hop}-hop)" in gold.format_table(report)
    # every question's answers equal the plain-Python path following of kb.txt ...
    items = {i.id: i for i in metaqa.load_questions(*metaqa.paths(metaqa_dir, hop, "dev"))}
    expected = []
    for result in report["results"][hop]:
        item = items[result.id]
        reference = reference_answers(graph, item)
        assert set(result.predicted) == reference, item
        expected.append(gold.score(reference, item.answers))
    # ... so the scores are exactly the reference's, and close to the full-dev figure
    assert h["f1"] == pytest.approx(sum(s.f1 for s in expected) / SAMPLE)
    assert h["top1"] == pytest.approx(sum(s.top1 for s in expected) / SAMPLE)
    assert h["f1"] >= CEILING_F1[hop] - 0.02
    if hop == 3:
        assert h["top1"] == 1.0 and h["f1"] == 1.0


def test_fidelity_original_rule_reproduces_2hop_gold(kb: OxigraphKB, metaqa_dir: Path) -> None:
    report = gold.metaqa_fidelity(metaqa_dir, hops=(2,), sample=100, seed=7, kb=kb,
                                  topic_exclusion="original")
    assert report["hops"][2]["exact"] == 1.0
    assert "Hit@1" in gold.format_table(report)
