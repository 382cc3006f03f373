"""What commands print: consoles, JSON, queries (whole, never wrapped) and warning lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text

__all__ = ["stdout", "stderr", "print_json", "print_query", "warnings_shown"]


def stderr() -> Console:
    """stderr, lines kept whole."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout(*, wrap: bool = False) -> Console:
    """stdout; ``wrap`` for prose meant for people (the demo), else lines stay whole."""
    return Console(highlight=False, soft_wrap=not wrap)


def print_json(data: Mapping[str, Any] | list[Any]) -> None:
    """``data`` as indented JSON on stdout (the one JSON format of every ``--json``)."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def print_query(out: Console, query: str, language: str) -> None:
    """``query`` between two rules, highlighted on a terminal, every line whole: neither wrapped
    nor cut at the terminal width, so a copied query runs as printed."""
    out.print(Rule(language.upper(), align="left", style="dim"))
    text = Syntax(query, language, background_color="default").highlight(query)
    text.rstrip()
    out.print(text, soft_wrap=True, crop=False, overflow="ignore", no_wrap=True)
    out.print(Rule(style="dim"))


class _WarningLines(logging.Handler):
    """pyql's warnings (an LLM retry, a model without a price) as ``warning:`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = " ".join(record.getMessage().split())
        except (TypeError, ValueError):  # a malformed log call must not end the command
            message = str(record.msg)
        stderr().print(Text.assemble(("warning: ", "yellow"), message))


@contextmanager
def warnings_shown() -> Iterator[None]:
    """Show pyql's warnings while the command runs, unless logging is configured already."""
    logger = logging.getLogger("pyql")
    if logger.handlers or logging.getLogger().handlers:
        yield
        return
    handler = _WarningLines(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
