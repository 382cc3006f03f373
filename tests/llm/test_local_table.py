"""A real model drives every strategy: SmolLM2-135M-Instruct in llama.cpp's server, in-process.

The model is tiny and answers badly; these tests hold the *robustness* a real model needs, not
accuracy: through the real ``openai`` client and the evaluation runner, every question ends with a
typed status and no traceback, every reply is constrained to its schema and read (zero parse
failures), pyql's token accounting equals the server's own counters, the time stays inside the
deadline, and the run replays from its trajectories (``conftest.check_strategy_run``). Skipped
only where the ``local`` extra or the model package is not installed (``.ci/run`` installs both).
The KB strategies and the table strategies are two files, so two test workers share them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyql.agent.local import LocalServer
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
