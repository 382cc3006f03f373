"""A real model (SmolLM2-135M in llama.cpp, in-process) drives the KB strategies (QueryAgent text
mode, Readi, SRP) on MetaQA, and `pyql ask --llm local`; what every run must hold is
``conftest.check_strategy_run``. A second file, so two test workers share the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pyql.agent.llm.local import LocalServer
from tests.llm.conftest import check_strategy_run

pytestmark = pytest.mark.llm


@pytest.mark.parametrize(("strategy", "mode", "options"), [
    pytest.param("queryagent", "text", {}, id="queryagent-text"),
    pytest.param("readi", "text", {"max_edits": 1}, id="readi-kb"),
    pytest.param("srp", "text", {"max_rounds": 1}, id="srp"),
])
@pytest.mark.parametrize("level", ["grounded", "choose"])
def test_a_real_model_runs_each_kb_strategy_cleanly(
        server: LocalServer, small_kb: Path, tmp_path: Path, strategy: str, mode: str,
        options: dict[str, Any], level: str) -> None:
    """Grounded (``auto``'s level with the local model) and choose mode (the model scores the
    KB's candidates: needs ``score()`` on the local client)."""
    check_strategy_run(server, tmp_path, strategy=strategy, mode=mode, dataset="metaqa-1hop",
                       options=options, kb=small_kb, constrain="grounded",
                       choose=level == "choose")


def test_pyql_ask_with_the_local_model(server: LocalServer, small_kb: Path) -> None:
    from pyql.cli import app

    result = CliRunner().invoke(app, [
        "ask", "what movies did [Temuera Morrison] act in", "--kb", str(small_kb),
        "--llm", "local", "--max-steps", "2", "--max-tokens", "96", "--constrain", "format",
        "--json"])
    out = json.loads(result.stdout)
    # 3: the step cap without an answer (issue 36, item 19), else 0
    stopped = out["stop_reason"] == "max_steps" and not out["answers"]
    assert result.exit_code == (3 if stopped else 0), result.output
    assert out["usage"]["llm_calls"] == len(out["steps"]) == 2
    assert out["usage"]["constrained_calls"] == 2 and out["usage"]["parse_failures"] == 0
