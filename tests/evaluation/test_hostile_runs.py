"""Hostile servers during ``pyql eval`` (issue 24, items 1-3): a hung SPARQL endpoint, an LLM
server that answers malformed JSON or no ``choices``, and an endpoint whose results have fewer
columns than the query selected are outages (``backend_error`` / ``llm_error``) counted in
``metrics.json``, never wrong answers or crashes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.evaluation.records import CONFIG, METRICS, RunConfig
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import OutageAbort, evaluate, read_results
from pyql.cli import app
from pyql.datasets import metaqa
from tests.support.fake_openai import FakeOpenAI, Malformed, Status
from tests.support.hostile_sparql import HungEndpoint, ShortRowsEndpoint

runner = CliRunner()


def _metrics(out: Path) -> dict:
    return json.loads((out / METRICS).read_text())


def test_a_hung_endpoint_is_a_backend_outage_and_trips_the_breaker(tmp_path: Path,
                                                                   mini_metaqa: Path) -> None:
    out = tmp_path / "run"
    with HungEndpoint() as hung:
        started = time.monotonic()
        result = runner.invoke(app, [
            "eval", "--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
            "--limit", "4", "--kb", hung.url, "--timeout", "0.2", "--max-outages", "2",
            "--out", str(out), "--no-progress"])
        took = time.monotonic() - started
        assert hung.requests >= 2
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output
    assert "the KB/DB is down: 2 questions in a row ended in backend_error" in errors[0]
    assert "within 0.2s" in errors[0]  # the endpoint's timeout, named
    assert took < 20  # --timeout (issue 36: run's and mcp's name) bounds each query (default 30 s)
    assert RunConfig.model_validate_json((out / CONFIG).read_text()).kb_timeout == 0.2
    results = read_results(out)
    assert [r.status for r in results] == ["backend_error", "backend_error"]
    trajectories = RunDir(out).trajectories()
    assert all(r.metrics == {} and trajectories[r.id].steps for r in results)  # steps kept
    metrics = _metrics(out)
    assert metrics["outages"]["backend_error"] == 2 and metrics["errors"] == 0
    assert metrics["scored"] == 0 and metrics["hit@1"] is None


def test_malformed_llm_replies_are_llm_errors(tmp_path: Path, mini_metaqa: Path,
                                              fake_openai: FakeOpenAI,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", fake_openai.api_key)
    no_choices = Status(200, {"id": "x", "object": "chat.completion", "created": 0,
                              "model": "gpt-test", "choices": []})
    fake_openai.push(Malformed(), no_choices, Malformed(), no_choices)
    config = RunConfig(dataset="metaqa-1hop", llm="openai:gpt-test", data_dir=str(mini_metaqa),
                       limit=5, base_url=fake_openai.base_url, max_outages=3)
    out = tmp_path / "run"
    with pytest.raises(OutageAbort, match="the LLM is failing: 3 questions in a row") as caught:
        evaluate(config, out, progress=False)
    assert "\n" not in str(caught.value)
    results = read_results(out)
    assert [r.status for r in results] == ["llm_error"] * 3
    assert all((r.error or "").startswith("LLMResponseError") for r in results)
    assert "no choices" in (results[1].error or "")
    metrics = _metrics(out)
    assert metrics["outages"]["llm_error"] == 3 and metrics["errors"] == 0
    assert metrics["scored"] == 0


def test_results_with_fewer_columns_than_selected_are_backend_outages(
        tmp_path: Path, mini_metaqa: Path) -> None:
    kb = metaqa.load_kb(mini_metaqa / "metaqa" / "kb.txt")
    out = tmp_path / "run"
    with ShortRowsEndpoint(kb.store) as short:
        config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa),
                           limit=6, kb=short.url, max_outages=0)
        metrics = evaluate(config, out, progress=False)  # no crash, no "unexpected errors" stop
    results = read_results(out)
    assert len(results) == 6
    assert {r.status for r in results} == {"backend_error"}
    assert all("malformed result" in (r.error or "") for r in results)
    assert metrics["outages"]["backend_error"] == 6 and metrics["errors"] == 0
    assert _metrics(out)["outages"]["backend_error"] == 6
