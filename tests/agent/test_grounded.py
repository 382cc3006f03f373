"""Grounded reply formats and choose mode without a model (issue 37): the candidates a Session
offers, the schemas that admit only them, scripted runs under ``grounded`` and choose mode, the
fail-fast of an explicit level, and the property that every schema-valid reply reads back.
(Real-model runs are in tests/llm.)"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyql import Session
from pyql.agent.errors import ScoringUnsupportedError
from pyql.agent.grounding.candidates import (
    Candidates,
    call_options,
    combine,
    ground_step,
    named_variable,
)
from pyql.agent.grounding.ranking import BM25Ranker, select_relations
from pyql.agent.llm.clients import OpenAIChat, ReplayLLM, ScriptedLLM
from pyql.agent.llm.structured import (
    ConstrainLevel,
    ConstrainRefusedError,
    HopChoices,
    ReplyFormat,
    action_format,
    answers_format,
    constrain_level,
    edit_chains_format,
    grounded_action_format,
    judge_format,
    kb_path_format,
    plan_format,
    query_format,
    relation_check_format,
    table_path_format,
)
from pyql.agent.strategies.queryagent.prompts import get_prompt_profile
from pyql.agent.strategies.queryagent.strategy import QueryAgent
from pyql.errors import InputError
from pyql.schemas import call_from_arguments, tool_schemas
from tests.support.fake_openai import FakeOpenAI, Status, Text
from tests.support.json_schema import from_schema
from tests.support.metaqa import metaqa_kb

KB_LINES = """Kismet|directed_by|William Dieterle
Kismet|written_by|Edward Knoblock
Kismet|has_genre|Drama
Kismet|release_year|1944
The Story of Louis Pasteur|directed_by|William Dieterle
"""
PROFILE = get_prompt_profile("metaqa")
TOOLS = tool_schemas(PROFILE.signatures, PROFILE)


def _valid(fmt: ReplyFormat, value: Any) -> bool:
    try:
        jsonschema.validate(value, dict(fmt.schema))
    except jsonschema.ValidationError:
        return False
    return True


def _action(name: str, **arguments: str) -> dict[str, Any]:
    return {"thought": "t", "action": {"name": name, "arguments": arguments}}


class ScriptedScorer(ScriptedLLM):
    """A test double in the style of DSPy's DummyLM: it scores candidates by a given rule (no
    model), and generates scripted replies where a step is not enumerable."""

    def __init__(self, rule: Callable[[str], float], replies: Sequence[str] = ()) -> None:
        super().__init__(list(replies), structured_output=True)
        self.scores_candidates = True  # ScriptedLLM scores only from a script of scores
        self.rule = rule
        self.scored: list[list[str]] = []

    def score(self, messages: Sequence[Mapping[str, Any]], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> list[float]:
        self.scored.append(list(candidates))
        return [self.rule(c) for c in candidates]


# -- candidates from the session -------------------------------------------------------------------


def test_before_get_relation_only_get_relation_of_a_linked_entity_is_offered() -> None:
    session = Session(metaqa_kb(KB_LINES), {"Kismet": "Kismet"})
    grounding = ground_step(session, "who directed Kismet", functions=PROFILE.functions)
    assert grounding.functions.items == ("get_relation",)
    assert grounding.slot("get_relation", "node") == Candidates("entity", ("Kismet",), 1, False)
    fmt = grounded_action_format(TOOLS, grounding)
    assert _valid(fmt, _action("get_relation", node="Kismet"))
    assert not _valid(fmt, _action("get_relation", node="Casablanca"))
    assert not _valid(fmt, _action("add_fact", head="Kismet", relation="directed_by", tail="?x"))
    assert not _valid(fmt, _action("execute"))


def test_a_grounded_fact_only_admits_the_relations_the_kb_listed_at_its_node() -> None:
    session = Session(metaqa_kb(KB_LINES), {"Kismet": "Kismet"})
    session.run("get_relation(Kismet)")
    grounding = ground_step(session, "who directed Kismet", ranker=BM25Ranker(),
                            functions=PROFILE.functions)
    # Kismet's relations are listed: asking again lists nothing new
    assert grounding.functions.items == ("add_fact",)
    (fact,) = grounding.facts
    assert (fact.node, fact.direction) == ("Kismet", "forward")
    # best first by the ranker: the question's words
    assert fact.relations.items[0] == "directed_by"
    assert set(fact.relations.items) == {"directed_by", "written_by", "has_genre", "release_year"}
    fmt = grounded_action_format(TOOLS, grounding)
    assert _valid(fmt, _action("add_fact", head="Kismet", relation="directed_by", tail="?x"))
    for bad in (dict(head="Kismet", relation="starred_actors", tail="?x"),   # not at Kismet
                dict(head="Kismet", relation="director", tail="?x"),         # not a KB relation
                dict(head="Casablanca", relation="directed_by", tail="?x"),  # not offered
                dict(head="?x", relation="directed_by", tail="Kismet")):     # wrong direction
        assert not _valid(fmt, _action("add_fact", **bad)), bad


def test_backward_relations_put_the_node_at_the_tail() -> None:
    session = Session(metaqa_kb(KB_LINES), {"William Dieterle": "William Dieterle"})
    session.run("get_relation(William Dieterle)")
    grounding = ground_step(session, "which films did William Dieterle direct")
    (fact,) = grounding.facts
    assert (fact.direction, fact.relations.items) == ("backward", ("directed_by",))
    fmt = grounded_action_format(TOOLS, grounding)
    assert _valid(fmt, _action("add_fact", head="?x", relation="directed_by",
                               tail="William Dieterle"))
    assert not _valid(fmt, _action("add_fact", head="William Dieterle", relation="directed_by",
                                   tail="?x"))


def test_answer_and_execute_are_legal_only_once_there_is_something_to_answer() -> None:
    session = Session(metaqa_kb(KB_LINES), {"Kismet": "Kismet"})
    session.run("get_relation(Kismet)")
    session.run("add_fact(Kismet, directed_by, ?x)")
    grounding = ground_step(session, "who directed Kismet", functions=PROFILE.functions)
    assert "set_answer" in grounding.functions.items
    assert "execute" not in grounding.functions.items
    assert grounding.slot("set_answer", "answer_var").items == ("?x",)
    assert grounding.fresh == "?y"
    assert [o.text for o in call_options(grounding)] == [
        "get_relation(?x)",
        # a forward fact's new node is named after its relation
        *[f"add_fact(Kismet, {r}, ?{r})" for r in grounding.facts[0].relations.items],
        "set_answer(?x)"]
    session.run("set_answer(?x)")
    after = ground_step(session, "", functions=PROFILE.functions).functions.items
    assert "execute" in after and "set_answer" not in after  # ?x is the answer already


def test_set_answer_offers_the_node_the_walk_reached_last_first() -> None:
    """A 2-hop walk answers with its second node: ``?y`` is offered before ``?x`` (a tie in
    choose mode goes to the earlier candidate)."""
    session = Session(metaqa_kb(KB_LINES), {"Kismet": "Kismet"})
    for call in ("get_relation(Kismet)", "add_fact(Kismet, directed_by, ?x)",
                 "get_relation(?x)", "add_fact(?y, directed_by, ?x)"):
        assert session.run(call).ok
    grounding = ground_step(session, "", functions=PROFILE.functions)
    assert grounding.slot("set_answer", "answer_var").items == ("?y", "?x")
    assert [o.text for o in call_options(grounding)][-2:] == ["set_answer(?y)", "set_answer(?x)"]


def test_a_fact_already_in_the_query_is_not_offered_again() -> None:
    session = Session(metaqa_kb(KB_LINES), {"William Dieterle": "William Dieterle"})
    session.run("get_relation(William Dieterle)")
    session.run("add_fact(?x, directed_by, William Dieterle)")
    fmt = grounded_action_format(TOOLS, ground_step(session, "q"))
    assert not _valid(fmt, _action("add_fact", head="?x", relation="directed_by",
                                   tail="William Dieterle"))  # the same fact: RM210
    # nor the same relation from the same node to a new variable (its values named twice)
    assert not _valid(fmt, _action("add_fact", head="?y", relation="directed_by",
                                   tail="William Dieterle"))
    assert "add_fact" not in ground_step(session, "q").functions.items


def test_a_long_relation_list_is_cut_as_the_observation_shows_it() -> None:
    lines = "".join(f"Kismet|relation_{i:02d}|X{i}\n" for i in range(50))
    lines += "Kismet|directed_by|William Dieterle\n"
    session = Session(metaqa_kb(lines), {"Kismet": "Kismet"})
    obs = session.run("get_relation(Kismet)")
    ranker = BM25Ranker()
    grounding = ground_step(session, "who directed Kismet", ranker=ranker, limit=40)
    (fact,) = grounding.facts
    assert (len(fact.relations), fact.relations.total, fact.relations.truncated) == (40, 51, True)
    assert grounding.truncated
    shown, _ = select_relations("who directed Kismet", obs.relations.forward,
                                obs.relations.backward, ranker, top_k=40)
    assert set(fact.relations.items) == set(shown)  # the enum is the list the model read
    assert fact.relations.items[0] == "directed_by"


def test_sql_grounding_offers_the_schemas_columns_and_a_columns_few_values(tmp_path) -> None:
    import sqlite3

    from pyql.db import SqlDB

    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE players (Player TEXT, Position TEXT, Team TEXT)")
        con.executemany("INSERT INTO players VALUES (?, ?, ?)",
                        [("Ross", "Guard", "Toronto"), ("Lowry", "Guard", "Toronto"),
                         ("Gasol", "Center", "Memphis")])
    session = Session(SqlDB(f"sqlite:///{path}"), table="players")
    session.run("get_column(Position)")
    profile = get_prompt_profile("wikisql")
    grounding = ground_step(session, functions=profile.functions)
    assert "execute" not in grounding.functions.items
    assert grounding.values["Position"].items == ("Guard", "Center")
    tools = tool_schemas(profile.signatures, profile)
    fmt = grounded_action_format(tools, grounding)
    assert _valid(fmt, _action("add_condition", column="Position", op="=", value="Guard"))
    assert not _valid(fmt, _action("add_condition", column="Nationality", op="=", value="x"))
    assert not _valid(fmt, _action("set_answer", column="Salary"))
    assert _valid(fmt, _action("set_answer", column="Player"))


# -- runs ------------------------------------------------------------------------------------------


def test_a_grounded_run_sends_each_steps_own_schema() -> None:
    replies = [_action("get_relation", node="Kismet"),
               _action("add_fact", head="Kismet", relation="directed_by", tail="?x"),
               _action("set_answer", answer_var="?x"), _action("execute")]
    llm = ScriptedLLM([json.dumps(r) for r in replies], structured_output=True)
    agent = QueryAgent(llm, metaqa_kb(KB_LINES), constrain="grounded")
    result = agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    assert result.answers == ("William Dieterle",) and result.finished
    assert result.usage.parse_failures == 0
    functions = [[b["properties"]["name"]["const"] for b in
                  c["response_format"]["json_schema"]["schema"]["properties"]["action"]["anyOf"]]
                 for c in llm.calls]
    assert functions[0] == ["get_relation"]
    assert "add_fact" in functions[1] and "execute" not in functions[1]
    assert "execute" in functions[3]
    assert result.steps[1].data["grounding"]["relations"] == {"Kismet forward": 4}


def test_auto_is_grounded_and_format_is_not() -> None:
    llm = ScriptedLLM([], structured_output=True)
    assert constrain_level("auto", llm) == ConstrainLevel("grounded")
    assert constrain_level("on", llm) == ConstrainLevel("format", required=True)
    assert constrain_level("auto", ScriptedLLM([])) == ConstrainLevel("off")
    assert not QueryAgent(llm, metaqa_kb(KB_LINES), constrain="format").level.grounded


def test_choose_mode_scores_the_legal_calls_and_takes_the_best() -> None:
    def rule(candidate: str) -> float:  # a scorer that prefers directors, answers, the end
        return (2.0 * ("directed_by" in candidate) + 3.0 * ("set_answer" in candidate)
                + 4.0 * ("execute" in candidate) - 0.01 * len(candidate))

    llm = ScriptedScorer(rule)
    agent = QueryAgent(llm, metaqa_kb(KB_LINES), choose=True, max_steps=6)
    result = agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    assert result.answers == ("William Dieterle",) and result.finished
    assert [s.action for s in result.steps] == [
        "get_relation(Kismet)", "add_fact(Kismet, directed_by, ?directed_by)",
        "set_answer(?directed_by)", "execute()"]
    assert result.usage.llm_calls == 4 and llm.calls == []  # nothing generated
    assert llm.scored[0] == ["Thought 1 : \nAction 1 : get_relation(Kismet)"]
    assert result.steps[1].data["choose"]["chosen"].endswith("directed_by, ?directed_by)")


def test_a_choose_mode_run_replays_from_its_trajectory() -> None:
    """Each choice keeps every candidate's score in its step (``data["scored"]``), so the
    recorded run replays with no scorer at all."""
    def rule(candidate: str) -> float:
        return (2.0 * ("directed_by" in candidate) + 3.0 * ("set_answer" in candidate)
                + 4.0 * ("execute" in candidate) - 0.01 * len(candidate))

    kb = metaqa_kb(KB_LINES)
    recorded = QueryAgent(ScriptedScorer(rule), kb, choose=True, max_steps=6).run(
        "who directed [Kismet]", {"Kismet": "Kismet"})
    assert all("scored" in s.data for s in recorded.steps)
    replay = ReplayLLM(recorded.trajectory)
    again = QueryAgent(replay, kb, choose=True, max_steps=6).run(
        "who directed [Kismet]", {"Kismet": "Kismet"})
    assert [s.action for s in again.steps] == [s.action for s in recorded.steps]
    assert again.answers == recorded.answers == ("William Dieterle",)


def test_choose_mode_without_scores_is_a_typed_error_before_the_run() -> None:
    with pytest.raises(ScoringUnsupportedError) as err:
        QueryAgent(ScriptedLLM([]), metaqa_kb(KB_LINES), choose=True)
    assert err.value.reason


def test_the_prior_rule_adds_the_weighted_ranker_score() -> None:
    assert combine([-1.0, -2.0], [0.0, 3.0], 0.5) == [-1.0, -0.5]
    assert combine([-1.0, -2.0], [0.0, 3.0], 0.0) == [-1.0, -2.0]


def test_with_a_prior_a_shared_word_decides_and_the_model_breaks_the_ties() -> None:
    """``prior_weight``: the word-overlap prior of the no-model baseline, the linked mention's
    words left out. The model here prefers ``written_by`` and stopping early; the question
    names "directed", so the prior takes ``directed_by``; ``set_answer`` against
    ``get_relation`` shares no word with the question, so the model's preference stands."""
    def rule(candidate: str) -> float:
        return (3.0 * ("written_by" in candidate) + 5.0 * ("set_answer" in candidate)
                + 6.0 * ("execute" in candidate))

    kb = metaqa_kb(KB_LINES)
    alone = QueryAgent(ScriptedScorer(rule), kb, choose=True, max_steps=6).run(
        "who directed [Kismet]", {"Kismet": "Kismet"})
    assert alone.answers == ("Edward Knoblock",)
    llm = ScriptedScorer(rule)
    agent = QueryAgent(llm, kb, choose=True, max_steps=6, prior_weight=10.0)
    result = agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    assert [s.action for s in result.steps] == [
        "get_relation(Kismet)", "add_fact(Kismet, directed_by, ?directed_by)",
        "set_answer(?directed_by)", "execute()"]
    assert result.answers == ("William Dieterle",)
    fact = result.steps[1].data["choose"]["best"][0]  # the prior reads the relation alone
    assert fact[0].endswith("directed_by, ?directed_by)") and fact[2] == pytest.approx(10.0)
    # get_relation and set_answer of the director both name "directed": a tie the model
    # breaks (it prefers set_answer); execute() is about the answer, so it ties too
    assert result.steps[2].data["choose"]["best"][1][0].endswith("get_relation(?directed_by)")
    assert result.steps[3].data["choose"]["best"][0][2] == pytest.approx(6.0 + 10.0)


def test_the_prior_reads_what_each_call_is_about() -> None:
    """``CallOption.words``: a fact's relation, the node of get_relation/set_answer, the
    answer of execute; the new node of a forward fact is named after its relation, so a
    2-hop walk's answer names the question's words (``?has_genre``) and ``?x`` names none."""
    session = Session(metaqa_kb(KB_LINES), {"William Dieterle": "William Dieterle"})
    for call in ("get_relation(William Dieterle)", "add_fact(?x, directed_by, William Dieterle)",
                 "get_relation(?x)", "add_fact(?x, has_genre, ?has_genre)"):
        assert session.run(call).ok, call
    options = call_options(ground_step(session, "", functions=PROFILE.functions))
    words = {o.text: o.words for o in options}
    assert words["set_answer(?has_genre)"] == "has_genre" and words["set_answer(?x)"] == "x"
    assert words["get_relation(?has_genre)"] == "has_genre"
    assert words["add_fact(?x, release_year, ?release_year)"] == "release_year"
    assert named_variable("has_genre", ["?has_genre"]) == "?has_genre2"
    assert named_variable("wdt:P57", []) == "?P57" and named_variable("...", ["?x"]) == "?y"


# -- an explicit level fails fast when the server refuses a schema (issue 36 item 16) ------------


def _refusing(fake_openai: FakeOpenAI) -> OpenAIChat:
    refused = {"error": {"message": "Unrecognized request argument supplied: 'response_format'",
                         "type": "invalid_request_error", "code": None,
                         "param": "response_format"}}
    fake_openai.push(Status(400, refused), Text("Thought 1 : x\nAction 1 : execute()"))
    return OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)


@pytest.mark.parametrize("level", ["on", "format", "grounded"])
def test_an_explicit_level_fails_fast_when_the_server_refuses_the_schema(
        fake_openai: FakeOpenAI, level: str) -> None:
    agent = QueryAgent(_refusing(fake_openai), metaqa_kb(KB_LINES), constrain=level)
    with pytest.raises(ConstrainRefusedError) as err:
        agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    assert err.value.mode in ("format", "grounded")


def test_auto_falls_back_to_free_replies_when_the_server_refuses(fake_openai: FakeOpenAI) -> None:
    agent = QueryAgent(_refusing(fake_openai), metaqa_kb(KB_LINES), max_steps=1)
    result = agent.run("who directed [Kismet]", {"Kismet": "Kismet"})
    assert result.steps[0].action == "execute()"


# -- every schema-valid reply reads back (issue 37 item 7) ----------------------------------------


def _grounded_formats() -> list[ReplyFormat]:
    session = Session(metaqa_kb(KB_LINES), {"Kismet": "Kismet", "Ocean's Eleven": "Kismet"})
    out = [grounded_action_format(TOOLS, ground_step(session, "q"))]
    session.run("get_relation(Kismet)")
    session.run("add_fact(Kismet, directed_by, ?x)")
    out.append(grounded_action_format(TOOLS, ground_step(session, "q")))
    return out


SQL_PROFILE = get_prompt_profile("wikisql")
ACTION_FORMATS = [(action_format(TOOLS), PROFILE.toolset),
                  (action_format(tool_schemas(SQL_PROFILE.signatures, SQL_PROFILE)),
                   SQL_PROFILE.toolset),
                  *((f, PROFILE.toolset) for f in _grounded_formats())]
TEXT_FORMATS = [kb_path_format(["Kismet", "The Story"]),
                kb_path_format(["Kismet"], {"Kismet": HopChoices(
                    first=["directed_by", "release_year"], second={"directed_by": ["written_by"]},
                    rest=["directed_by", "release_year", "written_by"])}),
                kb_path_format(["Kismet"], {"Kismet": HopChoices(first=[], second={}, rest=[])}),
                table_path_format(["Player", "Team"]),
                table_path_format([]), answers_format(), relation_check_format(["a", "b_c"], 2),
                plan_format(["Kismet"]), judge_format(2), edit_chains_format(["Kismet"]),
                query_format("sparql")]
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize(("fmt", "toolset"), ACTION_FORMATS)
@_SETTINGS
@given(data=st.data())
def test_every_schema_valid_action_reads_back_as_a_call(fmt: ReplyFormat, toolset: Any,
                                                        data: Any) -> None:
    value = data.draw(from_schema(fmt.schema))
    text = json.dumps(value, ensure_ascii=False)
    assert len(text.encode()) <= fmt.token_bound()
    read = fmt.read_action(text)
    assert read is not None
    _, name, arguments = read
    call = call_from_arguments(name, json.loads(arguments), toolset, arguments,
                               literal_fallback=True)
    assert not isinstance(call, InputError), (value, call)


@pytest.mark.parametrize("fmt", TEXT_FORMATS, ids=lambda f: f.name)
@_SETTINGS
@given(data=st.data())
def test_every_schema_valid_reply_reads_back_as_text(fmt: ReplyFormat, data: Any) -> None:
    value = data.draw(from_schema(fmt.schema))
    text = json.dumps(value, ensure_ascii=False)
    assert len(text.encode()) <= fmt.token_bound()
    assert fmt.read_text(text) is not None


# -- Readi and SRP ---------------------------------------------------------------------------------

GODEY_Q = "which person directed the movies written by [John Godey]"
GODEY = {"John Godey": "John Godey"}
GODEY_GOLD = {"Walter Hill", "Joseph Sargent", "Jerry Paris"}


def _schema(call: Mapping[str, Any]) -> dict[str, Any]:
    return call["response_format"]["json_schema"]["schema"]


def test_a_grounded_readi_path_only_admits_the_kbs_relations_around_the_topic(kb) -> None:
    from pyql.agent.strategies.readi import Readi

    path = {"thought": "his films, their directors",
            "path": {"John Godey": ["written_by", "directed_by"]}}
    llm = ScriptedLLM([json.dumps(path)], structured_output=True)
    result = Readi(llm, kb, constrain="grounded").run(GODEY_Q, GODEY)
    assert set(result.answers) == GODEY_GOLD and result.usage.parse_failures == 0
    schema = _schema(llm.calls[0])
    jsonschema.validate(path, schema)
    branches = schema["properties"]["path"]["properties"]["John Godey"]["anyOf"]
    # hop 1: the relations at John Godey (written_by, backward), and only those
    assert branches[0]["prefixItems"][0]["enum"] == ["written_by"]
    # hop 2: the relations at the films written_by reaches, hop by hop
    assert all(b["prefixItems"][0]["const"] == "written_by"
               for b in branches if len(b["prefixItems"]) >= 2)
    two_hops = [b for b in branches if len(b["prefixItems"]) == 2]
    assert {"directed_by", "has_genre"} <= set(two_hops[0]["prefixItems"][1]["enum"])
    offered = {r for b in branches for item in b["prefixItems"] for r in item.get("enum", ())}
    assert "in_language" not in offered  # only Kismet has it: not around John Godey
    for bad in ({"thought": "", "path": {"John Godey": ["director_of"]}},
                # a relation the KB has around the entity, but not at the entity itself: the
                # flat vocabulary admitted it first (Readi's irrelevant_relation)
                {"thought": "", "path": {"John Godey": ["directed_by", "written_by"]}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_readi_choose_mode_scores_the_kbs_paths(kb) -> None:
    from pyql.agent.strategies.readi import Readi

    llm = ScriptedScorer(lambda c: ("written_by → directed_by" in c) - 0.001 * len(c))
    result = Readi(llm, kb, choose=True).run(GODEY_Q, GODEY)
    assert set(result.answers) == GODEY_GOLD
    generate = result.steps[0]
    assert generate.data["path"] == {"John Godey": ["written_by", "directed_by"]}
    assert generate.data["choose"]["candidates"] >= 4 and llm.calls == []


def test_readi_choose_mode_with_the_prior_takes_the_path_the_question_names(kb) -> None:
    """A model that prefers the shortest path picks one hop alone; with ``prior_weight`` the
    path that names more of the question's words wins (here "directed" and "written")."""
    from pyql.agent.strategies.readi import Readi

    def shortest(candidate: str) -> float:
        return -0.1 * len(candidate)

    alone = Readi(ScriptedScorer(shortest), kb, choose=True).run(GODEY_Q, GODEY)
    assert alone.steps[0].data["path"] == {"John Godey": ["written_by"]}
    result = Readi(ScriptedScorer(shortest), kb, choose=True, prior_weight=30.0).run(
        GODEY_Q, GODEY)
    assert result.steps[0].data["path"] == {"John Godey": ["written_by", "directed_by"]}
    assert set(result.answers) == GODEY_GOLD


def test_readis_reader_answers_from_the_retrieved_values(kb) -> None:
    from pyql.agent.strategies.readi import Readi

    path = {"thought": "", "path": {"John Godey": ["written_by", "directed_by"]}}
    answer = {"thought": "", "answers": ["Walter Hill"]}
    llm = ScriptedLLM([json.dumps(path), json.dumps(answer)], structured_output=True)
    result = Readi(llm, kb, constrain="grounded", answer="llm").run(GODEY_Q, GODEY)
    assert result.answers == ("Walter Hill",)
    offered = _schema(llm.calls[1])["properties"]["answers"]["items"]["enum"]
    assert GODEY_GOLD <= set(offered) and "John Godey" not in offered


def test_srp_grounded_plan_and_answer(kb) -> None:
    from pyql.agent.strategies.srp.strategy import SRP

    check = {"relations": [{"relation": "written_by", "score": 1.0}]}
    plan = {"thought": "", "paths": {"John Godey": [["written_by", "directed_by"]]}}
    judge = {"thinking": "there", "verdict": "HAVE_ANSWER", "retained": []}
    answer = {"thought": "", "answers": ["Walter Hill"]}
    llm = ScriptedLLM([json.dumps(r) for r in (check, plan, judge, answer)],
                      structured_output=True)
    result = SRP(llm, kb, constrain="grounded").run(GODEY_Q, GODEY)
    assert result.answers[0] == "Walter Hill" and result.usage.parse_failures == 0
    chain = _schema(llm.calls[1])["properties"]["paths"]["properties"]["John Godey"]["items"]
    assert {"written_by", "directed_by"} <= set(chain["items"]["enum"])
    assert "in_language" not in chain["items"]["enum"]
    answers = _schema(llm.calls[3])["properties"]["answers"]["items"]["enum"]
    assert "Walter Hill" in answers and "John Godey" not in answers


def test_srp_choose_mode_checks_plans_and_answers_by_score(kb) -> None:
    from pyql.agent.strategies.srp.strategy import SRP

    def rule(text: str) -> float:
        return (("written_by" in text) + ("directed_by" in text) + ("Walter Hill" in text)
                + ("HAVE_ANSWER" in text) - 0.001 * len(text))

    judge = ("Thinking Process: the directors are there. <HAVE_ANSWER>\nRetained sequences:\n"
             '1. [("Johnny Handsome", "written_by", "John Godey"), '
             '("Johnny Handsome", "directed_by", "Walter Hill")]')
    llm = ScriptedScorer(rule, [judge])  # the judge's reply is not enumerable: generated
    result = SRP(llm, kb, choose=True).run(GODEY_Q, GODEY)
    kinds = {s.kind: s for s in result.steps}
    assert kinds["relation_check"].data["checked"] == ["written_by"]
    assert kinds["plan"].data["constraints"] == {"John Godey": ["written_by", "directed_by"]}
    assert result.answers[0] == "Walter Hill" and set(result.answers) == GODEY_GOLD
    assert len(llm.calls) == 1 and len(llm.scored) == 3  # check, plan, answer scored


def test_readi_and_srp_refuse_choose_mode_without_scores(kb) -> None:
    from pyql.agent.strategies.readi import Readi
    from pyql.agent.strategies.srp.strategy import SRP

    for strategy in (Readi, SRP):
        with pytest.raises(ScoringUnsupportedError):
            strategy(ScriptedLLM([]), kb, choose=True)


def test_a_constrained_calls_cap_holds_the_schemas_longest_reply() -> None:
    from pyql.agent.llm.accounting import PriceTable, TokenCounter
    from pyql.agent.recorder import Recorder

    llm = ScriptedLLM(['{"thought": "", "action": {"name": "execute", "arguments": {}}}'] * 2,
                      structured_output=True)
    rec = Recorder(llm, "q", counter=TokenCounter(estimates=False), price_table=PriceTable.of(None))
    fmt = action_format(TOOLS)
    rec.llm([{"role": "user", "content": "q"}], format=fmt, max_tokens=64)
    assert llm.calls[0]["max_tokens"] == fmt.token_bound() > 64
    rec.llm([{"role": "user", "content": "q"}], format=fmt, max_tokens=4000)
    assert llm.calls[1]["max_tokens"] == 4000


def test_the_cap_is_raised_through_the_evaluations_gate(fake_openai: FakeOpenAI) -> None:
    """The evaluation wraps the client in a :class:`GatedLLM`; the recorder reads the cap it
    raises from the client it calls, so the gate must show the wrapped client's (a Readi
    table path on WikiSQL was cut at 512 tokens inside its JSON without it)."""
    from pyql.agent.evaluation.specs import GatedLLM, RateGate
    from pyql.agent.llm.accounting import PriceTable, TokenCounter
    from pyql.agent.recorder import Recorder

    fmt = table_path_format(["Week", "Date", "Opponent"])
    reply = {"thought": "", "path": {"columns": ["Week"], "rows": [], "answer": "Opponent"}}
    fake_openai.push(Text(json.dumps(reply)))
    client = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key,
                        max_tokens=64)
    gated = GatedLLM(client, RateGate())
    assert gated.max_tokens == 64
    rec = Recorder(gated, "q", counter=TokenCounter(estimates=False),
                   price_table=PriceTable.of(None))
    call = rec.llm([{"role": "user", "content": "q"}], format=fmt)
    assert fake_openai.chat_requests[-1].body["max_tokens"] == fmt.token_bound() > 64
    assert call.reply.text.startswith("Path: ")


def test_a_candidate_call_reads_back_as_the_call_it_names() -> None:
    """An entity whose name has a comma is quoted (bare, ``get_relation(Black Cat, White
    Cat)`` read as two arguments: 8 PY104 hints in one choose-mode question)."""
    from pyql.program import parse_call

    kb = metaqa_kb("Black Cat, White Cat|directed_by|Emir Kusturica\n"
                   "1900|directed_by|Bernardo Bertolucci\n")
    for name in ("Black Cat, White Cat", "1900"):
        session = Session(kb, {name: name})
        (option,) = call_options(ground_step(session, "", functions=PROFILE.functions))
        assert parse_call(option.text).args[0].value == name
        assert session.run(option.text).ok
        fact = call_options(ground_step(session, "", functions=PROFILE.functions))
        (add,) = [o for o in fact if o.text.startswith("add_fact")]
        assert session.run(add.text).ok, add.text
