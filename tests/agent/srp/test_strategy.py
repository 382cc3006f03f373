"""The SRP strategy on a small MetaQA KB: scripted models, stand-ins, the real OpenAI client."""

from __future__ import annotations

import pytest

from pyql.agent.evaluation.metrics import step_usage
from pyql.agent.evaluation.records import EvalItem
from pyql.agent.evaluation.standins import build_stand_in
from pyql.agent.evaluation.standins.srp import SRPStandIn
from pyql.agent.llm.clients import OpenAIChat, ScriptedLLM
from pyql.agent.strategies.srp.labelled import LabelledQuestion
from pyql.agent.strategies.srp.metrics import srp_measures
from pyql.agent.strategies.srp.references import ReferenceLeakError, build_reference_base
from pyql.agent.strategies.srp.strategy import SRP
from pyql.agent.strategy import StrategyConfig, build_strategy, get_strategy
from pyql.agent.trajectory import Step, Trajectory
from tests.agent.conftest import ENTITIES, GOLD, QUESTION
from tests.support.fake_openai import FakeOpenAI, Text

CHECK = "1. ('written_by', 1.0): it leads to the movies John Godey wrote."
PLAN = ('Thought: the movies he wrote, then their directors.\n'
        'Path: {"John Godey": ["John Godey -> written_by -> directed_by"]}')
HAVE = ('Thinking Process: the directors are there. <HAVE_ANSWER>\nRetained sequences:\n'
        '1. [("Johnny Handsome", "written_by", "John Godey"), '
        '("Johnny Handsome", "directed_by", "Walter Hill")]')
ANSWER = "So, the answer is {Walter Hill}."
PROGRAM = {"Walter Hill", "Joseph Sargent", "Jerry Paris"}


def _kinds(result) -> list[str]:
    return [s.kind for s in result.steps]


def _no_answer(kept: str = '("Johnny Handsome", "written_by", "John Godey")') -> str:
    return (f"Thinking Process: these are years, not directors. <NO_ANSWER>\n"
            f"Retained sequences:\n1. [{kept}]")


def test_the_four_modules_answer_with_the_cot_answer_then_the_programs(kb) -> None:
    llm = ScriptedLLM([CHECK, PLAN, HAVE, ANSWER])
    result = SRP(llm, kb).run(QUESTION, ENTITIES)
    assert _kinds(result) == ["candidates", "relation_check", "plan", "retrieve", "judge",
                              "knowledge", "answer"]
    assert result.answers[0] == "Walter Hill" and set(result.answers) == GOLD
    assert (result.finished, result.stop_reason, result.strategy) == (True, "have_answer", "srp")
    assert result.usage.llm_calls == 4 and result.usage.kb_queries > 0
    candidates, check, plan, retrieve, judge, knowledge, answer = result.steps
    assert candidates.data["candidates"] == ["written_by"] and candidates.kb_queries > 0
    assert check.data["checked"] == ["written_by"]
    assert plan.data["constraints"] == {"John Godey": ["written_by", "directed_by"]}
    assert retrieve.data["complete"] and len(retrieve.data["sequences"][0]) >= 6
    assert judge.data["verdict"] == "HAVE_ANSWER" and len(judge.data["retained"][0]) == 2
    assert knowledge.data["kept"] == [list(t) for t in [("Johnny Handsome", "written_by",
                                                      "John Godey"),
                                                     ("Johnny Handsome", "directed_by",
                                                      "Walter Hill")]]
    assert answer.data["cot"] == ["Walter Hill"]
    assert set(answer.data["program_answers"]) == PROGRAM
    assert "add_fact" in str(result.program) and result.query.startswith("SELECT")
    # what the evaluation runner reads into its per-strategy metrics
    usage = step_usage(result.steps, GOLD)
    assert usage["judge.have_answer"] == 1.0 and usage["judge.no_answer"] == 0.0
    assert usage["answer_coverage"] == 1.0 and usage["plans_mended"] == 0.0
    assert usage["llm_calls.relation_check"] == usage["llm_calls.judge"] == 1.0
    # the prompts are the paper's: the relation check lists the one-hop candidates
    assert "Candidate Relations: written_by\nAnswer:" in llm.calls[0]["messages"][1]["content"]
    assert 'Valuable Relations: {"John Godey": ["written_by"]}' in \
        llm.calls[1]["messages"][1]["content"]


@pytest.mark.parametrize(("first", "how"), [("spouse", "replaced"), ("written", "bound")])
def test_a_plan_that_does_not_start_from_a_checked_relation_is_mended(kb, first, how) -> None:
    plan = f'Path: {{"John Godey": ["John Godey -> {first} -> directed_by"]}}'
    result = SRP(ScriptedLLM([CHECK, plan, HAVE, ANSWER]), kb).run(QUESTION, ENTITIES)
    step = next(s for s in result.steps if s.kind == "plan")
    assert step.data["constraints"] == {"John Godey": ["written_by", "directed_by"]}
    assert step.data["enforced"] == [{"entity": "John Godey", "from": first,
                                      "to": "written_by", "how": how}]
    assert set(result.answers) == GOLD


def test_no_answer_edits_from_the_tail_of_the_pruned_sequence(kb) -> None:
    years = 'Path: {"John Godey": ["John Godey -> written_by -> release_year"]}'
    edit = ("Goal: the directors.\nThought: directed_by is a candidate.\n"
            "Final Path: John Godey -> written_by -> directed_by")
    llm = ScriptedLLM([CHECK, years, _no_answer(), edit, HAVE, ANSWER])
    result = SRP(llm, kb).run(QUESTION, ENTITIES)
    assert _kinds(result) == ["candidates", "relation_check", "plan", "retrieve", "judge",
                              "candidates", "edit", "retrieve", "judge", "knowledge", "answer"]
    shown, edit_step = result.steps[5:7]
    # the judge kept the first hop: the candidates are the relations around the movies
    [at] = shown.data["at"]
    assert at["position"] == 1 and at["chain"].startswith("John Godey → written_by → ")
    assert "directed_by" in at["relations"] and "release_year" in at["relations"]
    assert shown.data["errors"][0].startswith("Current Information is not enough. these are "
                                              "years")
    assert edit_step.data["after"].endswith("[ John Godey → written_by → directed_by ] }")
    prompt = llm.calls[3]["messages"][1]["content"]
    assert "Initial Path: John Godey → written_by → release_year" in prompt
    assert 'Retained sequence 1: [("Johnny Handsome", "written_by", "John Godey")]' in prompt
    assert set(result.answers) == GOLD and result.stop_reason == "have_answer"


def test_a_stuck_relation_is_reported_with_the_stuck_candidates(kb) -> None:
    bad = 'Path: {"John Godey": ["John Godey -> written_by -> spouse"]}'
    edit = "Final Path: John Godey -> written_by -> directed_by"
    llm = ScriptedLLM([CHECK, bad, _no_answer(), edit, HAVE, ANSWER])
    result = SRP(llm, kb).run(QUESTION, ENTITIES)
    retrieve, _judge, shown = result.steps[3:6]
    assert retrieve.status == "stuck" and not retrieve.data["complete"]
    assert 'John Godey: relation "spouse" not instantiated.' in shown.data["errors"]
    assert set(result.answers) == GOLD


def test_edits_are_bounded_by_max_rounds(kb) -> None:
    years = 'Path: {"John Godey": ["John Godey -> written_by -> release_year"]}'
    edits = [f"Final Path: John Godey -> written_by -> {r}"
             for r in ("has_genre", "starred_actors", "release_year")]
    script = [CHECK, years, _no_answer(), edits[0], _no_answer(), edits[1], _no_answer(),
              "So, the answer is {1989}."]
    result = SRP(ScriptedLLM(script), kb, max_rounds=2).run(QUESTION, ENTITIES)
    assert _kinds(result).count("edit") == 2 and _kinds(result).count("judge") == 3
    assert (result.stop_reason, result.finished) == ("max_rounds", False)
    # judged not to answer: the program's answers are not added
    assert result.answers == ("1989",)
    none = SRP(ScriptedLLM([CHECK, years, _no_answer(), "{x}"]), kb, max_rounds=0)
    assert _kinds(none.run(QUESTION, ENTITIES)).count("edit") == 0


def test_an_unchanged_or_unreadable_edit_ends_the_reflection(kb) -> None:
    years = 'Path: {"John Godey": ["John Godey -> written_by -> release_year"]}'
    same = "Final Path: John Godey -> written_by -> release_year"
    result = SRP(ScriptedLLM([CHECK, years, _no_answer(), same, "{1989}"]), kb).run(
        QUESTION, ENTITIES)
    assert result.stop_reason == "unchanged_edit"
    result = SRP(ScriptedLLM([CHECK, years, _no_answer(), "I would not change it.", "{1989}"]),
                 kb).run(QUESTION, ENTITIES)
    edit = next(s for s in result.steps if s.kind == "edit")
    assert result.stop_reason == "edit_failed" and edit.data["parse_error"] == "no_path"


def test_malformed_replies_fall_back_and_are_recorded(kb) -> None:
    result = SRP(ScriptedLLM(["written_by looks best", "I am not sure.", "hmm", "no idea"]),
                 kb).run(QUESTION, ENTITIES)
    _candidates, check, plan, _retrieve, judge, _knowledge, answer = result.steps
    assert check.data["parse_error"] == "no_relations" and check.data["fallback"] == "ranker"
    assert check.data["checked"] == ["written_by"] and check.status == "error"
    assert plan.data["parse_error"] == "no_path"
    assert plan.data["constraints"] == {"John Godey": ["written_by"]}
    # an unreadable judge: the instantiation decides (complete: have answer), all triples kept
    assert judge.data["parse_error"] == "no_verdict" and judge.data["verdict"] == "HAVE_ANSWER"
    assert answer.data["parse_error"] == "no_answer"
    assert set(result.answers) == {"Johnny Handsome", "The Taking of Pelham One Two Three",
                                   "Never a Dull Moment"}


def test_without_reflection_there_is_no_judge_and_no_edit(kb) -> None:
    result = SRP(ScriptedLLM([CHECK, PLAN, ANSWER]), kb, reflection=False).run(QUESTION, ENTITIES)
    assert _kinds(result) == ["candidates", "relation_check", "plan", "retrieve", "knowledge",
                              "answer"]
    assert result.usage.llm_calls == 3 and result.stop_reason == "no_reflection"
    assert set(result.answers) == GOLD


def _base():
    questions = [
        LabelledQuestion(id="ref-1", question="who directed the movies written by [Peter Stone]",
                         topic="Peter Stone", topic_id="Peter Stone",
                         path=("^written_by", "directed_by"), answers=("Joseph Sargent",),
                         mentions=("Peter Stone",)),
        LabelledQuestion(id="ref-2", question="when was [Kismet] released", topic="Kismet",
                         topic_id="Kismet", path=("release_year",), answers=("1944",),
                         mentions=("Kismet",)),
    ]
    return build_reference_base(questions, datasets=["toy"], split="dev", embedding="bm25",
                                size=2, clusters=2, source_ids=["ref-1", "ref-2", "held-1"])


def test_references_are_retrieved_shown_to_the_model_and_recorded(kb) -> None:
    llm = ScriptedLLM([CHECK, PLAN, HAVE, ANSWER])
    result = SRP(llm, kb, references=_base(), top_k_references=1).run(
        QUESTION, ENTITIES, meta={"id": "3hop-dev-7"})
    refs = result.steps[0]
    assert refs.kind == "references" and refs.data["references"][0]["id"] == "ref-1"
    assert refs.data["references"][0]["path"] == ["^written_by", "directed_by"]
    for call in llm.calls[:3]:  # relation check, plan, judge: the paper's reference blocks
        assert "Question: who directed the movies written by [Peter Stone]\nRelation Path: " \
               "Peter Stone -> ^written_by -> directed_by" in call["messages"][1]["content"]
    assert "Answer: Joseph Sargent" in llm.calls[2]["messages"][1]["content"]
    item = EvalItem(id="q", question=QUESTION, entities=ENTITIES, answers=tuple(GOLD),
                    program="add_fact(?m, written_by, John Godey)\nadd_fact(?m, directed_by, ?d)"
                            "\nset_answer(?d)")
    measures = srp_measures(result.steps, item)
    assert measures["reference_hit"] is True and measures["judge_correct"] == 1


def test_a_question_the_references_were_built_from_is_refused(kb) -> None:
    srp = SRP(ScriptedLLM([]), kb, references=_base())
    with pytest.raises(ReferenceLeakError) as err:
        srp.run(QUESTION, ENTITIES, meta={"id": "held-1"})
    assert err.value.ids == ("held-1",) and err.value.count == 1


def _item(program: str = "add_fact(?m, written_by, John Godey)\nadd_fact(?m, directed_by, ?d)\n"
                         "set_answer(?d)\nexecute()") -> EvalItem:
    return EvalItem(id="2hop-dev-1", question=QUESTION, entities=ENTITIES,
                    answers=tuple(sorted(GOLD)), program=program, meta={"qtype": "x"})


def test_the_gold_stand_in_plans_the_gold_path_and_judges_by_the_gold_answers(kb) -> None:
    item = _item()
    result = SRP(build_stand_in("srp", "gold", item), kb).run(item.question, item.entities)
    assert set(result.answers) == GOLD and result.usage.llm_calls == 4
    plan = next(s for s in result.steps if s.kind == "plan")
    assert plan.data["constraints"] == {"John Godey": ["^written_by", "directed_by"]}
    measures = srp_measures(result.steps, item)
    assert (measures["judged"], measures["judge_correct"], measures["edits"]) == (1, 1, 0)


def _edit_prompt() -> list[dict]:
    from pyql.agent.strategies.srp import prompts

    return prompts.edit_messages("q", [], [], [], {})


def test_the_noisy_edit_repairs_only_from_the_candidates_it_is_shown() -> None:
    llm = build_stand_in("srp", "noisy-gold:0.3:edit_success=1", _item())
    assert isinstance(llm, SRPStandIn) and llm.relations == ("^written_by", "directed_by")
    llm.observe(Step(n=1, kind="retrieve", data={"constraints": [
        {"entity": "John Godey", "relations": ["^written_by", "release_year"]}]}))

    def shown(relations: list[str]) -> Step:
        return Step(n=2, kind="candidates", data={"for": "edit", "at": [
            {"entity": "John Godey", "position": 1, "chain": "John Godey → written_by → x",
             "relations": relations}]})

    llm.observe(shown(["release_year", "directed_by"]))
    assert llm.complete(_edit_prompt()).text.endswith(
        "Final Path: John Godey -> ^written_by -> directed_by")
    llm.observe(shown(["release_year", "has_genre"]))
    assert llm.complete(_edit_prompt()).text.endswith(
        "Final Path: John Godey -> ^written_by -> release_year")


def test_the_stand_in_judge_says_no_answer_when_the_triples_miss_the_gold() -> None:
    from pyql.agent.strategies.srp import prompts

    sequence = [("Johnny Handsome", "written_by", "John Godey"),
                ("Johnny Handsome", "release_year", "1989")]
    llm = build_stand_in("srp", "gold", _item())
    llm.observe(Step(n=1, kind="retrieve", data={"sequences": [[], [list(t) for t in sequence]]}))
    judgement = prompts.parse_judge(llm.complete(prompts.judge_messages("q", [sequence])).text,
                                    [sequence])
    assert judgement.verdict == "NO_ANSWER"
    assert judgement.retained == ((("Johnny Handsome", "written_by", "John Godey"),),)
    llm.observe(Step(n=2, kind="retrieve", data={"sequences": [[
        ["Johnny Handsome", "written_by", "John Godey"],
        ["Johnny Handsome", "directed_by", "Walter Hill"]]]}))
    assert "<HAVE_ANSWER>" in llm.complete(prompts.judge_messages("q", [sequence])).text


def test_registered_and_built_from_config_with_text_options(kb, tmp_path) -> None:
    assert get_strategy("srp") is SRP
    directory = _base().save(tmp_path / "refs")
    srp = build_strategy("srp", ScriptedLLM([]), kb, StrategyConfig(
        top_k=5, profile="metaqa", options={"references": str(directory), "max_rounds": "1",
                                            "top_k_references": "2", "reflection": "false"}))
    assert isinstance(srp, SRP)
    assert (srp.max_rounds, srp.top_k_references, srp.reflection, srp.check_candidates,
            srp.profile) == (1, 2, False, 5, "metaqa")
    assert len(srp.references) == 2


def test_a_run_through_the_openai_client_and_its_trajectory_round_trips(
        kb, fake_openai: FakeOpenAI, tmp_path) -> None:
    fake_openai.push(Text(CHECK, usage=(300, 20)), Text(PLAN, usage=(400, 30)),
                     Text(HAVE, usage=(500, 40)), Text(ANSWER, usage=(200, 10)))
    llm = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    result = SRP(llm, kb).run(QUESTION, ENTITIES, meta={"id": "q1"})
    assert set(result.answers) == GOLD
    assert (result.usage.llm_calls, result.usage.prompt_tokens,
            result.usage.completion_tokens) == (4, 1400, 100)
    bodies = [r.body for r in fake_openai.chat_requests]
    assert [b["messages"][0]["content"].split()[0] for b in bodies] == \
        ["Please", "You", "Here", "Given"]
    path = result.trajectory.save(tmp_path / "t.jsonl")
    again = Trajectory.load(path)
    assert [s.kind for s in again.steps] == _kinds(result)
    judge = next(s for s in again.steps if s.kind == "judge")
    assert judge.data["verdict"] == "HAVE_ANSWER" and again.strategy == "srp"


def test_two_topic_entities_are_checked_planned_and_joined(kb) -> None:
    question = "which movies written by [John Godey] were directed by [Walter Hill]"
    entities = {"John Godey": "John Godey", "Walter Hill": "Walter Hill"}
    plan = ('Path: {"John Godey": ["John Godey -> ^written_by"], '
            '"Walter Hill": ["Walter Hill -> ^directed_by"]}')
    judge = ('Thinking Process: Johnny Handsome. <HAVE_ANSWER>\nRetained sequences:\n'
             '1. [("Johnny Handsome", "written_by", "John Godey")]\n'
             '2. [("Johnny Handsome", "directed_by", "Walter Hill")]')
    llm = ScriptedLLM(["('written_by', 1.0)", "('directed_by', 1.0)", plan, judge,
                       "So, the answer is {Johnny Handsome}."])
    result = SRP(llm, kb).run(question, entities)
    assert _kinds(result) == ["candidates", "relation_check", "candidates", "relation_check",
                              "plan", "retrieve", "judge", "knowledge", "answer"]
    checks = [s for s in result.steps if s.kind == "relation_check"]
    assert [s.data["entity"] for s in checks] == ["John Godey", "Walter Hill"]
    assert result.steps[4].data["constraints"] == {"John Godey": ["^written_by"],
                                                   "Walter Hill": ["^directed_by"]}
    retrieve = result.steps[5]
    assert retrieve.data["complete"] and len(retrieve.data["sequences"]) == 2
    # the program joins the two constraints on the answer: the intersection
    assert result.answers == ("Johnny Handsome",)
    assert result.steps[-1].data["program_answers"] == ["Johnny Handsome"]


@pytest.mark.parametrize("name", ["srp", "readi"])
def test_one_binder_and_one_vocabulary_serve_every_question_of_a_run(kb, name) -> None:
    # the runner builds the strategy once per question, over that question's view of the KB
    from pyql.agent.evaluation.caches import KBView

    views = [KBView(kb) for _ in range(3)]
    built = [build_strategy(name, ScriptedLLM([]), view, StrategyConfig()) for view in views]
    assert all(s.binder is built[0].binder for s in built)
    # the KB's relations were asked by the first question only
    assert views[0].query_count > 0 and [v.query_count for v in views[1:]] == [0, 0]


def test_a_vocabulary_file_is_read_once_for_a_run(kb, tmp_path) -> None:
    path = tmp_path / "relations.txt"
    path.write_text("directed_by\nwritten_by\n", encoding="utf-8")
    first = SRP(ScriptedLLM([]), kb, vocabulary=str(path))
    path.unlink()  # a second read would fail: the next questions share what was read
    later = [SRP(ScriptedLLM([]), kb, vocabulary=str(path)) for _ in range(2)]
    assert all(s.binder is first.binder for s in later)
    assert first.binder.vocabulary.relations == ("directed_by", "written_by")
