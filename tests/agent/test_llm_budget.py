"""``--deadline`` is LLM time (issue 24, item 4): a :class:`~pyql.deadline.Budget` is used up
only while LLM calls run, so time spent before the first call (and between calls) does not
count, and when it runs out the error says the deadline ran out instead of blaming the
server."""

from __future__ import annotations

import random
import time

import pytest
from typer.testing import CliRunner

from pyql.agent.errors import LLMTimeoutError
from pyql.agent.llm.clients import OpenAIChat
from pyql.cli import app
from pyql.deadline import Budget, charged, within
from pyql.demo import movies_path
from tests.support.fake_openai import FakeOpenAI, Slow, Text

MESSAGES = [{"role": "user", "content": "q"}]


def chat(server: FakeOpenAI, **kw: object) -> OpenAIChat:
    return OpenAIChat("gpt-test", base_url=server.base_url, api_key=server.api_key,
                      rng=random.Random(0), **kw)  # type: ignore[arg-type]


def test_only_the_time_of_llm_calls_uses_up_a_budget(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Text("warm-up"), *[Slow(0.3, Text("ok"))] * 6)
    llm = chat(fake_openai, max_retries=0)
    llm.complete(MESSAGES)  # the SDK's first import and client: not this test's concern
    with within(Budget(1.0)) as budget:
        time.sleep(1.1)  # before the first call: linking, prompts... not LLM time
        assert budget is not None and budget.remaining() == 1.0
        assert llm.complete(MESSAGES).text == "ok"
        time.sleep(0.3)  # between calls: KB queries
        llm.complete(MESSAGES)
        assert 0.55 <= budget.elapsed() < 1.0  # the 1.4 s of sleeps are not in it
        with pytest.raises(LLMTimeoutError) as info:
            for _ in range(4):
                llm.complete(MESSAGES)
    error = info.value
    assert error.deadline == 1.0 and error.elapsed is not None and error.elapsed >= 1.0
    assert "the 1s deadline ran out" in str(error) and "no reply" not in str(error)


def test_an_exhausted_budget_says_so_before_any_attempt(fake_openai: FakeOpenAI) -> None:
    llm = chat(fake_openai)
    budget = Budget(0.05)
    with within(budget):
        with charged():
            time.sleep(0.1)
        with pytest.raises(LLMTimeoutError) as info:
            llm.complete(MESSAGES)
    assert info.value.attempts == 0 and not fake_openai.chat_requests
    assert "deadline ran out" in str(info.value) and "0 attempt(s)" in str(info.value)


SCRIPT = [
    Text("Thought 1: relations.\nAction 1: get_relation(Christopher Nolan)"),
    Text("Thought 2: films.\nAction 2: add_fact(?film, ex:directed_by, Christopher Nolan)"),
    Text("Thought 3: answer.\nAction 3: set_answer(?film)"),
    Text("Thought 4: done.\nAction 4: execute()"),
]


def test_ask_deadline_counts_llm_time_and_says_it_ran_out(fake_openai: FakeOpenAI) -> None:
    env = {"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": fake_openai.api_key,
           "PYQL_MODEL": "gpt-test"}
    args = ["ask", "which films did Christopher Nolan direct", "--kb", str(movies_path()),
            "--entity", "Christopher Nolan=ex:Christopher_Nolan"]
    # four replies of 0.3 s: 1.2 s of LLM time fit a 2 s deadline, whatever the rest takes
    fake_openai.push(*[Slow(0.3, reply) for reply in SCRIPT])
    ok = CliRunner().invoke(app, [*args, "--deadline", "2"], env=env)
    assert ok.exit_code == 0, (ok.stdout, ok.stderr)
    assert "Answer: " in ok.stdout
    # a 0.8 s deadline runs out on the third reply: the deadline is named, not the server
    fake_openai.push(*[Slow(0.3, reply) for reply in SCRIPT])
    short = CliRunner().invoke(app, [*args, "--deadline", "0.8"], env=env)
    assert short.exit_code == 1
    [line] = [line for line in short.stderr.splitlines() if line.startswith("error: ")]
    assert "ran out of time" in line and "0.8s deadline ran out" in line
    assert "is it up" not in line and "no reply" not in line
