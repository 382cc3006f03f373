"""NoisyGoldLLM: deterministic injections of the paper's hallucination types, their hints and
corrections, and the ablation's bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from pyql.agent import QueryAgent
from pyql.agent.evaluation.noisy import (
    ADDRESSED_BY,
    INJECTION_TYPES,
    SILENT_TYPES,
    Injection,
    NoisyGoldLLM,
    summarise,
)
from pyql.agent.evaluation.records import item_seed
from pyql.program import TOOLSETS, Call
from tests.guidelines.support import builtin

QUESTION = "which person directed the movies written by John Godey"
ENTITIES = {"John Godey": "John Godey"}
TWO_HOP = """get_relation(John Godey)
add_fact(?x1, written_by, John Godey)
get_relation(?x1)
add_fact(?x1, directed_by, ?x2)
set_answer(?x2)
execute()"""
DIRECTORS = {"Walter Hill", "Joseph Sargent", "Jerry Paris"}
ONE_HOP = """get_relation(John Godey)
add_fact(?x1, written_by, John Godey)
set_answer(?x1)
execute()"""
MOVIES = {"Johnny Handsome", "Never a Dull Moment", "The Taking of Pelham One Two Three"}
PANTHERS = """get_relation(m.0j8js)
add_fact(m.0j8js, sports.sports_team.venue, ?place)
get_relation(?place)
add_fact(?place, sports.team_venue_relationship.venue, ?arena)
set_answer(?arena)
execute()"""
SQL = """add_condition(Position, =, Center)
add_condition("No.", >, 18)
set_answer(Player, None)
execute()"""


def run(llm: NoisyGoldLLM, backend: Any, *, eraser: bool = True, question: str = QUESTION,
        entities: dict[str, str] | None = None, mode: str = "text", table: str | None = None
        ) -> Any:
    agent = QueryAgent(llm, backend, guidelines=True if eraser else None, max_steps=25,
                       mode=mode, table=table)  # type: ignore[arg-type]
    result = agent.run(question, ENTITIES if entities is None else entities, table=table)
    llm.reconcile(result.trajectory)
    return result


# -- determinism ---------------------------------------------------------------------------------


def test_same_seed_same_injections(movies: Any) -> None:
    runs = []
    for _ in range(2):
        llm = NoisyGoldLLM(TWO_HOP, rate=0.5, seed=7)
        result = run(llm, movies)
        runs.append(([i.model_dump() for i in llm.injections], [s.action for s in result.steps]))
    assert runs[0] == runs[1]
    assert runs[0][0], "rate 0.5 over six calls injects something with this seed"
    others = {tuple(s.action for s in run(NoisyGoldLLM(TWO_HOP, rate=0.5, seed=s), movies).steps)
              for s in range(8)}
    assert len(others) > 1, "different seeds make different mistakes"


def test_rate_zero_replays_gold(movies: Any) -> None:
    llm = NoisyGoldLLM(TWO_HOP, rate=0.0, seed=0)
    result = run(llm, movies)
    assert [s.action for s in result.steps] == TWO_HOP.splitlines()
    assert set(result.answers) == DIRECTORS and not llm.injections


def test_item_seed_is_stable_and_validation() -> None:
    assert item_seed(0, "a") == item_seed(0, "a") != item_seed(1, "a")
    with pytest.raises(ValueError, match="rate"):
        NoisyGoldLLM(ONE_HOP, rate=1.5, seed=0)
    with pytest.raises(ValueError, match="unknown injection"):
        NoisyGoldLLM(ONE_HOP, rate=0.1, seed=0, types=["made_up"])


# -- each type makes the intended wrong step ------------------------------------------------------


def _first(kind: str, program: str, backend: Any, **kwargs: Any) -> tuple[Injection, Any]:
    tools = kwargs.pop("tools", "sparql")
    llm = NoisyGoldLLM(program, rate=1.0, seed=0, types=[kind], tools=tools)
    result = run(llm, backend, **kwargs)
    assert llm.injections, f"{kind} was not injected"
    return llm.injections[0], result


def test_wrong_relation_takes_another_listed_relation(movies: Any) -> None:
    llm = NoisyGoldLLM(TWO_HOP, rate=1.0, seed=0, types=["wrong_relation"])
    run(llm, movies)
    listed = next(i for i in llm.injections if i.gold_index == 3)
    wrong = Call.parse(listed.action)
    assert listed.detail == "listed" and wrong.name == "add_fact"
    assert str(wrong.args[0]) == "?x1" and str(wrong.args[2]) == "?x2"
    assert wrong.args[1].value in {"has_genre", "release_year", "starred_actors", "written_by"}
    # John Godey's own list has only the gold relation: a plausible MetaQA relation instead
    guessed = next(i for i in llm.injections if i.gold_index == 1)
    assert guessed.detail == "profile" and "written_by" not in guessed.action


def test_reversed_direction_swaps_head_and_tail(movies: Any) -> None:
    inj, _ = _first("reversed_direction", TWO_HOP, movies)
    assert inj.action == "add_fact(John Godey, written_by, ?x1)"
    assert inj.gold == "add_fact(?x1, written_by, John Godey)"


def test_missing_get_relation_skips_to_an_unexplored_fact(movies: Any) -> None:
    inj, result = _first("missing_get_relation", ONE_HOP, movies)
    wrong = Call.parse(inj.action)
    assert inj.step == 1 and inj.gold == "get_relation(John Godey)"
    assert wrong.name == "add_fact" and str(wrong.args[2]) == "John Godey"
    assert wrong.args[1].value != "written_by"
    assert not result.steps[0].action.startswith("get_relation")


def test_invalid_action_and_wrong_arity(movies: Any) -> None:
    inj, _ = _first("invalid_action", ONE_HOP, movies)
    assert inj.action == "find_relation(John Godey)"
    assert inj.action.split("(")[0] not in TOOLSETS["sparql"]
    inj, _ = _first("wrong_arity", ONE_HOP, movies)
    assert inj.action == "get_relation()"
    llm = NoisyGoldLLM(ONE_HOP, rate=1.0, seed=0, types=["wrong_arity"])
    run(llm, movies)
    assert [i.action for i in llm.injections][-1] == "execute(?x1)"  # arity 0: one too many


def test_label_instead_of_id_writes_a_shown_value(movies: Any) -> None:
    inj, _ = _first("label_instead_of_id", ONE_HOP, movies)
    assert inj.gold == "set_answer(?x1)"
    assert Call.parse(inj.action).args[0].value in MOVIES


def test_cvt_answer_only_where_a_cvt_is_shown(movies: Any, panthers: Any) -> None:
    inj, result = _first("cvt_answer", PANTHERS, panthers, question="where do florida panthers play",
                         entities={"florida panthers": "m.0j8js"})
    assert (inj.action, inj.gold) == ("set_answer(?place)", "get_relation(?place)")
    assert inj.code == "KB207" and inj.corrected
    assert set(result.answers) == {"m.0bbt", "m.0miaa"}
    llm = NoisyGoldLLM(TWO_HOP, rate=1.0, seed=0, types=["cvt_answer"])
    run(llm, movies)
    assert not llm.injections, "MetaQA has no compound nodes"


def test_premature_execute(movies: Any) -> None:
    inj, result = _first("premature_execute", TWO_HOP, movies)
    assert inj.action == "execute()" and inj.gold_index == 2  # after the first fact
    # one variable: execute() is accepted, the run ends on the intermediate movies, no hint
    assert inj.outcome == "ended" and inj.hint_fired is False
    assert set(result.answers) == MOVIES


def test_sql_injections(players: Any) -> None:
    kwargs: dict[str, Any] = {"tools": "sql", "question": "which center wears a number above 18",
                              "entities": {}, "table": "players"}
    inj, _ = _first("wrong_relation", SQL, players, **kwargs)
    assert Call.parse(inj.action, "sql").args[0].value != "Position"
    inj, _ = _first("label_instead_of_id", SQL, players, **kwargs)
    assert inj.detail in ("column_variant", "value_case")
    inj, result = _first("premature_execute", SQL, players, **kwargs)
    assert inj.action == "execute()" and inj.code == "DB105" and inj.corrected
    assert result.answers == ("Aleksandar Radojević",)
    inj, _ = _first("reversed_direction", SQL, players, **kwargs)
    assert inj.action == 'add_condition("No.", <, 18)'


# -- hints and corrections -------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "program", "codes"), [
    ("wrong_relation", ONE_HOP, {"KB201"}),
    ("missing_get_relation", ONE_HOP, {"KB203"}),
    ("invalid_action", TWO_HOP, {"PY102"}),
    ("wrong_arity", TWO_HOP, {"PY104"}),
])
def test_eraser_hints_and_the_run_reaches_gold(movies: Any, kind: str, program: str,
                                              codes: set[str]) -> None:
    llm = NoisyGoldLLM(program, rate=1.0, seed=0, types=[kind])
    result = run(llm, movies)
    assert llm.injections
    for inj in llm.injections:
        assert inj.hint_fired and inj.code in codes and inj.code in ADDRESSED_BY[kind]
        assert inj.hint_code == inj.trajectory_code  # the observed step's code
        assert inj.corrected and inj.outcome == "corrected"
        nxt = result.steps[inj.step]  # the step after the mistake is the gold call
        assert nxt.action == inj.gold and nxt.accepted
    assert set(result.answers) == (MOVIES if program == ONE_HOP else DIRECTORS)
    assert result.finished


def test_without_eraser_invalid_action_shows_the_raw_error(movies: Any) -> None:
    llm = NoisyGoldLLM(ONE_HOP, rate=1.0, seed=0, types=["invalid_action"])
    result = run(llm, movies, eraser=False)
    first = result.steps[0]
    assert first.hint is None and first.observation.startswith("Error: unknown function")
    assert not first.accepted and first.error is not None
    inj = llm.injections[0]
    assert inj.hint_fired is False and inj.outcome == "retried" and not inj.corrected
    assert result.steps[1].action == "get_relation(John Godey)"  # the session rejected it
    assert set(result.answers) == MOVIES


def test_without_eraser_an_accepted_mistake_stays(movies: Any) -> None:
    llm = NoisyGoldLLM(ONE_HOP, rate=1.0, seed=0, types=["reversed_direction"])
    result = run(llm, movies, eraser=False)
    assert llm.injections[0].outcome == "kept"
    assert "add_fact(John Godey, written_by, ?x1)" in str(result.program).splitlines()
    assert result.answers == ()


def test_tools_mode(movies: Any) -> None:
    llm = NoisyGoldLLM(ONE_HOP, rate=1.0, seed=0, types=["wrong_arity"])
    result = run(llm, movies, mode="tools")
    assert llm.injections[0].code == "PY104" and set(result.answers) == MOVIES


# -- the stand-in reads step records, not hint wording ---------------------------------------------


def test_the_stand_in_reads_the_step_record_not_the_wording(movies: Any) -> None:
    """A hint whose rendered text no pattern could know (a third-party guideline's wording) is
    still read right: the stand-in gets the step's code."""
    from pyql.agent.trajectory import Step

    llm = NoisyGoldLLM(ONE_HOP, rate=1.0, seed=0, types=["invalid_action"])
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "s"},
                                  {"role": "user", "content": "Question : q"}]
    first = llm.complete(msgs)
    assert "find_relation" in first.text
    llm.observe(Step(n=1, action="find_relation(John Godey)", observation="Nope, try again.",
                     hint="PY102", status="hint", accepted=False))
    msgs += [{"role": "assistant", "content": first.text},
             {"role": "user", "content": "Observation 1 : Nope, try again."}]
    second = llm.complete(msgs)
    inj = llm.injections[0]
    assert inj.hint_code == "PY102" and inj.corrected and inj.outcome == "corrected"
    assert "get_relation(John Godey)" in second.text


# -- the ablation's numbers -------------------------------------------------------------------------


def test_summarise_rates() -> None:
    records = [
        Injection(type="wrong_relation", step=2, gold_index=1, gold="g", action="a",
                  hint_fired=True, hint_code="KB201", corrected=True, outcome="corrected"),
        Injection(type="wrong_relation", step=4, gold_index=3, gold="g", action="a",
                  hint_fired=False, outcome="kept"),
        Injection(type="invalid_action", step=1, gold_index=0, gold="g", action="a",
                  hint_fired=True, hint_code="PY102", trajectory_code="PY102", corrected=True,
                  outcome="corrected"),
    ]
    rows = summarise(records)
    assert rows["wrong_relation"]["n"] == 2 and rows["wrong_relation"]["detected"] == 1
    assert rows["wrong_relation"]["kept"] == 1 and rows["wrong_relation"]["codes"] == {"KB201": 1}
    assert rows["invalid_action"]["corrected"] == 1


def test_every_type_is_mapped() -> None:
    assert set(ADDRESSED_BY) == {*INJECTION_TYPES, *SILENT_TYPES}
    assert all(not ADDRESSED_BY[kind] for kind in SILENT_TYPES)
    known = {g.code for g in builtin()}
    for codes in ADDRESSED_BY.values():
        assert codes <= known
