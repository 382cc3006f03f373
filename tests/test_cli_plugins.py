"""Command plugins (entry-point group ``pyql.commands``): the core CLI loads the upper layers and
third-party commands through it, and says so when one is broken.

Plugins here are real installed distributions: a ``*.dist-info`` with an ``entry_points.txt``
on ``sys.path``, found by ``importlib.metadata`` like any installed package.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.cli import GROUP, app, plugin_commands

runner = CliRunner()

PLUGIN = '''
import typer

from pyql.cli import group, print_json


def hello(name: str = typer.Option("world", "--name")) -> None:
    """Say hello."""
    print_json({"hello": name})


def sparql() -> None:
    """A fidelity runner from another package."""
    typer.echo("sparql fidelity")


def register(app: typer.Typer) -> None:
    app.command("hello")(hello)
    group(app, "fidelity").command("sparql")(sparql)
'''


def install(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A minimal installed distribution ``dist`` in ``site``: its modules and entry points."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_third_party_plugin_adds_a_command_and_extends_a_group(site: Path) -> None:
    install(site, "pyql_hello", {"hello": "pyql_hello_cli:register"}, {"pyql_hello_cli": PLUGIN})
    result = runner.invoke(app, ["hello", "--name", "Ada"])
    assert result.exit_code == 0, result.output
    assert '"hello": "Ada"' in result.stdout
    # `pyql fidelity` is the core's group; the plugin's runner joins the core's runners
    result = runner.invoke(app, ["fidelity", "sparql"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "sparql fidelity"
    listed = runner.invoke(app, ["fidelity", "--help"], env={"COLUMNS": "200"}).stdout
    assert all(name in listed for name in ("gold", "sql", "sparql"))


def test_a_broken_plugin_is_listed_as_unavailable_and_says_why(site: Path) -> None:
    install(site, "pyql_broken", {"broken": "pyql_broken_cli:register"},
            {"pyql_broken_cli": "import pyql_no_such_dependency\n"})
    listed = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    line = next(x for x in listed.stdout.splitlines() if " broken " in x)
    assert "unavailable: ModuleNotFoundError" in line
    result = runner.invoke(app, ["broken", "--any", "option"])
    assert result.exit_code == 1
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert lines[0].startswith("error: the command plugin 'broken' (pyql_broken_cli:register) "
                               "failed to load: ModuleNotFoundError: No module named "
                               "'pyql_no_such_dependency'")
    assert lines[1].startswith("hint: ")
    # the other commands are untouched
    assert runner.invoke(app, ["compile", "add_fact(?x, <http://e/r>, ?y)"]).exit_code == 0


def test_plugin_failures_are_typed(site: Path) -> None:
    install(site, "pyql_notfn", {"notfn": "pyql_notfn_cli:register"},
            {"pyql_notfn_cli": "register = 42\n"})
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group=GROUP) if e.name == "notfn"]
    commands, failures = plugin_commands(found)
    assert [(f.name, f.target, f.error_type) for f in failures] == [
        ("notfn", "pyql_notfn_cli:register", "TypeError")]
    assert list(commands) == ["notfn"]


def test_pyql_registers_the_upper_layers_as_plugins() -> None:
    from importlib.metadata import entry_points

    names = {e.name: e.value for e in entry_points(group=GROUP)}
    assert {"ask", "eval", "report", "guidelines", "prompts"} <= set(names)
    commands, failures = plugin_commands()
    assert failures == []
    assert {"ask", "eval", "report", "guidelines", "prompts"} <= set(commands)


def test_the_core_cli_imports_no_upper_layer() -> None:
    """``pyql compile`` loads neither the agent nor the guidelines packages."""
    script = textwrap.dedent("""
        import sys
        from typer.testing import CliRunner
        from pyql.cli import app
        result = CliRunner().invoke(app, ["compile", "add_fact(?x, <http://e/r>, ?y)"])
        assert result.exit_code == 0, result.output
        upper = sorted(m for m in sys.modules if m.startswith(("pyql.agent", "pyql.guidelines")))
        print(upper)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
