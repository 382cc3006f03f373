"""The baselines under ``pyql eval``: one-call generation and AgentBench run end to end with
``--llm gold``; under ``--preset paper`` the headline is the paper's own metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.evaluation.records import METRICS
from pyql.cli import app

runner = CliRunner()


def _eval(*args: str) -> dict:
    result = runner.invoke(app, ["eval", *args, "--no-progress"])
    assert result.exit_code == 0, result.stderr
    out = Path(args[args.index("--out") + 1])
    return json.loads((out / METRICS).read_text())


@pytest.mark.parametrize("strategy", ["vanilla", "vanilla-few"])
def test_one_call_generation_gold_on_metaqa_and_wikisql(
        tmp_path: Path, mini_metaqa: Path, mini_wikisql: Path, strategy: str) -> None:
    kb = _eval("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
               "--strategy", strategy, "--limit", "10", "--out", str(tmp_path / "kb"))
    assert kb["hit@1"] == 1.0 and kb["llm_calls"] == 1.0 and kb["qpq"] == 1.0
    assert kb["stop_reasons"] == {"ok": 10}
    db = _eval("--dataset", "wikisql", "--data-dir", str(mini_wikisql), "--llm", "gold",
               "--strategy", strategy, "--limit", "10", "--out", str(tmp_path / "db"))
    assert db["accuracy"] == 1.0 and db["llm_calls"] == 1.0 and db["primary"] == "accuracy"


def test_agentbench_gold_with_and_without_eraser(tmp_path: Path, mini_metaqa: Path) -> None:
    for strategy in ("agentbench", "agentbench-eraser"):
        m = _eval("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                  "--strategy", strategy, "--limit", "5", "--out", str(tmp_path / strategy))
        assert m["hit@1"] == 1.0 and m["finished"] == 1.0


def test_the_paper_preset_heads_with_the_papers_metric(tmp_path: Path, mini_metaqa: Path) -> None:
    default = _eval("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--limit", "3", "--out", str(tmp_path / "default"))
    paper = _eval("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                  "--preset", "paper", "--ranker", "bm25", "--limit", "3", "--out", str(tmp_path / "paper"))
    assert default["primary"] == "hit@1"  # MetaQA's own headline
    assert paper["primary"] == "f1"       # QueryAgent's paper: F1 on every dataset
    assert {"hit@1", "hit@1_top1", "f1"} <= paper.keys()
