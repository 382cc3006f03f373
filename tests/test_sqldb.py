"""SqlDB: the read-only guard, engine-level read-only connections, error translation, schema."""

from __future__ import annotations

import hashlib
import socket
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlglot import exp

from pyql.db import GuardError, SqlDB, ensure_read_only_sql, sqlglot_dialect
from pyql.errors import (
    BackendQueryError,
    BackendTimeoutError,
    BackendUnavailableError,
    ReadOnlyError,
    SchemaError,
)
from pyql.results import ResultSet
from pyql.sql.schema import ForeignKey

SCRIPT = """
CREATE TABLE singer (
    singer_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    country TEXT,
    age INT
);
CREATE TABLE concert (
    concert_id INTEGER PRIMARY KEY,
    "concert name" VARCHAR(50),
    year TEXT,
    singer_id INTEGER REFERENCES singer(singer_id)
);
INSERT INTO singer VALUES (1, 'Joe Sharp', 'Netherlands', 52), (2, 'Timbaland', 'United States', 32),
    (3, 'Justin Brown', 'France', 29), (4, 'Rose White', 'France', 41), (5, 'John Nizinik', NULL, 43);
INSERT INTO concert VALUES (1, 'Auditions', '2014', 1), (2, 'Super bootcamp', '2014', 2),
    (3, 'Home Visits', '2015', 2);
"""


def _make_sqlite(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(SCRIPT)
    conn.commit()
    conn.close()
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def db_file(tmp_path: Path) -> Path:
    return _make_sqlite(tmp_path / "concerts.sqlite")


@pytest.fixture()
def db(db_file: Path) -> SqlDB:
    database = SqlDB.sqlite(db_file)
    yield database
    database.close()


# ------------------------------------------------------------------ the guard

REFUSED = [
    # (sql, dialect, kind)
    ("SELECT 1; DROP TABLE singer", "sqlite", "multiple"),
    ("SELECT 1; SELECT 2", "sqlite", "multiple"),
    ("", "sqlite", "empty"),
    ("  ; ", "sqlite", "empty"),
    ("INSERT INTO singer VALUES (9, 'x', 'y', 1)", "sqlite", "write"),
    ("INSERT OR REPLACE INTO singer VALUES (9, 'x', 'y', 1)", "sqlite", "write"),
    ("REPLACE INTO singer VALUES (9, 'x', 'y', 1)", "sqlite", "command"),
    ("UPDATE singer SET age = 1", "sqlite", "write"),
    ("DELETE FROM singer", "sqlite", "write"),
    ("MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE", "postgres", "write"),
    ("CREATE TABLE x (a INT)", "sqlite", "ddl"),
    ("CREATE TEMP TABLE x (a INT)", "sqlite", "ddl"),
    ("DROP TABLE singer", "sqlite", "ddl"),
    ("ALTER TABLE singer ADD COLUMN x INT", "sqlite", "ddl"),
    ("TRUNCATE singer", "postgres", "ddl"),
    ("WITH x AS (DELETE FROM singer RETURNING *) SELECT * FROM x", "postgres", "write"),
    ("WITH x AS (UPDATE singer SET age = 1 RETURNING *) SELECT * FROM x", "postgres", "write"),
    ("WITH x AS (INSERT INTO singer VALUES (9) RETURNING *) SELECT * FROM x", "postgres", "write"),
    ("PRAGMA query_only = OFF", "sqlite", "pragma"),
    ("PRAGMA writable_schema = 1", "sqlite", "pragma"),
    ("ATTACH DATABASE '/tmp/evil.db' AS evil", "sqlite", "attach"),
    ("DETACH evil", "sqlite", "attach"),
    ("SELECT * INTO singer_copy FROM singer", "postgres", "select_into"),
    ("SELECT * INTO singer_copy FROM singer", "sqlite", "select_into"),
    ("COPY singer TO '/tmp/out.csv'", "postgres", "copy"),
    ("COPY singer TO 'out.csv'", "duckdb", "copy"),
    ("SET statement_timeout = 0", "postgres", "set"),
    ("CALL refresh_things()", "postgres", "command"),
    ("DO $$ BEGIN DELETE FROM singer; END $$", "postgres", "command"),
    ("EXPLAIN SELECT 1", "sqlite", "command"),
    ("VACUUM INTO '/tmp/copy.db'", "sqlite", "command"),
    ("BEGIN", "sqlite", "transaction"),
    ("SELECT * FROM singer FOR UPDATE", "postgres", "lock"),
    ("SELECT load_extension('/tmp/evil.so')", "sqlite", "function"),
    ("SELECT writefile('/tmp/x', 'y')", "sqlite", "function"),
    ("SELECT lo_import('/etc/passwd')", "postgres", "function"),
    ("SELECT pg_read_file('/etc/passwd')", "postgres", "function"),
    ("SELECT pg_catalog.pg_read_file('/etc/passwd')", "postgres", "function"),
    ("SELECT * FROM dblink('host=evil', 'SELECT 1') AS t(a INT)", "postgres", "function"),
    ("SELECT dblink_exec('host=evil', 'DROP TABLE x')", "postgres", "function"),
    ("SELECT nextval('seq')", "postgres", "function"),
    ("SELECT set_config('default_transaction_read_only', 'off', false)", "postgres", "function"),
    ("SELECT query_to_xml('DELETE FROM singer', true, true, '')", "postgres", "function"),
    ("SELECT * FROM read_csv('/etc/passwd')", "duckdb", "function"),
    ("SELECT LOAD_FILE('/etc/passwd')", "mysql", "function"),
    ("INSTALL httpfs", "duckdb", "ddl"),
    ("SELEC name FROM singer", "sqlite", "unparseable"),
    ("REINDEX", "sqlite", "not_query"),
]


@pytest.mark.parametrize(("sql", "dialect", "kind"), REFUSED)
def test_guard_refuses(sql: str, dialect: str, kind: str) -> None:
    with pytest.raises(GuardError) as info:
        ensure_read_only_sql(sql, dialect)
    assert info.value.kind == kind
    assert isinstance(info.value, ReadOnlyError)
    assert "refused" in str(info.value)


ALLOWED = [
    "SELECT name FROM singer WHERE age > 30",
    "SELECT count(*) FROM singer",
    "WITH old AS (SELECT * FROM singer WHERE age > 40) SELECT name FROM old ORDER BY name",
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3) SELECT x FROM n",
    'SELECT name FROM singer UNION SELECT "concert name" FROM concert',
    "SELECT name FROM singer INTERSECT SELECT name FROM singer WHERE age < 50",
    "SELECT name FROM singer EXCEPT SELECT name FROM singer WHERE age < 50",
    "SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM concert WHERE year = '2014')",
    'SELECT s.name, c."concert name" FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id',
    "SELECT * FROM (SELECT name, age FROM singer) AS t WHERE t.age > (SELECT avg(age) FROM singer)",
    "SELECT name FROM singer WHERE name LIKE '%o%' AND country IS NOT NULL",
    "SELECT 'DROP TABLE singer; --' AS text",
    "SELECT * FROM pragma_table_info('singer')",
    "SELECT 1;",
    "(SELECT 1)",
    "VALUES (1, 2)",
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_allowed_reads_run(db: SqlDB, sql: str) -> None:
    ensure_read_only_sql(sql, "sqlite")
    result = db.execute(sql)
    assert isinstance(result, ResultSet)
    assert result.query  # the verified, regenerated text


def test_pg_sleep_is_allowed() -> None:
    assert ensure_read_only_sql("SELECT pg_sleep(0.1)", "postgres").key == "select"


def test_guard_checks_expressions(db: SqlDB) -> None:
    query = exp.select("name").from_("singer").where("age > 40").order_by("name")
    assert db.execute(query).column("name") == ["Joe Sharp", "John Nizinik", "Rose White"]
    with pytest.raises(GuardError) as info:
        db.execute(exp.delete("singer"))
    assert info.value.kind == "write"


def test_sqlite_file_unchanged_after_write_attempts(db_file: Path) -> None:
    before = _sha256(db_file)
    stat = db_file.stat()
    database = SqlDB.sqlite(db_file)
    for sql, _dialect, _kind in REFUSED:
        with pytest.raises(ReadOnlyError):
            database.execute(sql)
    # Below the guard: the engine connection itself refuses to write.
    engine_level = [
        "INSERT INTO singer VALUES (9, 'x', 'y', 1)",
        "UPDATE singer SET age = age + 1",
        "DELETE FROM singer",
        "DROP TABLE concert",
        "CREATE TABLE x (a INT)",
        "CREATE TEMP TABLE x (a INT)",
        "PRAGMA query_only = OFF",
        "PRAGMA writable_schema = 1",
        f"ATTACH DATABASE '{db_file.parent / 'evil.db'}' AS evil",
        "VACUUM",
        "SELECT load_extension('/nonexistent/evil')",
    ]
    for sql in engine_level:
        with database.engine.connect() as conn:
            with pytest.raises(sa.exc.DBAPIError):
                conn.exec_driver_sql(sql)
    # still readable afterwards
    assert database.execute("SELECT count(*) FROM singer").rows == ((5,),)
    database.close()
    assert _sha256(db_file) == before
    assert db_file.stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(p.name for p in db_file.parent.iterdir()) == ["concerts.sqlite"]


# ------------------------------------------------------------------ execution and results


def test_execute_returns_python_values(db: SqlDB) -> None:
    result = db.execute("SELECT name, age, country FROM singer WHERE singer_id = 5")
    assert result.columns == ("name", "age", "country")
    assert result.rows == (("John Nizinik", 43, None),)
    assert result.elapsed >= 0
    assert not result.truncated
    empty = db.execute("SELECT name FROM singer WHERE age > 100")
    assert empty.is_empty and empty.columns == ("name",)


def test_params_are_bound_as_literals(db: SqlDB) -> None:
    named = db.execute(
        "SELECT name FROM singer WHERE country = :c AND age > :a", {"c": "France", "a": 30}
    )
    assert named.column(0) == ["Rose White"]
    positional = db.execute("SELECT name FROM singer WHERE name = ?", ["x' OR '1'='1"])
    assert positional.is_empty


def test_max_rows_truncates(db_file: Path) -> None:
    database = SqlDB.sqlite(db_file, max_rows=2)
    result = database.execute("SELECT name FROM singer ORDER BY singer_id")
    assert result.truncated and len(result) == 2
    assert not database.execute("SELECT name FROM singer LIMIT 2").truncated


def test_query_count_and_dialect(db: SqlDB) -> None:
    assert db.dialect == "sqlite" and db.backend == "sqlite"
    assert db.query_count == 0
    db.execute("SELECT 1")
    db.execute("SELECT 2")
    with pytest.raises(GuardError):
        db.execute("DELETE FROM singer")
    assert db.query_count == 2


def test_sqlglot_dialect_names() -> None:
    assert sqlglot_dialect("postgresql") == "postgres"
    assert sqlglot_dialect("duckdb") == "duckdb"
    assert sqlglot_dialect("mssql") == "tsql"
    assert sqlglot_dialect("no-such-engine") == ""


def test_sqlite_memory_is_sealed() -> None:
    database = SqlDB.sqlite_memory(lambda c: c.executescript(SCRIPT))
    assert database.execute("SELECT count(*) FROM concert").rows == ((3,),)
    with database.engine.connect() as conn:
        with pytest.raises(sa.exc.DBAPIError):
            conn.exec_driver_sql("DELETE FROM concert")
    assert database.execute("SELECT count(*) FROM concert").rows == ((3,),)


def test_user_engine_is_hardened(db_file: Path) -> None:
    before = _sha256(db_file)
    engine = sa.create_engine(f"sqlite:///{db_file}")
    database = SqlDB(engine)
    assert database.execute("SELECT count(*) FROM singer").rows == ((5,),)
    with engine.connect() as conn:
        with pytest.raises(sa.exc.DBAPIError):
            conn.exec_driver_sql("DELETE FROM singer")
    engine.dispose()
    assert _sha256(db_file) == before


# ------------------------------------------------------------------ error translation


def test_missing_sqlite_file(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError) as info:
        SqlDB.sqlite(tmp_path / "nope.sqlite")
    assert "nope.sqlite" in str(info.value)
    assert not (tmp_path / "nope.sqlite").exists()  # never created


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT nosuch FROM singer",
        "SELECT * FROM nosuch",
        "SELECT name FROM singer WHERE singer.nosuch = 1",
        "SELECT nosuchfunction(name) FROM singer",
    ],
)
def test_engine_errors_are_query_errors(db: SqlDB, sql: str) -> None:
    with pytest.raises(BackendQueryError) as info:
        db.execute(sql)
    assert info.value.backend == "sqlite"
    assert info.value.query


def test_sqlite_statement_timeout(db_file: Path) -> None:
    database = SqlDB.sqlite(db_file, statement_timeout=0.2)
    endless = (
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    )
    with pytest.raises(BackendTimeoutError):
        database.execute(endless)
    assert database.execute("SELECT count(*) FROM singer").rows == ((5,),)  # usable afterwards


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_postgres_nothing_listening_is_unavailable() -> None:
    database = SqlDB(f"postgresql://pyql:secret@127.0.0.1:{_free_port()}/nothing")
    assert database.dialect == "postgres"
    assert "secret" not in database.url
    with pytest.raises(BackendUnavailableError):
        database.execute("SELECT 1")
    with pytest.raises(BackendUnavailableError):
        database.schema()
    assert database.query_count == 1


# ------------------------------------------------------------------ schema


def test_schema_introspection(db: SqlDB) -> None:
    assert sorted(db.table_names()) == ["concert", "singer"]
    schema = db.schema()
    singer = schema.table("singer")
    assert singer.column_names == ("singer_id", "name", "country", "age")
    assert singer.primary_key == ("singer_id",)
    assert singer.column("age").type == "integer"
    assert singer.column("name").type == "text"
    assert singer.column("name").sample_values == ("Joe Sharp", "John Nizinik", "Justin Brown")
    assert singer.column("country").sample_values == ("France", "Netherlands", "United States")
    assert None not in singer.column("country").sample_values
    concert = schema.table("concert")
    assert concert.column("concert name").raw_type == "VARCHAR(50)"
    assert [(fk.column, fk.ref_table, fk.ref_column) for fk in concert.foreign_keys] == [
        ("singer_id", "singer", "singer_id")
    ]
    assert schema.foreign_keys_between("concert", "singer") == [
        ("concert", "singer_id", "singer", "singer_id")
    ]
    assert db.query_count == 0  # introspection is not counted


def test_schema_sample_queries_are_built_not_parsed(
    db: SqlDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample values take one query per column, built as a sqlglot expression and generated
    without copies: no SQL text is parsed on the way (``.limit(3)`` parsed ``LIMIT 3`` each time,
    and with the copying builders that cost four times the query itself on SQLite)."""
    from sqlglot.dialects.dialect import Dialect

    parsed: list[str] = []
    tokenize = Dialect.tokenize

    def spy(self: Dialect, sql: str, **options: object) -> object:
        parsed.append(sql)
        return tokenize(self, sql, **options)

    monkeypatch.setattr(Dialect, "tokenize", spy)
    singer = db.schema(["singer"]).table("singer")
    assert singer.column("name").sample_values == ("Joe Sharp", "John Nizinik", "Justin Brown")
    assert parsed == []


def test_schema_subset_and_unknown_table(db: SqlDB) -> None:
    assert db.schema(["SINGER"]).table_names == ("singer",)
    with pytest.raises(SchemaError) as info:
        db.schema(["singers"])
    assert info.value.suggestions == ("singer",)


# ------------------------------------------------------------------ DuckDB


def test_duckdb_read_only(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    pytest.importorskip("duckdb_engine")
    path = tmp_path / "music.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE singer (id INTEGER PRIMARY KEY, name VARCHAR, age INTEGER)")
    conn.execute("INSERT INTO singer VALUES (1, 'Joe Sharp', 52), (2, 'Timbaland', 32)")
    conn.execute(
        "CREATE TABLE concert (id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(id))"
    )
    conn.close()
    (tmp_path / "secret.csv").write_text("a,b\n1,2\n")
    before = _sha256(path)
    database = SqlDB(f"duckdb:///{path}")
    assert database.dialect == "duckdb"
    assert database.execute("SELECT name FROM singer WHERE age > 40").rows == (("Joe Sharp",),)
    singer = database.schema().table("singer")
    assert singer.column_names == ("id", "name", "age")
    assert singer.primary_key == ("id",)
    assert singer.column("age").type == "integer"
    assert singer.column("name").sample_values == ("Joe Sharp", "Timbaland")
    assert database.schema().table("concert").foreign_keys == (
        ForeignKey("singer_id", "singer", "id"),
    )
    with pytest.raises(GuardError):
        database.execute(f"SELECT * FROM read_csv('{tmp_path / 'secret.csv'}')")
    with pytest.raises(BackendQueryError):
        database.execute("SELECT nosuch FROM singer")
    for sql in [
        "INSERT INTO singer VALUES (3, 'x', 1)",
        f"SELECT * FROM '{tmp_path / 'secret.csv'}'",
    ]:
        with database.engine.connect() as c:
            with pytest.raises(sa.exc.DBAPIError):
                c.exec_driver_sql(sql)
    database.close()
    assert _sha256(path) == before


# ------------------------------------------------------------------ PostgreSQL (a real server)


@pytest.mark.server
def test_postgres_read_only_session(postgres_url: str) -> None:
    admin = sa.create_engine(postgres_url)
    with admin.begin() as conn:
        for statement in [
            "DROP TABLE IF EXISTS pyql_concert",
            "DROP TABLE IF EXISTS pyql_singer",
            "CREATE TABLE pyql_singer (id INT PRIMARY KEY, name TEXT, age INT)",
            "CREATE TABLE pyql_concert (id INT PRIMARY KEY, singer_id INT REFERENCES pyql_singer(id))",
            "INSERT INTO pyql_singer VALUES (1, 'Joe Sharp', 52), (2, 'Tim 50%', 32)",
            "INSERT INTO pyql_concert VALUES (1, 1)",
        ]:
            conn.execute(sa.text(statement))
    database = SqlDB(postgres_url, statement_timeout=0.5)
    try:
        assert database.dialect == "postgres"
        assert database.execute("SELECT name FROM pyql_singer WHERE name LIKE '%50%'").rows == (
            ("Tim 50%",),
        )
        assert database.execute("SELECT name FROM pyql_singer WHERE age > :a", {"a": 40}).rows == (
            ("Joe Sharp",),
        )
        concert = database.schema(["pyql_concert"]).table("pyql_concert")
        assert [(fk.column, fk.ref_table) for fk in concert.foreign_keys] == [
            ("singer_id", "pyql_singer")
        ]
        with pytest.raises(BackendTimeoutError):
            database.execute("SELECT pg_sleep(3)")
        with pytest.raises(BackendQueryError):
            database.execute("SELECT nosuch FROM pyql_singer")
        with pytest.raises(GuardError):
            database.execute("WITH x AS (DELETE FROM pyql_singer RETURNING *) SELECT * FROM x")
        # Below the guard, the session itself is read-only.
        with database.engine.connect() as conn:
            with pytest.raises(sa.exc.DBAPIError) as info:
                conn.exec_driver_sql("DELETE FROM pyql_singer")
        assert getattr(info.value.orig, "sqlstate", None) == "25006"
    finally:
        database.close()
    with admin.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pyql_singer")).scalar() == 2
    admin.dispose()
