"""``pyql guidelines list`` / ``pyql guidelines show CODE``."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pyql.cli import app
from tests.guidelines.support import builtin

runner = CliRunner()


def test_list_shows_every_builtin_guideline() -> None:
    result = runner.invoke(app, ["guidelines", "list"])
    assert result.exit_code == 0, result.output
    for code in builtin().codes:
        assert code in result.stdout


def test_list_json_and_selection() -> None:
    result = runner.invoke(app, ["guidelines", "list", "--json", "--select", "sql",
                                 "--ignore", "DB301"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    codes = {r["code"] for r in rows}
    assert "DB101" in codes and "DB301" not in codes and all(c.startswith("DB") for c in codes)


def test_show_describes_one_guideline() -> None:
    result = runner.invoke(app, ["guidelines", "show", "kb201"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("KB201  kb.empty_fact_unlisted_relation")
    assert "Bad:" in result.stdout and "Fixed:" in result.stdout
    data = json.loads(runner.invoke(app, ["guidelines", "show", "RM205", "--json"]).stdout)
    assert data["name"] == "kb.filter_before_get_relation" and data["env"] == "RM"


def test_show_accepts_names_as_well_as_codes() -> None:
    """Issue 15 item 6: ``show`` took codes (as ``list --select`` takes names) but not names."""
    by_code = runner.invoke(app, ["guidelines", "show", "KB201"])
    for name in ("kb.empty_fact_unlisted_relation", "KB.Empty_Fact_Unlisted_Relation"):
        by_name = runner.invoke(app, ["guidelines", "show", name])
        assert by_name.exit_code == 0, by_name.output
        assert by_name.stdout == by_code.stdout
    data = json.loads(runner.invoke(
        app, ["guidelines", "show", "kb.filter_before_get_relation", "--json"]).stdout)
    assert data["code"] == "RM205"
    typo = runner.invoke(app, ["guidelines", "show", "kb.empty_fact_unlisted_relatoin"])
    assert typo.exit_code == 2  # a name it does not know: bad usage (issue 36, item 15)
    assert "hint: did you mean kb.empty_fact_unlisted_relation," in typo.stderr


def test_unknown_code_and_selector_are_one_line_errors() -> None:
    result = runner.invoke(app, ["guidelines", "show", "KB209"])
    assert result.exit_code == 2  # bad usage (issue 36, item 15)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0] == "error: no guideline 'KB209'"
    assert lines[1].startswith("hint: did you mean ")
    bad = runner.invoke(app, ["guidelines", "list", "--select", "nonsense"])
    assert bad.exit_code == 2 and "error: no guideline matches 'nonsense'" in bad.stderr
