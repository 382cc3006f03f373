"""Conservatism: correct programs fire no guideline.

- MetaQA-style gold programs (1-, 2- and 3-hop, with exclusion filters and counts) on a small
  MetaQA-profile fixture: no hint, and the dataset's answers; and the agent-style gold programs of
  :func:`pyql.datasets.metaqa.gold_program` for a sample of the dev questions on the full MetaQA
  KB: no hint.
- WebQSP author programs (field ``PyQL`` of the test set): every one of them runs on a small
  Freebase fixture without a single Python or reasoning-memory hint (most return nothing there:
  the fixture only holds the facts of a few questions); the few whose facts the fixture holds
  fire no guideline at all and return the gold answers.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from pyql import Program, Session
from tests.guidelines.support import builtin, run_steps, webqsp_with_programs

METAQA = [
    # (question as in MetaQA dev, entity table, gold program, answers)
    ("what movies did [Evelyn Venable] act in", {"Evelyn Venable": "Evelyn Venable"},
     ["add_fact(?film, starred_actors, Evelyn Venable)", "set_answer(?film)"],
     {"Alice Adams", "Death Takes a Holiday", "The Little Colonel"}),
    ("what are the languages spoken in the films directed by [Joel Zwick]",
     {"Joel Zwick": "Joel Zwick"},
     ["add_fact(?film, directed_by, Joel Zwick)", "add_fact(?film, in_language, ?language)",
      "set_answer(?language)"],
     {"Greek"}),
    ("the films that share directors with the film [Black Snake Moan] were in which genres",
     {"Black Snake Moan": "Black Snake Moan"},
     ["add_fact(Black Snake Moan, directed_by, ?director)",
      "add_fact(?film, directed_by, ?director)", "add_filter(?film, !=, Black Snake Moan)",
      "add_fact(?film, has_genre, ?genre)", "set_answer(?genre)"],
     {"Drama", "Music"}),
    ("what are the languages spoken in the films whose directors also directed [Police]",
     {"Police": "Police"},
     ["add_filter(?film, !=, Police)", "add_fact(Police, directed_by, ?director)",
      "add_fact(?film, directed_by, ?director)", "add_fact(?film, in_language, ?language)",
      "set_answer(?language)"],
     {"French"}),
    ("how many films did [Evelyn Venable] act in", {"Evelyn Venable": "Evelyn Venable"},
     ["add_fact(?film, starred_actors, Evelyn Venable)", "add_count(?film, ?n)"],
     {"3"}),
    ("who directed [Kismet] (explored first, as the agent does)", {"Kismet": "Kismet"},
     ["get_relation(Kismet)", "add_fact(Kismet, directed_by, ?director)",
      "get_relation(?director)", "set_answer(?director)"],
     {"William Dieterle"}),
]


@pytest.mark.parametrize(("question", "entities", "program", "answers"), METAQA,
                         ids=[q[0][:40] for q in METAQA])
def test_metaqa_gold_programs_fire_nothing(
    question: str, entities: dict[str, str], program: list[str], answers: set[str]
) -> None:
    obs = run_steps([*program, "execute()"], kb="metaqa", entities=entities)
    assert [o.hint for o in obs] == [None] * len(obs)
    assert all(o.ok for o in obs)
    assert set(obs[-1].answers or ()) == answers


def test_metaqa_dataset_gold_programs_fire_nothing(pyql_data: Path) -> None:
    from pyql.datasets import metaqa

    folder = pyql_data / "metaqa"
    if not (folder / "kb.txt").exists():
        pytest.skip("MetaQA data not found")
    kb = metaqa.load_kb(folder / "kb.txt")
    registry = builtin().select()  # a fresh copy: its stats count only this test
    steps = 0
    for hops in (1, 2, 3):
        qa = folder / f"{hops}-hop"
        items = metaqa.load_questions(qa / "qa_dev.txt", qa / "qa_dev_qtype.txt")
        for i, item in enumerate(itertools.islice(items, 0, 4000, 80)):
            exclusion = "original" if i % 2 else "same_type"
            session = Session(kb, {item.topic: item.topic}, guidelines=registry)
            for obs in session.run_program(metaqa.gold_program(item, topic_exclusion=exclusion)):
                assert obs.hint is None, (item.question, obs.action, obs.hint.message)
                steps += 1
    assert registry.stats.total == 0 and steps > 600


def test_webqsp_gold_programs_fire_no_python_or_memory_guideline(pyql_data: Path) -> None:
    questions = webqsp_with_programs()
    assert len(questions) > 1500
    registry = builtin().select(disable=[g.code for g in builtin() if "kb" in g.needs])
    fired: dict[str, tuple[str, str]] = {}
    for q in questions:
        program = [str(c) for c in Program.parse(q["PyQL"])]
        for o in run_steps(program, kb="webqsp", entities=q["entity_linking"],
                           registry=registry):
            assert o.feedback.python.status == "ok", (q["qid"], o.action, o.error)
            if o.hint is not None:
                fired.setdefault(o.hint.code, (q["qid"], o.action))
    assert fired == {}
    assert registry.stats.total == 0 and registry.stats.steps > 6000


WITH_RESULTS = ["WebQTest-0", "WebQTest-6", "WebQTest-9", "WebQTest-12", "WebQTest-110",
                "WebQTest-423", "WebQTest-523"]


def test_webqsp_gold_programs_with_results_fire_nothing(pyql_data: Path) -> None:
    by_id = {q["qid"]: q for q in webqsp_with_programs()}
    for qid in WITH_RESULTS:
        q = by_id[qid]
        program = [str(c) for c in Program.parse(q["PyQL"])]
        obs = run_steps([*program, "execute()"], kb="webqsp", entities=q["entity_linking"])
        assert [(o.action, o.hint) for o in obs if o.hint] == [], qid
        assert set(obs[-1].answers or ()) == set(q["answer"]), qid
