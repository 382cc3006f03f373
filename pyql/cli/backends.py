"""The one place commands open what they query: a KB (:func:`open_kb`) or a database
(:func:`open_db`, :func:`open_sql_session`). ``pyql run``, ``pyql ask`` and every command of a
plugin take the same ``--kb`` / ``--db`` values and fail with the same errors."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import typer

from pyql.cli.errors import CliError, as_cli_error, one_line
from pyql.cli.inputs import build_profile, declared_prefixes
from pyql.errors import InputError, LocationError, ProfileError
from pyql.kb.base import KB

__all__ = ["KB_HELP", "is_url", "is_metaqa_kb", "check_one_backend", "open_kb", "open_db",
           "open_sql_session", "sql_function", "driver_hint"]

#: the ``--kb`` values every command accepts
KB_HELP = "RDF file, Oxigraph store directory, SPARQL endpoint URL, or MetaQA's kb.txt."


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def is_metaqa_kb(location: str) -> bool:
    """A ``.txt`` file is read as MetaQA's ``kb.txt`` (``head|relation|tail`` lines)."""
    path = Path(location).expanduser()
    return not is_url(location) and path.suffix == ".txt" and path.is_file()


def check_one_backend(kb: str | None, db: str | None) -> None:
    """The rule of every command that takes ``--kb`` and ``--db``: exactly one of them is given
    (else a usage error, exit code 2, on ``--kb``)."""
    if (kb is None) == (db is None):
        raise typer.BadParameter(
            "give exactly one of --kb PATH_OR_URL (SPARQL) or --db URL (SQL)", param_hint="--kb")


def open_kb(
    location: str, profile: str | None = None, prefixes: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> KB:
    """The KB at ``location`` (:func:`pyql.kb.open_kb`: an http(s) SPARQL endpoint, an Oxigraph
    store directory, MetaQA's ``kb.txt`` or an RDF file loaded in memory), its failures as one
    ``error:`` line.

    ``profile`` defaults to :data:`~pyql.cli.inputs.DEFAULT_PROFILE` (``metaqa`` for a kb.txt);
    a Turtle file's ``@prefix`` lines and ``prefixes`` (``--prefix``) are added to it. The
    profile is ``kb.profile``. ``timeout``: an endpoint's seconds per query (``--timeout``).
    """
    url = is_url(location)
    if not url and not Path(location).expanduser().exists():
        raise CliError(
            f"KB not found: {location}",
            hint="give an RDF file (.ttl, .nt, ...), an Oxigraph store directory, MetaQA's "
            "kb.txt or an http(s) SPARQL endpoint URL",
        )
    metaqa = is_metaqa_kb(location)
    declared = {} if url or metaqa else declared_prefixes(Path(location).expanduser())
    built = build_profile(profile or ("metaqa" if metaqa else None), declared, prefixes or {})
    from pyql.kb import open_kb as open_location

    try:
        kb = open_location(location, profile=built.name, timeout=timeout)
    except ProfileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--profile") from None
    except SyntaxError as exc:  # pyoxigraph reports malformed RDF as SyntaxError
        raise CliError(f"cannot load {location}: {one_line(str(exc))}") from None
    except ValueError as exc:
        if metaqa:  # a line that is not head|relation|tail
            raise CliError(f"cannot load {location} as MetaQA's kb.txt: {one_line(str(exc))}",
                           hint="a .txt KB is read as head|relation|tail lines; give RDF files "
                           "their extension (.nt, .ttl, ...)") from None
        raise CliError(
            f"cannot open {location}: {exc}",
            hint="RDF files are read by their extension: .ttl, .nt, .nq, .trig, .n3, .rdf, "
            ".xml (optionally .gz); MetaQA's KB is a .txt file",
        ) from None
    except OSError as exc:
        raise CliError(f"cannot open {location}: {exc.strerror or exc}") from None
    kb.profile = built
    return kb


def sql_function(name: str) -> Callable[..., Any]:
    """``pyql.sql.<name>``, or a clear error while the SQL side is not there."""
    try:
        module = importlib.import_module("pyql.sql")
    except ImportError as exc:  # said, never swallowed: a missing dependency names itself
        raise CliError(f"SQL support cannot be loaded: {exc}",
                       hint="drop --sql/--db to work with SPARQL") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise CliError(
            "SQL support is not installed in this build",
            hint=f"pyql.sql.{name} is not available; drop --sql/--db to work with SPARQL",
        )
    return cast("Callable[..., Any]", fn)


def open_db(url: str, timeout: float | None = None) -> Any:
    """A read-only :class:`~pyql.db.SqlDB` on ``url`` (:func:`pyql.db.open_db`: a SQLAlchemy URL
    or a SQLite file), its failures as one ``error:`` line."""
    try:
        # pyql.db loads SQLAlchemy on first use: a missing one is said here, not as a driver's
        import pyql.db.sqldb  # noqa: F401
        from pyql.db import open_db as open_location
    except ImportError as exc:
        raise CliError(f"SQL support cannot be loaded: {exc}",
                       hint="use --kb to run SPARQL programs") from None
    options: dict[str, Any] = {}
    if timeout is not None:
        options["statement_timeout"] = timeout
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return open_location(url, **options)
    except LocationError:
        raise CliError(f"no such database file: {url}",
                       hint="give a SQLite file or a URL such as sqlite:///path.db, "
                       "postgresql://user@host/db or duckdb:///file.duckdb") from None
    except ImportError as exc:  # a SQLAlchemy dialect whose driver is not installed
        raise CliError(f"cannot open {url}: {exc}", hint=driver_hint(url, exc)) from None
    except SQLAlchemyError as exc:  # not a URL SQLAlchemy understands
        raise CliError(f"cannot open {url}: {exc}",
                       hint="give a SQLite file or a SQLAlchemy URL") from None


#: the extra that installs the driver of a SQLAlchemy dialect pyql ships one for
_DRIVER_EXTRAS = {"postgresql": "postgres", "duckdb": "duckdb"}


def driver_hint(url: str, exc: ImportError) -> str:
    """How to install the driver a database URL needs: pyql's extra for PostgreSQL and
    DuckDB, else the missing module by name (``mysql://`` needs ``mysqlclient``, whose module
    is MySQLdb: SQLAlchemy's dialect docs name each driver)."""
    dialect = url.split("://", 1)[0].split("+", 1)[0].lower()
    extra = _DRIVER_EXTRAS.get(dialect)
    if extra is not None:
        return f"install the driver: pip install 'pyql-kbqa[{extra}]'"
    missing = getattr(exc, "name", None) or "its driver"
    return (f"install the {dialect} driver that provides the module {missing} (pyql ships "
            "extras for PostgreSQL and DuckDB only; see SQLAlchemy's dialect docs)")


def open_sql_session(url: str, table: str | None, max_values: int = 10,
                     timeout: float | None = None) -> Any:
    """A :class:`~pyql.sql.session.SqlSession` on ``url`` (see :func:`open_db`)."""
    session_cls = sql_function("SqlSession")
    db = open_db(url, timeout)
    try:
        return session_cls(db, table=table, max_values=max_values)
    except InputError as exc:
        error = as_cli_error(exc)
        if error.hint is None and getattr(exc, "suggestions", ()):
            error.hint = "tables: " + ", ".join(exc.suggestions)  # type: ignore[attr-defined]
        raise error from None
