"""``pyql run`` against an endpoint whose results have fewer columns than the query selected
(issue 24, item 3): a typed backend error on one line, not a crash in the label lookup."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pyql.cli import app
from pyql.demo import movies_path
from tests.support.hostile_sparql import ShortRowsEndpoint

runner = CliRunner()
PROGRAM = "add_fact(?film, ex:directed_by, ex:Christopher_Nolan)\nset_answer(?film)\nexecute()"


def test_a_label_lookup_missing_its_label_column_is_a_backend_error() -> None:
    with ShortRowsEndpoint(movies_path(), min_columns=1) as short:
        result = runner.invoke(app, ["run", "--kb", short.url, "--prefix",
                                     "ex=http://example.org/movies/", PROGRAM])
        as_json = runner.invoke(app, ["run", "--json", "--kb", short.url, "--prefix",
                                      "ex=http://example.org/movies/", PROGRAM])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    [error] = [line for line in result.stderr.splitlines() if line.strip()]
    assert error.startswith("error: step ") and "malformed result" in error
    assert "selects ?e ?l but the result has ?e" in error
    report = json.loads(as_json.stdout)
    assert report["ok"] is False
    assert [s["status"] for s in report["steps"]][-1] == "backend_error"


def test_a_result_without_the_selected_column_is_a_backend_error() -> None:
    with ShortRowsEndpoint(movies_path()) as short:
        result = runner.invoke(app, ["run", "--kb", short.url, "--prefix",
                                     "ex=http://example.org/movies/", PROGRAM])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "the query selects ?film but the result has no columns" in result.stderr
