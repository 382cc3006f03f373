"""The QueryAgent on real MetaQA dev questions (the full WikiMovies KB): scripted gold runs reach
the gold answers, and injected mistakes — a wrong relation, a missing get_relation, an invalid
action, a wrong arity — give their ERASER hint with guidelines on (the run still reaches the gold
answers after the correction) and the raw error, or the kept wrong step, with guidelines off.
Last, a CVT answer on the Figure 7 (Freebase) fixture gets KB207."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyql.agent import QueryAgent, ScriptedLLM
from pyql.agent.evaluation.datasets import select_indices
from pyql.agent.strategies.queryagent.prompts import RETRY_WORDING
from pyql.agent.strategies.queryagent.strategy import Result
from pyql.datasets import metaqa
from pyql.datasets.gold import score
from pyql.kb import OxigraphKB
from pyql.program import Call
from tests.guidelines.support import fixture_kb

#: questions per hop, drawn with SEED from each dev file
PER_HOP = 3
SEED = 7
#: a relation MetaQA does not have (a plausible guess of a model)
WRONG = "produced_by"


@pytest.fixture(scope="module")
def kb(pyql_data: Path) -> OxigraphKB:
    kb_txt = metaqa.kb_path(pyql_data)
    if not kb_txt.is_file():
        pytest.skip(f"MetaQA KB not found at {kb_txt}")
    return metaqa.load_kb(kb_txt)


def sample_questions(data_dir: Path) -> list[tuple[str, metaqa.MetaQAItem]]:
    """A seeded sample of dev questions per hop: (the question as written, with the topic in
    brackets like the prompt's example; the item)."""
    out = []
    for hops in (1, 2, 3):
        qa, qtype = metaqa.paths(data_dir, hops, "dev")
        if not qa.is_file():
            pytest.skip(f"MetaQA questions not found at {qa}")
        items = list(metaqa.load_questions(qa, qtype))
        raw = [line.partition("\t")[0] for line in qa.read_text(encoding="utf-8").splitlines()]
        for index in select_indices(len(items), sample=PER_HOP, seed=SEED):
            out.append((raw[index], items[index]))
    return out


@pytest.fixture(scope="module")
def questions(pyql_data: Path) -> list[tuple[str, metaqa.MetaQAItem]]:
    return sample_questions(pyql_data)


def thought(call: Call) -> str:
    args = [str(a) for a in call.args]
    return {
        "get_relation": lambda: f"Let us see the relations of {args[0]}.",
        "add_fact": lambda: f"The relation {args[1]} links {args[0]} and {args[2]}.",
        "add_filter": lambda: f"{args[2]} itself is not an answer.",
        "set_answer": lambda: f"{args[0]} holds the answers.",
        "execute": lambda: "This query represents the question, execute it.",
    }[call.name]()


def replies(calls: list[Call | str], start: int = 1) -> list[str]:
    """Agent-format replies, one per call, numbered from ``start``."""
    out = []
    for n, call in enumerate(calls, start):
        text = thought(call) if isinstance(call, Call) else "Let us try this."
        out.append(f"Thought {n} : {text}\nAction {n} : {call}")
    return out


def run(kb: OxigraphKB, question: str, item: metaqa.MetaQAItem, script: list[str],
        guidelines: bool | None) -> Result:
    llm = ScriptedLLM(script)
    result = QueryAgent(llm, kb, guidelines=guidelines).run(question, {item.topic: item.topic})
    assert llm.remaining == 0
    # the prompt: the question as written and its entity linking, after the shared prefix
    assert llm.calls[0]["messages"][1]["content"] == (
        f"Question : {question}\nEntity : {{{item.topic}: {item.topic}}}")
    return result


# -- gold runs ----------------------------------------------------------------------------------


def test_sample_covers_every_hop(questions: list[tuple[str, metaqa.MetaQAItem]]) -> None:
    assert [item.hops for _, item in questions] == [1] * PER_HOP + [2] * PER_HOP + [3] * PER_HOP
    assert all(f"[{item.topic}]" in question for question, item in questions)


@pytest.mark.parametrize("index", range(3 * PER_HOP))
def test_gold_program_as_replies_reaches_the_gold_answers(
        kb: OxigraphKB, questions: list[tuple[str, metaqa.MetaQAItem]], index: int) -> None:
    question, item = questions[index]
    program = metaqa.gold_program(item)
    result = run(kb, question, item, replies(list(program)), guidelines=True)
    assert result.finished and result.stop_reason == "execute"
    assert [s.action for s in result.steps] == [str(c) for c in program]
    assert all(s.accepted and s.hint is None for s in result.steps)  # no false alarm
    assert score(result.answers, item.answers).hit1 == 1.0
    assert str(result.program) == str(program)


# -- injected mistakes --------------------------------------------------------------------------


def two_hop(questions: list[tuple[str, metaqa.MetaQAItem]]) -> tuple[str, metaqa.MetaQAItem]:
    return next((q, item) for q, item in questions if item.hops == 2)


def injected(item: metaqa.MetaQAItem, mistake: str) -> tuple[list[str], int]:
    """The gold replies with one wrong step, and that step's number.

    ``wrong_relation``: after get_relation(?x1), a fact with a relation ?x1 does not have.
    ``missing_get_relation``: the same fact before get_relation(?x1) was ever called.
    ``invalid_action``: a function that does not exist. ``wrong_arity``: add_fact with two
    arguments. In each case the next reply is the gold step the mistake stood for.
    """
    calls: list[Call | str] = list(metaqa.gold_program(item))
    second_lookup = [i for i, c in enumerate(calls)
                     if isinstance(c, Call) and c.name == "get_relation"][1]
    second_fact = next(i for i, c in enumerate(calls)
                       if isinstance(c, Call) and c.name == "add_fact" and i > second_lookup)
    fact = calls[second_fact]
    assert isinstance(fact, Call)
    relation = str(fact.args[1])
    wrong = {
        "wrong_relation": (second_fact, f"add_fact(?x1, {WRONG}, ?x2)"),
        "missing_get_relation": (second_lookup, f"add_fact(?x1, {WRONG}, ?x2)"),
        "invalid_action": (second_fact, f"search(?x1, {relation})"),
        "wrong_arity": (second_fact, f"add_fact(?x1, {relation})"),
    }
    at, action = wrong[mistake]
    calls.insert(at, action)
    return replies(calls), at + 1


def run_with_mistake(kb: OxigraphKB, questions: list[tuple[str, metaqa.MetaQAItem]],
                     mistake: str, *, guidelines: bool | None
                     ) -> tuple[metaqa.MetaQAItem, int, Result]:
    """A two-hop question's gold run with ``mistake`` injected: (item, the mistake's step, run)."""
    question, item = two_hop(questions)
    script, n = injected(item, mistake)
    return item, n, run(kb, question, item, script, guidelines=guidelines)


HINTS = {"wrong_relation": "KB201", "missing_get_relation": "KB203", "invalid_action": "PY102",
         "wrong_arity": "PY104"}


@pytest.mark.parametrize("mistake", list(HINTS))
def test_injected_mistake_gets_its_hint_and_the_run_recovers(
        kb: OxigraphKB, questions: list[tuple[str, metaqa.MetaQAItem]], mistake: str) -> None:
    item, n, result = run_with_mistake(kb, questions, mistake, guidelines=True)
    hinted = [s for s in result.steps if s.hint is not None]
    assert [(s.n, s.hint) for s in hinted] == [(n, HINTS[mistake])]
    wrong = hinted[0]
    assert not wrong.accepted and wrong.status == "hint"
    assert wrong.observation.endswith(RETRY_WORDING.format(n=n + 1))
    if mistake in ("wrong_relation", "missing_get_relation"):
        assert WRONG in wrong.observation
    assert result.usage.guideline_triggers == {HINTS[mistake]: 1}
    # rolled back: the program is the gold program, and the run reaches the gold answers
    assert str(result.program) == str(metaqa.gold_program(item))
    assert result.finished and score(result.answers, item.answers).hit1 == 1.0


RAW_ERRORS = {"invalid_action": "Error: unknown function 'search'",
              "wrong_arity": "Error: add_fact(head, relation, tail) takes 3 arguments, got 2"}


@pytest.mark.parametrize("mistake", list(HINTS))
def test_injected_mistake_without_guidelines(
        kb: OxigraphKB, questions: list[tuple[str, metaqa.MetaQAItem]], mistake: str) -> None:
    item, n, result = run_with_mistake(kb, questions, mistake, guidelines=None)
    wrong = result.steps[n - 1]
    assert all(s.hint is None for s in result.steps) and result.usage.guideline_triggers == {}
    assert "re-generate" not in wrong.observation
    assert result.finished
    if mistake in RAW_ERRORS:  # the raw error; nothing was kept, the gold answers are reached
        assert wrong.observation.startswith(RAW_ERRORS[mistake])
        assert not wrong.accepted and wrong.status == "error"
        assert score(result.answers, item.answers).hit1 == 1.0
    else:  # the wrong fact is kept: the query is empty from then on
        assert wrong.observation == "The query result is empty."
        assert wrong.accepted and wrong.status == "empty"
        assert WRONG in str(result.program) and WRONG in result.query
        assert result.answers == ()


# -- a CVT answer (Freebase, the Figure 7 fixture) ------------------------------------------------

PANTHERS = {"florida panthers": "m.0j8js"}
CVT_STEPS = [
    "get_relation(m.0j8js)",
    "add_fact(m.0j8js, sports.sports_team.venue, ?place)",
    "set_answer(?place)",  # ?place holds the venue CVT nodes
]
CORRECTED = [
    "get_relation(?place)",
    "add_fact(?place, sports.team_venue_relationship.venue, ?arena)",
    "set_answer(?arena)",
    "execute()",
]


def _text(steps: list[str], start: int = 1) -> list[str]:
    return [f"Thought {n} : next step.\nAction {n} : {a}" for n, a in enumerate(steps, start)]


def test_cvt_answer_gets_kb207_and_the_corrected_run_succeeds() -> None:
    llm = ScriptedLLM(_text(CVT_STEPS + CORRECTED))
    result = QueryAgent(llm, fixture_kb("figure7"), guidelines=True).run(
        "where do florida panthers play", PANTHERS)
    assert [s.hint for s in result.steps] == [None, None, "KB207", None, None, None, None]
    cvt = result.steps[2]
    assert not cvt.accepted and "UnName_Entity" in cvt.observation
    assert "get_relation(?place)" in cvt.observation  # the hint names the way out
    assert cvt.observation.endswith(RETRY_WORDING.format(n=4))
    assert result.finished and set(result.answers) == {"m.0bbt", "m.0miaa"}
    assert "set_answer(?place)" not in str(result.program)


def test_cvt_answer_without_guidelines_returns_the_cvt_nodes() -> None:
    llm = ScriptedLLM(_text([*CVT_STEPS, "execute()"]))
    result = QueryAgent(llm, fixture_kb("figure7"), guidelines=None).run(
        "where do florida panthers play", PANTHERS)
    assert all(s.hint is None and s.accepted for s in result.steps)
    assert result.finished and set(result.answers) == {"m.0ven1", "m.0ven2"}
