"""SRP's paper mode and ablations: several planned paths per topic, no forced first relation,
the edit prompt's CVT tag, w/o relation check, random references, reliable answering, and
references from the training split by default."""

from __future__ import annotations

from pyql.agent.evaluation.compare import reference_split
from pyql.agent.evaluation.records import EvalItem
from pyql.agent.grounding.paths.instantiate import COMPOUND_NODE
from pyql.agent.llm.clients import ScriptedLLM
from pyql.agent.strategies.srp.strategy import CVT_TAG, SRP, _cvt
from pyql.agent.strategy import StrategyConfig, build_strategy
from tests.agent.conftest import ENTITIES, GOLD, QUESTION
from tests.agent.srp.test_strategy import ANSWER, CHECK, HAVE, _base

TWO = ('Thought: two ways.\nPath: {"John Godey": ['
       '"John Godey -> written_by -> directed_by", "John Godey -> written_by -> release_year"]}')
OFF = 'Path: {"John Godey": ["John Godey -> spouse -> directed_by"]}'


def _item() -> EvalItem:
    return EvalItem(id="q", question=QUESTION, entities=ENTITIES, answers=tuple(GOLD),
                    program="add_fact(?m, written_by, John Godey)\n"
                            "add_fact(?m, directed_by, ?d)\nset_answer(?d)")


def test_the_paper_preset_keeps_every_planned_path(kb) -> None:
    llm = ScriptedLLM([CHECK, TWO, HAVE, ANSWER])
    result = build_strategy("srp", llm, kb, StrategyConfig(preset="paper")).run(
        QUESTION, ENTITIES)
    plan = next(s for s in result.steps if s.kind == "plan")
    assert len(plan.data["alternatives"]) == 2
    retrieve = next(s for s in result.steps if s.kind == "retrieve")
    assert len(retrieve.data["sequences"]) == 2  # the judge sees both paths' sequences
    assert "1968" in llm.calls[2]["messages"][1]["content"]  # a release year, second path
    assert set(result.answers) == GOLD
    # pyql's default keeps the first path only
    own = SRP(ScriptedLLM([CHECK, TWO, HAVE, ANSWER]), kb).run(QUESTION, ENTITIES)
    assert len(next(s for s in own.steps if s.kind == "retrieve").data["sequences"]) == 1


def test_the_paper_preset_does_not_force_the_first_relation(kb) -> None:
    edit = "Final Path: John Godey -> written_by -> directed_by"
    llm = ScriptedLLM([CHECK, OFF, HAVE.replace("<HAVE_ANSWER>", "<NO_ANSWER>"), edit, HAVE,
                       ANSWER])
    result = build_strategy("srp", llm, kb, StrategyConfig(preset="paper")).run(
        QUESTION, ENTITIES)
    plan = next(s for s in result.steps if s.kind == "plan")
    assert plan.data["constraints"] == {"John Godey": ["spouse", "directed_by"]}
    assert plan.data["enforced"] == []


def test_the_edit_prompt_writes_compound_nodes_as_its_instruction_does() -> None:
    assert _cvt(f"A -> r -> {COMPOUND_NODE}") == f"A -> r -> {CVT_TAG}"
    assert _cvt(f"1. {COMPOUND_NODE} in the end.") == "1. <cvt></cvt> in the end."


def test_without_relation_check_the_plan_sees_the_ranked_relations(kb) -> None:
    llm = ScriptedLLM([TWO.split("\n")[1].replace(
        ', "John Godey -> written_by -> release_year"', ""), HAVE, ANSWER])
    result = SRP(llm, kb, relation_check=False).run(QUESTION, ENTITIES)
    assert "relation_check" not in [s.kind for s in result.steps]
    assert result.usage.llm_calls == 3 and set(result.answers) == GOLD
    assert 'Valuable Relations: {"John Godey": ["written_by"]}' in \
        llm.calls[0]["messages"][1]["content"]


def test_random_references_are_drawn_from_the_base(kb) -> None:
    base = _base()
    srp = SRP(ScriptedLLM([CHECK, TWO, HAVE, ANSWER]), kb, references=base,
              top_k_references=1, reference_mode="random")
    refs = srp.run(QUESTION, ENTITIES).steps[0]
    drawn = refs.data["references"]
    assert len(drawn) == 1 and drawn[0]["score"] == 0.0
    assert drawn[0]["id"] in {r.id for r in base.references}


def test_reliable_answering_counts_correct_answers_the_kb_supports(kb) -> None:
    result = SRP(ScriptedLLM([CHECK, TWO, HAVE, ANSWER]), kb).run(QUESTION, ENTITIES)
    measures = SRP.measures(result.steps, _item())
    assert measures["reliable_answering:of"] == measures["reliable_answering:hits"] == 1.0
    guess = 'Thinking Process: nothing. <HAVE_ANSWER>\nRetained sequences:\n1. []'
    result = SRP(ScriptedLLM([CHECK, OFF.replace("spouse", "release_year"), guess,
                              "I know it. So, the answer is {Walter Hill}."]), kb,
                 enforce_checked=False).run(QUESTION, ENTITIES)
    measures = SRP.measures(result.steps, _item())
    assert (measures["reliable_answering:of"], measures["reliable_answering:hits"]) == (1.0, 0.0)


def test_references_come_from_the_training_split_where_there_is_one(tmp_path) -> None:
    # the shared MetaQA files hold a dev split only: the base is built from it (held out)
    assert reference_split(["metaqa-1hop"], tmp_path) == "dev"
