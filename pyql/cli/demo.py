"""``pyql demo``: offline tours of the bundled movie KB (``--sql``: the basketball database)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text

from pyql.cli.errors import CliError, reported
from pyql.cli.output import stdout

__all__ = ["demo_command", "register"]


def demo_command(
    sql: Annotated[bool, typer.Option("--sql", help="Run the SQL tours instead.")] = False,
    tour: Annotated[
        int | None, typer.Option("--tour", "-t", min=1, help="Run only tour N (1-based).")
    ] = None,
    kb_path: Annotated[
        bool, typer.Option("--kb-path", help="Print the path of the bundled movie KB and exit.")
    ] = False,
    db_path: Annotated[
        bool, typer.Option("--db-path", help="Print the path of the bundled SQLite database "
                           "and exit.")
    ] = False,
) -> None:
    """An offline tour: questions answered one call at a time, with the query growing.

    Runs on a small movie KB shipped with pyql (in-memory Oxigraph): no server, no key.
    """
    from pyql import demo as demos

    if kb_path:
        typer.echo(str(demos.movies_path()))
        return
    if db_path:
        typer.echo(str(_demo_db_path()))
        return
    with reported():
        try:
            tour_set = demos.get_tour_set("sql" if sql else "kb")
        except LookupError as exc:
            raise CliError(str(exc), hint="the SQL tours come with pyql's SQL support") from None
        tours = list(enumerate(tour_set.tours, 1))
        if tour is not None:
            if tour > len(tours):
                raise typer.BadParameter(f"there are {len(tours)} tours", param_hint="--tour")
            tours = [tours[tour - 1]]
        out = stdout(wrap=True)
        out.print(Text.assemble(("pyql demo", "bold"), f": {tour_set.title}"))
        if tour_set.source:
            out.print(Text(f"data: {tour_set.source}", style="dim"))
        failures = []
        for number, item in tours:
            result = demos.run_tour(tour_set, item)
            _show_tour(out, number, len(tour_set.tours), result, tour_set.language)
            if not result.ok:
                failures.append(number)
        out.print()
        if failures:
            raise CliError(
                f"tour {', '.join(map(str, failures))} did not reach the expected answers",
                hint="this is a bug in pyql; please report it",
            )
        out.print(
            Text(
                f"{len(tours)} tour{'s' if len(tours) != 1 else ''} done: every answer "
                "as expected.",
                style="bold green",
            )
        )
        if not sql:
            out.print(Text("Next: run your own program on the same KB:", style="dim"))
            _command(out, 'pyql run --kb "$(pyql demo --kb-path)" \\',
                     "  'add_fact(Inception, ex:directed_by, ?d)'")
            out.print(Text("or tour SQL on a small database: pyql demo --sql", style="dim"))
        else:
            out.print(Text("Next: run your own program on the same database:", style="dim"))
            _command(out, 'pyql run --db "$(pyql demo --db-path)" --table players \\',
                     "  'add_condition(position, =, Center); set_answer(height_cm, MAX)'")


def _command(out: Console, *lines: str) -> None:
    """A shell command to copy: each line whole (shorter than 80 columns; a long one is
    continued with a backslash), never wrapped by the console."""
    for line in lines:
        out.print(Text("  " + line, style="dim"), soft_wrap=True)


def _demo_db_path() -> Path:
    from importlib import resources

    return Path(str(resources.files("pyql").joinpath("data/demo.sqlite")))


def _show_tour(out: Console, number: int, total: int, result: Any, language: str) -> None:
    tour = result.tour
    out.print()
    out.print(Rule(f"Tour {number}/{total}: {tour.title}", align="left"))
    out.print(Text.assemble(("Question: ", "bold"), tour.question))
    if tour.entities:
        linked = ", ".join(f"{m} = {kb_id}" for m, kb_id in tour.entities.items())
        out.print(Text.assemble(("Linked entities: ", "bold"), linked))
    previous = ""
    for obs in result.observations:
        out.print()
        out.print(Text.assemble((f"Step {obs.step}  ", "bold"), (obs.action, "bold cyan")))
        style = "green" if obs.ok else "red"
        out.print(Padding(Text("-> " + obs.text, style=style), (0, 0, 0, 2), expand=False))
        if obs.query and obs.query != previous:
            out.print(
                Padding(
                    Panel(
                        Syntax(obs.query, language, background_color="default", word_wrap=True),
                        title=f"{language.upper()} so far",
                        title_align="left",
                        expand=False,
                        border_style="dim",
                    ),
                    (0, 0, 0, 2),
                    expand=False,
                )
            )
            previous = obs.query
    out.print()
    answers = ", ".join(result.answers) if result.answers else "(none)"
    if result.ok:
        out.print(Text.assemble(("Answer: ", "bold green"), answers))
    else:
        expected = ", ".join(sorted(tour.expected))
        out.print(Text.assemble(("Answer: ", "bold red"), f"{answers} (expected {expected})"))
    if tour.note:
        out.print(Text(tour.note, style="dim italic"))


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
