"""``pyql ask --kb-timeout`` (issue 24, item 1): a hung SPARQL endpoint costs each query the
given seconds, not 30, and the step says the query timed out."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from pyql.cli import app
from tests.support.fake_openai import FakeOpenAI, Text
from tests.support.hostile_sparql import HungEndpoint


@pytest.mark.parametrize("flag", ["--timeout", "--kb-timeout"])  # issue 36, item 19: one name
def test_kb_timeout_bounds_each_query_of_a_hung_endpoint(fake_openai: FakeOpenAI,
                                                         flag: str) -> None:
    fake_openai.push(Text("Thought 1: relations.\nAction 1: get_relation(Christopher Nolan)"),
                     Text("Thought 2: again.\nAction 2: get_relation(Christopher Nolan)"))
    env = {"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": fake_openai.api_key,
           "PYQL_MODEL": "gpt-test"}
    with HungEndpoint() as hung:
        started = time.monotonic()
        result = CliRunner().invoke(app, [
            "ask", "which films did Christopher Nolan direct", "--kb", hung.url,
            "--entity", "Christopher Nolan=http://example.org/movies/Christopher_Nolan",
            flag, "0.2", "--max-steps", "2", "--no-guidelines"], env=env)
        took = time.monotonic() - started
        assert hung.requests >= 2
    assert result.exit_code == 3, (result.stdout, result.stderr)  # the step cap, no answer
    assert result.stdout.count("the query timed out") == 2 and "within 0.2s" in result.stdout
    assert took < 10
