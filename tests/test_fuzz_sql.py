"""Property: every SQL program the builder accepts compiles to SQL the engines accept (issue 14).

Hypothesis writes programs of the SQL toolset over the demo league schema (``teams``,
``players``, ``coaches``; columns, ``table.column`` forms, ``*``, operators, aggregations,
values of the column's type, sub-query blocks, set operations, orders, limits). They replay
through :class:`~pyql.sql.SqlBuild` as a Session does: a call the builder refuses is dropped (the
step is rolled back), every other call is kept. Every query the builder holds after an accepted
call must then:

- be parsed back by sqlglot from its SQLite, PostgreSQL and DuckDB text;
- be accepted by SQLite's ``EXPLAIN`` (parse, name resolution, aggregate and set-operation
  checks) on the demo database;
- be accepted by DuckDB's ``EXPLAIN`` (in process) and PostgreSQL's (the throw-away server of
  ``tests/support/postgres.py``, marked ``server``) on the same tables, except for the errors of
  :data:`STRICTER`: SQL that SQLite accepts and the stricter engines refuse for reasons of types
  and functional dependencies the builder leaves to the engine (Spider's gold SQL has them too,
  see ``tests/test_sql_servers.py``). They are told apart by PostgreSQL's SQLSTATE and DuckDB's
  exception class, never by the engines' wording alone.

``PYQL_FUZZ_SCALE`` multiplies the number of examples, as in ``tests/test_fuzz.py``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyql.db import SqlDB
from pyql.errors import PyqlError
from pyql.program import Call
from pyql.sql import Sql, SqlBuild
from pyql.sql.demo import demo_db_path
from pyql.syntax import quote_string

SCALE = float(os.environ.get("PYQL_FUZZ_SCALE", "1"))
EXAMPLES = settings(
    max_examples=int(120 * SCALE), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
DIALECTS = ("sqlite", "postgres", "duckdb")

DEMO = demo_db_path()
with SqlDB.sqlite(DEMO) as _db:
    SCHEMA = _db.schema()
TABLES = [t.name for t in SCHEMA]
COLUMNS = {f"{t.name}.{c.name}": c.type for t in SCHEMA for c in t.columns}

#: PostgreSQL SQLSTATEs of SQL that SQLite accepts: grouping_error (a selected column the GROUP BY
#: does not determine), undefined_function (``text = integer``, ``sum(text)``),
#: invalid_text_representation (``'x'`` compared with an integer column), invalid_column_reference
#: (``SELECT DISTINCT ... ORDER BY`` a column not selected), datatype_mismatch (set operation sides
#: of different types)
PG_STRICTER = {"42803", "42883", "22P02", "42P10", "42804"}


def _duckdb_stricter(exc: Exception) -> bool:
    """DuckDB's counterparts of :data:`PG_STRICTER`: binder errors about grouping, types and
    DISTINCT/ORDER BY, and conversion errors (a text literal compared with a number column)."""
    import duckdb

    if isinstance(exc, duckdb.ConversionException):
        return True
    if isinstance(exc, duckdb.BinderException):
        text = str(exc)
        return any(s in text for s in ("GROUP BY", "No function matches", "Cannot compare",
                                       "ORDER BY", "Cannot mix", "DISTINCT"))
    return False


STRICTER = "PostgreSQL SQLSTATE in PG_STRICTER, DuckDB errors of _duckdb_stricter"

# -- programs ------------------------------------------------------------------------------------

_TEXT_VALUES = ["Toronto", "Guard", "Canada", "O'Neal", "50%_off", "?q1", "", "a|b", "NULL", "é"]


def _value(kind: str) -> st.SearchStrategy[str]:
    numbers = st.one_of(st.integers(-5, 3000).map(str),
                        st.floats(-10, 300, allow_nan=False).map(lambda f: repr(round(f, 2))))
    texts = st.sampled_from(_TEXT_VALUES).map(quote_string)
    if kind in ("integer", "real", "numeric"):
        return st.one_of(numbers, numbers, texts.filter(lambda t: t == '"NULL"'), st.just("NULL"))
    return st.one_of(texts, st.just("NULL"))


@st.composite
def _column(draw: st.DrawFn, star: bool = False) -> tuple[str, str]:
    qualified = draw(st.sampled_from(sorted(COLUMNS)))
    kind = COLUMNS[qualified]
    if star and draw(st.integers(0, 5)) == 0:
        return "*", "integer"
    return (qualified if draw(st.booleans()) else qualified.split(".", 1)[1]), kind


OPS = ["=", "!=", ">", "<", ">=", "<=", "LIKE", "NOT LIKE", "contains", "IN", "NOT IN"]
AGGS = ["None", "MAX", "MIN", "COUNT", "SUM", "AVG", "COUNT DISTINCT"]


@st.composite
def _call(draw: st.DrawFn, names: list[str]) -> str:
    ref = st.sampled_from(names) if names else st.nothing()
    choice = draw(st.sampled_from([
        "condition", "condition", "answer", "answer", "join", "group", "having", "order",
        "distinct", "subquery", "set", "ref_condition",
    ]))
    if choice == "condition":
        column, kind = draw(_column())
        op = draw(st.sampled_from(OPS))
        value = draw(_value("text" if op in ("LIKE", "NOT LIKE", "contains") else kind))
        if op in ("IN", "NOT IN"):
            value = "|".join(draw(st.lists(_value(kind), min_size=1, max_size=3)))
            value = value if '"' not in value else quote_string(value.replace('"', ""))
        return f"add_condition({quote_string(column)}, {op}, {value})"
    if choice == "ref_condition" and names:
        column, _ = draw(_column())
        op = draw(st.sampled_from(["IN", "NOT IN", "=", ">"]))
        return f"add_condition({quote_string(column)}, {op}, {draw(ref)})"
    if choice == "answer":
        column, _ = draw(_column(star=True))
        return f"set_answer({quote_string(column)}, {draw(st.sampled_from(AGGS))})"
    if choice == "join":
        table = draw(st.sampled_from(TABLES))
        if draw(st.booleans()):
            return f"add_join({table})"
        left, _ = draw(_column())
        right, _ = draw(_column())
        return f"add_join({table}, {quote_string(left)}, {quote_string(right)})"
    if choice == "group":
        return f"add_group_by({quote_string(draw(_column())[0])})"
    if choice == "having":
        column, kind = draw(_column(star=True))
        agg = draw(st.sampled_from(AGGS[1:]))
        op = draw(st.sampled_from(OPS[:6]))
        value = draw(ref) if names and draw(st.booleans()) else draw(_value("integer"))
        return f"add_having({quote_string(column)}, {agg}, {op}, {value})"
    if choice == "order":
        column, _ = draw(_column(star=True))
        if column == "*":
            column = "COUNT(*)"
        direction = draw(st.sampled_from(["asc", "desc"]))
        limit = draw(st.sampled_from(["", ", 1", ", 3", ", None"]))
        return f"add_order({quote_string(column)}, {direction}{limit})"
    if choice == "distinct":
        return "set_distinct()"
    if choice == "set" and names:
        return f"{draw(st.sampled_from(['add_union', 'add_intersect', 'add_except']))}({draw(ref)})"
    return "begin_subquery"  # replaced by a block in _program


@st.composite
def _program(draw: st.DrawFn, depth: int = 0, names: list[str] | None = None) -> list[str]:
    names = names if names is not None else []
    calls: list[str] = []
    if draw(st.booleans()):
        calls.append(f"add_join({draw(st.sampled_from(TABLES))})")
    for _ in range(draw(st.integers(1, 7))):
        call = draw(_call(names))
        if call == "begin_subquery":
            if depth >= 2:
                continue
            name = f"?q{len(names) + 1}"
            inner = draw(_program(depth + 1, names))
            calls += [f"begin_subquery({name})", *inner, "end_subquery()"]
            names.append(name)
        else:
            calls.append(call)
    return calls


def replay(calls: list[str], check: Callable[[Sql], None]) -> int:
    """Apply the calls as a Session does (refused calls are dropped); check every main query the
    builder holds after an accepted call. The number of accepted calls."""
    build = SqlBuild(Sql(schema=SCHEMA), start=None)
    accepted = 0
    for text in calls:
        try:
            build = build.apply(Call.parse(text, "sql"))
        except PyqlError:
            continue
        accepted += 1
        if build.query.table is not None:
            check(build.query)
    return accepted


def replay_checked(calls: list[str], check: Callable[[Sql], None]) -> None:
    """:func:`replay`; a failed check (or SQLite refusing a query) fails with the program."""
    try:
        replay(calls, check)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nprogram:\n" + "\n".join(calls)) from None
    except sqlite3.Error as exc:
        raise AssertionError(f"SQLite refused: {exc}\nprogram:\n" + "\n".join(calls)) from None


# -- engines --------------------------------------------------------------------------------------


def _ddl(dialect: str) -> list[str]:
    conn = sqlite3.connect(f"{DEMO.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return [sqlglot.transpile(sql, read="sqlite", write=dialect)[0] for (sql,) in rows]


class Engines:
    """EXPLAIN on SQLite (the demo file, read-only), DuckDB (in memory) and, when given,
    PostgreSQL; failures are collected with the SQL and the program."""

    def __init__(self, postgres_url: str | None = None) -> None:
        import duckdb

        self.sqlite = sqlite3.connect(f"{DEMO.resolve().as_uri()}?mode=ro", uri=True)
        self.duckdb = duckdb.connect()
        for ddl in _ddl("duckdb"):
            self.duckdb.execute(ddl)
        self.pg = None
        if postgres_url is not None:
            import psycopg
            from sqlalchemy.engine import make_url

            url = make_url(postgres_url)
            self.pg = psycopg.connect(host=url.host, port=url.port, user=url.username,
                                      password=url.password, dbname=url.database, autocommit=True)
            with self.pg.cursor() as cur:
                cur.execute("DROP SCHEMA IF EXISTS fuzz CASCADE")
                cur.execute("CREATE SCHEMA fuzz")
                cur.execute("SET search_path TO fuzz")
                for ddl in _ddl("postgres"):
                    cur.execute(ddl)

    def close(self) -> None:
        self.sqlite.close()
        self.duckdb.close()
        if self.pg is not None:
            self.pg.close()

    def check(self, query: Sql) -> None:
        texts = {d: query.to_sql(d) for d in DIALECTS}
        for dialect, text in texts.items():
            sqlglot.parse_one(text, read=dialect)  # raises ParseError
        self.sqlite.execute(f"EXPLAIN {texts['sqlite']}").fetchall()
        try:
            self.duckdb.execute(f"EXPLAIN {texts['duckdb']}").fetchall()
        except Exception as exc:  # noqa: BLE001 - classified right below
            if not _duckdb_stricter(exc):
                raise AssertionError(f"DuckDB refused {texts['duckdb']}: {exc}") from exc
        if self.pg is not None:
            import psycopg

            with self.pg.cursor() as cur:
                try:
                    cur.execute(f"EXPLAIN {texts['postgres']}".replace("%", "%%"))
                except psycopg.Error as exc:
                    if exc.sqlstate not in PG_STRICTER:
                        raise AssertionError(
                            f"PostgreSQL refused {texts['postgres']}: {exc.sqlstate} {exc}"
                        ) from exc


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    pytest.importorskip("duckdb")
    e = Engines()
    yield e
    e.close()


@pytest.fixture(scope="module")
def engines_with_postgres(postgres_url: str) -> Iterator[Engines]:
    pytest.importorskip("duckdb")
    pytest.importorskip("psycopg")
    e = Engines(postgres_url)
    yield e
    e.close()


# -- the properties ------------------------------------------------------------------------------


@EXAMPLES
@given(calls=_program())
def test_accepted_sql_programs_compile_to_sql_sqlite_and_duckdb_accept(
    calls: list[str], engines: Engines
) -> None:
    replay_checked(calls, engines.check)


@pytest.mark.server
@settings(max_examples=int(60 * SCALE), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(calls=_program())
def test_accepted_sql_programs_compile_to_sql_postgres_accepts(
    calls: list[str], engines_with_postgres: Engines
) -> None:
    replay_checked(calls, engines_with_postgres.check)


# -- the three inputs of the issue, each refused at its step --------------------------------------


@pytest.mark.parametrize(("calls", "refused"), [
    (["add_join(players)", "add_condition(team_id, IN, ?q1)"], "unknown_subquery"),
    (["add_join(players)", "set_answer(team_id)", "add_having(player_id, COUNT, >, 2)"],
     "having_without_group_by"),
    (["begin_subquery(?q)", "add_join(teams)", "set_answer(team_id)", "set_answer(name)",
      "end_subquery()", "add_join(players)", "set_answer(team_id)", "add_except(?q)"],
     "bad_set_operation"),
])
def test_the_issue_inputs_are_refused_at_their_step(calls: list[str], refused: str) -> None:
    build = SqlBuild(Sql(schema=SCHEMA))
    for text in calls[:-1]:
        build = build.apply(Call.parse(text, "sql"))
    with pytest.raises(PyqlError) as info:
        build.apply(Call.parse(calls[-1], "sql"))
    assert getattr(info.value, "code", None) == refused


def test_the_checker_does_catch_an_engine_rejection(engines: Engines) -> None:
    """The property is not vacuous: a query the builder used to accept fails the check."""
    having = Sql("players", schema=SCHEMA).set_answer("name")
    having = having._evolve(having=(having.add_group_by("name").add_having(
        "*", "COUNT", ">", 2).having))
    with pytest.raises(sqlite3.Error):
        engines.check(having)


def test_a_session_reports_them_as_query_errors_at_the_step() -> None:
    from pyql.sql.demo import demo_db
    from pyql.sql.session import SqlSession

    session = SqlSession(demo_db())
    assert session.run("add_join(players)").ok and session.run("set_answer(team_id)").ok
    for action, code in [("add_condition(team_id, IN, ?q1)", "unknown_subquery"),
                         ("add_having(player_id, COUNT, >, 2)", "having_without_group_by")]:
        obs = session.run(action)
        assert not obs.ok and obs.feedback.db.status == "not_run"
        assert (obs.feedback.python.status, obs.feedback.python.error_code) == ("query_error", code)
    assert "add_group_by(team_id)" in obs.text
    assert session.run("execute()").ok
