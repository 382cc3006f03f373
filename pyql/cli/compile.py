"""``pyql compile``: a program to SPARQL (or to SQL with ``--sql``), printed whole."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import typer

from pyql.cli.backends import sql_function
from pyql.cli.errors import CliError, as_cli_error, reported
from pyql.cli.inputs import (
    build_profile,
    check_extremum,
    entities,
    pairs,
    parse_program,
    read_program,
)
from pyql.cli.options import (
    EntitiesFileOpt,
    EntityOpt,
    ExtremumOpt,
    JsonOpt,
    PrefixOpt,
    ProfileOpt,
    ProgramArg,
    TableOpt,
)
from pyql.cli.output import print_json, printable
from pyql.echo import clip
from pyql.errors import InputError
from pyql.profiles import Profile
from pyql.program import Program

__all__ = ["compile_command", "register"]


def compile_command(
    program: ProgramArg,
    profile: ProfileOpt = None,
    entity: EntityOpt = None,
    entities_file: EntitiesFileOpt = None,
    prefix: PrefixOpt = None,
    extremum: ExtremumOpt = "ties",
    sql: Annotated[bool, typer.Option("--sql", help="Compile a SQL program instead.")] = False,
    dialect: Annotated[
        str, typer.Option("--dialect", help="SQL dialect (any sqlglot dialect), with --sql.")
    ] = "sqlite",
    table: TableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compile a program to SPARQL (or SQL with --sql) on stdout.

    Programs are one call per line (add_fact(?x, rel, ent)) or the original Python style
    (a = PyQL() then a.add_fact('m.0x', 'rel', 'x0')). Freebase ids (m.0x, a.b.c) need
    --profile freebase.
    """
    with reported(as_json=as_json):
        check_extremum(extremum)
        text, source = read_program(program)
        if sql:
            _compile_sql(text, source, dialect, table, as_json)
            return
        linked = entities(entity, entities_file)
        built = build_profile(profile, pairs(prefix, "--prefix", "NAME=IRI"))
        prog = parse_program(text, "sparql", source)
        query_text = compile_sparql(prog, built, linked, extremum)
    if as_json:
        print_json({"program": str(prog), "profile": built.name, "sparql": query_text})
    else:
        typer.echo(printable(query_text))


def compile_sparql(
    program: Program, profile: Profile, entities: Mapping[str, str], extremum: str
) -> str:
    """The SPARQL text of ``program``, or a :class:`CliError` naming the call that fails."""
    from pyql.resolve import Context
    from pyql.sparql import Sparql
    from pyql.sparql.apply import apply_call

    ctx = Context(profile, dict(entities))
    query = Sparql(profile=profile, entities=dict(entities), extremum_mode=extremum)  # type: ignore[arg-type]
    for index, call in enumerate(program, 1):
        try:
            query = apply_call(query, call, ctx)
        except InputError as exc:
            raise as_cli_error(exc, profile, where=f"call {index} {clip(str(call))}") from None
    if query.is_empty:
        raise CliError(
            "the program builds no query (no add_fact or add_type call)",
            hint="start with add_fact(head, relation, tail)",
        )
    return query.to_sparql()


def check_dialect(dialect: str) -> None:
    """``--dialect``: a sqlglot dialect, else a usage error."""
    from sqlglot.dialects.dialect import Dialect

    try:
        Dialect.get_or_raise(dialect)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dialect") from None


def _compile_sql(
    text: str, source: str | None, dialect: str, table: str | None, as_json: bool
) -> None:
    program_to_sql = sql_function("program_to_sql")
    check_dialect(dialect)
    prog = parse_program(text, "sql", source)
    try:
        query_text = str(program_to_sql(prog, dialect=dialect, table=table))
    except InputError as exc:
        error = as_cli_error(exc)
        if table is None and error.hint is None:
            error.hint = "name the table the program starts from with --table"
        raise error from None
    if as_json:
        print_json({"program": str(prog), "dialect": dialect, "sql": query_text})
    else:
        typer.echo(printable(query_text))


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_command)
