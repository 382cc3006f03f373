"""Every command that takes ``--kb`` and ``--db`` keeps one rule (:func:`pyql.cli.check_one_backend`):
exactly one of them, else a usage error (exit code 2) naming both, before anything is opened. The
real ``pyql`` app through typer's CliRunner, the plugin commands included."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from pyql.cli import app, check_one_backend
from pyql.demo import movies_path

runner = CliRunner()
MESSAGE = "give exactly one of --kb PATH_OR_URL (SPARQL) or --db URL (SQL)"

COMMANDS = {
    "run": ["run", "add_fact(?x, ex:title, ?t)"],
    "ask": ["ask", "who directed Kismet"],
    "mcp": ["mcp"],
    "serve": ["serve"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("given", ["neither", "both"])
def test_each_command_wants_exactly_one_of_kb_and_db(command, given, tmp_path):
    if command in ("mcp", "serve"):
        pytest.importorskip({"mcp": "mcp", "serve": "uvicorn"}[command])
    backends = [] if given == "neither" else [
        "--kb", str(movies_path()), "--db", str(tmp_path / "absent.sqlite")]
    result = runner.invoke(app, [*COMMANDS[command], *backends])
    assert result.exit_code == 2, result.output
    assert MESSAGE in " ".join(result.output.split()), result.output
    assert not (tmp_path / "absent.sqlite").exists()


def test_the_rule_itself():
    check_one_backend("kb.ttl", None)
    check_one_backend(None, "sqlite:///x.db")
    for kb, db in ((None, None), ("kb.ttl", "x.db")):
        with pytest.raises(typer.BadParameter) as raised:
            check_one_backend(kb, db)
        assert raised.value.param_hint == "--kb" and str(raised.value) == MESSAGE
