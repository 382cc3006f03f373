"""pyql's command line: one ``typer`` app, ``pyql``.

The core commands live here, one module each: ``pyql demo`` (:mod:`pyql.cli.demo`),
``pyql compile`` (:mod:`pyql.cli.compile`), ``pyql run`` (:mod:`pyql.cli.run`) and
``pyql fidelity ...`` (:mod:`pyql.cli.fidelity`). Commands of the layers above (``ask``,
``eval``, ``report``, ``prompts``, ``guidelines``, and third-party ones) plug in through the
entry-point group ``pyql.commands`` (:mod:`pyql.cli.plugins`): the core never imports them.

Shared by every command, plugins included:

- :mod:`pyql.cli.errors`: :class:`CliError`, :func:`reported`, :func:`fail`: errors are one red
  ``error: ...`` line on stderr (with a ``hint:`` line where one helps) and exit code 1; usage
  errors (a bad option, typer's included: :class:`~pyql.cli.plugins.PluginGroup` turns them
  into ``error:`` lines) exit with 2; the statuses are listed once
  (:data:`~pyql.cli.errors.EXIT_STATUSES`, under ``pyql --help``). Never a traceback for a
  known error.
- :mod:`pyql.cli.output`: :func:`print_json` (every ``--json``), :func:`print_query` (queries
  printed whole, never wrapped at the terminal width), :func:`warnings_shown`.
- :mod:`pyql.cli.backends`: :func:`open_kb`, :func:`open_db`, :func:`open_sql_session`: one
  opener for ``--kb`` / ``--db``; :func:`check_one_backend`: exactly one of them is given.
- :mod:`pyql.cli.inputs` and :mod:`pyql.cli.options`: programs, entity tables, prefixes and the
  one profile rule (:data:`~pyql.cli.inputs.DEFAULT_PROFILE`: ``generic``, ``metaqa`` for
  MetaQA's kb.txt).
"""

from __future__ import annotations

from typing import Annotated

import typer

from pyql import __version__
from pyql.cli import compile as _compile
from pyql.cli import demo as _demo
from pyql.cli import fidelity as _fidelity
from pyql.cli import run as _run
from pyql.cli.backends import check_one_backend, open_db, open_kb, open_sql_session
from pyql.cli.errors import EXIT_STATUSES, CliError, as_cli_error, fail, reported
from pyql.cli.inputs import DEFAULT_PROFILE, build_profile, entities, pairs
from pyql.cli.output import print_json, print_query, stderr, stdout, warnings_shown
from pyql.cli.plugins import GROUP, CommandPluginError, PluginGroup, group, plugin_commands

__all__ = [
    "DEFAULT_PROFILE",
    "GROUP",
    "CliError",
    "CommandPluginError",
    "app",
    "as_cli_error",
    "build_profile",
    "check_one_backend",
    "entities",
    "fail",
    "group",
    "main",
    "open_db",
    "open_kb",
    "open_sql_session",
    "pairs",
    "plugin_commands",
    "print_json",
    "print_query",
    "reported",
    "stderr",
    "stdout",
    "warnings_shown",
]

#: the exit statuses, listed once under ``pyql --help`` (:data:`~pyql.cli.errors.EXIT_STATUSES`)
EXIT_HELP = "Exit statuses: " + "; ".join(
    f"{code}: {meaning}" for code, meaning in EXIT_STATUSES.items()) + "."

app = typer.Typer(
    name="pyql",
    epilog=EXIT_HELP,
    cls=PluginGroup,
    help="Build SPARQL and SQL step by step, the way a KBQA agent does. "
    "Start with `pyql demo` (offline, no key).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pyql {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Build SPARQL and SQL step by step, the way a KBQA agent does.

    --profile defaults to generic everywhere (metaqa for MetaQA's kb.txt).
    """


for _module in (_demo, _compile, _run, _fidelity):
    _module.register(app)


def main() -> None:
    """Entry point for ``python -m pyql``."""
    app(prog_name="pyql")
