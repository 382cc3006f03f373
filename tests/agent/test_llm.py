"""LLM clients: the real ``openai`` client code path against the fake server, and the offline
scripted/replay clients."""

from __future__ import annotations

import random
import time

import pytest

from pyql.agent.errors import (
    LLMAuthError,
    LLMBadRequestError,
    LLMContextLengthError,
    LLMError,
    LLMModelNotFoundError,
    LLMRateLimitError,
    LLMResponseError,
    LLMScriptExhaustedError,
    LLMServerError,
    LLMTimeoutError,
)
from pyql.agent.llm.accounting import Price, PriceTable, TokenCounter, TokenUsage, Usage
from pyql.agent.llm.clients import (
    LLMReply,
    OpenAIChat,
    OpenAIEmbeddings,
    ScriptedLLM,
    ToolCall,
    apply_stop,
    prompt_fingerprint,
)
from pyql.deadline import Deadline, within
from pyql.errors import PyqlError
from tests.support.fake_openai import (
    ContextTooLong,
    Drip,
    FakeOpenAI,
    Hang,
    Malformed,
    RateLimit,
    ServerError,
    Slow,
    Status,
    Text,
    ToolCalls,
    fake_embedding,
)

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


class FakeSleep:
    """Records the delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def chat(server: FakeOpenAI, sleep: FakeSleep | None = None, **kw: object) -> OpenAIChat:
    options = {"base_url": server.base_url, "api_key": server.api_key,
               "sleep": sleep or FakeSleep(), "rng": random.Random(0), **kw}
    return OpenAIChat("gpt-test", **options)  # type: ignore[arg-type]


def test_text_reply_usage_and_stop(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Text("Thought 1 : x\nAction 1 : execute()\nObservation 1 : invented",
                          usage=(120, 30)))
    reply = chat(fake_openai).complete(MESSAGES, stop=["\nObservation"])
    assert reply.text == "Thought 1 : x\nAction 1 : execute()"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (120, 30)
    assert not reply.usage.estimated
    assert reply.model == "gpt-test" and reply.retries == 0
    body = fake_openai.chat_requests[-1].body
    assert body["stop"] == ["\nObservation"]
    assert body["messages"] == MESSAGES
    assert body["temperature"] == 0.0
    assert fake_openai.chat_requests[-1].headers["authorization"] == f"Bearer {fake_openai.api_key}"


def test_tool_calls_are_returned_raw(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(ToolCalls([("get_relation", {"node": "m.0x"}), ("add_fact", "{broken")],
                               content="Thought 1 : two at once"))
    tools = [{"type": "function", "function": {"name": "get_relation", "parameters": {}}}]
    reply = chat(fake_openai).complete(MESSAGES, tools=tools)
    assert reply.text == "Thought 1 : two at once"
    assert [c.name for c in reply.tool_calls] == ["get_relation", "add_fact"]
    assert reply.tool_calls[0].parsed_arguments() == {"node": "m.0x"}
    with pytest.raises(ValueError, match="not valid JSON"):
        reply.tool_calls[1].parsed_arguments()
    assert fake_openai.chat_requests[-1].body["tools"] == tools


def test_missing_usage_is_estimated(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Text("hello world", usage=None))
    reply = chat(fake_openai).complete(MESSAGES)
    assert reply.usage.estimated
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0


def test_rate_limit_honours_retry_after(fake_openai: FakeOpenAI) -> None:
    sleep = FakeSleep()
    fake_openai.push(RateLimit(retry_after=7), RateLimit(retry_after=2.5), Text("ok"))
    reply = chat(fake_openai, sleep).complete(MESSAGES)
    assert reply.text == "ok"
    assert sleep.delays == [7.0, 2.5]
    assert reply.retries == 2
    assert len(fake_openai.chat_requests) == 3


def test_rate_limit_gives_up_with_retry_after(fake_openai: FakeOpenAI) -> None:
    sleep = FakeSleep()
    fake_openai.push(*[RateLimit(retry_after=1)] * 3)
    with pytest.raises(LLMRateLimitError) as info:
        chat(fake_openai, sleep, max_retries=2).complete(MESSAGES)
    assert info.value.retry_after == 1.0 and info.value.status == 429
    assert sleep.delays == [1.0, 1.0]


def test_too_long_retry_after_is_not_waited(fake_openai: FakeOpenAI) -> None:
    sleep = FakeSleep()
    fake_openai.push(RateLimit(retry_after=3600))
    with pytest.raises(LLMRateLimitError) as info:
        chat(fake_openai, sleep, max_retry_after=60).complete(MESSAGES)
    assert info.value.retry_after == 3600 and sleep.delays == []


def test_insufficient_quota_is_not_retried(fake_openai: FakeOpenAI) -> None:
    sleep = FakeSleep()
    fake_openai.push(RateLimit(retry_after=None, code="insufficient_quota"))
    with pytest.raises(LLMRateLimitError) as info:
        chat(fake_openai, sleep).complete(MESSAGES)
    assert info.value.code == "insufficient_quota" and sleep.delays == []


def test_server_errors_back_off_exponentially(fake_openai: FakeOpenAI) -> None:
    sleep = FakeSleep()
    fake_openai.push(ServerError(500), ServerError(503), Text("ok"))
    reply = chat(fake_openai, sleep, backoff_base=1.0).complete(MESSAGES)
    assert reply.text == "ok"
    first, second = sleep.delays
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0  # equal jitter around 1s, 2s


def test_server_errors_exhaust_retries(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(*[ServerError(502)] * 2)
    with pytest.raises(LLMServerError) as info:
        chat(fake_openai, max_retries=1).complete(MESSAGES)
    assert info.value.status == 502


def test_timeout_then_success(fake_openai: FakeOpenAI) -> None:
    sleep = FakeSleep()
    fake_openai.push(Slow(5.0, then=Text("late")), Text("on time"))
    reply = chat(fake_openai, sleep, timeout=0.3).complete(MESSAGES)
    assert reply.text == "on time"
    assert len(sleep.delays) == 1 and reply.retries == 1


def test_timeout_exhausts_retries(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Slow(5.0), Slow(5.0))
    with pytest.raises(LLMTimeoutError):
        chat(fake_openai, timeout=0.2, max_retries=1).complete(MESSAGES)


# -- time bounds (issue 14, issue 15 item 3): a hung or dripping server costs bounded time --------


def test_a_hung_server_costs_the_attempts_and_no_more(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Hang(), Hang(), Hang())
    llm = chat(fake_openai, timeout=0.4, max_retries=2, deadline=None)
    start = time.monotonic()
    with pytest.raises(LLMTimeoutError) as info:
        llm.complete(MESSAGES)
    elapsed = time.monotonic() - start
    # the attempts are counted below; the clock only has to show they were cut, not waited out
    # (a loaded machine, e.g. a local model decoding on the other core, stretches each one)
    assert 1.1 <= elapsed < 4.0
    error = info.value
    assert (error.timeout, error.attempts, error.deadline) == (0.4, 3, None)
    assert error.elapsed == pytest.approx(elapsed, abs=0.2)
    assert len(fake_openai.chat_requests) == 3


def test_a_slow_drip_is_cut_at_the_timeout(fake_openai: FakeOpenAI) -> None:
    # a byte every 0.1 s never trips a per-read timeout; the wall-clock bound does
    fake_openai.push(Drip(interval=0.1, then=Text("a reply that would take a minute to arrive")))
    start = time.monotonic()
    with pytest.raises(LLMTimeoutError) as info:
        chat(fake_openai, timeout=0.5, max_retries=0).complete(MESSAGES)
    assert time.monotonic() - start < 1.0
    assert info.value.attempts == 1 and info.value.timeout == 0.5


def test_a_timely_drip_is_read_whole(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Drip(interval=0.01, chunk=64, then=Text("slow but in time")))
    assert chat(fake_openai, timeout=10).complete(MESSAGES).text == "slow but in time"


def test_the_deadline_of_the_context_bounds_every_retry(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(*[Hang()] * 6)
    llm = chat(fake_openai, timeout=0.4, max_retries=5, deadline=None, backoff_base=0.01)
    start = time.monotonic()
    with llm.with_deadline(1.0), pytest.raises(LLMTimeoutError) as info:
        llm.complete(MESSAGES)
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 1.4
    assert info.value.deadline == 1.0 and info.value.attempts == 3  # 0.4 + 0.4 + 0.2
    # an exhausted deadline sends nothing more
    requests = len(fake_openai.chat_requests)
    with within(Deadline(0.01)):
        time.sleep(0.02)
        with pytest.raises(LLMTimeoutError) as late:
            llm.complete(MESSAGES)
    assert late.value.attempts == 0 and len(fake_openai.chat_requests) == requests


def test_the_client_deadline_bounds_one_call(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(Hang(), Hang(), Text("never reached"))
    llm = chat(fake_openai, timeout=0.4, max_retries=5, deadline=0.6, backoff_base=0.01)
    start = time.monotonic()
    with pytest.raises(LLMTimeoutError) as info:
        llm.complete(MESSAGES)
    assert time.monotonic() - start < 1.0
    assert info.value.deadline == 0.6 and info.value.attempts == 2


def test_a_shorter_outer_deadline_stays_in_force() -> None:
    with within(1.0) as outer, within(100.0) as inner:
        assert inner is outer


def test_time_bound_configuration_is_checked(fake_openai: FakeOpenAI) -> None:
    for bad in ({"timeout": 0}, {"max_retries": -1}, {"deadline": 0}):
        with pytest.raises(ValueError):
            chat(fake_openai, **bad)


@pytest.mark.parametrize(
    ("behaviour", "kwargs", "error", "status", "code"),
    [
        (None, {"api_key": "sk-wrong"}, LLMAuthError, 401, "invalid_api_key"),
        (None, {"model": "gpt-nope"}, LLMModelNotFoundError, 404, "model_not_found"),
        (ContextTooLong(), {}, LLMContextLengthError, 400, "context_length_exceeded"),
        (Status(400, {"error": {"message": "bad temperature", "code": None}}), {},
         LLMBadRequestError, 400, None),
        (Malformed(), {}, LLMResponseError, None, None),
    ],
)
def test_errors_are_typed(fake_openai: FakeOpenAI, behaviour: object, kwargs: dict[str, str],
                          error: type[LLMError], status: int | None, code: str | None) -> None:
    sleep = FakeSleep()
    if behaviour is not None:
        fake_openai.push(behaviour)
    options = {"base_url": fake_openai.base_url, "api_key": kwargs.get("api_key", fake_openai.api_key),
               "sleep": sleep}
    llm = OpenAIChat(kwargs.get("model", "gpt-test"), **options)  # type: ignore[arg-type]
    with pytest.raises(error) as info:
        llm.complete(MESSAGES)
    assert isinstance(info.value, PyqlError)
    assert info.value.status == status and info.value.code == code
    assert sleep.delays == []  # none of these is retried
    assert len(fake_openai.chat_requests) == 1


def test_no_key_is_an_auth_error() -> None:
    with pytest.raises(LLMAuthError, match="OPENAI_API_KEY"):
        OpenAIChat("gpt-test")


def test_configuration_from_environment(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", fake_openai.api_key)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("PYQL_MODEL", "gpt-4o-mini")
    fake_openai.push(Text("from env", usage=(1_000_000, 0)))
    llm = OpenAIChat()
    reply = llm.complete(MESSAGES)
    assert reply.text == "from env" and reply.model == "gpt-4o-mini"
    assert reply.cost == pytest.approx(0.15)  # default price table: $0.15 / 1M input tokens
    assert "from env" in llm.inspect_history(1)
    assert fake_openai.api_key not in llm.inspect_history(1)


def test_stop_rejected_is_retried_without_it(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(
        Status(400, {"error": {"message": "Unsupported parameter: 'stop'", "param": "stop",
                               "code": "unsupported_parameter"}}),
        Text("Thought 1 : a\nAction 1 : execute()\nObservation 1 : b"),
        Text("again\nObservation 2 : c"),
    )
    llm = chat(fake_openai)
    assert llm.complete(MESSAGES, stop=["\nObservation"]).text == "Thought 1 : a\nAction 1 : execute()"
    assert llm.complete(MESSAGES, stop=["\nObservation"]).text == "again"
    bodies = [r.body for r in fake_openai.chat_requests]
    assert "stop" in bodies[0] and "stop" not in bodies[1] and "stop" not in bodies[2]


def test_embeddings(fake_openai: FakeOpenAI) -> None:
    emb = OpenAIEmbeddings(base_url=fake_openai.base_url, api_key=fake_openai.api_key, batch_size=2)
    vectors = emb.embed(["film directed by", "directed_by", "release year"])
    assert len(vectors) == 3 and len(fake_openai.requests) == 2  # batched
    assert vectors[0] == pytest.approx(fake_embedding("film directed by"))
    assert emb.prompt_tokens > 0


def test_scripted_llm() -> None:
    llm = ScriptedLLM([
        "Thought 1 : a\nAction 1 : execute()\nObservation 1 : b",
        [("get_relation", {"node": "?x"})],
        {"text": "Thought 3 : c", "tool_calls": [{"name": "execute", "arguments": {}}]},
        LLMReply(text="ready"),
        LLMServerError("down", model="scripted"),
    ])
    assert llm.complete(MESSAGES, stop=["\nObservation"]).text == "Thought 1 : a\nAction 1 : execute()"
    assert llm.complete(MESSAGES).tool_calls == (ToolCall(id="call_0", name="get_relation",
                                                          arguments='{"node": "?x"}'),)
    third = llm.complete(MESSAGES)
    assert third.text == "Thought 3 : c" and third.tool_calls[0].name == "execute"
    assert llm.complete(MESSAGES).text == "ready"
    with pytest.raises(LLMServerError):
        llm.complete(MESSAGES)
    with pytest.raises(LLMScriptExhaustedError):
        llm.complete(MESSAGES)
    assert len(llm.calls) == 6 and llm.calls[0]["stop"] == ["\nObservation"]


def test_apply_stop_and_fingerprint() -> None:
    assert apply_stop("a\nObservation b\nObservation c", ["\nObservation"]) == "a"
    assert apply_stop("abc", ["x", "c"]) == "ab"
    assert apply_stop("abc", None) == "abc"
    assert prompt_fingerprint(MESSAGES) == prompt_fingerprint([dict(m) for m in MESSAGES])
    assert prompt_fingerprint(MESSAGES) != prompt_fingerprint(MESSAGES, [{"type": "function"}])


# -- accounted calls (every strategy's, through its Recorder) -------------------------------------
def test_an_accounted_call_estimates_and_prices_what_the_client_does_not_report() -> None:
    from pyql.agent.recorder import Recorder

    messages = [{"role": "user", "content": "who directed Kismet"}]
    counter = TokenCounter(encoding="cl100k_base")
    prices = PriceTable({"scripted": Price(1.0, 2.0)})
    call = Recorder(ScriptedLLM(["William Dieterle"]), counter=counter,
                    price_table=prices).llm(messages)
    assert call.text == "William Dieterle" and call.model == "scripted"
    assert call.tokens.estimated
    assert call.tokens.prompt_tokens == counter.count_messages(messages)
    assert call.tokens.completion_tokens == counter.count("William Dieterle")
    assert call.cost == pytest.approx(prices.cost("scripted", call.tokens.prompt_tokens,
                                                  call.tokens.completion_tokens))
    assert call.prompt_hash == prompt_fingerprint(messages)
    fields = call.step_fields()
    assert fields["reply_text"] == "William Dieterle" and fields["estimated_tokens"] is True
    assert fields["prompt_tokens"] == call.tokens.prompt_tokens and fields["cost"] == call.cost


def test_an_accounted_call_keeps_what_the_client_reported() -> None:
    from pyql.agent.recorder import Recorder

    class Reporting:
        model = "client-model"

        def complete(self, messages: list[dict[str, str]], **_: object) -> LLMReply:
            return LLMReply(text="ok", usage=TokenUsage(prompt_tokens=7, completion_tokens=2),
                            cost=0.5, model="")

    call = Recorder(Reporting(), counter=TokenCounter(),  # type: ignore[arg-type]
                    price_table=PriceTable()).llm([{"role": "user", "content": "x"}])
    assert (call.tokens.prompt_tokens, call.tokens.completion_tokens) == (7, 2)
    assert not call.tokens.estimated and call.cost == 0.5
    assert call.model == "client-model"  # the reply named none


def test_the_recorders_usage_is_the_sum_of_its_calls_and_steps() -> None:
    from pyql.agent.recorder import Recorder
    from pyql.agent.trajectory import Step

    class Reporting:
        model = "m"
        replies = iter([(TokenUsage(prompt_tokens=7, completion_tokens=2, cached_tokens=1), 0.1,
                         0.25), (None, None, 0.5)])

        def complete(self, messages: list[dict[str, str]], **_: object) -> LLMReply:
            usage, cost, latency = next(self.replies)
            return LLMReply(text="ok", usage=usage, cost=cost, latency=latency)

    counter = TokenCounter(encoding="cl100k_base")
    prices = PriceTable({"m": Price(1.0, 2.0)})
    rec = Recorder(Reporting(), counter=counter, price_table=prices)  # type: ignore[arg-type]
    calls = []
    for n in range(1, 3):
        calls.append(rec.llm([{"role": "user", "content": "x"}]))
        expected = Usage(  # made when asked for, and again after the next call
            llm_calls=n, prompt_tokens=sum(c.tokens.prompt_tokens for c in calls),
            completion_tokens=sum(c.tokens.completion_tokens for c in calls), cached_tokens=1,
            estimated_tokens=n == 2, cost=sum(c.cost for c in calls),
            llm_seconds=sum(c.reply.latency for c in calls))
        assert rec.usage == expected
    assert calls[1].tokens.estimated and calls[1].cost > 0  # counted and priced here
    rec.add(Step(n=1, hint="KB001", kb_queries=2, format_issue="no_action"))
    rec.add(Step(n=2, hint="KB001", kb_queries=1))
    rec.add_queries(3)
    expected = expected.model_copy(update={"guideline_triggers": {"KB001": 2}, "kb_queries": 6,
                                           "parse_failures": 1})
    assert rec.usage == expected
    final = rec.finish_usage(label_queries=2)
    assert final == expected.model_copy(update={"seconds": final.seconds, "label_queries": 2})
    assert final.seconds > 0 and rec.usage is final
