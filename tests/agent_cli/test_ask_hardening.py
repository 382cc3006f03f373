"""``pyql ask`` under issue 24: ``--json`` is one JSON object when the LLM fails or no LLM is
set up (item 11), and what the LLM and the KB say reaches the terminal without control
characters (item 7). The real CLI, the real OpenAI client and the fake server."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from pyql.cli import app
from pyql.demo import movies_path
from tests.support.fake_openai import ServerError, Text

runner = CliRunner()
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
QUESTION = "which films did Christopher Nolan direct"


def env_for(fake) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": fake.api_key,
            "PYQL_MODEL": "gpt-test"}


def test_ask_json_is_one_json_object_when_the_llm_fails(fake_openai):
    fake_openai.push(ServerError(500), ServerError(500))
    result = runner.invoke(app, ["ask", QUESTION, "--kb", str(movies_path()), "--json",
                                 "--max-retries", "1"], env=env_for(fake_openai))
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False and "LLM server failed" in data["error"]["message"]
    assert result.stderr.startswith("error: ")


def test_ask_json_without_an_llm_or_with_a_usage_error_is_json_too():
    result = runner.invoke(app, ["ask", QUESTION, "--kb", str(movies_path()), "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["message"].startswith("no LLM configured")
    result = runner.invoke(app, ["ask", QUESTION, "--json"], env={"PYQL_MODEL": "m"})
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["kind"] == "usage"


def test_what_the_llm_writes_is_printed_without_control_characters(fake_openai):
    fake_openai.push(
        Text("Thought 1: \x1b]0;owned\x07films \x1b[2Jfirst.\n"
             "Action 1: add_fact(?film, ex:directed_by, Christopher Nolan)"),
        Text("Thought 2: done.\x9b2J\nAction 2: set_answer(?film)"),
        Text("Thought 3: done.\nAction 3: execute()"))
    result = runner.invoke(app, ["ask", QUESTION, "--kb", str(movies_path())],
                           env=env_for(fake_openai))
    assert result.exit_code == 0, result.output
    assert "]0;ownedfilms [2Jfirst." in result.stdout
    assert not CONTROL.search(result.stdout), repr(result.stdout)
    assert "ex:Inception" in result.stdout
