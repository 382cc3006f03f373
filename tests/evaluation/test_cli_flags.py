"""``pyql eval`` flags of the one runner: --strategy, --option, --split, --ablation, the LLM
bounds and --max-outages (a KB on a refused port stops the run with a one-line reason)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from typer.testing import CliRunner

from pyql.agent.evaluation.records import CONFIG
from pyql.agent.evaluation.runner import read_results
from pyql.cli import app

runner = CliRunner()


def invoke(*args: str):  # noqa: ANN201 - typer's Result
    return runner.invoke(app, ["eval", *args, "--no-progress"])


def error_line(result, code: int = 1) -> str:  # noqa: ANN001
    """The one ``error:`` line; ``code`` 2 for bad usage (issue 36, item 15)."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_unknown_strategy_is_one_line_before_any_run(tmp_path: Path, mini_metaqa: Path) -> None:
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--strategy", "nope", "--out", str(tmp_path / "run"))
    assert "unknown strategy 'nope'; known: " in error_line(result, code=2)
    assert not (tmp_path / "run").exists()


def test_a_bad_noisy_rate_leaves_no_run_directory(tmp_path: Path, mini_metaqa: Path) -> None:
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm",
                    "noisy-gold:7", "--out", str(tmp_path / "run"))
    assert "rate is a probability (0 to 1), not 7" in error_line(result, code=2)
    assert not (tmp_path / "run").exists()


def test_strategy_options_and_bounds_reach_the_config(tmp_path: Path, mini_metaqa: Path) -> None:
    out = tmp_path / "run"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--strategy", "queryagent", "--option", "max_observation_chars=400",
                    "--option", "execute_on_stop=false", "--split", "dev", "--limit", "3",
                    "--llm-timeout", "20", "--max-retries", "2", "--deadline", "60",
                    "--max-outages", "9", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    config = json.loads((out / CONFIG).read_text())
    assert config["strategy"] == "queryagent" and config["split"] == "dev"
    assert config["options"] == {"max_observation_chars": 400, "execute_on_stop": False}
    assert (config["llm_timeout"], config["max_retries"], config["question_deadline"],
            config["max_outages"]) == (20.0, 2, 60.0, 9)
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--option", "nonsense", "--out", str(tmp_path / "bad"))
    assert "is not KEY=VALUE" in error_line(result, code=2)


def test_ablation_flag_prints_the_combined_table(tmp_path: Path, mini_metaqa: Path) -> None:
    out = tmp_path / "abl"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--limit", "3", "--ablation", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert "| gold (gold) | ERASER on |" in result.stdout
    assert "| gold (gold) | w/o ERASER |" in result.stdout
    assert (out / "eraser_off" / CONFIG).exists()


def test_kb_down_stops_the_run_with_one_line(tmp_path: Path, mini_metaqa: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "run"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--kb", f"http://127.0.0.1:{port}/sparql", "--max-outages", "2",
                    "--out", str(out))
    line = error_line(result)
    assert line.startswith("error: the run stopped: the KB/DB is down: 2 questions in a row "
                           "ended in backend_error (last: ")
    assert "connection refused" in line
    assert [r.status for r in read_results(out)] == ["backend_error"] * 2
