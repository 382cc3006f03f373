"""What commands print: consoles, JSON, queries (whole, never wrapped) and warning lines.

Every console a command prints on comes from :func:`make_console` (:func:`stdout`, :func:`stderr`):
it drops control characters from the text it prints (:func:`printable`), so a label from a KB,
a cell from a database or a reply from an LLM that holds ``ESC[2J`` or an OSC title sequence
shows as text and never drives the terminal. The styles the console adds itself are untouched.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.rule import Rule
from rich.segment import Segment
from rich.syntax import Syntax
from rich.text import Text

__all__ = ["make_console", "shared_stderr", "stdout", "stderr", "printable", "json_text", "print_json", "print_query",
           "warnings_shown", "counted"]

#: C0 controls but tab and newline, DEL and the C1 controls (U+009B is a one-character CSI)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: what JSON leaves raw of those: DEL and C1 (json.dumps escapes C0 itself)
_RAW_IN_JSON = re.compile("[\x7f-\x9f]")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1, the number with thousands separators.

    >>> counted(1, "triple"), counted(1200, "triple"), counted(0, "file")
    ('1 triple', '1,200 triples', '0 files')
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def printable(text: str) -> str:
    """``text`` without control characters (tab and newline kept).

    >>> printable("Kismet\x1b[2J\x1b]0;owned\x07")
    'Kismet[2J]0;owned'
    """
    return _CONTROL.sub("", text)


class _PrintableConsole(Console):
    """A console whose printed text goes through :func:`printable`; the control segments rich
    makes itself (cursor moves of a progress bar) pass."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _CONTROL.search(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment


def make_console(**options: Any) -> Console:
    """A rich console (``options`` as :class:`rich.console.Console` takes them) that prints no
    control character of the text it is given: the one console of every command."""
    return _PrintableConsole(**options)


@functools.cache
def shared_stderr() -> Console:
    """The one stderr console of a process's progress bars and log lines: a line logged while
    a bar runs on it prints above the bar, not through it."""
    return make_console(stderr=True)


def stderr() -> Console:
    """stderr, lines kept whole."""
    return make_console(stderr=True, highlight=False, soft_wrap=True)


def stdout(*, wrap: bool = False) -> Console:
    """stdout; ``wrap`` for prose meant for people (the demo), else lines stay whole."""
    return make_console(highlight=False, soft_wrap=not wrap)


def json_text(data: Any) -> str:
    """``data`` as indented JSON, every control character escaped (``\\u001b``)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def print_json(data: Mapping[str, Any] | list[Any]) -> None:
    """``data`` as indented JSON on stdout (the one JSON format of every ``--json``)."""
    typer.echo(json_text(data))


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
        shared_stderr().print(Text.assemble(("warning: ", "yellow"), message), soft_wrap=True)


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
