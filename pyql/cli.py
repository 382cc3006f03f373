"""pyql's command line: ``pyql demo``, ``pyql compile``, ``pyql run``.

- ``pyql demo``: an offline tour: questions answered one DSL call at a time on the bundled
  movie KB, showing each call, its observation and the query so far; ``pyql demo --sql`` tours
  the bundled basketball database (:mod:`pyql.sql.demo`).
- ``pyql compile PROGRAM``: a program (text, a file, ``@file`` or ``-`` for stdin) to SPARQL,
  or to SQL with ``--sql [--dialect D] [--table T]`` (:func:`pyql.sql.program_to_sql`).
- ``pyql run --kb PATH_OR_URL PROGRAM``: runs each call in a :class:`~pyql.session.Session` and
  prints the observations, the final query and the answers (``--json`` for tools);
  ``pyql run --db URL_OR_SQLITE_FILE [--table T] PROGRAM`` does the same for a SQL program in a
  :class:`~pyql.sql.session.SqlSession` over a read-only :class:`~pyql.db.SqlDB`.

Errors are one red ``error: ...`` line on stderr (with a ``hint:`` line where one helps) and exit
code 1; usage errors (a bad option) exit with 2. Never a traceback for a known error.

More commands plug in without editing this file's commands: a module listed in
:data:`EXTENSION_MODULES` that defines ``register(app: typer.Typer) -> None`` is imported when
the CLI starts and adds its commands or sub-apps (``app.add_typer(guidelines_app,
name="guidelines")``). A module that cannot be imported (not written yet, or an optional
dependency missing) is skipped; keep heavy imports inside the command functions.
"""

from __future__ import annotations

import gzip
import importlib
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, NoReturn, cast

import typer
from rich.console import Console
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text

from pyql import __version__
from pyql.errors import (
    BackendTimeoutError,
    BackendUnavailableError,
    InputError,
    ParseError,
    ProfileError,
    PyqlError,
    QueryError,
    TermError,
    UnknownEntityError,
)
from pyql.kb.base import KB
from pyql.profiles import Profile, get_profile
from pyql.program import Call, Program
from pyql.session import Observation

__all__ = ["app", "main", "CliError", "EXTENSION_MODULES"]

log = logging.getLogger(__name__)

#: modules that add commands: each defines ``register(app: typer.Typer) -> None``
EXTENSION_MODULES: tuple[str, ...] = (
    "pyql.guidelines.cli",  # pyql guidelines list|show
    "pyql.agent.cli",  # pyql ask, pyql eval, pyql report
    "pyql.agent.evaluation.report_cli",  # pyql report RUN_DIR
    "pyql.agent.evaluation.cli",  # pyql eval
)

app = typer.Typer(
    name="pyql",
    help="Build SPARQL and SQL step by step, the way a KBQA agent does. "
    "Start with `pyql demo` (offline, no key).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


# -- errors -----------------------------------------------------------------------------------


class CliError(Exception):
    """A failure to report as one ``error:`` line (and an optional hint), exiting with ``code``."""

    def __init__(
        self, message: str, *, hint: str | None = None, detail: str | None = None, code: int = 1
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        #: lines shown as they are under the error (a caret under a parse error)
        self.detail = detail
        self.code = code


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _stdout(*, wrap: bool = False) -> Console:
    """stdout; ``wrap`` for prose meant for people (the demo), else lines stay whole."""
    return Console(highlight=False, soft_wrap=not wrap)


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text).strip()


def _report(error: CliError) -> NoReturn:
    console = _stderr()
    console.print(Text.assemble(("error: ", "bold red"), _one_line(error.message)))
    if error.detail:
        for line in error.detail.splitlines():
            console.print(Text("  | " + line, style="dim"))
    if error.hint:
        console.print(Text.assemble(("hint: ", "yellow"), _one_line(error.hint)))
    raise typer.Exit(error.code)


def _hint_for(exc: Exception, profile: Profile | None = None) -> str | None:
    if isinstance(exc, TermError):
        prefix_hint = _prefix_hint(exc.text, profile)
        if prefix_hint:
            return prefix_hint
        if isinstance(exc, UnknownEntityError):
            return (
                "link the mention to a KB id with --entity 'MENTION=ID' (or --entities FILE.json)"
            )
        return f"expected {exc.expected}" if exc.expected else None
    if isinstance(exc, QueryError) and exc.suggestions:
        return "try: " + ", ".join(exc.suggestions[:5])
    if isinstance(exc, BackendTimeoutError):
        return "the query ran out of time; raise --timeout or simplify the program"
    if isinstance(exc, BackendUnavailableError):
        return "is the endpoint up and the URL right?"
    return None


def _prefix_hint(text: str, profile: Profile | None) -> str | None:
    m = re.fullmatch(r"([A-Za-z][\w\-.]*):[^/\s]*", text.strip())
    if m is None or profile is None or m.group(1) in profile.prefixes:
        return None
    return f"the prefix {m.group(1)!r} is not declared: add --prefix {m.group(1)}=NAMESPACE_IRI"


def _as_cli_error(exc: Exception, profile: Profile | None = None, where: str = "") -> CliError:
    lead = f"{where}: " if where else ""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, ParseError):
        return CliError(lead + str(exc), detail=exc.highlight if exc.text else None)
    return CliError(lead + str(exc), hint=_hint_for(exc, profile))


@contextmanager
def _reported() -> Iterator[None]:
    """Turn the errors pyql raises on purpose into one ``error:`` line and exit code 1."""
    try:
        yield
    except (CliError, PyqlError) as exc:
        _report(_as_cli_error(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _report(CliError(f"{where}{exc.strerror or exc}"))


# -- inputs -----------------------------------------------------------------------------------


def _read_program(arg: str) -> tuple[str, str | None]:
    """The program text and the file it came from (``None`` for inline text or stdin)."""
    if arg == "-":
        return sys.stdin.read(), None
    if arg.startswith("@"):
        return _read_file(Path(arg[1:]), "program"), arg[1:]
    path = Path(arg)
    if "(" not in arg or path.is_file():
        if not path.is_file():
            raise CliError(
                f"no such program file: {arg}",
                hint="pass the program text in quotes, a file path, @FILE, or - to read stdin",
            )
        return _read_file(path, "program"), arg
    return arg, None


def _read_file(path: Path, what: str) -> str:
    if not path.is_file():
        raise CliError(f"{what} file not found: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{what} file is not UTF-8 text: {path}") from None
    except OSError as exc:
        raise CliError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None


def _parse_program(text: str, tools: str, source: str | None) -> Program:
    try:
        program = Program.parse(text, tools)
    except InputError as exc:
        raise _as_cli_error(exc, where=source or "") from None
    if not len(program):
        raise CliError(
            f"{source or 'the program'} has no calls",
            hint="write one call per line, e.g. add_fact(?x, relation, entity)",
        )
    return program


def _pairs(values: Sequence[str] | None, option: str, shape: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise typer.BadParameter(f"expected {shape}, got {value!r}", param_hint=option)
        out[key.strip()] = val.strip()
    return out


def _entities(entity: Sequence[str] | None, entities_file: Path | None) -> dict[str, str]:
    table: dict[str, str] = {}
    if entities_file is not None:
        text = _read_file(entities_file, "entities")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"{entities_file}: not JSON: {exc.msg} (line {exc.lineno}, col {exc.colno})"
            ) from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise CliError(f"{entities_file}: expected a JSON object of mention -> KB id strings")
        table.update(data)
    table.update(_pairs(entity, "--entity", "MENTION=ID"))
    return table


_STANDARD_PREFIXES = frozenset({"rdf", "rdfs", "xsd", "owl"})


def _build_profile(name: str, *prefix_maps: Mapping[str, str]) -> Profile:
    """The named profile with extra prefixes; the first new prefix becomes the display prefix
    when the profile has none (so SPARQL shows ``ex:Film`` instead of a full IRI)."""
    try:
        profile = get_profile(name)
    except ProfileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--profile") from None
    merged: dict[str, str] = {}
    for prefixes in prefix_maps:
        merged.update(prefixes)
    new = {k: v for k, v in merged.items() if profile.prefixes.get(k) != v}
    if not new:
        return profile
    try:
        profile = profile.with_prefixes(**new)
    except TermError as exc:
        raise typer.BadParameter(f"bad namespace IRI: {exc}", param_hint="--prefix") from None
    if profile.display_prefix is None:
        # explicit --prefix options come last in prefix_maps and win
        for prefixes in reversed(prefix_maps):
            shown = next((k for k in prefixes if k and k not in _STANDARD_PREFIXES), None)
            if shown is not None:
                return replace(profile, display_prefix=shown)
    return profile


_PREFIX_DECL = re.compile(
    r"^[ \t]*(?:@prefix|PREFIX)[ \t]+([A-Za-z][\w\-.]*)?:[ \t]*<([^<>\s]*)>",
    re.IGNORECASE | re.MULTILINE,
)


def _declared_prefixes(path: Path) -> dict[str, str]:
    """Prefixes declared at the top of a Turtle/TriG/N3 file (the first 64 KB are read)."""
    suffixes = [s for s in path.suffixes if s != ".gz"]
    if not path.is_file() or not suffixes or suffixes[-1] not in (".ttl", ".trig", ".n3"):
        return {}
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            head = handle.read(1 << 16).decode("utf-8", errors="replace")
    except OSError:
        return {}
    return {m.group(1) or "": m.group(2) for m in _PREFIX_DECL.finditer(head)}


def _open_kb(location: str, profile: Profile) -> KB:
    from pyql.kb import open_kb

    is_url = location.startswith(("http://", "https://"))
    if not is_url and not Path(location).exists():
        raise CliError(
            f"KB not found: {location}",
            hint="give an RDF file (.ttl, .nt, ...), an Oxigraph store directory or an "
            "http(s) SPARQL endpoint URL",
        )
    try:
        kb = open_kb(location, profile=profile.name)
    except SyntaxError as exc:  # pyoxigraph reports malformed RDF as SyntaxError
        raise CliError(f"cannot load {location}: {_one_line(str(exc))}") from None
    except ValueError as exc:
        raise CliError(f"cannot open {location}: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot open {location}: {exc.strerror or exc}") from None
    kb.profile = profile
    return kb


def _sql_function(name: str) -> Callable[..., Any]:
    """``pyql.sql.<name>``, or a clear error while the SQL side is not there."""
    try:
        module = importlib.import_module("pyql.sql")
    except ImportError:
        module = None
    fn = getattr(module, name, None)
    if fn is None:
        raise CliError(
            "SQL support is not installed in this build",
            hint=f"pyql.sql.{name} is not available; drop --sql/--db to work with SPARQL",
        )
    return cast("Callable[..., Any]", fn)


# -- shared options ---------------------------------------------------------------------------

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
        help="Declare a namespace prefix (repeatable), e.g. 'ex=http://example.org/'.",
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


def _check_extremum(value: str) -> str:
    if value not in ("ties", "limit"):
        raise typer.BadParameter(
            f"expected 'ties' or 'limit', got {value!r}", param_hint="--extremum"
        )
    return value


def _print_json(data: Mapping[str, Any]) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


# -- root -------------------------------------------------------------------------------------


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pyql {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Build SPARQL and SQL step by step, the way a KBQA agent does."""


# -- demo -------------------------------------------------------------------------------------


@app.command("demo")
def demo_command(
    sql: Annotated[bool, typer.Option("--sql", help="Run the SQL tours instead.")] = False,
    tour: Annotated[
        int | None, typer.Option("--tour", "-t", min=1, help="Run only tour N (1-based).")
    ] = None,
    kb_path: Annotated[
        bool, typer.Option("--kb-path", help="Print the path of the bundled movie KB and exit.")
    ] = False,
) -> None:
    """An offline tour: questions answered one call at a time, with the query growing.

    Runs on a small movie KB shipped with pyql (in-memory Oxigraph): no server, no key.
    """
    from pyql import demo as demos

    if kb_path:
        typer.echo(str(demos.movies_path()))
        return
    with _reported():
        try:
            tour_set = demos.get_tour_set("sql" if sql else "kb")
        except LookupError as exc:
            raise CliError(str(exc), hint="the SQL tours come with pyql's SQL support") from None
        tours = list(enumerate(tour_set.tours, 1))
        if tour is not None:
            if tour > len(tours):
                raise typer.BadParameter(f"there are {len(tours)} tours", param_hint="--tour")
            tours = [tours[tour - 1]]
        out = _stdout(wrap=True)
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
            out.print(
                Text(
                    '  pyql run --kb "$(pyql demo --kb-path)" '
                    "-e 'Inception=ex:Inception' 'add_fact(Inception, ex:directed_by, ?d)'",
                    style="dim",
                )
            )
            out.print(Text("or tour SQL on a small database: pyql demo --sql", style="dim"))
        else:
            _sql_demo_next(out)


def _sql_demo_next(out: Console) -> None:
    """After the SQL tours: how to run a program of one's own on the demo database."""
    from importlib import resources

    path = Path(str(resources.files("pyql").joinpath("data/demo.sqlite")))
    if not path.is_file():  # pragma: no cover - shipped with pyql
        return
    out.print(Text("Next: run your own program on the same database:", style="dim"))
    out.print(Text(
        f"  pyql run --db {path} --table players "
        "'add_condition(position, =, Center); set_answer(height_cm, MAX)'",
        style="dim",
    ))


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


# -- compile ----------------------------------------------------------------------------------


@app.command("compile")
def compile_command(
    program: Annotated[
        str,
        typer.Argument(
            metavar="PROGRAM_OR_FILE",
            help="Program text, a file (path or @FILE), or - to read stdin.",
        ),
    ],
    profile: Annotated[
        str, typer.Option("--profile", "-p", help="KB profile: freebase, generic or metaqa.")
    ] = "freebase",
    entity: EntityOpt = None,
    entities: EntitiesFileOpt = None,
    prefix: PrefixOpt = None,
    extremum: ExtremumOpt = "ties",
    sql: Annotated[bool, typer.Option("--sql", help="Compile a SQL program instead.")] = False,
    dialect: Annotated[
        str, typer.Option("--dialect", help="SQL dialect (any sqlglot dialect), with --sql.")
    ] = "sqlite",
    table: Annotated[
        str | None, typer.Option("--table", help="The table a SQL program starts from.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compile a program to SPARQL (or SQL with --sql) on stdout.

    Programs are one call per line (add_fact(?x, rel, ent)) or the original Python style
    (a = PyQL() then a.add_fact('m.0x', 'rel', 'x0')).
    """
    _check_extremum(extremum)
    with _reported():
        text, source = _read_program(program)
        if sql:
            _compile_sql(text, source, dialect, table, as_json)
            return
        linked = _entities(entity, entities)
        built = _build_profile(profile, _pairs(prefix, "--prefix", "NAME=IRI"))
        prog = _parse_program(text, "sparql", source)
        query_text = _compile_sparql(prog, built, linked, extremum)
    if as_json:
        _print_json({"program": str(prog), "profile": built.name, "sparql": query_text})
    else:
        typer.echo(query_text)


def _compile_sparql(
    program: Program, profile: Profile, entities: Mapping[str, str], extremum: str
) -> str:
    from pyql.sparql import Sparql
    from pyql.sparql.apply import apply_call
    from pyql.terms import Context

    ctx = Context(profile, dict(entities))
    query = Sparql(profile=profile, entities=dict(entities), extremum_mode=extremum)  # type: ignore[arg-type]
    for index, call in enumerate(program, 1):
        try:
            query = apply_call(query, call, ctx)
        except InputError as exc:
            raise _as_cli_error(exc, profile, where=f"call {index} {call}") from None
    if query.is_empty:
        raise CliError(
            "the program builds no query (no add_fact or add_type call)",
            hint="start with add_fact(head, relation, tail)",
        )
    return query.to_sparql()


def _check_dialect(dialect: str) -> None:
    from sqlglot.dialects.dialect import Dialect

    try:
        Dialect.get_or_raise(dialect)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dialect") from None


def _compile_sql(
    text: str, source: str | None, dialect: str, table: str | None, as_json: bool
) -> None:
    program_to_sql = _sql_function("program_to_sql")
    _check_dialect(dialect)
    prog = _parse_program(text, "sql", source)
    try:
        query_text = str(program_to_sql(prog, dialect=dialect, table=table))
    except InputError as exc:
        error = _as_cli_error(exc)
        if table is None and error.hint is None:
            error.hint = "name the table the program starts from with --table"
        raise error from None
    if as_json:
        _print_json({"program": str(prog), "dialect": dialect, "sql": query_text})
    else:
        typer.echo(query_text)


# -- run --------------------------------------------------------------------------------------


@app.command("run")
def run_command(
    program: Annotated[
        str,
        typer.Argument(
            metavar="PROGRAM_OR_FILE",
            help="Program text, a file (path or @FILE), or - to read stdin.",
        ),
    ],
    kb: Annotated[
        str | None,
        typer.Option(
            "--kb",
            metavar="PATH_OR_URL",
            help="RDF file, Oxigraph store directory or SPARQL endpoint URL.",
        ),
    ] = None,
    db: Annotated[
        str | None, typer.Option("--db", metavar="URL", help="A database URL (SQL programs).")
    ] = None,
    profile: Annotated[
        str, typer.Option("--profile", "-p", help="KB profile: freebase, generic or metaqa.")
    ] = "generic",
    entity: EntityOpt = None,
    entities: EntitiesFileOpt = None,
    prefix: PrefixOpt = None,
    extremum: ExtremumOpt = "ties",
    table: Annotated[
        str | None, typer.Option("--table", help="The table a SQL program starts from.")
    ] = None,
    max_values: Annotated[
        int, typer.Option("--max-values", min=1, help="Values shown per variable.")
    ] = 10,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0.001, help="Seconds per KB query.")
    ] = None,
    keep_going: Annotated[
        bool, typer.Option("--keep-going", help="Run the remaining calls after a failed one.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a program call by call against a KB (or a DB) and print what each step observed.

    The Session rolls back a failed call; the run stops there unless --keep-going. A program
    without execute() is executed at the end. Files with @prefix lines (.ttl) declare their
    prefixes, so ex:Film works as written.
    """
    _check_extremum(extremum)
    if (kb is None) == (db is None):
        raise typer.BadParameter(
            "give exactly one of --kb PATH_OR_URL (SPARQL) or --db URL (SQL)", param_hint="--kb"
        )
    with _reported():
        text, source = _read_program(program)
        linked = _entities(entity, entities)
        explicit = _pairs(prefix, "--prefix", "NAME=IRI")
        if db is not None:
            prog = _parse_program(text, "sql", source)
            session = _open_sql_session(db, table, max_values, timeout)
            location, language, profile_name = db, "sql", None
        else:
            assert kb is not None
            declared = (
                {} if kb.startswith(("http://", "https://")) else _declared_prefixes(Path(kb))
            )
            built = _build_profile(profile, declared, explicit)
            prog = _parse_program(text, "sparql", source)
            session = _open_kb_session(kb, built, linked, max_values, timeout, extremum)
            location, language, profile_name = kb, "sparql", built.name
        observations = _run_calls(session, prog, keep_going)
        _show_run(observations, location, language, profile_name, session, as_json)


def _open_kb_session(
    location: str,
    profile: Profile,
    entities: Mapping[str, str],
    max_values: int,
    timeout: float | None,
    extremum: str,
) -> Any:
    from pyql.session import Session

    kb = _open_kb(location, profile)
    return Session(
        kb, entities=entities, max_values=max_values, timeout=timeout, extremum_mode=extremum
    )


def _open_sql_session(url: str, table: str | None, max_values: int,
                      timeout: float | None) -> Any:
    """A :class:`~pyql.sql.session.SqlSession` on ``url`` (a SQLAlchemy URL or a SQLite file),
    opened read-only."""
    session_cls = _sql_function("SqlSession")
    try:
        from pyql.db import SqlDB
    except ImportError:
        raise CliError("SQL support is not installed in this build",
                       hint="pyql.db.SqlDB is not available; use --kb to run SPARQL programs"
                       ) from None
    if "://" not in url:
        path = Path(url).expanduser()
        if not path.is_file():
            raise CliError(f"no such database file: {url}",
                           hint="give a SQLite file or a URL such as sqlite:///path.db, "
                           "postgresql://user@host/db or duckdb:///file.duckdb")
        url = f"sqlite:///{path.resolve()}"
    options: dict[str, Any] = {}
    if timeout is not None:
        options["statement_timeout"] = timeout
    from sqlalchemy.exc import SQLAlchemyError

    try:
        db = SqlDB(url, **options)
    except ImportError as exc:  # a SQLAlchemy dialect whose driver is not installed
        raise CliError(f"cannot open {url}: {exc}",
                       hint="install the database driver (pip install 'pyql-kbqa[postgres]' "
                       "or 'pyql-kbqa[duckdb]')") from None
    except SQLAlchemyError as exc:  # not a URL SQLAlchemy understands
        raise CliError(f"cannot open {url}: {exc}",
                       hint="give a SQLite file or a SQLAlchemy URL") from None
    try:
        return session_cls(db, table=table, max_values=max_values)
    except InputError as exc:
        error = _as_cli_error(exc)
        if error.hint is None and getattr(exc, "suggestions", ()):
            error.hint = "tables: " + ", ".join(exc.suggestions)  # type: ignore[attr-defined]
        raise error from None


def _run_calls(session: Any, program: Program, keep_going: bool) -> list[tuple[Observation, bool]]:
    """(observation, implicit) per step; an execute() is added when the program has none."""
    steps: list[tuple[Observation, bool]] = []
    for call in program:
        obs = session.run(call)
        steps.append((obs, False))
        if not obs.ok and not keep_going:
            return steps
    has_execute = any(call.name == "execute" for call in program)
    if not has_execute and steps and steps[-1][0].query:
        steps.append((session.run(Call.of("execute")), True))
    return steps


def _answer_labels(observations: Sequence[Observation]) -> tuple[list[Any] | None, list[str]]:
    for obs in reversed(observations):
        if obs.call is not None and obs.call.name == "execute" and obs.ok:
            labels = [str(v) for vv in obs.values.values() for v in vv.values]
            return list(obs.answers or ()), labels
    return None, []


def _failure_hint(obs: Observation, profile: Profile | None) -> str | None:
    python = obs.feedback.python
    if python.status == "bad_term" and python.arg_text:
        hint = _prefix_hint(python.arg_text, profile)
        if hint:
            return hint
    if python.error_type == "UnknownEntityError":
        return "link the mention to a KB id with --entity 'MENTION=ID' (or --entities FILE.json)"
    if python.suggestions:
        return "try: " + ", ".join(python.suggestions[:5])
    if obs.hint is not None and obs.hint.suggestions:
        return "try: " + ", ".join(obs.hint.suggestions[:5])
    if obs.feedback.kb.status == "timeout":
        return "the query ran out of time; raise --timeout or simplify the program"
    return None


def _show_run(
    steps: list[tuple[Observation, bool]],
    location: str,
    language: str,
    profile_name: str | None,
    session: Any,
    as_json: bool,
) -> None:
    observations = [obs for obs, _ in steps]
    query_text = next((obs.query for obs in reversed(observations) if obs.query), "")
    answers, labels = _answer_labels(observations)
    failed = next((obs for obs in observations if not obs.ok), None)
    if as_json:
        _print_json(
            {
                "ok": failed is None,
                "source": location,
                "profile": profile_name,
                "steps": [
                    {
                        "step": obs.step,
                        "action": obs.action,
                        "status": obs.status,
                        "ok": obs.ok,
                        "text": obs.text,
                        "implicit": implicit,
                    }
                    for obs, implicit in steps
                ],
                "program": str(session.program),
                language: query_text,
                "answers": answers,
                "labels": labels,
            }
        )
    else:
        out = _stdout()
        for obs, implicit in steps:
            out.print(
                Text.assemble(
                    (f"{obs.step:>2}  ", "bold"),
                    (obs.action, "cyan"),
                    (" (added: the program has no execute())" if implicit else "", "dim"),
                )
            )
            style = "green" if obs.ok else "red"
            out.print(Text("    " + obs.text, style=style))
        if query_text:
            out.print(Rule(language.upper(), align="left", style="dim"))
            out.print(Syntax(query_text, language, background_color="default", word_wrap=True))
            out.print(Rule(style="dim"))
        if failed is not None:
            pass  # the error line below says why there are no answers
        elif answers is None:
            out.print(Text("No answers: the program did not execute.", style="yellow"))
        elif not answers:
            out.print(Text("No answers: the query result is empty.", style="yellow"))
        else:
            more = f" ({len(answers)} in total)" if len(answers) > len(labels) else ""
            out.print(Text.assemble(("Answers: ", "bold"), ", ".join(labels) + more))
    if failed is not None:
        profile = getattr(session, "profile", None)
        reason = failed.error or failed.text
        _report(
            CliError(
                f"step {failed.step} failed: {failed.action}: {reason}",
                hint=_failure_hint(failed, profile if isinstance(profile, Profile) else None),
            )
        )


# -- extensions -------------------------------------------------------------------------------


def _load_extensions(target: typer.Typer, modules: Sequence[str] = EXTENSION_MODULES) -> None:
    """Let each importable module of ``modules`` add its commands to ``target``."""
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            log.debug("pyql CLI extension %s not loaded: %s", name, exc)
            continue
        register = getattr(module, "register", None)
        if callable(register):
            register(target)


_load_extensions(app)


def main() -> None:
    """Entry point for ``python -m pyql``."""
    app(prog_name="pyql")


if __name__ == "__main__":  # pragma: no cover
    main()
