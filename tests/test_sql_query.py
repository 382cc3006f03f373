"""Tests of pyql.sql: the immutable Sql builder, the schema model, apply_call and the compilers.

Golden SQL texts per dialect are in test_sql_golden.py; here: behaviour, errors, execution on
SQLite/DuckDB, and hypothesis properties (random names/values/ops either raise a typed pyql error
or give SQL that re-parses to one SELECT holding exactly the inputs).
"""

from __future__ import annotations

import dataclasses
import doctest
import json
import sqlite3
from decimal import Decimal

import pytest
import sqlglot
import sqlglot.expressions as exp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyql.sql
import pyql.sql.apply
import pyql.sql.query
import pyql.sql.schema
from pyql.errors import (
    ArityError,
    PyqlError,
    QueryError,
    SchemaError,
    TermError,
    UnknownFunctionError,
)
from pyql.program import Call, Program
from pyql.sql import (
    STAR,
    ColumnInfo,
    ColumnRef,
    ForeignKey,
    Schema,
    Sql,
    TableInfo,
    apply_call,
    escape_like,
    normalise_type,
    program_to_query,
    program_to_sql,
)
from tests.support.sql import CONCERT, SQL_DIALECTS


def _sqlite(
    rows: list[tuple], table: str = "t", columns: tuple[str, ...] = ("a", "b")
) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    q = lambda name: '"' + name.replace('"', '""') + '"'  # noqa: E731 - test fixture DDL only
    con.execute(f"CREATE TABLE {q(table)} ({', '.join(q(c) for c in columns)})")
    con.executemany(f"INSERT INTO {q(table)} VALUES ({', '.join('?' for _ in columns)})", rows)
    return con


# --------------------------------------------------------------------------- immutability


def test_every_builder_method_returns_a_new_query_and_leaves_the_old_one() -> None:
    base = Sql("t").add_condition("a", "=", 1)
    before = base.to_sql()
    steps = [
        lambda q: q.add_condition("b", ">", 2),
        lambda q: q.set_answer("a"),
        lambda q: q.add_join("u", "a", "a"),
        lambda q: q.add_group_by("a"),
        lambda q: q.add_group_by("a").add_having("a", "COUNT", ">", 1),
        lambda q: q.add_order("a", "desc", 3),
        lambda q: q.set_distinct(),
        lambda q: q.set_limit(2),
        lambda q: q.union(Sql("u")),
        lambda q: q.value_counts("a"),
    ]
    for step in steps:
        new = step(base)
        assert new is not base
        assert new != base
        assert base.to_sql() == before


def test_sql_is_frozen_hashable_and_compares_by_value() -> None:
    q = Sql("t").set_answer("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.table = "u"  # type: ignore[misc]
    assert q == Sql("t").set_answer("a")
    assert hash(q) == hash(Sql("t").set_answer("a"))
    assert len({q, Sql("t").set_answer("a"), Sql("t")}) == 2
    assert repr(q) == 'Sql(\'SELECT "a" FROM "t"\')'
    assert "no table" in repr(Sql())


def test_to_expression_is_fresh_each_time() -> None:
    q = Sql("t").add_condition("a", "=", "x")
    e = q.to_expression()
    e.set("where", None)
    assert "WHERE" in q.to_sql()


# --------------------------------------------------------------------------- conditions


@pytest.mark.parametrize(
    ("op", "sql_op"),
    [
        ("=", "="),
        ("==", "="),
        ("!=", "<>"),
        ("<>", "<>"),
        (">", ">"),
        ("<", "<"),
        (">=", ">="),
        ("<=", "<="),
    ],
)
def test_comparison_operators(op: str, sql_op: str) -> None:
    assert Sql("t").add_condition("a", op, 5).to_sql() == f'SELECT * FROM "t" WHERE "a" {sql_op} 5'


def test_conditions_and_and_nulls() -> None:
    q = (
        Sql("t")
        .add_condition("a", "=", None)
        .add_condition("b", "!=", None)
        .add_condition("c", "like", "x%")
    )
    assert q.to_sql() == (
        'SELECT * FROM "t" WHERE "a" IS NULL AND NOT "b" IS NULL AND "c" LIKE \'x%\''
    )
    assert len(q.conditions) == 3


@pytest.mark.parametrize(
    ("op", "value", "code"),
    [
        ("~", 1, "bad_operator"),
        (">", None, "bad_value"),
        ("=", True, "bad_value"),
        ("=", float("nan"), "bad_value"),
        ("=", float("inf"), "bad_value"),
        ("=", Decimal("NaN"), "bad_value"),
        ("=", [1], "bad_value"),
        ("=", b"x", "bad_value"),
        ("like", None, "bad_value"),
        ("contains", Sql("u").set_answer("a"), "bad_value"),
        ("in", "abc", "bad_value"),
        ("in", [], "bad_value"),
        ("in", [1, None], "bad_value"),
        ("=", "a\x00b", "nul_character"),
        ("=", Sql("u"), "bad_subquery"),
        ("in", Sql("u").set_answer("a").set_answer("b"), "bad_subquery"),
    ],
)
def test_bad_conditions_raise_query_error(op: str, value: object, code: str) -> None:
    with pytest.raises(QueryError) as info:
        Sql("t").add_condition("a", op, value)
    assert info.value.code == code


def test_unknown_operator_lists_the_operators() -> None:
    with pytest.raises(QueryError) as info:
        Sql("t").add_condition("a", "equals", 1)
    assert "LIKE" in info.value.suggestions


@pytest.mark.parametrize("name", ["", "   ", "a\x00b"])
def test_bad_names_raise_query_error(name: str) -> None:
    with pytest.raises(QueryError):
        Sql("t").set_answer(name)
    with pytest.raises(QueryError):
        Sql(name)


def test_numbers_render_as_numbers_and_strings_as_strings() -> None:
    q = (
        Sql("t")
        .add_condition("a", "=", "5")
        .add_condition("b", "=", 5)
        .add_condition("c", "=", Decimal("1.50"))
        .add_condition("d", "=", -1e-05)
        .add_condition("e", "=", 10**30)
    )
    assert q.to_sql() == (
        'SELECT * FROM "t" WHERE "a" = \'5\' AND "b" = 5 AND "c" = 1.50 AND "d" = -1e-05 '
        'AND "e" = 1000000000000000000000000000000'
    )


HOSTILE = [
    "O'Neal",
    "'; DROP TABLE t; --",
    "x' OR '1'='1",
    "/* comment */ --",
    "back\\slash\\",
    'double "quote"',
    "new\nline\r\ttab",
    "ünïcødé ☃ 𝔘 \u2028",
    "`backtick` [bracket] ]",
    "$$dollar$$ $tag$",
]


@pytest.mark.parametrize("dialect", SQL_DIALECTS)
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_stay_inside_their_literal(dialect: str, value: str) -> None:
    sql = (
        Sql("t")
        .add_condition("a", "=", value)
        .add_condition("b", "contains", value)
        .to_sql(dialect)
    )
    statements = sqlglot.parse(sql, read=dialect)
    assert len(statements) == 1 and isinstance(statements[0], exp.Select)
    literals = [lit.this for lit in statements[0].find_all(exp.Literal) if lit.is_string]
    assert value in literals
    pattern = f"%{escape_like(value, brackets=dialect == 'tsql')}%"
    assert pattern in literals


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_match_literally_on_sqlite(value: str) -> None:
    con = _sqlite([(value, 1), ("other", 2)])
    sql = Sql("t").add_condition("a", "=", value).set_answer("b").to_sql()
    assert con.execute(sql).fetchall() == [(1,)]
    assert con.execute('SELECT COUNT(*) FROM "t"').fetchone() == (2,)


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_contains_escapes_wildcards_when_executed(engine: str) -> None:
    rows = [
        ("100% sure", 1),
        ("1000 sure", 2),
        ("a_b", 3),
        ("axb", 4),
        ("c\\d", 5),
        ("[x]", 6),
        ("x", 7),
    ]
    if engine == "sqlite":
        con = _sqlite(rows)
        run = lambda sql: sorted(r[0] for r in con.execute(sql).fetchall())  # noqa: E731
    else:
        duckdb = pytest.importorskip("duckdb")
        dcon = duckdb.connect()
        dcon.execute("CREATE TABLE t (a VARCHAR, b INTEGER)")
        dcon.executemany("INSERT INTO t VALUES (?, ?)", rows)
        run = lambda sql: sorted(r[0] for r in dcon.execute(sql).fetchall())  # noqa: E731
    q = Sql("t").set_answer("b")
    assert run(q.add_condition("a", "contains", "0%").to_sql(engine)) == [1]
    assert run(q.add_condition("a", "contains", "_").to_sql(engine)) == [3]
    assert run(q.add_condition("a", "contains", "\\").to_sql(engine)) == [5]
    assert run(q.add_condition("a", "contains", "[x").to_sql(engine)) == [6]
    assert run(q.add_condition("a", "not contains", "x").to_sql(engine)) == [1, 2, 3, 5]
    assert run(q.add_condition("a", "like", "a_b").to_sql(engine)) == [3, 4]  # LIKE: user pattern


def test_contains_on_bigquery_has_no_escape_clause() -> None:
    sql = Sql("t").add_condition("a", "contains", "5%").to_sql("bigquery")
    assert "ESCAPE" not in sql
    assert sql.endswith("LIKE LOWER('%5\\\\%%')")


def test_in_lists_and_sub_queries() -> None:
    sub = Sql("u").set_answer("x").add_condition("y", ">", 1)
    q = Sql("t").add_condition("a", "in", [1, "b"]).add_condition("c", "not in", sub)
    assert q.to_sql() == (
        'SELECT * FROM "t" WHERE "a" IN (1, \'b\') AND NOT "c" IN (SELECT "x" FROM "u" WHERE "y" > 1)'
    )
    q2 = Sql("t").add_condition("a", ">", Sql("t").set_answer("a", "AVG"))
    assert q2.to_sql() == 'SELECT * FROM "t" WHERE "a" > (SELECT AVG("a") FROM "t")'


# --------------------------------------------------------------------------- answers


def test_answers_aggregations_and_stars() -> None:
    q = Sql("t").set_answer("a").set_answer("b", "max").set_answer("*", "COUNT").set_answer("a")
    assert q.to_sql() == 'SELECT "a", MAX("b"), COUNT(*) FROM "t"'
    assert Sql("t").set_answer("a", "none").answers == Sql("t").set_answer("a").answers
    assert Sql("t").set_answer("*").to_sql() == 'SELECT * FROM "t"'
    assert (
        Sql("t").set_answer("a", "COUNT_DISTINCT").to_sql() == 'SELECT COUNT(DISTINCT "a") FROM "t"'
    )
    assert (
        Sql("t").set_answer("a", "sum", distinct=True).to_sql()
        == 'SELECT SUM(DISTINCT "a") FROM "t"'
    )


@pytest.mark.parametrize(
    ("column", "agg", "code"),
    [
        ("*", "MAX", "bad_star"),
        ("*", "count distinct", "bad_star"),
        ("a", "median", "bad_aggregation"),
    ],
)
def test_bad_answers(column: str, agg: str, code: str) -> None:
    with pytest.raises(QueryError) as info:
        Sql("t").set_answer(column, agg)
    assert info.value.code == code


def test_star_is_not_a_condition_column() -> None:
    with pytest.raises(QueryError):
        Sql("t").add_condition("*", "=", 1)


# --------------------------------------------------------------------------- grouping, order


def test_group_having_order_limit() -> None:
    q = (
        Sql("t")
        .set_answer("g")
        .add_group_by("g")
        .add_group_by("g")
        .add_having("v", "sum", ">", 10)
        .add_order("v", "desc", aggregation="SUM")
        .add_order("g", limit=5)
    )
    assert q.to_sql() == (
        'SELECT "g" FROM "t" GROUP BY "g" HAVING SUM("v") > 10 ORDER BY SUM("v") DESC, "g" LIMIT 5'
    )
    assert q.add_order("g", "asc", 1).limit == 1
    assert q.set_limit(None).limit is None
    assert Sql("t").add_group_by("g").add_order("max(age)", "DESCENDING").to_sql() == (
        'SELECT * FROM "t" GROUP BY "g" ORDER BY MAX("age") DESC'
    )
    # an aggregate only ORDER BY has is refused (SQLite: "misuse of aggregate")
    with pytest.raises(QueryError) as info:
        Sql("t").set_answer("g").add_order("max(age)", "DESCENDING")
    assert info.value.code == "aggregate_order_without_group_by"
    assert info.value.suggestions == ("add_group_by(g)",)


def test_to_sql_parses_no_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiling builds the expression and generates it once, without copies: no SQL text is
    parsed (an int LIMIT was parsed back from ``LIMIT 5`` on every compile)."""
    from sqlglot.dialects.dialect import Dialect

    parsed: list[str] = []
    tokenize = Dialect.tokenize

    def spy(self: Dialect, sql: str, **options: object) -> object:
        parsed.append(sql)
        return tokenize(self, sql, **options)

    monkeypatch.setattr(Dialect, "tokenize", spy)
    q = Sql("t").set_answer("g").add_condition("v", ">", 10).add_order("g", limit=5)
    assert q.to_sql() == 'SELECT "g" FROM "t" WHERE "v" > 10 ORDER BY "g" LIMIT 5'
    assert q.to_sql("tsql") == 'SELECT TOP 5 [g] FROM [t] WHERE [v] > 10 ORDER BY [g]'
    assert parsed == []


def test_order_by_aggregate_text_that_is_a_schema_column_stays_a_column() -> None:
    schema = Schema((TableInfo("t", ["COUNT(x)", "y"]),))
    assert Sql("t", schema=schema).add_order("COUNT(x)").to_sql() == (
        'SELECT * FROM "t" ORDER BY "COUNT(x)"'
    )


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda q: q.add_order("a", "sideways"), "bad_direction"),
        (lambda q: q.add_order("a", "asc", -1), "bad_limit"),
        (lambda q: q.add_order("a", "asc", True), "bad_limit"),
        (lambda q: q.set_limit(1.5), "bad_limit"),
        (lambda q: q.add_having("a", "None", "=", 1), "bad_aggregation"),
        (lambda q: q.add_having("*", "SUM", "=", 1), "bad_star"),
        (lambda q: q.add_order("*", "asc"), "bad_star"),
    ],
)
def test_bad_grouping_and_order(call, code: str) -> None:  # noqa: ANN001
    with pytest.raises(QueryError) as info:
        call(Sql("t"))
    assert info.value.code == code


# --------------------------------------------------------------------------- set operations


def test_set_operations_execute_on_sqlite() -> None:
    con = _sqlite([("x", 1), ("y", 2), ("y", 3)])
    a = Sql("t").set_answer("a")
    y = Sql("t").set_answer("a").add_condition("b", ">", 1)
    run = lambda q: sorted(con.execute(q.to_sql()).fetchall())  # noqa: E731
    assert run(a.union(y)) == [("x",), ("y",)]
    assert run(a.union(y, all=True)) == [("x",), ("y",), ("y",), ("y",), ("y",)]
    assert run(a.intersect(y)) == [("y",)]
    assert run(a.except_(y)) == [("x",)]
    top = Sql("t").set_answer("a").add_order("b", "desc", 1)
    assert run(top.union(Sql("t").set_answer("a").add_condition("b", "=", 1))) == [("x",), ("y",)]
    nested = a.except_(y.union(Sql("t").set_answer("a").add_condition("a", "=", "x")))
    assert run(nested) == []


def test_set_operation_width_mismatch() -> None:
    with pytest.raises(QueryError) as info:
        Sql("t").set_answer("a").union(Sql("u").set_answer("a").set_answer("b"))
    assert info.value.code == "bad_set_operation"
    with pytest.raises(TypeError):
        Sql("t").union("SELECT 1")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- schema resolution


def test_schema_resolves_case_and_table_dot_column() -> None:
    q = Sql("SINGER", schema=CONCERT).add_condition("age", ">", 30).set_answer("singer.name")
    assert q.to_sql() == 'SELECT "Name" FROM "singer" WHERE "Age" > 30'
    assert q.resolve_column("COUNTRY") == ColumnRef("Country", "singer")
    assert q.resolve_column("*") is STAR


def test_base_table_is_inferred_from_the_first_column() -> None:
    q = Sql(schema=CONCERT).add_condition("concert_Name", "=", "x")
    assert q.table == "concert"
    assert Sql(schema=CONCERT).set_answer("stadium.Capacity", "max").to_sql() == (
        'SELECT MAX("Capacity") FROM "stadium"'
    )
    with pytest.raises(QueryError) as info:
        Sql(schema=CONCERT).set_answer("Name")
    assert info.value.code == "ambiguous_column"
    assert set(info.value.suggestions) == {"stadium.Name", "singer.Name"}
    with pytest.raises(QueryError) as no_table:
        Sql().to_sql()
    assert no_table.value.code == "no_table"


def test_unknown_names_give_schema_errors_with_suggestions() -> None:
    with pytest.raises(SchemaError) as info:
        Sql("singr", schema=CONCERT)
    assert info.value.suggestions == ("singer",)
    with pytest.raises(SchemaError) as col:
        Sql("singer", schema=CONCERT).set_answer("Contry")
    assert "Country" in col.value.suggestions
    assert col.value.name == "Contry"
    with pytest.raises(SchemaError) as other:
        Sql("singer", schema=CONCERT).add_condition("Year", "=", 2014)
    assert other.value.suggestions == ("concert.Year",)
    with pytest.raises(SchemaError) as unjoined:
        Sql("singer", schema=CONCERT).set_answer("concert.Year")
    assert "add_join" in str(unjoined.value)


def test_wikisql_headers_with_dots_resolve_as_whole_names() -> None:
    schema = Schema((TableInfo("t", ["No.", "a.b", "Pos."]), TableInfo("a", ["b", "c"])))
    q = Sql("t", schema=schema).add_join("a", "Pos.", "c")
    assert q.resolve_column("a.b") == ColumnRef("a.b", "t")  # the whole text is a column
    assert q.resolve_column("a.c") == ColumnRef("c", "a")
    assert q.resolve_column("t.No.") == ColumnRef("No.", "t")
    assert q.set_answer("No.").to_sql() == (
        'SELECT "t"."No." FROM "t" JOIN "a" ON "t"."Pos." = "a"."c"'
    )
    # without a schema: the whole text, unless it is table.column of a table in the query
    assert Sql("t").resolve_column("No.") == ColumnRef("No.")
    assert Sql("t").resolve_column("W.L") == ColumnRef("W.L")
    assert Sql("t").resolve_column("T.x") == ColumnRef("x", "t")
    assert Sql("t").add_join("u", "k").resolve_column("u.v") == ColumnRef("v", "u")


def test_columns_equal_by_a_join_are_not_ambiguous() -> None:
    q = Sql("singer", schema=CONCERT).add_join("singer_in_concert")
    assert q.resolve_column("Singer_ID") == ColumnRef("Singer_ID", "singer")
    q2 = q.add_join("concert").add_join("stadium")
    with pytest.raises(QueryError) as info:
        q2.set_answer("Name")  # singer.Name vs stadium.Name are different things
    assert info.value.code == "ambiguous_column"


# --------------------------------------------------------------------------- joins


def test_joins_along_foreign_keys_in_both_directions() -> None:
    forward = Sql("concert", schema=CONCERT).add_join("stadium")
    backward = Sql("stadium", schema=CONCERT).add_join("concert")
    assert forward.joins[0].left == ColumnRef("Stadium_ID", "concert")
    assert backward.joins[0].left == ColumnRef("Stadium_ID", "stadium")
    assert Sql(tables=["singer", "singer_in_concert", "concert"], schema=CONCERT).tables == (
        "singer",
        "singer_in_concert",
        "concert",
    )


def test_join_errors() -> None:
    with pytest.raises(QueryError) as no_fk:
        Sql("singer", schema=CONCERT).add_join("stadium")
    assert no_fk.value.code == "no_foreign_key"
    with pytest.raises(QueryError) as no_schema:
        Sql("a").add_join("b")
    assert no_schema.value.code == "no_foreign_key"
    with pytest.raises(QueryError) as twice:
        Sql("singer", schema=CONCERT).add_join("singer_in_concert").add_join("SINGER")
    assert twice.value.code == "table_already_joined"
    with pytest.raises(SchemaError):
        Sql("singer", schema=CONCERT).add_join("singer_in_concert", "Singer_ID", "nope")
    with pytest.raises(QueryError) as bad:
        Sql("a").add_join("b", "b.x", "b.y")
    assert bad.value.code == "bad_join"


def test_ambiguous_foreign_keys_list_the_choices() -> None:
    schema = Schema(
        (
            TableInfo(
                "flights",
                ["Src", "Dst"],
                foreign_keys=[("Src", "airports", "Code"), ("Dst", "airports", "Code")],
            ),
            TableInfo("airports", ["Code", "City"]),
        )
    )
    with pytest.raises(QueryError) as info:
        Sql("flights", schema=schema).add_join("airports")
    assert info.value.code == "ambiguous_join"
    assert "add_join(airports, flights.Src, airports.Code)" in info.value.suggestions
    q = Sql("flights", schema=schema).add_join("airports", "Dst", "Code")
    assert q.to_sql() == (
        'SELECT * FROM "flights" JOIN "airports" ON "flights"."Dst" = "airports"."Code"'
    )
    swapped = Sql("flights", schema=schema).add_join("airports", "airports.Code", "flights.Dst")
    assert swapped == q


# --------------------------------------------------------------------------- get_column helper


def test_value_counts_runs_under_the_current_conditions() -> None:
    con = _sqlite([("x", 1), ("y", 1), ("y", 1), ("z", 2), ("y", 2)])
    q = Sql("t").add_condition("b", "=", 1).set_answer("b", "MAX").add_order("a", limit=1)
    assert con.execute(q.to_sql_count_values("a")).fetchall() == [("y", 2), ("x", 1)]
    assert con.execute(Sql("t").to_sql_count_values("a", limit=1)).fetchall() == [("y", 3)]
    assert "TOP 20" in Sql("t").to_sql_count_values("a", "tsql")


# --------------------------------------------------------------------------- schema model


@pytest.mark.parametrize(
    ("raw", "category"),
    [
        ("INTEGER", "integer"),
        ("int(11)", "integer"),
        ("BIGINT UNSIGNED", "integer"),
        ("serial", "integer"),
        ("VARCHAR(255)", "text"),
        ("character varying", "text"),
        ("NVARCHAR(MAX)", "text"),
        ("text", "text"),
        ("REAL", "real"),
        ("double precision", "real"),
        ("FLOAT64", "real"),
        ("NUMERIC(10, 2)", "numeric"),
        ("decimal", "numeric"),
        ("number", "numeric"),
        ("DATE", "date"),
        ("DATETIME", "date"),
        ("timestamp with time zone", "date"),
        ("BOOLEAN", "boolean"),
        ("bit", "boolean"),
        ("BLOB", "other"),
        ("", "other"),
        ("INTERVAL", "other"),
        ("POINT", "other"),
        ("JSON", "other"),
        ("UUID", "other"),
    ],
)
def test_normalise_type(raw: str, category: str) -> None:
    assert normalise_type(raw) == category


def test_schema_model_from_simple_values() -> None:
    col = ColumnInfo("Age", "INT", sample_values=[1, 2])
    assert (col.type, col.raw_type, col.sample_values) == ("integer", "INT", (1, 2))
    assert ColumnInfo("x", "text", "VARCHAR(3)").raw_type == "VARCHAR(3)"
    table = TableInfo("t", ["a", ("b", "REAL"), col], ["a"], [ForeignKey("a", "u", "id")])
    assert table.column("B").type == "real"
    assert hash(table) == hash(TableInfo("t", ["a", ("b", "REAL"), col], ["a"], [("a", "u", "id")]))
    with pytest.raises(ValueError):
        TableInfo("t", ["a", "a"])
    with pytest.raises(ValueError):
        Schema((TableInfo("t"), TableInfo("t")))
    with pytest.raises(SchemaError):
        table.column("zz")
    schema = Schema.from_mapping({"t": {"a": "TEXT"}, "u": ["id"]})
    assert schema.table("t").column("a").type == "text"
    assert len(schema) == 2 and [t.name for t in schema] == ["t", "u"]
    assert CONCERT.foreign_keys_between("stadium", "concert") == [
        ("stadium", "Stadium_ID", "concert", "Stadium_ID")
    ]


# --------------------------------------------------------------------------- apply_call


def _apply(query: Sql, text: str) -> Sql:
    return apply_call(query, Call.parse(text, "sql"))


def test_apply_call_maps_every_sql_tool() -> None:
    q = Sql("players")
    for text in [
        "add_condition(Player, =, Terrence Ross)",
        'add_condition("School/Club Team", contains, Duke)',
        "add_condition(No., >, 5)",
        "add_condition(Height, <=, 6.5)",
        "set_answer(Nationality, None)",
        "set_answer(No., MAX)",
        "add_group_by(Nationality)",
        "add_having(*, COUNT, >, 1)",
        "add_order(No., desc, 3)",
        "set_distinct()",
        "get_column(Player)",
        "execute()",
    ]:
        q = _apply(q, text)
    assert q.to_sql() == (
        'SELECT DISTINCT "Nationality", MAX("No.") FROM "players" WHERE "Player" = \'Terrence Ross\' '
        'AND "School/Club Team" LIKE \'%Duke%\' ESCAPE \'\\\' AND "No." > 5 AND "Height" <= 6.5 '
        'GROUP BY "Nationality" HAVING COUNT(*) > 1 ORDER BY "No." DESC LIMIT 3'
    )


def test_apply_call_values() -> None:
    def value(text: str) -> object:
        return _apply(Sql("t"), f"add_condition(a, =, {text})").conditions[0].value

    assert value("2005") == 2005
    assert value("-1.5") == -1.5
    assert value("007") == "007"
    assert value('"2005"') == "2005"
    assert value("Terrence Ross") == "Terrence Ross"
    assert value("NULL") is None
    like = _apply(Sql("t"), "add_condition(a, like, 1.50)").conditions[0].value
    assert like == "1.50"


def test_apply_call_env_calls_return_the_same_query() -> None:
    q = Sql("singer", schema=CONCERT)
    assert _apply(q, "get_column(Country)") is q
    assert _apply(q, "execute()") is q
    with pytest.raises(SchemaError):
        _apply(q, "get_column(Contry)")


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("add_condition(a, ~, 1)", 1),
        ("set_answer(a, MEDIAN)", 1),
        ("add_having(a, None, >, 1)", 1),
        ("add_having(a, COUNT, LIKE, 1)", 2),
        ("add_order(a, up)", 1),
        ("add_order(a, desc, many)", 2),
        ("add_order(a, desc, -1)", 2),
        ("add_join(<http://x>)", 0),
    ],
)
def test_apply_call_term_errors_carry_the_argument_index(text: str, index: int) -> None:
    with pytest.raises(TermError) as info:
        _apply(Sql("t"), text)
    assert info.value.index == index


def test_apply_call_rejects_calls_outside_the_sql_tools() -> None:
    with pytest.raises(UnknownFunctionError):
        apply_call(Sql("t"), Call.of("add_fact", "a", "b", "c"))
    with pytest.raises(ArityError):
        apply_call(Sql("t"), Call.of("set_answer"))


def test_program_to_sql() -> None:
    text = "add_join(singer_in_concert)\nadd_condition(Age, >, 30)\nset_answer(*, COUNT)"
    program = Program.parse(text, "sql")
    assert program_to_sql(program, "postgres", table="singer", schema=CONCERT) == (
        'SELECT COUNT(*) FROM "singer" JOIN "singer_in_concert" ON '
        '"singer"."Singer_ID" = "singer_in_concert"."Singer_ID" WHERE "singer"."Age" > 30'
    )
    assert program_to_query(text, "singer", CONCERT) == program_to_query(program, "singer", CONCERT)
    inferred = program_to_sql(
        "add_condition(Year, =, 2014)\nset_answer(concert_Name)", schema=CONCERT
    )
    assert inferred == 'SELECT "concert_Name" FROM "concert" WHERE "Year" = 2014'
    with pytest.raises(QueryError):
        program_to_query(Program.parse("execute()", "sparql"), "t")


# --------------------------------------------------------------------------- Spider gold


def _spider_schema(entry: dict) -> Schema:
    names = entry["table_names_original"]
    cols = entry["column_names_original"]
    tables = []
    for ti, name in enumerate(names):
        columns = [
            ColumnInfo(c, entry["column_types"][i]) for i, (t, c) in enumerate(cols) if t == ti
        ]
        fks = [
            ForeignKey(cols[a][1], names[cols[b][0]], cols[b][1])
            for a, b in entry["foreign_keys"]
            if cols[a][0] == ti
        ]
        tables.append(TableInfo(name, columns, foreign_keys=fks))
    return Schema(tuple(tables))


def test_spider_gold_queries_give_the_gold_results(pyql_data) -> None:  # noqa: ANN001
    spider = pyql_data / "spider"
    entries = {e["db_id"]: e for e in json.loads((spider / "tables.json").read_text())}
    cases = {
        "concert_singer": [
            (
                "SELECT song_name FROM singer WHERE age > (SELECT avg(age) FROM singer)",
                lambda s: (
                    Sql("singer", schema=s)
                    .set_answer("song_name")
                    .add_condition("age", ">", Sql("singer", schema=s).set_answer("age", "avg"))
                ),
            ),
            (
                "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON "
                "T1.stadium_id = T2.stadium_id GROUP BY T1.stadium_id",
                lambda s: (
                    Sql("concert", schema=s)
                    .add_join("stadium")
                    .set_answer("stadium.name")
                    .set_answer("*", "count")
                    .add_group_by("concert.stadium_id")
                ),
            ),
            (
                "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)",
                lambda s: (
                    Sql("stadium", schema=s)
                    .set_answer("name")
                    .add_condition(
                        "stadium_id", "not in", Sql("concert", schema=s).set_answer("stadium_id")
                    )
                ),
            ),
            (
                "SELECT name, country FROM singer WHERE song_name LIKE '%Hey%'",
                lambda s: (
                    Sql("singer", schema=s)
                    .set_answer("name")
                    .set_answer("country")
                    .add_condition("song_name", "contains", "Hey")
                ),
            ),
        ],
        "dog_kennels": [
            (
                "SELECT state FROM Owners INTERSECT SELECT state FROM Professionals",
                lambda s: (
                    Sql(schema=s)
                    .set_answer("Owners.state")
                    .intersect(Sql(schema=s).set_answer("Professionals.state"))
                ),
            ),
        ],
        "network_1": [
            (
                "SELECT grade FROM Highschooler GROUP BY grade ORDER BY count(*) DESC LIMIT 1",
                lambda s: (
                    Sql("Highschooler", schema=s)
                    .set_answer("grade")
                    .add_group_by("grade")
                    .add_order("count(*)", "desc", 1)
                ),
            ),
        ],
    }
    checked = 0
    for db, pairs in cases.items():
        path = spider / "database" / db / f"{db}.sqlite"
        if not path.exists() or db not in entries:
            continue
        schema = _spider_schema(entries[db])
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        for gold, build in pairs:
            ours = build(schema).to_sql()
            assert sorted(con.execute(ours).fetchall()) == sorted(con.execute(gold).fetchall()), (
                ours
            )
            checked += 1
    if not checked:
        pytest.skip("Spider databases not found")


# --------------------------------------------------------------------------- properties


def _value_of(node: exp.Expression) -> object:
    if isinstance(node, exp.Neg):  # copy_negate: unary minus would round to 28 digits
        inner = _value_of(node.this)
        return inner.copy_negate() if isinstance(inner, Decimal) else -inner  # type: ignore[operator]
    assert isinstance(node, exp.Literal), node
    return node.this if node.is_string else Decimal(node.this)


def _as_decimal(value: object) -> Decimal:
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)  # type: ignore[arg-type]


names = st.text(min_size=1, max_size=12)
values = st.one_of(
    st.none(),
    st.text(max_size=15),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=False, places=3),
    st.booleans(),
)
ops = st.sampled_from(
    [
        "=",
        "!=",
        "<>",
        ">",
        "<",
        ">=",
        "<=",
        "LIKE",
        "not like",
        "contains",
        "NOT CONTAINS",
        "in",
        "~",
    ]
)
aggs = st.sampled_from([None, "None", "max", "MIN", "count", "SUM", "avg", "count distinct", "x"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=names,
    column=names,
    answer=names,
    op=ops,
    value=values,
    agg=aggs,
    dialect=st.sampled_from(SQL_DIALECTS),
)
def test_random_inputs_give_typed_errors_or_faithful_sql(
    table: str, column: str, answer: str, op: str, value: object, agg: str | None, dialect: str
) -> None:
    if dialect == "bigquery":  # BigQuery reads dots in quoted names as paths (no dotted columns)
        table, column, answer = (n.replace(".", "_") for n in (table, column, answer))
    operand = [value] if op == "in" else value
    try:
        query = Sql(table).add_condition(column, op, operand).set_answer(answer, agg)
        sql = query.to_sql(dialect)
    except PyqlError:
        return
    statements = sqlglot.parse(sql, read=dialect)
    assert len(statements) == 1
    select = statements[0]
    assert isinstance(select, exp.Select)
    assert select.find(exp.Table).name == table  # type: ignore[union-attr]
    where = select.args["where"].this
    if isinstance(where, exp.Not):
        where = where.this
    if isinstance(where, exp.Escape):
        assert _value_of(where.expression) == "\\"
        where = where.this
    subject = where.this
    if isinstance(subject, exp.Lower):  # case-insensitive LIKE where the dialect has no ILIKE
        subject = subject.this
        where = where.copy()
        where.set("expression", where.expression.this)
    assert isinstance(subject, exp.Column) and subject.name == query.resolve_column(column).name
    cond = query.conditions[0]
    if cond.op in ("CONTAINS", "NOT CONTAINS"):
        pattern = _value_of(where.expression)
        assert isinstance(pattern, str) and pattern[0] == pattern[-1] == "%"
        if isinstance(value, str):
            assert pattern == f"%{escape_like(value, brackets=dialect == 'tsql')}%"
        else:
            assert Decimal(pattern[1:-1]) == _as_decimal(value)
    elif cond.op == "IN":
        (lit,) = where.expressions
        got = _value_of(lit)
        assert got == value if isinstance(value, str) else got == _as_decimal(value)
    elif value is None:
        assert isinstance(where, exp.Is)
    else:
        got = _value_of(where.expression)
        if isinstance(value, str):
            assert got == value
        elif cond.op in ("LIKE", "NOT LIKE"):
            assert Decimal(got) == _as_decimal(value)  # type: ignore[arg-type]
        else:
            assert got == _as_decimal(value)
    projection = select.expressions[0]
    if not isinstance(projection, exp.Star):
        inner = projection if isinstance(projection, exp.Column) else projection.this
        if isinstance(inner, exp.Distinct):
            inner = inner.expressions[0]
        assert isinstance(inner, (exp.Column, exp.Star))
        if isinstance(inner, exp.Column):
            assert inner.name == query.resolve_column(answer).name


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=30), op=ops)
def test_random_program_text_gives_typed_errors_or_sql(text: str, op: str) -> None:
    try:
        sql = program_to_sql(f"add_condition({text}, {op}, {text})\nset_answer({text})", table="t")
    except PyqlError:
        return
    assert len(sqlglot.parse(sql, read="sqlite")) == 1


# --------------------------------------------------------------------------- doctests


@pytest.mark.parametrize(
    "module", [pyql.sql, pyql.sql.query, pyql.sql.schema, pyql.sql.apply], ids=lambda m: m.__name__
)
def test_doctests(module) -> None:  # noqa: ANN001
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


def test_question_mark_text_is_not_a_variable_in_sql() -> None:
    """Only KB term slots have variables; in SQL, a column ``?x`` is text (a header) and a quoted
    value ``"?y"`` is text; an unquoted value ``?y`` names a stored sub-query (none here)."""
    from pyql.program import Program
    from pyql.sql.apply import program_to_sql

    sql = program_to_sql(Program.parse('add_condition(?x, =, "?y")\nset_answer(b)', tools="sql"),
                         table="t")
    assert sql == 'SELECT "b" FROM "t" WHERE "?x" = \'?y\''
    with pytest.raises(QueryError) as info:
        program_to_sql(Program.parse("add_condition(?x, =, ?y)", tools="sql"), table="t")
    assert info.value.code == "unknown_subquery"
