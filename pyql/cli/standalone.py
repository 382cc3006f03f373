"""One command run on its own, for the ``python -m MODULE`` entry points that predate ``pyql``
(``python -m pyql.agent.prompt_stats`` is ``pyql prompts stats``): the same options, errors and
exit codes as the subcommand."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import typer

__all__ = ["run_standalone"]


def run_standalone(command: Callable[..., Any], argv: Sequence[str] | None, prog_name: str) -> int:
    """Run ``command`` (a typer command function) on ``argv``; its exit code."""
    app = typer.Typer(add_completion=False, rich_markup_mode="markdown")
    app.command()(command)
    try:
        app(args=list(argv) if argv is not None else None, prog_name=prog_name)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
