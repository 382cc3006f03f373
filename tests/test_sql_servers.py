"""The same PyQL-SQL programs on SQLite, PostgreSQL and DuckDB give the same answers.

All 20 Spider dev databases are copied from their SQLite files into a throw-away PostgreSQL
cluster (one database each, ``tests/support/postgres.py``) and into DuckDB files, with bound
parameters and a writable connection; the copies are then opened through :class:`SqlDB`
read-only, like any other database. Every gold query of those databases that
:func:`~pyql.sql.from_sql.to_program` can express runs as a program in a
:class:`~pyql.sql.session.SqlSession` on all three engines; the rows must be the same (numbers by
value: ``Decimal``/``float``/``int`` agree when equal to 6 significant digits), in order when the
gold query has an ``ORDER BY``.

Column types on the copies: stored integers -> ``BIGINT`` (SQLite types values, not columns),
``integer`` -> ``BIGINT``, ``real`` -> ``DOUBLE PRECISION``,
``numeric`` -> ``NUMERIC`` (DuckDB: ``DOUBLE``) when every stored value fits, else ``TEXT``;
text, dates and everything else are ``TEXT`` (SQLite stores dates as text anyway).
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import sqlglot.expressions as exp
from sqlalchemy.engine import make_url

from pyql.datasets import spider
from pyql.datasets.sql_fidelity import normalise_cell, same_rows
from pyql.db import SqlDB
from pyql.sql import Answer, Sql
from pyql.sql.from_sql import Unsupported, to_program
from pyql.sql.schema import normalise_type
from pyql.sql.session import SqlSession
from tests.conftest import data_dir

pytestmark = pytest.mark.server

#: the Spider dev databases copied to the servers: all of them
DB_IDS = tuple(sorted(p.name for p in (data_dir() / "spider" / "database").iterdir() if p.is_dir())
               ) if (data_dir() / "spider" / "database").is_dir() else ()


def _sqlite_tables(
    path: Path,
) -> Iterator[tuple[str, list[tuple[str, str]], list[str], list[tuple[Any, ...]]]]:
    """(table, [(column, declared type)], primary key, rows) for every table of a SQLite file."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", errors="replace")
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        for name in names:
            quoted = exp.to_identifier(name, quoted=True).sql("sqlite")
            info = list(conn.execute(f"PRAGMA table_info({quoted})"))
            columns = [(r[1], r[2]) for r in info]
            key = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
            rows = [tuple(r) for r in conn.execute(f"SELECT * FROM {quoted}")]
            yield name, columns, key, rows
    finally:
        conn.close()


def _target_type(declared: str, values: list[Any], engine: str) -> str:
    category = normalise_type(declared)
    present = [v for v in values if v is not None]
    # SQLite types values, not columns: what it stored decides (wta_1's DATE column holds
    # integers like 19381017, which must stay integers to compare and sort alike)
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "BIGINT"
    if category == "integer" and all(isinstance(v, int) for v in present):
        return "BIGINT"
    if category in ("real", "numeric") and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
    ):
        if category == "numeric" and engine == "postgres":
            return "NUMERIC"
        return "DOUBLE PRECISION" if engine == "postgres" else "DOUBLE"
    return "TEXT"


def _cell(value: Any, target: str) -> Any:
    if value is None:
        return None
    if target == "TEXT":
        return value if isinstance(value, str) else str(value)
    if target == "NUMERIC":
        return Decimal(str(value))
    if target.startswith("DOUBLE"):
        return float(value)
    return value


#: parameters bound per INSERT statement (PostgreSQL's limit is 65,535)
BATCH_PARAMETERS = 20_000


def _copy(path: Path, engine: str, execute: Any) -> None:
    """Create every table of the SQLite file ``path`` through ``execute(sql, parameters=None)``
    (``?`` placeholders). Rows go in batches of multi-row INSERTs: DuckDB's ``executemany`` runs
    one statement per row, which took a minute for wta_1 and world_1 alone."""
    dialect = "postgres" if engine == "postgres" else "duckdb"
    for table, columns, key, rows in _sqlite_tables(path):
        types = [_target_type(t, [r[i] for r in rows], engine) for i, (_, t) in enumerate(columns)]
        definitions: list[exp.Expression] = [
            exp.ColumnDef(this=exp.to_identifier(c, quoted=True),
                          kind=exp.DataType.build(t, dialect=dialect))
            for (c, _), t in zip(columns, types, strict=True)
        ]
        names = [c for c, _ in columns]
        key_values = [tuple(r[names.index(k)] for k in key) for r in rows]
        if key and None not in {v for kv in key_values for v in kv} and len(set(key_values)) == len(
            key_values
        ):  # a primary key lets PostgreSQL see what GROUP BY id determines
            definitions.append(exp.PrimaryKey(
                expressions=[exp.to_identifier(k, quoted=True) for k in key]))
        create = exp.Create(
            kind="TABLE",
            this=exp.Schema(
                this=exp.Table(this=exp.to_identifier(table, quoted=True)),
                expressions=definitions,
            ),
        )
        execute(create.sql(dialect=dialect))
        converted = [tuple(_cell(v, t) for v, t in zip(row, types, strict=True)) for row in rows]
        size = max(1, BATCH_PARAMETERS // max(1, len(columns)))
        statements: dict[int, str] = {}
        for start in range(0, len(converted), size):
            batch = converted[start:start + size]
            if len(batch) not in statements:
                statements[len(batch)] = exp.insert(
                    exp.values([exp.Tuple(expressions=[exp.Placeholder() for _ in columns])
                                for _ in batch]),
                    exp.Table(this=exp.to_identifier(table, quoted=True)),
                ).sql(dialect=dialect)
            execute(statements[len(batch)], [v for row in batch for v in row])


class _Copies(Mapping[str, dict[str, SqlDB]]):
    """The three engines of each Spider dev database, copied on first use: a test that needs
    a few databases does not wait for all twenty (wta_1 alone holds a fifth of the rows)."""

    def __init__(self, postgres_url: str, folder: Path, workdir: Path) -> None:
        self.postgres_url, self.folder, self.workdir = postgres_url, folder, workdir
        self.made: dict[str, dict[str, SqlDB]] = {}

    def __len__(self) -> int:
        return len(DB_IDS)

    def __iter__(self) -> Iterator[str]:
        return iter(DB_IDS)

    def __getitem__(self, db_id: str) -> dict[str, SqlDB]:
        if db_id not in DB_IDS:
            raise KeyError(db_id)
        if db_id not in self.made:
            self.made[db_id] = self._copy(db_id)
        return self.made[db_id]

    def _copy(self, db_id: str) -> dict[str, SqlDB]:
        import duckdb
        import psycopg

        source = spider.db_path(self.folder, db_id)
        admin = sa.create_engine(self.postgres_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "spider_{db_id}"')
        admin.dispose()
        # PostgreSQL: a writable psycopg connection (the %s placeholders of psycopg)
        pg_url = make_url(self.postgres_url).set(database=f"spider_{db_id}")
        with psycopg.connect(
            host=pg_url.host, port=pg_url.port, user=pg_url.username,
            password=pg_url.password, dbname=pg_url.database,
        ) as pg:
            with pg.cursor() as cur:
                _copy(source, "postgres", lambda sql, params=None, cur=cur: cur.execute(
                    sql if params is None else sql.replace("?", "%s"), params))
            pg.commit()
        # DuckDB: a writable file, closed before the read-only SqlDB opens it
        duck_path = self.workdir / f"{db_id}.duckdb"
        con = duckdb.connect(str(duck_path))
        try:
            _copy(source, "duckdb", con.execute)
        finally:
            con.close()
        return {
            "sqlite": SqlDB.sqlite(source),
            "postgres": SqlDB(pg_url.render_as_string(hide_password=False)),
            "duckdb": SqlDB(f"duckdb:///{duck_path}"),
        }

    def close(self) -> None:
        for dbs in self.made.values():
            for db in dbs.values():
                db.close()


@pytest.fixture(scope="module")
def engines(
    postgres_url: str, pyql_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mapping[str, dict[str, SqlDB]]]:
    pytest.importorskip("duckdb")
    pytest.importorskip("duckdb_engine")
    copies = _Copies(postgres_url, spider.spider_dir(pyql_data),
                     tmp_path_factory.mktemp("spider-copies"))
    yield copies
    copies.close()


def test_the_copies_are_read_only(engines: Mapping[str, dict[str, SqlDB]]) -> None:
    from pyql.errors import ReadOnlyError

    for name, db in engines["concert_singer"].items():
        assert db.read_only, name
        with pytest.raises(ReadOnlyError):
            db.execute("DELETE FROM singer")
        assert db.execute("SELECT count(*) FROM singer").rows[0][0] == 6, name


def _keyed(query: Sql) -> tuple[Sql, list[int]]:
    """``query`` also returning its ORDER BY keys, and where they are among its answers."""
    keyed = query
    for key in query.order_by:
        agg = f"{key.aggregation} DISTINCT" if key.distinct and key.aggregation else key.aggregation
        keyed = keyed.set_answer("*" if key.column.is_star else str(key.column), agg)
    positions = [
        keyed.answers.index(Answer(key.column, key.aggregation, key.distinct))
        for key in query.order_by
    ]
    return keyed, positions


def _same_order(got: Sequence[Sequence[Any]], want: Sequence[Sequence[Any]],
                positions: list[int], limited: bool) -> bool:
    """Equal ORDER BY results up to ties: the same keys in the same order, and the same rows
    within each run of equal keys (only the keys for the last run when a LIMIT may cut it)."""

    def runs(rows: Sequence[Sequence[Any]]) -> list[tuple[tuple[Any, ...], list[Sequence[Any]]]]:
        out: list[tuple[tuple[Any, ...], list[Sequence[Any]]]] = []
        for row in rows:
            key = tuple(normalise_cell(row[i]) for i in positions)
            if out and out[-1][0] == key:
                out[-1][1].append(row)
            else:
                out.append((key, [row]))
        return out

    a, b = runs(got), runs(want)
    if [k for k, _ in a] != [k for k, _ in b]:
        return False
    checked = a[:-1] if limited else a
    return all(same_rows(ra, rb, ordered=False) for (_, ra), (_, rb) in zip(checked, b, strict=False))


#: gold queries whose result the SQL standard leaves to the engine (ties), so engines differ
AMBIGUOUS = {
    "dev-455": "ORDER BY birth_date, which is not returned and NULL for many rows: ties in any order",
    "dev-456": "ORDER BY birth_date, which is not returned and NULL for many rows: ties in any order",
    "dev-954": "the sub-query's ORDER BY count(*) LIMIT 1 has tied breeds: engines pick either",
    "dev-955": "the sub-query's ORDER BY count(*) LIMIT 1 has tied breeds: engines pick either",
}


def _gold_items(pyql_data: Path) -> list[spider.SpiderItem]:
    folder = spider.spider_dir(pyql_data)
    return [it for it in spider.load_items(folder / "dev.json")
            if it.db_id in DB_IDS and it.id not in AMBIGUOUS]


def _check_agreement(engines: Mapping[str, dict[str, SqlDB]], items: list[spider.SpiderItem],
                     min_expressible: int) -> None:
    expressible = compared = 0
    not_everywhere: list[str] = []
    mismatches: list[str] = []
    for item in items:
        dbs = engines[item.db_id]
        program = to_program(item.query, dbs["sqlite"].schema())
        if isinstance(program, Unsupported):
            continue
        expressible += 1
        rows: dict[str, Sequence[Sequence[Any]]] = {}
        positions: list[int] = []
        for name, db in dbs.items():
            session = SqlSession(db)
            failed = next((o for o in session.run_program(program) if not o.ok), None)
            if failed is not None:
                not_everywhere.append(f"{item.id} {name}: {failed.action}: {failed.text}")
                break
            assert session.last_result is not None
            rows[name] = session.last_result.rows
            if session.query.order_by:  # compare up to ties: fetch the keys too
                keyed, positions = _keyed(session.query)
                rows[name] = db.execute(keyed.to_sql(db.dialect)).rows
        else:
            compared += 1
            limited = session.query.limit is not None
            for name in ("postgres", "duckdb"):
                if positions:
                    same = _same_order(rows[name], rows["sqlite"], positions, limited)
                else:
                    same = same_rows(rows[name], rows["sqlite"], ordered=False)
                if not same:
                    mismatches.append(
                        f"{item.id} {name}: {item.query}\n  sqlite: {rows['sqlite'][:5]}\n"
                        f"  {name}: {rows[name][:5]}"
                    )
    print(f"{compared} of {expressible} programs ran on all three engines and agree")
    assert not mismatches, "\n".join(mismatches)
    assert expressible >= min_expressible
    # What does not run everywhere is SQL that only SQLite accepts: selecting a column that is
    # neither grouped nor functionally dependent on the GROUP BY key, joining a TEXT column to an
    # integer one (Spider declares some foreign keys as text), averaging a column of numbers
    # stored as text (car_1's MPG), and ordering a DISTINCT result by a column it does not return.
    stricter = re.compile(r"must appear in the GROUP BY clause|operator does not exist"
                          r"|function (avg|sum)\(text\) does not exist"
                          r"|for SELECT DISTINCT, ORDER BY expressions must appear in select list")
    unexpected = [f for f in not_everywhere if not stricter.search(f)]
    assert not unexpected, "\n".join(unexpected)
    assert compared >= 0.75 * expressible, "\n".join(not_everywhere)  # 858 of 1,007


def test_gold_programs_agree_on_sqlite_postgres_and_duckdb_sample(
    engines: Mapping[str, dict[str, SqlDB]], pyql_data: Path
) -> None:
    """A seeded sample of the exhaustive check below, from every database but the two largest
    (wta_1, world_1: half the rows to copy; the exhaustive check covers them)."""
    items = [it for it in _gold_items(pyql_data) if it.db_id not in ("wta_1", "world_1")]
    _check_agreement(engines, random.Random(0).sample(items, 200), min_expressible=150)


@pytest.mark.slow
@pytest.mark.exhaustive
def test_gold_programs_agree_on_sqlite_postgres_and_duckdb(
    engines: Mapping[str, dict[str, SqlDB]], pyql_data: Path
) -> None:
    _check_agreement(engines, _gold_items(pyql_data), min_expressible=120)
