"""Concurrent runs equal sequential ones; a rate limit pauses every worker (fake clock)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pyql.agent.errors import LLMAuthError, LLMRateLimitError, LLMServerError
from pyql.agent.evaluation.records import EvalItem, RunConfig
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import EvalAbort, evaluate, read_results, resume
from pyql.agent.evaluation.specs import GatedLLM, RateGate
from pyql.agent.evaluation.standins.gold import GoldLLM
from pyql.agent.llm.clients import LLM, LLMReply, Message, ScriptedLLM
from tests.evaluation.support import (
    FakeClock,
    comparable_metrics,
    comparable_run,
    require_data,
)


def test_concurrency_4_equals_concurrency_1(tmp_path: Path) -> None:
    require_data("metaqa")
    runs = {}
    for k in (1, 4):
        config = RunConfig(dataset="metaqa-2hop", llm="gold", limit=24, concurrency=k)
        metrics = evaluate(config, tmp_path / f"k{k}", progress=False)
        runs[k] = (metrics, comparable_run(tmp_path / f"k{k}"))
    assert runs[4][1] == runs[1][1]
    assert comparable_metrics(runs[4][0]) == comparable_metrics(runs[1][0])
    assert runs[4][0]["run"]["this_session"]["concurrency"] == 4


def test_one_worker_hands_its_answers_over_in_batches_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One worker thread answers back to back for up to BATCH_SECONDS: handed over after each
    question or after all of them, the results are the same lines in the selection's order."""
    from pyql.agent.evaluation import runner

    require_data("metaqa")
    config = RunConfig(dataset="metaqa-2hop", llm="gold", limit=12)
    runs = {}
    for seconds in (0.0, 60.0):
        monkeypatch.setattr(runner, "BATCH_SECONDS", seconds)
        metrics = evaluate(config, tmp_path / f"b{seconds}", progress=False)
        runs[seconds] = (metrics, list(comparable_run(tmp_path / f"b{seconds}").values()))
    assert runs[0.0][1] == runs[60.0][1] and len(runs[0.0][1]) == 12
    order = {seconds: [json.loads(line)["id"] for line in
                       (tmp_path / f"b{seconds}" / "results.jsonl").read_text().splitlines()]
             for seconds in runs}
    assert order[0.0] == order[60.0] == [r["id"] for r in runs[0.0][1]]
    assert comparable_metrics(runs[0.0][0]) == comparable_metrics(runs[60.0][0])


def test_a_batch_stops_after_its_seconds_or_an_abort_and_returns_what_it_did_not_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker thread or process answers before it hands over: up to BATCH_SECONDS of
    questions (the rest goes back to the queue), or those before an abort."""
    from pyql.agent.evaluation import runner

    items = [f"q{i}" for i in range(5)]
    monkeypatch.setattr(runner, "BATCH_SECONDS", 60.0)
    assert runner._batch(items, str.upper) == (["Q0", "Q1", "Q2", "Q3", "Q4"], [], None)
    monkeypatch.setattr(runner, "BATCH_SECONDS", 0.0)
    assert runner._batch(items, str.upper) == (["Q0"], items[1:], None)
    stop = EvalAbort("stop")

    def work(item: str) -> str:
        if item == "q2":
            raise stop
        return item.upper()

    monkeypatch.setattr(runner, "BATCH_SECONDS", 60.0)
    assert runner._batch(items, work) == (["Q0", "Q1"], [], stop)


# -- the rate gate ------------------------------------------------------------------------------


class _RecordingGate(RateGate):
    """A gate that logs trips and the end of every wait, in order."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock, sleep=clock.sleep)
        self.events: list[tuple[str, str, float, float]] = []
        self._events_lock = threading.Lock()

    def trip(self, seconds: float) -> None:
        super().trip(seconds)
        with self._events_lock:
            self.events.append(("trip", threading.current_thread().name, self.clock(),
                                self.deadline))

    def wait(self) -> float:
        with self._events_lock:
            self.events.append(("wait", threading.current_thread().name, self.clock(), 0.0))
        waited = super().wait()
        with self._events_lock:
            self.events.append(("open", threading.current_thread().name, self.clock(), waited))
        return waited


def test_a_rate_limit_pauses_the_other_workers_until_retry_after() -> None:
    clock = FakeClock()
    gate = RateGate(clock=clock, sleep=clock.sleep)
    tripped = threading.Event()
    seen: dict[str, float] = {}

    class Limited:
        model = "fake"

        def __init__(self) -> None:
            self.calls = 0

        def complete(self, messages: Sequence[Message], *, stop: Any = None, tools: Any = None
                     ) -> LLMReply:
            self.calls += 1
            if self.calls == 1:
                raise LLMRateLimitError("429", model="fake", retry_after=30.0)
            seen["a"] = clock()
            return LLMReply(text="a")

    class Other:
        model = "fake"

        def complete(self, messages: Sequence[Message], *, stop: Any = None, tools: Any = None
                     ) -> LLMReply:
            seen["b"] = clock()
            return LLMReply(text="b")

    original_trip = gate.trip

    def trip(seconds: float) -> None:
        original_trip(seconds)
        tripped.set()

    gate.trip = trip  # type: ignore[method-assign]
    a = GatedLLM(Limited(), gate)
    b = GatedLLM(Other(), gate)

    def worker_b() -> None:
        tripped.wait(5)
        b.complete([{"role": "user", "content": "q"}])

    thread = threading.Thread(target=worker_b, name="worker-b")
    thread.start()
    reply = a.complete([{"role": "user", "content": "q"}])
    thread.join(5)
    assert reply.text == "a" and reply.retries == 1
    assert gate.trips == 1
    assert seen["b"] >= 30.0  # worker b was not refused, yet it waited for the deadline
    assert seen["a"] >= 30.0
    assert any(name == "worker-b" and seconds > 0 for name, seconds in clock.sleeps)


def test_server_errors_are_retried_by_that_worker_alone() -> None:
    clock = FakeClock(yield_seconds=0.0)
    gate = RateGate(clock=clock, sleep=clock.sleep)
    llm = GatedLLM(ScriptedLLM([LLMServerError("500"), LLMServerError("502"), "ok"]), gate,
                   backoff_base=1.0)
    assert llm.complete([{"role": "user", "content": "q"}]).text == "ok"
    assert gate.trips == 0 and len(clock.sleeps) == 2
    quota = GatedLLM(ScriptedLLM([LLMRateLimitError("quota", code="insufficient_quota")]), gate)
    with pytest.raises(LLMRateLimitError):
        quota.complete([])
    too_long = GatedLLM(ScriptedLLM([LLMRateLimitError("429", retry_after=9999)]), gate)
    with pytest.raises(LLMRateLimitError):
        too_long.complete([])


class _Provider:
    """Gold replies; the LLM of ``limited`` is refused once (429) at its second call."""

    spec = "test"

    def __init__(self, gate: RateGate, limited: str) -> None:
        self.gate = gate
        self.limited = limited

    def for_item(self, item: EvalItem) -> LLM:
        gold = GoldLLM(item.program, tools=item.tools)
        if item.id != self.limited:
            return GatedLLM(gold, self.gate)
        calls = [0]

        class Limited:
            model = "gold"

            def complete(self, messages: Sequence[Message], *, stop: Any = None,
                         tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
                calls[0] += 1
                if calls[0] == 2:
                    raise LLMRateLimitError("429", model="gold", retry_after=30.0)
                return gold.complete(messages, stop=stop, tools=tools)

        return GatedLLM(Limited(), self.gate)


def test_evaluate_pauses_every_worker_on_a_429(tmp_path: Path, mini_metaqa: Path) -> None:
    clock = FakeClock()
    gate = _RecordingGate(clock)
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=16,
                       concurrency=4)
    metrics = evaluate(config, tmp_path / "run", progress=False,
                       provider=_Provider(gate, "1hop-dev-2"), gate=gate)
    assert metrics["hit@1"] == 1.0 and metrics["errors"] == 0
    assert metrics["run"]["rate_limit_pauses"] == 1
    assert metrics["run"]["rate_limit_wait_seconds"] >= 30.0
    events = gate.events
    [trip_at] = [i for i, e in enumerate(events) if e[0] == "trip"]
    deadline = events[trip_at][3]
    # every wait that began after the trip opened only at the deadline or later
    begun_after = {i for i, e in enumerate(events) if e[0] == "wait" and i > trip_at}
    assert begun_after
    for i in begun_after:
        thread = events[i][1]
        opened = next(e for e in events[i + 1:] if e[0] == "open" and e[1] == thread)
        assert opened[2] >= deadline
    paused = {e[1] for e in events[trip_at:] if e[0] == "open" and e[3] > 0}
    assert len(paused) >= 2, "the refused worker and at least one other paused"


def test_an_auth_error_stops_the_run_and_keeps_what_was_done(tmp_path: Path,
                                                             mini_metaqa: Path) -> None:
    class Provider:
        spec = "test"

        def for_item(self, item: EvalItem) -> LLM:
            if item.id == "1hop-dev-5":
                return ScriptedLLM([LLMAuthError("invalid_api_key", status=401)])
            return GoldLLM(item.program)

    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=10)
    with pytest.raises(EvalAbort, match="LLMAuthError"):
        evaluate(config, tmp_path / "run", progress=False, provider=Provider())
    done = [r.id for r in read_results(tmp_path / "run")]
    assert done == [f"1hop-dev-{i}" for i in range(5)]
    metrics = resume(tmp_path / "run", progress=False)  # fixed: the gold provider of the config
    assert metrics["n"] == 10 and metrics["errors"] == 0


def test_failing_questions_are_recorded_and_the_run_goes_on(tmp_path: Path,
                                                            mini_metaqa: Path) -> None:
    class Provider:
        spec = "test"

        def for_item(self, item: EvalItem) -> LLM:
            if item.id in ("1hop-dev-1", "1hop-dev-3"):
                return ScriptedLLM([LLMServerError("502 after retries", status=502)])
            return GoldLLM(item.program)

    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=6,
                       concurrency=2)
    metrics = evaluate(config, tmp_path / "run", progress=False, provider=Provider())
    # an LLM server failure is an outage: counted, kept out of the scores, not a wrong answer
    assert metrics["n"] == 6 and metrics["scored"] == 4 and metrics["errors"] == 0
    assert metrics["outages"]["llm_error"] == 2 and metrics["outage_total"] == 2
    assert metrics["hit@1"] == 1.0
    assert metrics["run"]["complete"] is False  # resume re-runs the outages
    failed = {r.id: r for r in read_results(tmp_path / "run") if r.error}
    assert set(failed) == {"1hop-dev-1", "1hop-dev-3"}
    assert failed["1hop-dev-1"].error.startswith("LLMServerError: 502")
    assert failed["1hop-dev-1"].status == failed["1hop-dev-1"].stop_reason == "llm_error"
    assert failed["1hop-dev-1"].metrics == {}


def test_a_question_error_of_its_own_scores_zero(tmp_path: Path, mini_metaqa: Path) -> None:
    class Provider:
        spec = "test"

        def for_item(self, item: EvalItem) -> LLM:
            if item.id == "1hop-dev-1":
                return GoldLLM(None, reason="no gold program")
            return GoldLLM(item.program)

    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=4)
    metrics = evaluate(config, tmp_path / "run", progress=False, provider=Provider())
    assert metrics["n"] == metrics["scored"] == 4 and metrics["errors"] == 1
    assert metrics["hit@1"] == pytest.approx(3 / 4) and metrics["outage_total"] == 0
    [failed] = [r for r in read_results(tmp_path / "run") if r.error]
    assert failed.status == failed.stop_reason == "error" and failed.metrics["hit@1"] == 0.0


def test_a_failed_question_counts_the_hints_of_its_steps(tmp_path: Path,
                                                        mini_metaqa: Path) -> None:
    """A question that raised after a guideline fired: its result counts that trigger (as a
    question that ran to its end does, from its usage), and its trajectory has the step."""
    script = ["Thought 1 : look.\nAction 1 : get_relation(?movie)", RuntimeError("broke")]

    class Provider:
        spec = "test"

        def for_item(self, item: EvalItem) -> LLM:
            return ScriptedLLM(script) if item.id == "1hop-dev-1" else GoldLLM(item.program)

    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=3)
    metrics = evaluate(config, tmp_path / "run", progress=False, provider=Provider())
    [failed] = [r for r in read_results(tmp_path / "run") if r.error]
    assert failed.status == "error" and failed.error == "RuntimeError: broke"
    [step] = RunDir(tmp_path / "run").trajectories([failed.id])[failed.id].steps
    assert step.hint is not None and failed.guidelines == {step.hint: 1}
    assert failed.usage["steps"] == 1 and failed.corrected == {}
    assert metrics["guidelines"]["triggers"] == 1


def test_a_bug_in_every_question_aborts(tmp_path: Path, mini_metaqa: Path) -> None:
    class Provider:
        spec = "test"

        def for_item(self, item: EvalItem) -> LLM:
            raise TypeError("a bug")

    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=20)
    with pytest.raises(EvalAbort, match="unexpected errors"):
        evaluate(config, tmp_path / "run", progress=False, provider=Provider())


def test_worker_processes_give_the_same_results(tmp_path: Path, mini_metaqa: Path) -> None:
    """A CPU-bound stand-in run in two worker processes (spawned, each with its own KB handle)
    writes the same results as one process; the parent alone writes the files."""
    from pyql.agent.evaluation.runner import TRAJECTORIES, _processes
    from pyql.agent.trajectory import load_trajectories

    runs = {}
    for processes in (1, 2):
        config = RunConfig(dataset="metaqa-1hop", llm="noisy-gold:0.3", seed=3,
                           data_dir=str(mini_metaqa), limit=16, processes=processes)
        metrics = evaluate(config, tmp_path / str(processes), progress=False)
        assert metrics["run"]["this_session"]["processes"] == processes
        trajectories = RunDir(tmp_path / str(processes)).trajectories()
        results = read_results(tmp_path / str(processes))
        runs[processes] = {r.id: (r.predicted, r.metrics,
                                  [s.action for s in trajectories[r.id].steps])
                           for r in results}
        for r in results:  # the row of a question counts its trajectory's steps and hints
            steps = trajectories[r.id].steps
            assert r.usage["steps"] == len(steps)
            assert r.guidelines == Counter(s.hint for s in steps if s.hint)
        assert any(r.guidelines for r in results)  # the noisy stand-in's mistakes fired some
        assert len(load_trajectories(tmp_path / str(processes) / TRAJECTORIES)) == 16
    assert runs[1] == runs[2] and len(runs[2]) == 16
    auto = RunConfig(dataset="metaqa-1hop", llm="gold", processes=None)
    assert _processes(auto, 10, None) == 1  # a short run stays in this process
    assert _processes(auto.model_copy(update={"llm": "openai:m"}), 10**5, None) == 1
    # one local model server, its slots serve the threads: never a process per core
    assert _processes(auto.model_copy(update={"llm": "local"}), 10**5, None) == 1
    assert _processes(auto.model_copy(update={"llm": "local:/m.gguf"}), 10**5, None) == 1
