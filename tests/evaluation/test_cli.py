"""``pyql eval``: runs, resumes, JSON output, and one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.evaluation.records import CONFIG, RESULTS, RunConfig
from pyql.cli import app
from tests.evaluation.support import require_data

runner = CliRunner()


def invoke(*args: str):  # noqa: ANN201 - typer's Result
    return runner.invoke(app, ["eval", *args])


def one_line_error(result, *, hint: bool | None = None, code: int = 1) -> str:  # noqa: ANN001
    """The one ``error:`` line of a failed run; ``code`` 2 for bad usage (issue 36, item 15)."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[0] == errors[0], result.stderr
    if hint is not None:
        assert any(line.startswith("hint: ") for line in lines) == hint, result.stderr
    return errors[0]


def test_eval_runs_and_prints_the_metrics(tmp_path: Path, mini_metaqa: Path) -> None:
    out = tmp_path / "run"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--limit", "5", "-k", "2", "--out", str(out), "--no-progress")
    assert result.exit_code == 0, result.stderr
    assert "hit@1 (any answer) (primary)" in result.stdout and "1.0000" in result.stdout
    config = RunConfig.model_validate_json((out / CONFIG).read_text())
    assert config.data_dir == str(mini_metaqa.resolve()) and config.concurrency == 2
    assert config.pyql_version
    # resume: nothing left, the same metrics, as JSON
    again = invoke("--resume", str(out), "--json", "--no-progress")
    assert again.exit_code == 0, again.stderr
    metrics = json.loads(again.stdout)
    assert metrics["n"] == 5 and metrics["hit@1"] == 1.0
    assert metrics["run"]["this_session"]["questions"] == 0
    assert len((out / RESULTS).read_text().splitlines()) == 5


def test_eval_json_and_sampling(tmp_path: Path, mini_metaqa: Path) -> None:
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--sample", "4", "--seed", "2", "--out", str(tmp_path / "r"), "--json",
                    "--no-progress", "--no-guidelines", "--max-steps", "6")
    assert result.exit_code == 0, result.stderr
    metrics = json.loads(result.stdout)
    assert metrics["n"] == 4
    config = RunConfig.model_validate_json((tmp_path / "r" / CONFIG).read_text())
    assert (config.sample, config.seed, config.guidelines, config.max_steps) == (4, 2, False, 6)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--llm", "gold", "--out", "x"], "missing --dataset"),
        (["--dataset", "nope", "--llm", "gold", "--out", "x"], "unknown dataset 'nope'"),
        (["--dataset", "metaqa-1hop", "--llm", "gpt-4o", "--out", "x"], "unknown --llm spec"),
        (["--dataset", "metaqa-1hop", "--llm", "gold", "--out", "x", "--mode", "voice"],
         "--mode must be text or tools"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    assert message in one_line_error(invoke(*args), code=2)


def test_resume_errors(tmp_path: Path, mini_metaqa: Path) -> None:
    assert "not a run directory" in one_line_error(invoke("--resume", str(tmp_path)))
    error = one_line_error(invoke("--resume", str(tmp_path), "--llm", "gold"), hint=True, code=2)
    assert "--llm cannot change it" in error
    # whether a stand-in run counts its tokens is the run's: a resumed half may not differ
    error = one_line_error(invoke("--resume", str(tmp_path), "--token-estimates"), code=2)
    assert "--token-estimates cannot change it" in error


def test_an_existing_run_is_not_overwritten(tmp_path: Path, mini_metaqa: Path) -> None:
    args = ("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
            "--limit", "2", "--out", str(tmp_path / "r"), "--no-progress")
    assert invoke(*args).exit_code == 0
    assert "already holds a run" in one_line_error(invoke(*args))


def test_a_stopped_run_says_how_to_resume(tmp_path: Path, mini_metaqa: Path) -> None:
    error = one_line_error(invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa),
                                  "--llm", "openai:gpt-4o-mini", "--out", str(tmp_path / "r"),
                                  "--no-progress"), hint=True)
    assert "the run stopped" in error and "no API key" in error


@pytest.mark.parametrize(("llm", "message"), [
    ("noisy-gold:7", "rate is a probability (0 to 1), not 7"), ("noisy-gold:lots", "needs a number"),
    ("noisy-gold:0.3:judge_accuracy=1", "no parameter 'judge_accuracy'"),
    ("noisy-gold:0.3:fix_on_hint=2", "is a probability"),
    ("gold:silent=0.1", "takes no parameter")])
def test_a_bad_llm_spec_fails_before_the_run_directory_is_made(
        tmp_path: Path, mini_metaqa: Path, llm: str, message: str) -> None:
    """Issue 15 item 6: a bad noisy-gold rate left an empty run directory and a hint to
    --resume it, which failed."""
    out = tmp_path / "r"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", llm,
                    "--limit", "1", "--out", str(out), "--no-progress")
    assert message in one_line_error(result, code=2)
    assert "--resume" not in result.stderr
    assert not out.exists()


def test_webqsp_without_kb(tmp_path: Path) -> None:
    require_data("freebase_questions", "WebQSP_test_processed.json.gz")
    error = one_line_error(invoke("--dataset", "webqsp", "--llm", "gold", "--out",
                                  str(tmp_path / "r"), "--no-progress"))
    assert "needs a Freebase KB" in error


def test_eval_paper_preset_with_a_ranker(tmp_path: Path, mini_metaqa: Path) -> None:
    out = tmp_path / "paper"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--limit", "4", "--preset", "paper", "--ranker", "bm25", "--out", str(out),
                    "--no-progress", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["hit@1"] == 1.0
    config = RunConfig.model_validate_json((out / CONFIG).read_text())
    assert (config.preset, config.ranker, config.max_steps) == ("paper", "bm25", None)
    trajectory = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
    assert trajectory["profile"] == "paper-metaqa"


@pytest.mark.parametrize(("flags", "message"), [
    (["--preset", "paper", "--dataset", "spider"], "no setting for 'spider'"),
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--ranker", "tfidf"], "unknown ranker 'tfidf'"),
    (["--extremum", "some"], "--extremum must be ties or limit"),
])
def test_eval_settings_are_checked_before_the_run_directory(
        tmp_path: Path, mini_metaqa: Path, flags: list[str], message: str) -> None:
    out = tmp_path / "never"
    args = ["--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
            "--out", str(out), *flags]
    if "spider" in flags:
        args = args[2:]
    error = one_line_error(invoke(*args), code=2)
    assert message in error
    assert not out.exists()


@pytest.mark.parametrize("flags", [["--preset", "paper"], ["--ranker", "openai"]])
def test_an_embedding_ranker_without_a_key_fails_before_the_run(
        tmp_path: Path, mini_metaqa: Path, flags: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper preset ranks relations with OpenAI embeddings: without a key (a local model,
    a stand-in) the run used to start and stop at its first question."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "never"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm", "gold",
                    "--out", str(out), *flags)
    assert "needs OpenAI embeddings" in one_line_error(result, hint=True)
    assert "--ranker bm25" in result.stderr
    assert not out.exists()


def test_a_run_that_never_starts_leaves_no_directory(tmp_path: Path, mini_metaqa: Path) -> None:
    out = tmp_path / "never"
    error = one_line_error(invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa),
                                  "--split", "nope", "--llm", "gold", "--out", str(out)))
    assert "no 'nope' split" in error
    assert not out.exists()
    kept = tmp_path / "mine"  # a directory the user made stays, without our lock
    kept.mkdir()
    one_line_error(invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa),
                          "--split", "nope", "--llm", "gold", "--out", str(kept)))
    assert kept.is_dir() and list(kept.iterdir()) == []


def test_metrics_and_the_table_state_the_stand_ins_assumptions(
        tmp_path: Path, mini_metaqa: Path) -> None:
    out = tmp_path / "run"
    result = invoke("--dataset", "metaqa-1hop", "--data-dir", str(mini_metaqa), "--llm",
                    "noisy-gold:0.3:fix_on_hint=1", "--limit", "3", "--out", str(out),
                    "--no-progress")
    assert result.exit_code == 0, result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stand_in"] == {
        "name": "noisy-gold", "strategy": "queryagent",
        "parameters": {"rate": 0.3, "fix_on_hint": 1.0, "fix_on_error": 0.6, "silent": 0.05}}
    assert "stand-in assumptions" in result.stdout
    assert re.search(r"stand-in\s*│\s*noisy-gold", result.stdout)
    assert re.search(r"fix_on_error\s*│\s*0\.600", result.stdout)


def test_a_run_without_a_scored_question_does_not_blame_token_estimates() -> None:
    from io import StringIO

    from rich.console import Console

    from pyql.agent.commands.eval import render_metrics
    from pyql.agent.evaluation.metrics import aggregate

    metrics = aggregate([])  # every question an outage, or none written yet
    assert metrics["tokens_counted"] is None
    out = StringIO()
    render_metrics(metrics, Console(file=out, width=120))
    assert "not counted" not in out.getvalue() and "tokens / question" in out.getvalue()
