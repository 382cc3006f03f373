"""Constrained output without a model: the schemas, their reading back into what each strategy
parses, the Recorder's accounting, the clients' handling of ``response_format``, and the local
model's typed errors. (A real model runs in tests/llm.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyql.agent.grounding.paths.path import parse_path
from pyql.agent.grounding.paths.table import parse_table_path
from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.clients import OpenAIChat, ScriptedLLM
from pyql.agent.llm.local import LocalModelError, resolve_model_path
from pyql.agent.llm.structured import (
    ConstrainError,
    action_format,
    answers_format,
    edit_chains_format,
    judge_format,
    kb_path_format,
    plan_format,
    relation_check_format,
    resolve_constrain,
    table_path_format,
)
from pyql.agent.recorder import Recorder
from pyql.agent.strategies.queryagent.prompts import get_prompt_profile
from pyql.agent.strategies.queryagent.strategy import QueryAgent
from pyql.agent.strategies.readi import Readi
from pyql.agent.strategies.readi.prompts import parse_answers
from pyql.agent.strategies.srp import prompts as srp
from pyql.schemas import tool_schemas
from tests.support.fake_openai import FakeOpenAI, Status, Text
from tests.support.metaqa import metaqa_kb

KB_LINES = "Kismet|directed_by|William Dieterle\nKismet|written_by|Edward Knoblock\n"


def _json(value: object) -> str:
    return json.dumps(value)


# -- each format reads back as its parser's input -----------------------------------------------


def test_a_kb_path_reads_back_as_readis_path() -> None:
    fmt = kb_path_format(["Kismet"])
    text = fmt.read_text(_json({"thought": "one hop", "path": {"Kismet": ["directed_by"]}}))
    assert text is not None and text.startswith("Thought: one hop\n")
    assert parse_path(text, entities=["Kismet"]).as_dict() == {"Kismet": ["directed_by"]}
    assert set(fmt.schema["properties"]["path"]["required"]) == {"Kismet"}


def test_a_relation_with_the_path_texts_syntax_reads_back_as_one_relation() -> None:
    # what SmolLM2 wrote in a constrained Readi reply: brackets inside one relation (and a
    # relation of nothing but syntax, which is none)
    fmt = kb_path_format(["Black Snake Moan"])
    relation = "films that share directors with [film_genre_1] -> genre"
    text = fmt.read_text(_json({"thought": "", "path": {"Black Snake Moan": [relation, "[]", "x"]}}))
    assert parse_path(text or "", entities=["Black Snake Moan"]).as_dict() == {
        "Black Snake Moan": ["films that share directors with film_genre_1 genre", "x"]}


def test_a_table_path_reads_back_as_readis_table_path() -> None:
    fmt = table_path_format(["Player", "School"])
    reply = {"thought": "t", "path": {"columns": ["School"], "answer": "Player",
                                      "rows": [{"column": "School", "op": "=", "value": "Butler"}]}}
    path = parse_table_path(fmt.read_text(_json(reply)) or "")
    assert (path.columns, path.answer_column, path.rows[0].value) == (("School",), "Player",
                                                                       "Butler")
    column = fmt.schema["properties"]["path"]["properties"]["columns"]["items"]
    assert column["enum"] == ["Player", "School"]


def test_answers_read_back_in_braces_and_none_as_empty() -> None:
    fmt = answers_format()
    text = fmt.read_text(_json({"thought": "so", "answers": ["Paris, Texas", "Lyon"]}))
    assert parse_answers(text or "") == ("Paris, Texas", "Lyon")
    assert srp.parse_answer(text or "") == ("Paris, Texas", "Lyon")
    empty = fmt.read_text(_json({"thought": "", "answers": []}))
    assert parse_answers(empty or "") == () and srp.parse_answer(empty or "") == ()


def test_srp_formats_read_back_as_srps_parsers_take_them() -> None:
    check = relation_check_format(["directed_by", "written_by"], 2).read_text(_json(
        {"relations": [{"relation": "written_by", "score": 0.2},
                       {"relation": "directed_by", "score": 0.9}]}))
    assert srp.parse_relation_check(check or "", ["directed_by", "written_by"]).names == (
        "directed_by", "written_by")
    plan = plan_format(["Kismet"]).read_text(_json(
        {"thought": "t", "paths": {"Kismet": [["directed_by"], ["written_by", "x"]]}}))
    assert srp.parse_plan(plan or "").paths == (("Kismet", "Kismet -> directed_by"),
                                                ("Kismet", "Kismet -> written_by -> x"))
    triple = ("Kismet", "directed_by", "William Dieterle")
    judged = judge_format(2).read_text(_json(
        {"thinking": "found", "verdict": "HAVE_ANSWER", "retained": [[list(triple)], []]}))
    judgement = srp.parse_judge(judged or "", [[triple], []])
    assert judgement.have_answer and judgement.retained == ((triple,), ())
    edit = edit_chains_format(["Kismet"]).read_text(_json(
        {"goal": "g", "thought": "t", "paths": [{"topic": "Kismet", "relations": ["r1", "r2"]}]}))
    assert srp.parse_edit(edit or "").paths == ("Kismet -> r1 -> r2",)


def test_a_reply_that_does_not_conform_reads_as_itself() -> None:
    fmt = kb_path_format(["Kismet"])
    assert fmt.read_text("not json") is None
    assert fmt.read_text(_json({"thought": "t", "path": {"Other": ["r"]}})) is None
    assert fmt.read_text('{"thought": "cut at max_tok') is None


def test_the_action_schema_is_one_of_the_dsl_calls() -> None:
    profile = get_prompt_profile("metaqa")
    fmt = action_format(tool_schemas(profile.signatures, profile))
    names = [c["properties"]["name"]["const"]
             for c in fmt.schema["properties"]["action"]["anyOf"]]
    assert names == [s.name for s in profile.signatures]
    assert fmt.read_action(_json({"thought": "t", "action": {
        "name": "add_fact", "arguments": {"head": "Kismet"}}})) == (
        "t", "add_fact", '{"head": "Kismet"}')
    assert fmt.read_action("Thought 1: free text") is None
    rf = fmt.response_format()
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is False


# -- strategies on a client that honours schemas ------------------------------------------------


def test_queryagent_reads_constrained_actions_in_text_mode() -> None:
    kb = metaqa_kb(KB_LINES)
    llm = ScriptedLLM([
        _json({"thought": "the director", "action": {"name": "add_fact", "arguments": {
            "head": "Kismet", "relation": "directed_by", "tail": "?d"}}}),
        _json({"thought": "answer", "action": {"name": "set_answer",
                                               "arguments": {"answer_var": "?d"}}}),
        _json({"thought": "done", "action": {"name": "execute", "arguments": {}}}),
    ], structured_output=True)
    result = QueryAgent(llm, kb, guidelines=None).run("who directed [Kismet]", {"Kismet": "Kismet"})
    assert result.answers == ("William Dieterle",) and result.finished
    assert result.usage.constrained_calls == 3 and result.usage.parse_failures == 0
    assert all(c["response_format"]["json_schema"]["name"] == "action" for c in llm.calls)
    assert result.steps[0].action == "add_fact(Kismet, directed_by, ?d)"
    assert json.loads(result.steps[0].raw_reply)["thought"] == "the director"
    # the history stays in the text format the demonstrations use
    assert llm.calls[1]["messages"][2]["content"] == (
        "Thought 1 : the director\nAction 1 : add_fact(Kismet, directed_by, ?d)")


def test_an_unreadable_constrained_reply_is_a_counted_parse_failure() -> None:
    kb = metaqa_kb(KB_LINES)
    llm = ScriptedLLM(['{"thought": "cut sho'], structured_output=True)
    result = QueryAgent(llm, kb, guidelines=None, max_steps=1).run("q [Kismet]",
                                                                   {"Kismet": "Kismet"})
    assert result.steps[0].format_issue == "no_action" and result.usage.parse_failures == 1


def test_readi_reads_constrained_paths_and_answers() -> None:
    kb = metaqa_kb(KB_LINES)
    llm = ScriptedLLM([_json({"thought": "one hop", "path": {"Kismet": ["directed_by"]}})],
                      structured_output=True)
    result = Readi(llm, kb).run("who directed Kismet", {"Kismet": "Kismet"})
    assert result.answers == ("William Dieterle",)
    assert result.usage.constrained_calls == 1 and result.usage.parse_failures == 0
    assert llm.calls[0]["response_format"]["json_schema"]["name"] == "reasoning_path"


def test_constrain_on_needs_a_client_that_takes_schemas() -> None:
    kb = metaqa_kb(KB_LINES)
    with pytest.raises(ConstrainError, match="does not take structured output"):
        QueryAgent(ScriptedLLM([]), kb, constrain="on")
    with pytest.raises(ConstrainError) as bad:
        resolve_constrain("always", ScriptedLLM([]))
    assert bad.value.mode == "always"
    assert resolve_constrain("off", ScriptedLLM([], structured_output=True)) is False
    assert QueryAgent(ScriptedLLM([]), kb).constrained is False  # auto: a stand-in is free text


# -- the Recorder ---------------------------------------------------------------------------------


def test_the_recorder_accounts_calls_and_fires_each_callback_once() -> None:
    seen: list[int] = []
    observed: list[int] = []
    llm = ScriptedLLM(["hello"])
    llm.observe = lambda step: observed.append(step.n)  # type: ignore[attr-defined]
    rec = Recorder(llm, "q", counter=TokenCounter(), price_table=PriceTable(),
                   on_step=lambda step: seen.append(step.n))
    call = rec.llm([{"role": "user", "content": "hi"}])
    assert call.tokens.estimated and rec.usage.llm_calls == 1 and not call.constrained
    from pyql.agent.trajectory import Step

    rec.add(Step(n=rec.next_n, kind="x", kb_queries=2, hint="RM204", **call.step_fields()))
    rec.add(Step(n=rec.next_n, kind="y", format_issue="no_action"))
    assert seen == observed == [1, 2]
    usage = rec.finish_usage()
    assert (usage.kb_queries, usage.guideline_triggers, usage.parse_failures) == (
        2, {"RM204": 1}, 1)


# -- the OpenAI-compatible client -----------------------------------------------------------------


def test_openai_chat_sends_the_schema_and_drops_it_when_the_server_refuses(
        fake_openai: FakeOpenAI) -> None:
    refused = {"error": {"message": "Unrecognized request argument supplied: 'response_format'",
                         "type": "invalid_request_error", "code": None,
                         "param": "response_format"}}
    fake_openai.push(Text('{"answers": ["x"]}'), Status(400, refused), Text("free text"))
    llm = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
    assert llm.structured_output
    schema = answers_format().response_format()
    llm.complete([{"role": "user", "content": "q"}], response_format=schema)
    assert fake_openai.chat_requests[-1].body["response_format"]["json_schema"]["name"] == (
        "answers")
    reply = llm.complete([{"role": "user", "content": "q"}], response_format=schema)
    # refused once: asked again without it, and not sent again (auto falls back to free text)
    assert reply.text == "free text" and "response_format" not in (
        fake_openai.chat_requests[-1].body)
    assert not llm.structured_output


def test_openai_chat_without_structured_output_sends_no_schema(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Text("plain"))
    llm = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key,
                     structured_output=False)
    llm.complete([{"role": "user", "content": "q"}],
                 response_format=answers_format().response_format())
    assert "response_format" not in fake_openai.chat_requests[-1].body


# -- the local model's inputs --------------------------------------------------------------------


def test_a_missing_or_foreign_model_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="no GGUF model") as missing:
        resolve_model_path(tmp_path / "nope.gguf")
    assert missing.value.path.endswith("nope.gguf") and missing.value.hint
    other = tmp_path / "model.bin"
    other.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(LocalModelError, match="not a GGUF"):
        resolve_model_path(other)


def test_the_local_spec_parses_for_eval() -> None:
    from pyql.agent.evaluation.llm_spec import LLMSpecError, parse_llm_spec

    assert (parse_llm_spec("local").kind, parse_llm_spec("local").argument) == ("local", "")
    assert parse_llm_spec("local:/m/x.gguf").argument == "/m/x.gguf"
    with pytest.raises(LLMSpecError):
        parse_llm_spec("local:")


# -- bounded replies (issue 24, item 5) ------------------------------------------------------------


def test_a_runaway_reply_goes_back_into_the_prompt_capped() -> None:
    kb = metaqa_kb(KB_LINES)
    huge = "Thought 1 : " + "blah " * 400_000 + "\nAction 1 : get_relation(Kismet)"
    llm = ScriptedLLM([huge, "Thought 2 : done\nAction 2 : execute()"])
    QueryAgent(llm, kb, guidelines=None, max_steps=2).run("q [Kismet]", {"Kismet": "Kismet"})
    second = llm.calls[1]["messages"]
    assert sum(len(m["content"] or "") for m in second) < len(huge) // 100
    assert second[2]["content"].startswith("Thought 1 : blah") and " ..." in second[2]["content"]


def test_the_cli_and_the_runner_send_the_strategys_reply_cap(fake_openai: FakeOpenAI) -> None:
    from pyql.agent.commands.ask import _make_llm
    from pyql.agent.evaluation.records import RunConfig
    from pyql.agent.evaluation.runner import _client_options
    from pyql.agent.strategies.readi import Readi
    from pyql.agent.strategy import max_reply_tokens

    assert (max_reply_tokens(QueryAgent), max_reply_tokens(Readi)) == (256, 512)
    assert _client_options(RunConfig(dataset="metaqa-1hop", llm="openai:m"))["max_tokens"] == 256
    assert _client_options(RunConfig(dataset="wikisql", llm="openai:m", strategy="readi",
                                      max_tokens=64))["max_tokens"] == 64
    fake_openai.push(Text("ok"))
    llm = _make_llm("gpt-test", fake_openai.base_url, fake_openai.api_key, max_tokens=256)
    llm.complete([{"role": "user", "content": "q"}])
    assert fake_openai.chat_requests[-1].body["max_tokens"] == 256


def test_ask_takes_only_a_local_model_in_llm() -> None:
    from typer.testing import CliRunner

    from pyql.cli import app

    result = CliRunner().invoke(app, ["ask", "q", "--kb", "x.ttl", "--llm", "openai:gpt-4o"])
    assert result.exit_code == 2 and "expected local or local:PATH.gguf" in result.output
