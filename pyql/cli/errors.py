"""Errors on the command line: one red ``error:`` line on stderr, an optional ``hint:``, an exit
code. Every command reports through :func:`reported` / :func:`fail`, so the format is the same
everywhere and never a traceback for an error pyql raises on purpose.

With ``--json`` (``reported(as_json=True)``) stdout carries one JSON object whatever happens:
``{"ok": false, "error": {...}}`` (:func:`error_json`) for an error, a usage error or a bug, as
well as the ``error:`` line on stderr."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.text import Text

try:  # typer vendors its click since 0.22; older ones use click's own
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - typer < 0.22
    from click.exceptions import NoArgsIsHelpError, UsageError

from pyql.cli.output import print_json, stderr
from pyql.echo import TEXT_LIMIT, clip, clip_echoes
from pyql.errors import (
    BackendTimeoutError,
    BackendUnavailableError,
    ParseError,
    PyqlError,
    QueryError,
    TermError,
    UnknownEntityError,
)
from pyql.profiles import Profile

__all__ = [
    "CliError",
    "as_cli_error",
    "error_json",
    "fail",
    "hint_for",
    "one_line",
    "prefix_hint",
    "unavailable_hint",
    "reported",
    "ENTITY_HINT",
    "TIMEOUT_HINT",
    "EXIT_ERROR",
    "EXIT_NO_ANSWER",
    "EXIT_OK",
    "EXIT_STATUSES",
    "EXIT_USAGE",
    "usage_failed",
    "NoArgsIsHelpError",
    "UsageError",
]

#: the exit statuses of every command, listed once (``pyql --help`` and the README show them)
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_ANSWER = 3
EXIT_STATUSES: dict[int, str] = {
    EXIT_OK: "done",
    EXIT_ERROR: "an error (the KB, database, LLM or a file; a failed step; an eval run that "
                "stopped)",
    EXIT_USAGE: "bad usage: an unknown or missing option, a value of the wrong type or out of "
                "range (a strategy's --option included), a malformed KEY=VALUE",
    EXIT_NO_ANSWER: "pyql ask stopped at the step cap (--max-steps) without an answer",
}

#: what to do about a mention that is not a KB id
ENTITY_HINT = "link the mention to a KB id with --entity 'MENTION=ID' (or --entities FILE.json)"
#: what to do about a query that ran out of time
TIMEOUT_HINT = "the query ran out of time; raise --timeout or simplify the program"


class CliError(PyqlError):
    """A failure to report as one ``error:`` line (and an optional hint), exiting with ``code``.

    ``detail`` is shown as it is under the error line (a caret under a parse error)."""

    def __init__(
        self, message: str, *, hint: str | None = None, detail: str | None = None, code: int = 1
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail
        self.code = code


def one_line(text: str) -> str:
    """``text`` with its line breaks (and the blanks around them) turned into one space."""
    return re.sub(r"\s*\n\s*", " ", text).strip()


def error_json(error: CliError, kind: str = "error") -> dict[str, Any]:
    """What ``--json`` prints for ``error``: ``ok`` false and the error's fields (``kind`` is
    ``error``, ``usage`` for a bad option, ``internal`` for a bug)."""
    return {"ok": False, "error": {"kind": kind, "message": one_line(error.message),
                                   "hint": error.hint, "detail": error.detail,
                                   "exit_code": error.code}}


def fail(error: CliError | str, hint: str | None = None, *, as_json: bool = False) -> NoReturn:
    """Print ``error`` (and its hint) on stderr and exit with its code (1 for a string);
    ``as_json`` also prints it as the JSON object of ``--json`` on stdout."""
    if isinstance(error, str):
        error = CliError(error, hint=hint)
    if as_json:
        print_json(error_json(error))
    console = stderr()
    console.print(Text.assemble(("error: ", "bold red"), one_line(error.message)))
    if error.detail:
        for line in error.detail.splitlines():
            console.print(Text("  | " + line, style="dim"))
    if error.hint:
        console.print(Text.assemble(("hint: ", "yellow"), one_line(error.hint)))
    raise typer.Exit(error.code)


def usage_failed(error: UsageError) -> NoReturn:
    """A usage error (an unknown or missing option, a bad value: typer's and the commands' own
    :class:`typer.BadParameter`) as one ``error:`` line and a ``hint:`` naming the command's
    help, exit status :data:`EXIT_USAGE`, instead of typer's usage box."""
    ctx = error.ctx
    where = f"{ctx.command_path} {ctx.help_option_names[0]}" if ctx is not None else "pyql -h"
    fail(CliError(error.format_message(), hint=f"see {where}", code=EXIT_USAGE))


def prefix_hint(text: str, profile: Profile | None) -> str | None:
    """A hint to declare the prefix of ``text`` (``ex:Film``) when ``profile`` lacks it."""
    m = re.fullmatch(r"([A-Za-z][\w\-.]*):[^/\s]*", text.strip())
    if m is None or profile is None or m.group(1) in profile.prefixes:
        return None
    return f"the prefix {m.group(1)!r} is not declared: add --prefix {m.group(1)}=NAMESPACE_IRI"


def freebase_hint(text: str, profile: Profile | None) -> str | None:
    """A hint to use ``--profile freebase`` for a Freebase id (``m.0x``) in another profile."""
    if profile is not None and profile.name == "freebase":
        return None
    if re.fullmatch(r"[mg]\.[0-9a-z_]+", text.strip()) is None:
        return None
    return f"{text.strip()} looks like a Freebase id: add --profile freebase"


def hint_for(exc: Exception, profile: Profile | None = None) -> str | None:
    """What to try after a pyql error, read from its structured fields."""
    if isinstance(exc, TermError):
        hint = prefix_hint(exc.text, profile) or freebase_hint(exc.text, profile)
        if hint:
            return hint
        if isinstance(exc, UnknownEntityError):
            return ENTITY_HINT
        return f"expected {exc.expected}" if exc.expected else None
    if isinstance(exc, QueryError) and exc.suggestions:
        return "try: " + ", ".join(exc.suggestions[:5])
    if isinstance(exc, BackendTimeoutError):
        return TIMEOUT_HINT
    if isinstance(exc, BackendUnavailableError):
        return unavailable_hint(exc.backend)
    return None


#: database engines that are files, not servers
_FILE_ENGINES = frozenset({"sqlite", "duckdb"})


def unavailable_hint(backend: str) -> str:
    """What to check when ``backend`` (an endpoint URL or a database engine) cannot be used."""
    if backend in _FILE_ENGINES:
        return f"is it a {'SQLite' if backend == 'sqlite' else 'DuckDB'} database file, readable?"
    if backend.startswith(("http://", "https://")):
        return "is the endpoint up and the URL right?"
    return "is the database server up and the URL right?"


def as_cli_error(exc: Exception, profile: Profile | None = None, where: str = "") -> CliError:
    """``exc`` as a :class:`CliError`, prefixed with ``where`` (a file, a call)."""
    if isinstance(exc, CliError):
        return exc
    lead = f"{where}: " if where else ""
    if isinstance(exc, ParseError):  # the highlight is an excerpt of the line, never all of it
        return CliError(clip(lead + str(exc), TEXT_LIMIT),
                        detail=exc.highlight if exc.text else None)
    return CliError(clip_echoes(lead + str(exc), _echoes(exc)), hint=hint_for(exc, profile))


def _echoes(exc: Exception) -> list[str]:
    """What an error's message may quote of its input (clipped when long)."""
    text = getattr(exc, "text", None)
    return [text] if isinstance(text, str) else []


@contextmanager
def reported(*, as_json: bool = False) -> Iterator[None]:
    """Turn the errors pyql raises on purpose (and OS errors) into one ``error:`` line.

    ``as_json`` (a command's ``--json``): each of them, a usage error raised in the block and any
    other exception is also one JSON object on stdout (:func:`error_json`); usage errors and bugs
    then go on as they would without it (the usage text, the traceback)."""
    try:
        yield
    except PyqlError as exc:
        fail(as_cli_error(exc), as_json=as_json)
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        fail(CliError(f"{where}{exc.strerror or exc}"), as_json=as_json)
    except (typer.Exit, typer.Abort):
        raise
    except typer.TyperException as exc:  # typer.BadParameter: a usage error, exit code 2
        if as_json:
            print_json(error_json(CliError(exc.format_message(), code=exc.exit_code), "usage"))
        raise
    except Exception as exc:
        if as_json:
            message = f"{type(exc).__name__}: {exc}"
            print_json(error_json(CliError(message), "internal"))
        raise
