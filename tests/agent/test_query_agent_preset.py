"""QueryAgent under a preset: the original's history, prompt budget, end without execute(),
argmax semantics; the paper preset's choices per dataset."""

from __future__ import annotations

import pytest

from pyql.agent import QueryAgent, ScriptedLLM, StrategyConfig, build_strategy
from pyql.agent.evaluation.standins import build_stand_in
from pyql.agent.grounding.ranking import BM25Ranker
from pyql.agent.strategies.queryagent.presets import (
    FORGOTTEN_OBSERVATION,
    Preset,
    PresetError,
    get_preset,
)
from pyql.kb import OxigraphKB
from tests.support.metaqa import metaqa_kb

TRIPLES = """\
Kismet|directed_by|William Dieterle
Kismet|written_by|Edward Knoblock
Juarez|directed_by|William Dieterle
"""


@pytest.fixture()
def kb() -> OxigraphKB:
    return metaqa_kb(TRIPLES)


def preset(**values: object) -> Preset:
    base = {"name": "test", "dataset": "metaqa", "max_steps": 10, "history": "full"}
    return Preset(**{**base, **values})  # type: ignore[arg-type]


STEPS = [
    "Thought 1 : relations.\nAction 1 : get_relation(Kismet)",
    "Thought 2 : the director.\nAction 2 : add_fact(Kismet, directed_by, ?d)",
    "Thought 3 : his films.\nAction 3 : add_fact(?f, directed_by, ?d)",
    "Thought 4 : answer.\nAction 4 : set_answer(?f)",
    "Thought 5 : done.\nAction 5 : execute()",
]


def test_paper_history_forgets_observations_older_than_two_steps(kb: OxigraphKB) -> None:
    llm = ScriptedLLM(STEPS)
    agent = QueryAgent(llm, kb, guidelines=None, preset=preset(history="paper"))
    result = agent.run("films of the director of [Kismet]", {"Kismet": "Kismet"})
    assert result.finished and set(result.answers) == {"Kismet", "Juarez"}
    fifth = [m["content"] for m in llm.calls[4]["messages"]]
    assert fifth[3] == f"Observation 1 : {FORGOTTEN_OBSERVATION}"
    assert fifth[5] == f"Observation 2 : {FORGOTTEN_OBSERVATION}"
    assert fifth[7].startswith("Observation 3 : ") and FORGOTTEN_OBSERVATION not in fifth[7]
    assert fifth[9].startswith("Observation 4 : ") and FORGOTTEN_OBSERVATION not in fifth[9]
    # the thoughts and actions stay
    assert fifth[2].endswith("Action 1 : get_relation(Kismet)")
    # the full history (pyql's default) keeps every observation
    full = ScriptedLLM(STEPS)
    QueryAgent(full, kb, guidelines=None).run("q [Kismet]", {"Kismet": "Kismet"})
    assert all(FORGOTTEN_OBSERVATION not in m["content"] for m in full.calls[4]["messages"])


def test_paper_history_forgets_a_long_error_two_steps_back(kb: OxigraphKB) -> None:
    long_bad = "no_such_function_" + "x" * 300 + "()"  # an error observation of 300+ chars
    llm = ScriptedLLM([f"Thought 1 : t.\nAction 1 : {long_bad}",
                       "Thought 2 : t.\nAction 2 : add_fact(Kismet, directed_by, ?d)",
                       "Thought 3 : t.\nAction 3 : set_answer(?d)"])
    QueryAgent(llm, kb, guidelines=None, max_steps=3, preset=preset(history="paper")).run(
        "q [Kismet]", {"Kismet": "Kismet"})
    third = [m["content"] for m in llm.calls[2]["messages"]]
    assert third[3] == f"Observation 1 : {FORGOTTEN_OBSERVATION}"
    # a short observation two steps back stays
    short = ScriptedLLM(STEPS[:3])
    QueryAgent(short, kb, guidelines=None, max_steps=3, preset=preset(history="paper")).run(
        "q [Kismet]", {"Kismet": "Kismet"})
    assert FORGOTTEN_OBSERVATION not in short.calls[2]["messages"][3]["content"]


def test_context_budget_gives_the_question_up(kb: OxigraphKB) -> None:
    llm = ScriptedLLM(STEPS)
    result = QueryAgent(llm, kb, guidelines=None, preset=preset(context_budget=50)).run(
        "q [Kismet]", {"Kismet": "Kismet"})
    assert result.stop_reason == "context_budget" and not result.finished
    assert llm.calls == [] and result.usage.llm_calls == 0


@pytest.mark.parametrize("history", ["full", "paper"])
def test_a_prompt_is_counted_once_for_the_budget_and_the_estimate(kb: OxigraphKB,
                                                                   history: str) -> None:
    from pyql.agent import TokenCounter

    class Counting(TokenCounter):
        messages = 0

        def count_message(self, message):  # type: ignore[no-untyped-def]
            Counting.messages += 1
            return super().count_message(message)

    result = QueryAgent(ScriptedLLM(STEPS), kb, guidelines=None, token_counter=Counting(),
                        max_steps=3, preset=preset(history=history, context_budget=100_000)
                        ).run("q [Kismet]", {"Kismet": "Kismet"})
    assert result.usage.prompt_tokens > 0
    # 3 steps over 2, 4 and 6 messages: each message counted once per prompt it is in when
    # the history is rewritten (paper), once in all when it only grows (before: twice that)
    assert Counting.messages == (12 if history == "paper" else 6)


def test_choose_answer_on_stop_asks_for_the_variable(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([STEPS[1], STEPS[2], "set_answer(?f)"])
    agent = QueryAgent(llm, kb, guidelines=None,
                       preset=preset(max_steps=2, on_stop="choose_answer"))
    result = agent.run("films of the director of [Kismet]", {"Kismet": "Kismet"})
    assert not result.finished and result.stop_reason == "max_steps"
    assert set(result.answers) == {"Kismet", "Juarez"}  # ?f, as the model chose
    assert result.usage.llm_calls == 3
    choice = llm.calls[2]["messages"][0]["content"]
    assert choice.startswith("I will give you a question and some results.")
    assert "Question : films of the director of [Kismet]" in choice
    assert "The value of variable" in choice


def test_choose_answer_under_the_original_request_is_its_request(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([" the director.\nAction 1: add_fact(Kismet, directed_by, ?d)",
                       " his films.\nAction 2: add_fact(?f, directed_by, ?d)", "set_answer(?f)"])
    agent = QueryAgent(llm, kb, guidelines=None, preset=preset(
        max_steps=2, on_stop="choose_answer", request="paper", dataset="grailqa"))
    result = agent.run("films of the director of [Kismet]", {"Kismet": "Kismet"})
    assert set(result.answers) == {"Kismet", "Juarez"} and result.usage.llm_calls == 3
    choice = llm.calls[2]
    assert (choice["stop"], choice["max_tokens"], choice["temperature"]) == (["\n"], 256, 0.0)


def test_execute_on_stop_runs_the_query_as_it_is(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([STEPS[1]])
    result = QueryAgent(llm, kb, guidelines=None,
                        preset=preset(max_steps=1, on_stop="execute")).run(
        "q [Kismet]", {"Kismet": "Kismet"})
    # no set_answer: the original executes anyway (pyql's default would answer nothing)
    assert result.answers == ("William Dieterle",)
    default = QueryAgent(ScriptedLLM([STEPS[1]]), kb, guidelines=None, max_steps=1).run(
        "q [Kismet]", {"Kismet": "Kismet"})
    assert default.answers == ()


def test_paper_preset_chooses_prompt_steps_ranker_and_argmax(kb: OxigraphKB) -> None:
    agent = QueryAgent(ScriptedLLM([]), kb, preset="paper", dataset="metaqa-3hop",
                       ranker="bm25")
    assert agent.max_steps == 7 and agent.profile.name == "paper-metaqa"
    assert agent.system.startswith("You are asked to answer")
    assert isinstance(agent.ranker, BM25Ranker)  # an explicit argument wins over the preset
    webqsp = QueryAgent(ScriptedLLM([]), kb, preset="paper", dataset="webqsp", ranker="bm25",
                        max_steps=3)
    assert webqsp.max_steps == 3 and webqsp.profile.name == "paper-webqsp"
    assert webqsp.new_session({})._extremum_mode == "limit"
    assert QueryAgent(ScriptedLLM([]), kb).new_session({})._extremum_mode == "ties"
    # the dataset is guessed from a MetaQA KB; elsewhere it must be given
    assert QueryAgent(ScriptedLLM([]), kb, preset="paper", ranker="bm25").preset == \
        get_preset("paper", "metaqa")
    with pytest.raises(PresetError, match="pass dataset="):
        QueryAgent(ScriptedLLM([]), OxigraphKB(profile="generic"), preset="paper")


def test_from_config_applies_the_preset(kb: OxigraphKB) -> None:
    agent = build_strategy("queryagent", ScriptedLLM([]), kb, StrategyConfig(
        preset="paper", dataset="metaqa-2hop", profile="metaqa", ranker="bm25"))
    assert agent.max_steps == 7 and agent.profile.name == "paper-metaqa"
    plain = build_strategy("queryagent", ScriptedLLM([]), kb, StrategyConfig(profile="metaqa"))
    assert plain.max_steps == 20 and plain.profile.name == "metaqa"
    assert isinstance(plain.ranker, BM25Ranker)


def test_paper_preset_sets_the_original_session_semantics(kb: OxigraphKB) -> None:
    llm = ScriptedLLM([])
    metaqa = QueryAgent(llm, kb, preset="paper", dataset="metaqa-3hop",
                        ranker="bm25").new_session({"K": "Kismet"})
    assert metaqa.query.exclude_topic == "nodes" and metaqa.relation_filter is None
    assert metaqa.walk  # get_relation() is the current node's from the first step
    fb = OxigraphKB(profile="freebase")
    webqsp = QueryAgent(llm, fb, preset="paper", dataset="webqsp", ranker="bm25").new_session({})
    assert webqsp.query.exclude_topic == "answer" and webqsp.relation_filter.name == "webqsp"
    assert QueryAgent(llm, fb, preset="paper", dataset="grailqa", ranker="bm25").new_session(
        {}).relation_filter.name == "grailqa"
    # pyql's default: neither; each can be set or turned off on its own
    plain = QueryAgent(llm, kb).new_session({})
    assert plain.query.exclude_topic == "off" and plain.relation_filter is None
    assert not plain.walk
    off = QueryAgent(llm, fb, preset="paper", dataset="webqsp", exclude_topic="off",
                     relation_filter="off", ranker="bm25").new_session({})
    assert off.query.exclude_topic == "off" and off.relation_filter is None


def test_paper_walk_runs_under_the_paper_preset(kb: OxigraphKB) -> None:
    # the original MetaQA demo's spelling, the walk's execute() answers with the node reached;
    # replies continue the original's "Thought n:" as its parser reads them
    llm = ScriptedLLM([
        " the director.\nAction 1: relate(directed_by)",
        " relations.\nAction 2: get_relation()",
        " his films.\nAction 3: relate(directed_by)",
        " done.\nAction 4: execute()",
    ])
    agent = QueryAgent(llm, kb, guidelines=None, preset="paper", dataset="metaqa-2hop",
                       ranker="bm25")
    result = agent.run("films sharing the director of [Kismet]", {"Kismet": "Kismet"})
    assert result.finished and result.answers == ("Juarez",)  # Kismet itself is dropped
    assert str(result.program).splitlines()[-2:] == ["set_answer(?e2)", "execute()"]


def test_gold_stand_in_speaks_the_paper_spelling_under_the_paper_preset() -> None:
    from pyql.agent.evaluation.records import EvalItem

    item = EvalItem(id="1", question="q", entities={"Kismet": "Kismet"}, answers=("Juarez",),
                    program="add_fact(Kismet, directed_by, ?x1)\nset_answer(?x1)\nexecute()",
                    tools="sparql", meta={"paper_program": "relate(directed_by)\nexecute()"})
    ask = [{"role": "user", "content": "q"}]
    paper = build_stand_in("queryagent", "gold", item, preset="paper")
    assert paper.complete(ask).text.endswith("relate(directed_by)")
    ours = build_stand_in("queryagent", "gold", item)
    assert ours.complete(ask).text.endswith("add_fact(Kismet, directed_by, ?x1)")
