"""The shared retry loop (pyql.retrying), wall-clock deadlines (pyql.deadline), and the
evaluation's GatedLLM on top of them."""

from __future__ import annotations

import random
import threading
import time

import pytest

from pyql.agent.errors import LLMRateLimitError, LLMServerError, LLMTimeoutError
from pyql.agent.evaluation.specs import GatedLLM, RateGate
from pyql.agent.llm.clients import ScriptedLLM
from pyql.deadline import Deadline, DeadlineExceeded, call_within, current, within
from pyql.retrying import Retrying, RetryPolicy, Transient, retry_call


class Clock:
    """A fake monotonic clock whose sleep advances it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(errors: list[BaseException], result: str = "ok"):
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return result

    return fn, calls


def test_transient_failures_are_retried_with_bounded_jittered_backoff() -> None:
    clock = Clock()
    fn, calls = failing([Transient(ValueError("a")), Transient(ValueError("b"))])
    policy = RetryPolicy(retries=3, backoff=1.0)
    assert retry_call(fn, policy, sleep=clock.sleep, rng=random.Random(1)) == ("ok", 2)
    first, second = clock.sleeps
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0  # equal jitter around 1 s and 2 s


def test_retries_are_bounded_and_the_typed_error_is_raised_with_its_cause() -> None:
    clock = Clock()
    cause = ConnectionResetError("reset")
    errors: list[BaseException] = []
    for _ in range(5):
        try:
            raise Transient(LLMServerError("down", status=503)) from cause
        except Transient as exc:
            errors.append(exc)
    fn, calls = failing(errors)
    with pytest.raises(LLMServerError) as info:
        retry_call(fn, RetryPolicy(retries=2, backoff=0.1, jitter=False), sleep=clock.sleep)
    assert len(calls) == 3 and clock.sleeps == [0.1, 0.2]
    assert info.value.status == 503 and info.value.__cause__ is cause


def test_other_errors_are_not_retried() -> None:
    fn, calls = failing([KeyError("bug")])
    with pytest.raises(KeyError):
        retry_call(fn, RetryPolicy(retries=5), sleep=lambda s: None)
    assert len(calls) == 1


def test_retry_after_is_honoured_and_a_too_long_one_gives_up() -> None:
    clock = Clock()
    fn, _ = failing([Transient(ValueError("429"), retry_after=7.0)])
    assert retry_call(fn, RetryPolicy(retries=2), sleep=clock.sleep)[0] == "ok"
    assert clock.sleeps == [7.0]
    fn, calls = failing([Transient(ValueError("429"), retry_after=600.0)])
    with pytest.raises(ValueError):
        retry_call(fn, RetryPolicy(retries=2, max_retry_after=60), sleep=clock.sleep)
    assert len(calls) == 1 and clock.sleeps == [7.0]


def test_no_retry_runs_past_the_deadline() -> None:
    clock = Clock()
    deadline = Deadline(3.5, clock=clock)
    fn, calls = failing([Transient(ValueError(str(i))) for i in range(10)])
    with pytest.raises(ValueError, match="2"):
        retry_call(fn, RetryPolicy(retries=10, backoff=1.0, jitter=False), sleep=clock.sleep,
                   deadline=deadline)
    assert clock.sleeps == [1.0, 2.0] and len(calls) == 3  # the next wait (4 s) would not fit


def test_give_up_can_replace_the_error() -> None:
    fn, _ = failing([Transient(TimeoutError("t"))] * 3)
    with pytest.raises(RuntimeError, match="after 3"):
        retry_call(fn, RetryPolicy(retries=2, backoff=0), sleep=lambda s: None,
                   give_up=lambda error, n: RuntimeError(f"after {n}"))


def test_call_within_returns_raises_and_stops_waiting() -> None:
    assert call_within(lambda: 42, 1.0) == 42
    with pytest.raises(KeyError):
        call_within(lambda: {}["x"], 1.0)
    release = threading.Event()
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded) as info:
        call_within(lambda: release.wait(5), 0.2)
    assert time.monotonic() - start < 0.5 and info.value.seconds == 0.2
    release.set()


def test_call_within_keeps_the_callers_context() -> None:
    with within(10.0) as deadline:
        assert call_within(current, 1.0) is deadline


def test_deadline_configuration() -> None:
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError):
            Deadline(bad)
    with within(None) as nothing:
        assert nothing is None


def test_gated_llm_stops_retrying_at_the_questions_deadline() -> None:
    # issue 15 item 3: a failing server used to cost 138 s of backoff per question
    clock = Clock()
    gate = RateGate(clock=clock, sleep=clock.sleep)
    llm = GatedLLM(ScriptedLLM([LLMServerError("500")] * 20), gate, max_retries=50,
                   backoff_base=1.0, backoff_max=60.0, rng=random.Random(0))
    with within(Deadline(10.0, clock=clock)), pytest.raises(LLMServerError):
        llm.complete([{"role": "user", "content": "q"}])
    assert clock.now <= 10.0
    assert len(clock.sleeps) < 5
    # once the deadline has passed, no call is made at all
    script = ScriptedLLM(["never"])
    with within(Deadline(1.0, clock=clock)) as deadline:
        clock.now += 2.0
        with pytest.raises(LLMTimeoutError) as info:
            GatedLLM(script, gate).complete([])
    assert script.calls == [] and info.value.deadline == deadline.seconds


def test_gated_llm_rate_limit_closes_the_gate_for_retry_after() -> None:
    clock = Clock()
    gate = RateGate(clock=clock, sleep=clock.sleep)
    llm = GatedLLM(ScriptedLLM([LLMRateLimitError("429", retry_after=12.0), "ok"]), gate)
    reply = llm.complete([{"role": "user", "content": "q"}])
    assert reply.text == "ok" and reply.retries == 1
    assert gate.trips == 1 and clock.now == pytest.approx(12.0)


def test_gated_llm_has_a_deadline_per_call_by_default() -> None:
    # a hung server times out every attempt; without a question deadline the call still ends
    clock = Clock()
    gate = RateGate(clock=clock, sleep=clock.sleep)

    class Hung:
        model = "hung"

        def complete(self, messages: object, *, stop: object = None, tools: object = None
                     ) -> object:
            clock.now += 30.0  # one attempt's timeout
            raise LLMTimeoutError("no reply within 30s", model="hung", timeout=30.0)

    with pytest.raises(LLMTimeoutError):
        GatedLLM(Hung(), gate, rng=random.Random(0)).complete([])
    assert clock.now <= 61.0  # the default 60 s per call (two attempts and a backoff)
    with pytest.raises(ValueError):
        GatedLLM(Hung(), gate, deadline=0)


def test_clients_keep_their_retry_knobs_in_one_policy() -> None:
    gated = GatedLLM(ScriptedLLM([]), RateGate(), max_retries=3, backoff_base=0.5,
                     backoff_max=4.0, max_retry_after=9.0, rng=random.Random(1))
    assert isinstance(gated, Retrying)
    assert gated.retry_policy == RetryPolicy(retries=3, backoff=0.5, backoff_max=4.0,
                                             max_retry_after=9.0)
    # the backoff is the policy's, drawn from the client's own random source
    assert gated.backoff(2) == gated.retry_policy.delay(2, random.Random(1))
