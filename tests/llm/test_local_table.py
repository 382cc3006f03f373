"""A real model (SmolLM2-135M in llama.cpp, in-process) drives the table strategies (QueryAgent
tools mode, Readi) on WikiSQL; what every run must hold is ``conftest.check_strategy_run``. A
second file, so two test workers share the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyql.agent.llm.local import LocalServer
from tests.llm.conftest import check_strategy_run

pytestmark = pytest.mark.llm


@pytest.mark.parametrize(("strategy", "mode", "options"), [
    pytest.param("queryagent", "tools", {}, id="queryagent-tools"),
    pytest.param("readi", "text", {"max_edits": 1}, id="readi-table"),
])
def test_a_real_model_runs_each_table_strategy_cleanly(
        server: LocalServer, tmp_path: Path, strategy: str, mode: str,
        options: dict[str, Any]) -> None:
    check_strategy_run(server, tmp_path, strategy=strategy, mode=mode, dataset="wikisql",
                       options=options, kb=None)
