"""``pyql prompts stats``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pyql.agent.commands.prompts import prompt_stats
from pyql.cli import app
from tests.conftest import data_dir

runner = CliRunner()


@pytest.fixture()
def tiktoken_dir() -> str:
    path = data_dir() / "tiktoken"
    if not (path / "cl100k_base.tiktoken").is_file():
        pytest.skip(f"no tiktoken files in {path} (set PYQL_DATA)")
    return str(path)


def test_prompts_stats(tiktoken_dir: str) -> None:
    result = runner.invoke(app, ["prompts", "stats", "--tiktoken-dir", tiktoken_dir, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == prompt_stats(tiktoken_dir)
    table = runner.invoke(app, ["prompts", "stats", "--tiktoken-dir", tiktoken_dir])
    assert table.stdout.splitlines()[0].split() == [
        "profile", "dataset", "mode", "system", "tools", "static", "original", "ratio"]
    assert len(table.stdout.splitlines()) == 2 + len(prompt_stats(tiktoken_dir))


def test_a_missing_encoding_is_one_error_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    result = runner.invoke(app, ["prompts", "stats", "--tiktoken-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.output
