"""``pyql mcp``'s bounded work and its tool errors (issue 36 items 5 and 12; issue 35's
``--llm`` spec): in process on :class:`~pyql.apps.mcp.PyqlMcp`, the same calls the transports make."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.fake_openai import fake_openai  # noqa: F401 - a fixture
from tests.support.hostile_sparql import HungEndpoint

pytest.importorskip("mcp")

from mcp.shared.exceptions import MCPError  # noqa: E402

from pyql.apps.mcp import PyqlMcp  # noqa: E402
from pyql.apps.mcp import server as mcp_server  # noqa: E402
from pyql.apps.mcp.server import LlmConfig  # noqa: E402
from pyql.demo import movies_path  # noqa: E402
from pyql.kb import open_kb  # noqa: E402

INCEPTION = "<http://example.org/movies/Inception>"


class Key:
    """An MCP session's key."""


def test_a_kb_timeout_while_linking_is_a_tool_error_within_the_timeout():
    with HungEndpoint() as hung:
        face = PyqlMcp(open_kb(hung.url, profile="metaqa"), timeout=1.0)
        start = time.monotonic()
        result = face.call(Key(), "start_question", {"question": "who directed Inception"})
        took = time.monotonic() - start
    assert result.is_error
    assert result.structured_content["error"]["type"] == "BackendTimeoutError"
    assert result.structured_content["status"] == "timeout"
    assert took < 10, f"{took:.1f} s for a 1 s timeout"


def test_a_kb_timeout_with_guidelines_on_is_a_tool_error():
    with HungEndpoint() as hung:
        face = PyqlMcp(open_kb(hung.url, profile="metaqa"), timeout=1.0, guidelines=True)
        key = Key()
        face.call(key, "start_question", {"question": "who directed Inception",
                                          "entities": {"Inception": "Inception"}})
        result = face.call(key, "get_relation", {"node": "Inception"})
    content = result.structured_content
    assert content["hint"]["code"] == "KB302"  # the guideline explains it...
    assert result.is_error  # ...and it is still an error, as the docs say
    assert content["error"]["status"] == "timeout"


def test_entities_that_are_not_text_are_a_tool_error_in_ask(fake_openai):  # noqa: F811
    face = PyqlMcp(open_kb(str(movies_path())),
                   llm=LlmConfig("openai:gpt-test", base_url=fake_openai.base_url,
                                 api_key=fake_openai.api_key))
    for tool in ("ask", "start_question"):
        result = face.call(Key(), tool, {"question": "who directed Inception",
                                         "entities": {"Inception": 1}})
        assert result.is_error, tool
        assert result.structured_content["error"]["type"] == "TermError"
    assert not fake_openai.requests  # refused before any model call


def test_prompt_arguments_are_capped_like_tool_arguments():
    face = PyqlMcp(open_kb(str(movies_path())))
    start = time.monotonic()
    with pytest.raises(MCPError) as raised:
        face.prompt("queryagent", {"question": "who directed Inception " * 150_000})  # 3.5 MB
    assert time.monotonic() - start < 1
    assert raised.value.error.code == -32602
    assert raised.value.error.data["limit"] == mcp_server.MAX_ARGUMENT_CHARS


def test_structured_content_is_bounded_like_the_text(tmp_path: Path):
    big = "x" * 2_000_000
    kb = tmp_path / "big.ttl"
    kb.write_text("@prefix ex: <http://example.org/> .\n"
                  + "".join(f'ex:film ex:note "{n}{big}" .\n' for n in range(5)),
                  encoding="utf-8")
    face = PyqlMcp(open_kb(str(kb)), guidelines=False)
    key = Key()
    face.call(key, "start_question", {"question": "notes of the film",
                                      "entities": {"film": "<http://example.org/film>"}})
    for name, args in [("add_fact", {"head": "<http://example.org/film>",
                                     "relation": "<http://example.org/note>", "tail": "?n"}),
                       ("set_answer", {"answer_var": "?n"}), ("execute", {})]:
        result = face.call(key, name, args)
        assert not result.is_error, result.content
        size = len(json.dumps(result.structured_content))
        assert size <= mcp_server.MAX_STRUCTURED_CHARS, (name, size)
        assert len(result.content[0].text) <= mcp_server.MAX_TEXT_CHARS
    content = result.structured_content
    assert content["truncated"] is True and len(content["answers"]) == 5
    assert all(len(a) <= mcp_server.MAX_VALUE_CHARS + 3 for a in content["answers"])


def test_a_sessions_history_and_program_are_bounded(monkeypatch):
    face = PyqlMcp(open_kb(str(movies_path())), guidelines=False)
    key = Key()
    face.call(key, "start_question", {"question": "who directed Inception",
                                      "entities": {"Inception": INCEPTION}})
    for _ in range(3 * mcp_server.MAX_HISTORY):
        assert not face.call(key, "get_relation", {"node": INCEPTION}).is_error
    entry = face.sessions.get(key)
    assert len(entry.session.observations) == mcp_server.MAX_HISTORY

    face.call(key, "reset", {})
    monkeypatch.setattr(mcp_server, "MAX_PROGRAM_CALLS", 2)
    fact = {"head": INCEPTION, "relation": "<http://example.org/movies/directed_by>",
            "tail": "?d"}
    assert not face.call(key, "add_fact", fact).is_error
    assert not face.call(key, "add_fact", {**fact, "tail": "?e"}).is_error
    refused = face.call(key, "add_fact", {**fact, "tail": "?f"})
    assert refused.is_error and refused.structured_content["error"]["code"] == "program_too_long"
    assert not face.call(key, "reset", {}).is_error
    assert not face.call(key, "add_fact", fact).is_error  # a reset program takes calls again


def test_llm_takes_the_spec_ask_and_eval_take():
    from pyql.agent.evaluation.llm_spec import LLMSpecError

    with pytest.raises(LLMSpecError, match="openai:MODEL"):
        PyqlMcp(open_kb(str(movies_path())), llm=LlmConfig("gpt-4o-mini"))  # a bare name


def test_a_stand_in_without_a_gold_program_is_an_llm_error():
    face = PyqlMcp(open_kb(str(movies_path())), llm=LlmConfig("gold"))
    result = face.call(Key(), "ask", {"question": "who directed Inception",
                                      "entities": {"Inception": INCEPTION}})
    assert result.is_error and result.structured_content["status"] == "llm_error"
    assert "no gold program" in result.structured_content["error"]["message"]


def test_a_kb_timeout_while_linking_a_prompts_question_is_a_typed_error():
    with HungEndpoint() as hung:
        face = PyqlMcp(open_kb(hung.url, profile="metaqa"), timeout=1.0)
        with pytest.raises(MCPError) as raised:
            face.prompt("queryagent", {"question": "who directed Inception"})
    assert raised.value.error.data["type"] == "BackendTimeoutError"


def test_llm_local_answers_through_the_ask_tool():
    from pyql.agent.evaluation.llm_spec import LLMSpecError

    try:
        face = PyqlMcp(open_kb(str(movies_path())), llm=LlmConfig("local", max_steps=2))
    except LLMSpecError as exc:  # the local extra or the model package is not installed
        pytest.skip(str(exc))
    assert "ask" in {t.name for t in face.tools()}
    result = face.call(Key(), "ask", {"question": "who directed Inception",
                                      "entities": {"Inception": INCEPTION}})
    assert not result.is_error, result.content  # the tiny model answers badly, but it answers
    content = result.structured_content
    assert content["status"] == "ok" and content["trajectory"]
    assert content["question"] == "who directed Inception"
