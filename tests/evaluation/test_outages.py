"""Outages are errors, not wrong answers (issue 15, item 1): a KB on a refused port and an LLM
server that fails or is slow end questions as ``backend_error`` / ``llm_error`` /
``llm_timeout``, kept out of the scores and counted in ``metrics.json``, with their trajectories;
N in a row stop the run with a one-line reason; ``resume`` runs them again."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from pyql.agent.evaluation.records import METRICS, RunConfig
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import (
    TRAJECTORIES,
    OutageAbort,
    evaluate,
    read_results,
    resume,
)
from pyql.agent.evaluation.specs import ReplayProvider, build_provider
from pyql.agent.trajectory import load_trajectories
from tests.support.fake_openai import FakeOpenAI, ServerError, Slow, Text


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_kb_down_ends_early_with_backend_errors_and_trajectories(tmp_path: Path,
                                                                  mini_metaqa: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/sparql"
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=10,
                       kb=url, max_outages=3)
    out = tmp_path / "run"
    with pytest.raises(OutageAbort) as caught:
        evaluate(config, out, progress=False)
    assert caught.value.status == "backend_error" and caught.value.count == 3
    reason = str(caught.value)
    assert "\n" not in reason and reason.startswith("the KB/DB is down: 3 questions in a row")
    assert "connection refused" in reason
    results = read_results(out)
    assert len(results) == 3
    steps = {qid: t.steps for qid, t in RunDir(out).trajectories().items()}
    for r in results:
        assert r.status == r.stop_reason == "backend_error"
        # the backend's refusal is named, not the gold program running out
        assert "connection refused" in (r.error or "") and "gold program" not in (r.error or "")
        assert r.metrics == {} and steps[r.id]  # not scored; the steps are kept
    trajectories = load_trajectories(out / TRAJECTORIES)
    assert [t.meta["id"] for t in trajectories] == [r.id for r in results]
    assert all(t.steps and t.steps[0].env_status == "backend_error" for t in trajectories)
    metrics = json.loads((out / METRICS).read_text())
    assert metrics["outages"]["backend_error"] == 3 and metrics["errors"] == 0
    assert metrics["scored"] == 0 and metrics["hit@1"] is None
    assert metrics["run"]["complete"] is False


def test_llm_server_failing_then_resume_reruns_the_outages(tmp_path: Path, mini_metaqa: Path,
                                                           fake_openai: FakeOpenAI,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", fake_openai.api_key)
    fake_openai.push(*[ServerError(500) for _ in range(4)])
    config = RunConfig(dataset="metaqa-1hop", llm="openai:gpt-test", data_dir=str(mini_metaqa),
                       limit=6, base_url=fake_openai.base_url, max_retries=0, max_outages=2)
    out = tmp_path / "run"
    with pytest.raises(OutageAbort, match="the LLM is failing: 2 questions in a row"):
        evaluate(config, out, progress=False)
    failed = read_results(out)
    assert [r.status for r in failed] == ["llm_error", "llm_error"]
    assert all(r.error and r.error.startswith("LLMServerError") for r in failed)
    assert len(load_trajectories(out / TRAJECTORIES)) == 2  # kept, even with no step
    # the server is back (here: the gold stand-in): resume runs the outages again, then the rest
    metrics = resume(out, progress=False, provider=build_provider("gold"))
    assert metrics["n"] == metrics["scored"] == 6 and metrics["outage_total"] == 0
    assert metrics["hit@1"] == 1.0 and metrics["run"]["complete"] is True
    assert {r.id: r.status for r in read_results(out)} == {r.id: "ok" for r in read_results(out)}
    # a replay of this run replays the answered trajectory, not the one the outage cut short
    replay = ReplayProvider(out)
    for r in failed:
        assert replay.trajectories[r.id].meta.get("status") is None
        assert replay.trajectories[r.id].finished


def test_a_slow_llm_is_an_llm_timeout(tmp_path: Path, mini_metaqa: Path,
                                      fake_openai: FakeOpenAI,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", fake_openai.api_key)
    fake_openai.push(Slow(2.0), Slow(2.0))
    config = RunConfig(dataset="metaqa-1hop", llm="openai:gpt-test", data_dir=str(mini_metaqa),
                       limit=2, base_url=fake_openai.base_url, llm_timeout=0.3, max_retries=0,
                       max_outages=0)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["outages"]["llm_timeout"] == 2 and metrics["errors"] == 0
    assert [r.status for r in read_results(tmp_path / "run")] == ["llm_timeout"] * 2


def test_the_question_deadline_ends_a_question(tmp_path: Path, mini_metaqa: Path,
                                               fake_openai: FakeOpenAI,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", fake_openai.api_key)
    fake_openai.push(Text("Thought 1 : look.\nAction 1 : get_relation(Kismet)"),
                     Slow(3.0, Text("Thought 2 : late.\nAction 2 : execute()")))
    config = RunConfig(dataset="metaqa-1hop", llm="openai:gpt-test", data_dir=str(mini_metaqa),
                       limit=1, base_url=fake_openai.base_url, question_deadline=0.8,
                       max_retries=0)
    started = time.monotonic()
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert time.monotonic() - started < 3.0  # the slow call was cut at the deadline
    [result] = read_results(tmp_path / "run")
    assert result.status == "llm_timeout" and result.error.startswith("LLMTimeoutError")
    [trajectory] = RunDir(tmp_path / "run").trajectories().values()
    assert len(trajectory.steps) == 1  # the step before the deadline is kept
    assert trajectory.meta == {"id": result.id, "error": result.error, "status": "llm_timeout"}
    assert result.usage["steps"] == 1
    assert metrics["outages"]["llm_timeout"] == 1
