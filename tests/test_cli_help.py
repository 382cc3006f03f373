"""What ``--help`` shows (issue 36, item 19): no Python types (``<list[Path]>``,
``<float range>``), metavars upper-case placeholders or lower-case literal values, one name
for the query timeout, help for every option, and the exit statuses listed once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from pyql.cli import app
from pyql.cli.errors import EXIT_STATUSES

runner = CliRunner()
WIDE = {"COLUMNS": "300"}


def _commands() -> Iterator[tuple[list[str], Any]]:
    root = get_command(app)
    ctx = root.make_context("pyql", ["--help"], resilient_parsing=True)

    def walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        for name in getattr(command, "commands", {}) or ():
            yield from walk(command.commands[name], [*path, name])

    for name in root.list_commands(ctx):
        yield from walk(root.get_command(ctx, name), [name])


COMMANDS = [path for path, _ in _commands()]


def _help(path: list[str]) -> str:
    result = runner.invoke(app, [*path, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


#: a Python type as typer shows it: <str>, <int range>, <list[Path]>, <same_type|none>
PYTHON_TYPE = re.compile(r"<[\w\[\]|, ]+>")


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_shows_no_python_types(path: list[str]) -> None:
    text = _help(path)
    assert not PYTHON_TYPE.findall(text), PYTHON_TYPE.findall(text)


def test_metavars_are_upper_case_placeholders_or_literal_values() -> None:
    seen = 0
    for path, command in _commands():
        _help(path)  # help of the command: its metavars are settled
        for param in command.params:
            metavar = param.metavar
            if not metavar:
                continue
            seen += 1
            for token in re.split(r"[^A-Za-z0-9_]+", metavar):
                assert token.isupper() or token.islower() or token.isdigit() or not token, (
                    path, param.name, metavar)
    assert seen > 100


def test_the_profile_help_states_the_rule_without_asides() -> None:
    for path in (["compile"], ["run"], ["ask"], ["mcp"]):
        text = " ".join(_help(path).split())
        assert "(compile too)" not in text
        assert "Default: metaqa for MetaQA's kb.txt, generic for anything else" in text


def test_every_option_has_help() -> None:
    for path, command in _commands():
        for param in command.params:
            if getattr(param, "hidden", False) or param.param_type_name != "option":
                continue
            assert (param.help or "").strip(), (path, param.name)


@pytest.mark.parametrize("path", [["run"], ["ask"], ["eval"], ["mcp"]], ids=" ".join)
def test_the_query_timeout_is_timeout_everywhere(path: list[str]) -> None:
    text = _help(path)
    assert re.search(r"--timeout\b", text)
    assert re.search(r"--timeout\s+(?:,\s*)?(?:--kb-timeout\s+)?SECONDS", text) or (
        "--timeout" in text and "SECONDS" in text)


def test_pyql_help_lists_the_exit_statuses_once() -> None:
    text = " ".join(_help([]).split())
    for code, meaning in EXIT_STATUSES.items():
        assert f"{code}: {meaning.split(' (')[0].split(':')[0]}" in text
    assert text.count("Exit statuses") == 1
