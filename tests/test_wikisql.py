"""WikiSQL: the built database, gold programs, and WikiSQL's execution semantics."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from pyql.datasets import wikisql
from pyql.datasets.wikisql import WikiSQLItem, WikiSQLTable, wikisql_execute
from pyql.db import GuardError, SqlDB
from pyql.program import Program
from tests.conftest import require_data

#: the header of dev-0's table (1-10015132-11), as the item and the built database hold it
DEV0_HEADER = ("Player", "No.", "Nationality", "Position", "Years in Toronto", "School/Club Team")


@pytest.fixture(scope="session")
def wikisql_dir() -> Path:
    return require_data("wikisql", "dev.tables.jsonl.gz").parent


@pytest.fixture(scope="session")
def tables(wikisql_dir: Path) -> dict[str, WikiSQLTable]:
    return wikisql.load_tables(wikisql_dir / "dev.tables.jsonl.gz")


@pytest.fixture(scope="session")
def items(wikisql_dir: Path, tables: dict[str, WikiSQLTable]) -> dict[str, WikiSQLItem]:
    return {item.id: item for item in wikisql.load_questions(wikisql_dir / "dev.jsonl", tables)}


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wikisql-cache")


@pytest.fixture(scope="session")
def db(wikisql_dir: Path, cache_dir: Path) -> SqlDB:
    return wikisql.load_db(wikisql_dir / "dev.tables.jsonl.gz", cache_dir=cache_dir)


# ------------------------------------------------------------------ loading


def test_tables_and_questions_load(
    tables: dict[str, WikiSQLTable], items: dict[str, WikiSQLItem]
) -> None:
    assert len(tables) == 2716
    assert len(items) == 8421
    assert len({item.table_id for item in items.values()}) == 2630
    first = items["dev-0"]
    assert first.question == "What position does the player who played for butler cc (ks) play?"
    assert first.table_id == "1-10015132-11"
    assert first.table == "table_1_10015132_11"
    assert first.header == DEV0_HEADER
    assert first.sql == {"sel": 3, "conds": [[5, 0, "Butler CC (KS)"]], "agg": 0}
    assert first.phase == 1
    with pytest.raises(ValidationError):  # frozen
        first.question = "x"  # type: ignore[misc]


def test_column_names() -> None:
    assert wikisql.table_name("1-10015132-11") == "table_1_10015132_11"
    assert wikisql.column_names(["", "Name", "name", "Name_2", "col0"]) == [
        "col0",
        "Name",
        "name_2",
        "Name_2_2",
        "col0_2",
    ]


def test_no_duplicate_headers_but_some_empty(tables: dict[str, WikiSQLTable]) -> None:
    duplicates = [
        t.id for t in tables.values() if len({h.casefold() for h in t.header}) != len(t.header)
    ]
    empty = sorted(t.id for t in tables.values() if "" in t.header)
    assert duplicates == []
    assert len(empty) == 9
    table = tables["1-12868503-2"]
    assert table.header[0] == "" and table.columns[0] == "col0"
    assert table.columns[1:] == table.header[1:]


# ------------------------------------------------------------------ the database


def test_load_db_tables_and_headers(db: SqlDB, tables: dict[str, WikiSQLTable]) -> None:
    names = db.table_names()
    assert len(names) == 2716
    assert set(names) == {t.name for t in tables.values()}
    info = db.schema(["table_1_10015132_11"]).table("table_1_10015132_11")
    assert info.column_names == DEV0_HEADER
    assert {c.raw_type for c in info.columns} == {"TEXT"}
    rows = db.execute(
        'SELECT "Position", "Years in Toronto" FROM table_1_10015132_11 '
        "WHERE \"School/Club Team\" = 'Butler CC (KS)'"
    ).rows
    assert rows == (("Guard-Forward", "1996-97"),)


def test_load_db_types_and_case(db: SqlDB, tables: dict[str, WikiSQLTable]) -> None:
    real = next(t for t in tables.values() if "real" in t.types and t.rows)
    column = real.columns[real.types.index("real")]
    info = db.schema([real.name]).table(real.name)
    assert info.column(column).raw_type == "REAL"
    values = db.execute(f'SELECT "{column}" FROM "{real.name}"').column(0)
    assert all(isinstance(v, float) for v in values if v is not None)
    # TEXT columns compare case-insensitively (COLLATE NOCASE), cells keep their case
    rows = db.execute(
        'SELECT "Player" FROM table_1_10015132_11 WHERE "School/Club Team" = \'butler cc (ks)\''
    ).rows
    assert rows == (("Martin Lewis",),)


def test_load_db_is_read_only(db: SqlDB) -> None:
    with pytest.raises(GuardError):
        db.execute("DROP TABLE table_1_10015132_11")


def test_load_db_cache_and_path(
    wikisql_dir: Path, cache_dir: Path, db: SqlDB, tmp_path: Path
) -> None:
    source = wikisql_dir / "dev.tables.jsonl.gz"
    cached = sorted(cache_dir.glob("wikisql-dev-*.sqlite"))
    assert len(cached) == 1
    mtime = cached[0].stat().st_mtime_ns
    again = wikisql.load_db(source, cache_dir=cache_dir)  # reused, not rebuilt
    assert cached[0].stat().st_mtime_ns == mtime
    assert again.execute("SELECT count(*) FROM table_1_10015132_11").rows == ((7,),)
    assert not list(cache_dir.glob(".*partial"))


@pytest.mark.slow
def test_load_db_temp_file_is_removed(wikisql_dir: Path) -> None:
    import gc

    temp = wikisql.load_db(wikisql_dir / "dev.tables.jsonl.gz")
    path = Path(temp.url.split("file:", 1)[1].split("?", 1)[0])
    assert path.is_file()
    temp.close()
    del temp
    gc.collect()
    assert not path.exists()


# ------------------------------------------------------------------ gold programs


def test_gold_programs_print_and_parse_back(items: dict[str, WikiSQLItem]) -> None:
    for item in items.values():
        text = str(item.program)
        assert Program.parse(text, tools="sql") == item.program, item.id
        assert text.endswith("execute()")


def test_gold_program_examples(items: dict[str, WikiSQLItem]) -> None:
    assert str(items["dev-0"].program) == (
        'add_condition("School/Club Team", =, "Butler CC (KS)")\n'
        "set_answer(Position, None)\n"
        "execute()"
    )
    assert str(items["dev-1"].program) == (
        'add_condition("No.", =, "3")\nset_answer("School/Club Team", COUNT)\nexecute()'
    )
    # a comma number on a real column becomes the number WikiSQL's engine reads
    assert str(items["dev-2517"].program).splitlines()[0] == "add_condition(Crowd, >, 24637)"
    # a lower-cased annotation value takes the cell's spelling
    assert 'add_condition(School, =, "Michigan State")' in str(items["dev-2421"].program)
    assert items["dev-2421"].sql["conds"][2] == [1, 0, "michigan state"]  # raw kept as is


def _norm(value: object) -> object:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, (int, float)):
        return round(float(value), 6)
    return value


def _gold_results_agree(
    db: SqlDB, tables: dict[str, WikiSQLTable], chosen: list[WikiSQLItem]
) -> list[str]:
    program_to_sql = pytest.importorskip("pyql.sql").program_to_sql
    wrong = []
    for item in chosen:
        got = db.execute(program_to_sql(item.program, table=item.table)).column(0)
        want = wikisql_execute(tables[item.table_id], **item.sql)
        if [_norm(v) for v in got] != [_norm(v) for v in want]:
            wrong.append(item.id)
    return wrong


def test_gold_programs_execute_like_wikisql_sample(
    db: SqlDB, tables: dict[str, WikiSQLTable], items: dict[str, WikiSQLItem]
) -> None:
    chosen = list(items.values())[::40] + [items[i] for i in ("dev-2421", "dev-2517", "dev-2065")]
    assert _gold_results_agree(db, tables, chosen) == []


@pytest.mark.slow
@pytest.mark.exhaustive
def test_gold_programs_execute_like_wikisql_all(
    db: SqlDB, tables: dict[str, WikiSQLTable], items: dict[str, WikiSQLItem]
) -> None:
    assert _gold_results_agree(db, tables, list(items.values())) == []


# ------------------------------------------------------------------ WikiSQL's execution semantics


@pytest.mark.parametrize(
    ("item_id", "expected"),
    [
        ("dev-0", ["guard-forward"]),  # text cells are lower-cased, as in WikiSQL's database
        ("dev-1", [1]),  # COUNT
        ("dev-21", [13.0]),  # MIN over a real column: REAL cells come back as floats
        ("dev-55", [1]),
        ("dev-2462", [None]),  # AVG over no rows
        ("dev-2517", ["8.11 (59)"]),  # "24,637" on a real column is read as 24637
        ("dev-2421", [10.0]),  # lower-cased condition value, AVG
        ("dev-2065", ["kenpō x", "interval x plus"]),  # both spellings match once lower-cased
    ],
)
def test_wikisql_execute_known_items(
    tables: dict[str, WikiSQLTable], items: dict[str, WikiSQLItem], item_id: str, expected: list
) -> None:
    item = items[item_id]
    assert wikisql_execute(tables[item.table_id], **item.sql) == expected


def test_wikisql_execute_reproduces_source_counts(
    tables: dict[str, WikiSQLTable], items: dict[str, WikiSQLItem]
) -> None:
    # SOURCE_tables.md: all 8,421 run; 7,748 return a non-NULL value
    results = [wikisql_execute(tables[i.table_id], **i.sql) for i in items.values()]
    assert sum(1 for r in results if r and r[0] is not None) == 7748


TOY = WikiSQLTable(
    id="1-1",
    header=("Name", "Crowd", "Note"),
    types=("text", "real", "text"),
    rows=(("Alpha", 18000, "12"), ("beta", 9000, "x"), ("Gamma", 24637, "3.5"), ("delta", 5, "7")),
)


@pytest.mark.parametrize(
    ("sel", "agg", "conds", "expected"),
    [
        (0, 0, [[1, 1, "10,000"]], ["alpha", "gamma"]),  # babel-style "10,000" -> 10000
        (0, 0, [[1, 1, "about 9000 people"]], ["alpha", "gamma"]),  # first number in the text
        (0, 0, [[0, 0, "GAMMA"]], ["gamma"]),  # values lower-cased
        (0, 0, [[0, 1, "b"]], ["beta", "gamma", "delta"]),  # text compares as text
        (1, 1, [], [24637.0]),  # MAX
        (0, 2, [], ["alpha"]),  # MIN over text
        (1, 4, [], [51642.0]),  # SUM over REAL
        (2, 4, [], [22.5]),  # SUM over text: numeric prefix, else 0
        (1, 5, [[1, 2, 100]], [5.0]),  # AVG
        (0, 3, [[1, 1, 1e9]], [0]),  # COUNT over no rows
        (0, 1, [[1, 1, 1e9]], [None]),  # MAX over no rows
        # two conditions on one column share one parameter: the last value wins (the original's quirk)
        (0, 0, [[1, 1, 1000], [1, 2, 20000]], []),
        (0, 0, [[2, 0, 7]], ["delta"]),  # a number against a TEXT column compares as text
    ],
)
def test_wikisql_execute_semantics(sel: int, agg: int, conds: list, expected: list) -> None:
    assert wikisql_execute(TOY, sel=sel, agg=agg, conds=conds) == expected


def test_wikisql_execute_rejects_op_and_unparseable_numbers() -> None:
    with pytest.raises(ValueError):
        wikisql_execute(TOY, sel=0, agg=0, conds=[[1, 3, 5]])
    with pytest.raises(ValueError):
        wikisql_execute(TOY, sel=0, agg=0, conds=[[1, 1, "many"]])


def _official_db(tables: dict[str, WikiSQLTable], ids: set[str]) -> sqlite3.Connection:
    """The layout of WikiSQL's own database: col<i> columns, text lower-cased."""
    conn = sqlite3.connect(":memory:")
    for table_id in ids:
        table = tables[table_id]
        conn.execute(
            f"CREATE TABLE {table.name} ({', '.join(f'col{i} {t}' for i, t in enumerate(table.types))})"
        )
        conn.executemany(
            f"INSERT INTO {table.name} VALUES ({', '.join('?' for _ in table.types)})",
            [[c.lower() if isinstance(c, str) else c for c in row] for row in table.rows],
        )
    return conn


def _official_execute(conn: sqlite3.Connection, table: WikiSQLTable, sql: dict) -> list:
    """lib/dbengine.py's query, run on SQLite (the reference for the pure-Python version)."""
    select = f"col{sql['sel']}"
    if sql["agg"]:
        select = f"{wikisql.AGG_OPS[sql['agg']]}({select})"
    where, params = [], {}
    for col, op, value in sql["conds"]:
        if isinstance(value, str):
            value = value.lower()
        if table.types[col] == "real" and not isinstance(value, (int, float)):
            value = wikisql._parse_decimal(value)
        where.append(f"col{col} {wikisql.COND_OPS[op]} :col{col}")
        params[f"col{col}"] = value
    query = f"SELECT {select} AS result FROM {table.name}"
    if where:
        query += " WHERE " + " AND ".join(where)
    return [row[0] for row in conn.execute(query, params)]


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        (x == y and type(x) is type(y))
        or (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-12))
        for x, y in zip(a, b, strict=True)
    )


def test_wikisql_execute_matches_sqlite(
    tables: dict[str, WikiSQLTable], items: dict[str, WikiSQLItem]
) -> None:
    chosen = list(items.values())  # all 8,421 (about half a second)
    conn = _official_db(tables, {i.table_id for i in chosen})
    wrong = [
        i.id
        for i in chosen
        if not _same(
            wikisql_execute(tables[i.table_id], **i.sql),
            _official_execute(conn, tables[i.table_id], i.sql),
        )
    ]
    assert wrong == []
