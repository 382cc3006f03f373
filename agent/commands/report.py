"""``pyql report RUN_DIR``: an evaluation run directory as one static HTML page.

Registered through the ``pyql.commands`` entry point ``report``; the work is done by
:func:`pyql.agent.evaluation.report.write_report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pyql.cli import CliError, reported

__all__ = ["register", "report_command"]


def report_command(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="A run directory written by `pyql eval`."),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", metavar="FILE", help="Where to write the page "
                     "(default: RUN_DIR/report.html)."),
    ] = None,
    open_: Annotated[
        bool,
        typer.Option("--open/--no-open", help="Open the page in a web browser when written."),
    ] = False,
    max_trajectories: Annotated[
        int,
        typer.Option("--max-trajectories", min=0, metavar="N",
                     help="Embed the step-by-step trajectories of at most N questions "
                     "(errors, then incorrect answers first); every question stays listed."),
    ] = 1000,
) -> None:
    """Write an HTML report of an evaluation run: metrics, guidelines, charts, trajectories.

    One static file (no network): summary and configuration, guideline triggers and
    corrections, charts, and every question with its trajectory, filterable and searchable.
    """
    from pyql.agent.evaluation.report import RunDirError, write_report
    with reported():
        try:
            path = write_report(run_dir, out, max_trajectories=max_trajectories)
        except RunDirError as exc:
            raise CliError(str(exc), hint="RUN_DIR is the directory `pyql eval` writes "
                           "(config.json, results.jsonl, metrics.json)") from None
        typer.echo(str(path))
        if open_:
            import webbrowser

            webbrowser.open(path.resolve().as_uri())


def register(app: typer.Typer) -> None:
    """Add ``pyql report`` to the CLI."""
    app.command("report")(report_command)
