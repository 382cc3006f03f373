"""``pyql guidelines list`` and ``pyql guidelines show CODE``: the installed ERASER guidelines.

Loaded by ``pyql.cli`` as a command extension (its ``EXTENSION_MODULES``): :func:`register`
adds the ``guidelines`` sub-app. The content comes from :mod:`pyql.guidelines.docs`
(:func:`~pyql.guidelines.docs.list_rows`, :func:`~pyql.guidelines.docs.describe`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from pyql.guidelines.registry import Registry

__all__ = ["guidelines_app", "register"]

guidelines_app = typer.Typer(
    name="guidelines",
    help="List and describe the installed ERASER guidelines (built-in packs and plugins).",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(message: str, hint: str | None = None) -> NoReturn:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text.assemble(("error: ", "bold red"), re.sub(r"\s*\n\s*", " ", message)))
    if hint:
        console.print(Text.assemble(("hint: ", "yellow"), hint))
    raise typer.Exit(1)


def _registry(enable: list[str] | None = None, disable: list[str] | None = None) -> Registry:
    from pyql.guidelines import GuidelineLoadError, default_registry

    try:
        registry = default_registry()
    except GuidelineLoadError as exc:
        _fail(str(exc), "fix or uninstall the plugin named above")
    if enable or disable:
        try:
            registry = registry.select(enable=enable or None, disable=disable)
        except ValueError as exc:
            _fail(str(exc), "codes (KB201), code prefixes (RM), names or groups (sql, paper)")
    return registry


@guidelines_app.command("list")
def list_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
    enable: Annotated[list[str] | None, typer.Option(
        "--select", "-s", help="Only these codes, code prefixes, names or groups.")] = None,
    disable: Annotated[list[str] | None, typer.Option(
        "--ignore", "-i", help="Leave out these codes, code prefixes, names or groups.")] = None,
) -> None:
    """List the installed guidelines in evaluation order."""
    from pyql.guidelines.docs import list_rows

    rows = list_rows(_registry(enable, disable))
    if json_output:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    table = Table(show_lines=False, highlight=False)
    for column in ("Code", "Name", "Env", "Triggers on", "Description"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(r["code"], r["name"], r["env"], r["triggers"], r["description"])
    Console(highlight=False).print(table)


@guidelines_app.command("show")
def show_command(
    code: Annotated[str, typer.Argument(help="A guideline code, e.g. KB201.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Describe one guideline: what it detects, what it reads, and a bad and a fixed example."""
    from pyql.guidelines.derive import closest
    from pyql.guidelines.docs import describe, list_rows

    registry = _registry()
    wanted = code.strip().upper()
    if wanted not in registry:
        near = closest(wanted, registry.codes, cutoff=0.5)
        _fail(f"no guideline {code!r}",
              f"did you mean {', '.join(near)}?" if near else "see `pyql guidelines list`")
    if json_output:
        row = next(r for r in list_rows(registry) if r["code"] == wanted)
        typer.echo(json.dumps(row, ensure_ascii=False, indent=2))
        return
    typer.echo(describe(registry[wanted], registry), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``pyql guidelines ...`` to the pyql command line."""
    app.add_typer(guidelines_app, name="guidelines")
