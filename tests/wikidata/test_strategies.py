"""Every strategy with the ``wikidata`` profile, through the gold and noisy-gold stand-ins, on a
synthesized slice of WikiWebQuestions train: each run ends, with a typed end on every question.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.cli import app

runner = CliRunner()
N = 12
STRATEGIES = ["queryagent", "queryagent-sc0", "queryagent-sc-few", "readi", "srp", "vanilla",
              "vanilla-few", "agentbench", "agentbench-eraser"]
#: a question's end: accepted, stopped by the strategy, or failed with a typed error
STATUSES = {"ok", "error", "backend_error", "llm_error", "llm_timeout"}


@pytest.fixture(scope="module")
def slice_store(pyql_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wwq-slice")
    result = runner.invoke(app, ["fidelity", "sparql", "wwq", "--data-dir", str(pyql_data),
                                 "--limit", str(N), "--slice", str(root / "slice.nt")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["kb", "load", str(root / "slice.nt"), "--store",
                                 str(root / "store")])
    assert result.exit_code == 0, result.output
    return root / "store"


@pytest.mark.parametrize("llm", ["gold", "noisy-gold:0.3"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_ends_every_question(slice_store: Path, pyql_data: Path, tmp_path: Path,
                                            strategy: str, llm: str) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, [
        "eval", "--dataset", "wwq", "--strategy", strategy, "--llm", llm, "--kb",
        str(slice_store), "--limit", str(N), "--data-dir", str(pyql_data), "--out", str(out),
        "--no-progress", "--json"])
    if strategy.startswith("vanilla") and llm != "gold":
        # the vanilla stand-in plays gold only: bad usage (exit 2) before anything runs, with its
        # reason
        assert result.exit_code == 2 and "plays gold" in result.output
        return
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == N
    for row in rows:
        assert row["status"] in STATUSES and row["stop_reason"], row
        if row["status"] != "ok":
            assert row["error"], row  # a failure names its typed error
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["f1"] is not None
    if strategy in ("queryagent", "agentbench", "agentbench-eraser", "vanilla") and llm == "gold":
        converted = [r for r in rows if "unsupported" not in r["meta"]]
        assert all(r["metrics"]["f1"] == 1.0 for r in converted)
