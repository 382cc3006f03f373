"""``pyql ask --constrain``: the levels, and an explicit level that fails fast when the server
refuses ``response_format`` (issue 36 item 16) while ``auto`` keeps the fallback."""

from __future__ import annotations

import pytest

from pyql.demo import movies_path
from tests.agent_cli.test_ask import QUESTION, TEXT_SCRIPT, ask, assert_one_line_error, env_for
from tests.support.fake_openai import FakeOpenAI, Status

REFUSED = {"error": {"message": "Unrecognized request argument supplied: 'response_format'",
                     "type": "invalid_request_error", "code": None,
                     "param": "response_format"}}


@pytest.mark.parametrize("level", ["on", "format", "grounded"])
def test_an_explicit_level_is_one_line_when_the_server_refuses_schemas(
        fake_openai: FakeOpenAI, level: str) -> None:
    fake_openai.push(Status(400, REFUSED), *TEXT_SCRIPT)
    result = ask(QUESTION, "--kb", str(movies_path()), "--constrain", level,
                 env=env_for(fake_openai))
    line = assert_one_line_error(result)
    assert "refused response_format" in line and "--constrain auto" in line
    assert len(fake_openai.chat_requests) == 2  # the refused request, and its retry only


def test_auto_runs_unconstrained_when_the_server_refuses_schemas(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Status(400, REFUSED), *TEXT_SCRIPT)
    result = ask(QUESTION, "--kb", str(movies_path()), "--json", env=env_for(fake_openai))
    assert result.exit_code == 0, result.stderr
    assert "response_format" not in fake_openai.chat_requests[-1].body


def test_grounded_sends_the_steps_own_schema(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(*TEXT_SCRIPT)
    result = ask(QUESTION, "--kb", str(movies_path()), "--constrain", "grounded", "--json",
                 env=env_for(fake_openai))
    assert result.exit_code == 0, result.stderr
    first = fake_openai.chat_requests[0].body["response_format"]["json_schema"]["schema"]
    names = [b["properties"]["name"]["const"] for b in first["properties"]["action"]["anyOf"]]
    assert names == ["get_relation"]


def test_an_unknown_level_or_choose_value_is_a_usage_error(fake_openai: FakeOpenAI) -> None:
    for option, value in (("--constrain", "always"), ("--choose", "maybe")):
        result = ask(QUESTION, "--kb", str(movies_path()), option, value,
                     env=env_for(fake_openai))
        assert result.exit_code == 2
    assert fake_openai.chat_requests == []
