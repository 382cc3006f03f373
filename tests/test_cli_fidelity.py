"""``pyql fidelity gold|sql``: gold programs through
pyql on small copies of MetaQA and WikiSQL, and Spider's own databases."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pyql.cli import app
from tests.evaluation.conftest import mini_metaqa, mini_wikisql  # noqa: F401 - fixtures
from tests.evaluation.support import require_data

runner = CliRunner()


def fidelity(*args: str):  # noqa: ANN201 - typer's Result
    return runner.invoke(app, ["fidelity", *args])


def test_gold_metaqa(mini_metaqa: Path) -> None:  # noqa: F811 - the fixture
    args = ["gold", "metaqa", "--data-dir", str(mini_metaqa), "--hops", "1", "--limit", "5"]
    result = fidelity(*args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report["hops"]) == ["1"]
    hop = report["hops"]["1"]
    assert hop["n"] == 5 and hop["hit1"] == 1.0 and hop["errors"] == 0
    table = fidelity(*args, "--failures")
    assert table.exit_code == 0, table.output
    assert table.stdout.startswith("MetaQA dev gold programs")
    assert "   1      5  1.000" in table.stdout


def test_gold_usage_errors(tmp_path: Path) -> None:
    assert fidelity("gold", "metaqa", "--hops", "4").exit_code == 2
    assert fidelity("gold", "webqsp").exit_code == 2
    missing = fidelity("gold", "metaqa", "--data-dir", str(tmp_path), "--hops", "1")
    assert missing.exit_code == 1
    lines = missing.stderr.splitlines()
    assert lines[0].startswith("error: ") and "kb.txt" in lines[0]
    assert lines[1] == "hint: pass --data-dir DIR or set $PYQL_DATA"


def test_sql_wikisql(mini_wikisql: Path) -> None:  # noqa: F811
    result = fidelity("sql", "wikisql", "--data-dir", str(mini_wikisql), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["total"] > 0 and report["agreement"] > 0.9


def test_sql_spider_sample() -> None:
    spider = require_data("spider")
    result = fidelity("sql", "spider", "--data-dir", str(spider.parent), "--sample", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("spider: 3 questions")
    assert fidelity("sql", "spider", "--cache-dir", "x").exit_code == 2
