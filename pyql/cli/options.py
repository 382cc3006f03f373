"""Options shared by commands, declared once so their names, help and defaults agree."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pyql.cli.backends import KB_HELP

__all__ = [
    "DbOpt",
    "EntitiesFileOpt",
    "EntityOpt",
    "ExtremumOpt",
    "JsonOpt",
    "KbOpt",
    "PrefixOpt",
    "ProfileOpt",
    "ProgramArg",
    "QueryTimeoutOpt",
    "TableOpt",
    "PROFILE_HELP",
]

#: the one defaulting rule, shown by every command with --profile
PROFILE_HELP = (
    "KB profile: generic, freebase, metaqa or wikidata. Default: metaqa for MetaQA's kb.txt, "
    "generic for anything else; Freebase ids (m.0x) need freebase."
)

ProgramArg = Annotated[
    str,
    typer.Argument(
        metavar="PROGRAM_OR_FILE", help="Program text, a file (path or @FILE), or - to read stdin."
    ),
]
KbOpt = Annotated[str | None, typer.Option("--kb", metavar="PATH_OR_URL", help=KB_HELP)]
DbOpt = Annotated[
    str | None,
    typer.Option("--db", metavar="URL",
                 help="A database URL or SQLite file (SQL programs or questions)."),
]
QueryTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", min=0.001, metavar="SECONDS",
                 help="Wall-clock seconds one KB or database query may take (the same "
                 "--timeout in every command)."),
]
TableOpt = Annotated[
    str | None, typer.Option("--table", help="The table a SQL program (or question) starts from.")
]
ProfileOpt = Annotated[
    str | None, typer.Option("--profile", "-p", metavar="PROFILE", help=PROFILE_HELP)
]
EntityOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--entity",
        "-e",
        metavar="MENTION=ID",
        help="Link a mention to a KB id (repeatable), e.g. 'Inception=ex:Inception'.",
    ),
]
EntitiesFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--entities",
        metavar="FILE.json",
        help="A JSON object of mention -> KB id (--entity entries win).",
    ),
]
PrefixOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--prefix",
        metavar="NAME=IRI",
        help="Declare a namespace prefix (repeatable), e.g. 'ex=http://example.org/'; "
        ".ttl files declare their own.",
    ),
]
ExtremumOpt = Annotated[
    str,
    typer.Option(
        "--extremum",
        metavar="ties|limit",
        help="add_max/add_min: keep every tie, or ORDER BY ... LIMIT 1 as in the paper.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for tools.")]
