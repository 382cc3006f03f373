"""``pyql guidelines list`` and ``pyql guidelines show CODE_OR_NAME``: the installed ERASER guidelines.

Registered through the ``pyql.commands`` entry point ``guidelines``: :func:`register` adds the
``guidelines`` sub-app. The content comes from :mod:`pyql.guidelines.docs`
(:func:`~pyql.guidelines.docs.list_rows`, :func:`~pyql.guidelines.docs.describe`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from pyql.cli import fail, print_json
from pyql.cli.errors import EXIT_USAGE, CliError
from pyql.cli.output import make_console, printable

if TYPE_CHECKING:
    from pyql.guidelines.base import Guideline
    from pyql.guidelines.registry import Registry

__all__ = ["guidelines_app", "register"]

guidelines_app = typer.Typer(
    name="guidelines",
    help="List and describe the installed ERASER guidelines (built-in packs and plugins).",
    no_args_is_help=True,
    add_completion=False,
)


def _registry(enable: list[str] | None = None, disable: list[str] | None = None) -> Registry:
    from pyql.guidelines import GuidelineLoadError, default_registry

    try:
        registry = default_registry()
    except GuidelineLoadError as exc:
        fail(str(exc), "fix or uninstall the plugin named above")
    if enable or disable:
        try:
            registry = registry.select(enable=enable or None, disable=disable)
        except ValueError as exc:
            fail(CliError(str(exc), hint="codes (KB201), code prefixes (RM), names or groups "
                          "(sql, paper)", code=EXIT_USAGE))
    return registry


@guidelines_app.command("list")
def list_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
    enable: Annotated[list[str] | None, typer.Option(
        "--select", "-s", metavar="SELECTOR",
        help="Only these codes, code prefixes, names or groups.")] = None,
    disable: Annotated[list[str] | None, typer.Option(
        "--ignore", "-i", metavar="SELECTOR",
        help="Leave out these codes, code prefixes, names or groups.")] = None,
) -> None:
    """List the installed guidelines in evaluation order."""
    from pyql.guidelines.docs import list_rows

    rows = list_rows(_registry(enable, disable))
    if json_output:
        print_json(rows)
        return
    table = Table(show_lines=False, highlight=False)
    for column in ("Code", "Name", "Env", "Triggers on", "Description"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(r["code"], r["name"], r["env"], r["triggers"], r["description"])
    make_console(highlight=False).print(table)


@guidelines_app.command("show")
def show_command(
    code: Annotated[str, typer.Argument(
        metavar="CODE_OR_NAME",
        help="A guideline code or name, e.g. KB201 or kb.empty_fact_unlisted_relation.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Describe one guideline: what it detects, what it reads, and a bad and a fixed example."""
    from pyql.guidelines.docs import describe, list_rows

    registry = _registry()
    guideline = find(registry, code)
    if json_output:
        row = next(r for r in list_rows(registry) if r["code"] == guideline.code)
        print_json(row)
        return
    typer.echo(printable(describe(guideline, registry)), nl=False)


def find(registry: Registry, wanted: str) -> Guideline:
    """The guideline whose code or name is ``wanted`` (any case), or a one-line error that
    suggests the closest codes and names."""
    from pyql.guidelines.derive import closest

    key = wanted.strip()
    if key.upper() in registry:
        return registry[key.upper()]
    by_name = {g.name.casefold(): g for g in registry}
    if key.casefold() in by_name:
        return by_name[key.casefold()]
    near = closest(key, [*registry.codes, *(g.name for g in registry)], cutoff=0.5)
    fail(CliError(f"no guideline {wanted!r}",  # a name it does not know: bad usage, exit 2
                  hint=f"did you mean {', '.join(near)}?" if near
                  else "see `pyql guidelines list`", code=EXIT_USAGE))


def register(app: typer.Typer) -> None:
    """Add ``pyql guidelines ...`` to the pyql command line."""
    app.add_typer(guidelines_app, name="guidelines")
