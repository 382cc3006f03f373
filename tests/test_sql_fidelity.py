"""Gold SQL -> PyQL-SQL programs (pyql.sql.from_sql) and the fidelity runner
(pyql.datasets.sql_fidelity) on seeded samples of WikiSQL and Spider dev.

The full dev sets run with ``pyql fidelity sql wikisql|spider`` (figures in
the module docs of pyql.datasets.sql_fidelity); here, samples keep the suite fast.
"""

from __future__ import annotations

import doctest
import json
from decimal import Decimal
from pathlib import Path

import pytest

import pyql.datasets.sql_fidelity as fidelity
import pyql.sql.from_sql as from_sql
from pyql.datasets.sql_fidelity import normalise_cell, same_rows, spider_fidelity, wikisql_fidelity
from pyql.program import Program
from pyql.sql import Sql
from pyql.sql.from_sql import CONSTRUCTS, Unsupported, to_program, to_query
from pyql.sql.schema import Schema, TableInfo

SCHEMA = Schema(
    (
        TableInfo(
            "singer",
            [("Singer_ID", "INT"), ("Name", "TEXT"), ("Country", "TEXT"), ("Age", "INT")],
            primary_key=["Singer_ID"],
        ),
        TableInfo("concert", [("concert_ID", "INT"), ("Year", "TEXT"), ("Stadium_ID", "INT")]),
        TableInfo(
            "singer_in_concert",
            [("concert_ID", "INT"), ("Singer_ID", "INT")],
            foreign_keys=[("Singer_ID", "singer", "Singer_ID"),
                          ("concert_ID", "concert", "concert_ID")],
        ),
        TableInfo("stadium", [("Stadium_ID", "INT"), ("Name", "TEXT"), ("Capacity", "INT")]),
    )
)

PROGRAMS = [
    ("SELECT count(*) FROM singer", "add_join(singer)\nset_answer(*, COUNT)\nexecute()"),
    (
        'SELECT name ,  country FROM singer WHERE country = "France" AND age > 30',
        "add_join(singer)\nadd_condition(Country, =, \"France\")\nadd_condition(Age, >, 30)\n"
        "set_answer(Name)\nset_answer(Country)\nexecute()",
    ),
    (
        "SELECT DISTINCT country FROM singer WHERE age BETWEEN 20 AND 30",
        "add_join(singer)\nadd_condition(Age, >=, 20)\nadd_condition(Age, <=, 30)\n"
        "set_answer(Country)\nset_distinct()\nexecute()",
    ),
    (
        "SELECT T2.name FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.singer_id = "
        "T2.singer_id GROUP BY T2.name HAVING count(*) >= 2 ORDER BY count(*) DESC LIMIT 1",
        "add_join(singer_in_concert)\n"
        "add_join(singer, singer_in_concert.Singer_ID, singer.Singer_ID)\n"
        "add_group_by(singer.Name)\nset_answer(singer.Name)\n"
        "add_having(*, COUNT, >=, 2)\nadd_order(COUNT(*), desc, 1)\nexecute()",
    ),
    (
        "SELECT T3.name FROM concert AS T1 JOIN singer_in_concert AS T2 JOIN singer AS T3 "
        "ON T1.concert_id = T2.concert_id AND T2.singer_id = T3.singer_id WHERE T1.year = 2014",
        "add_join(concert)\nadd_join(singer_in_concert, concert.concert_ID, "
        "singer_in_concert.concert_ID)\nadd_join(singer, singer_in_concert.Singer_ID, "
        "singer.Singer_ID)\nadd_condition(concert.Year, =, 2014)\nset_answer(singer.Name)\n"
        "execute()",
    ),
    (
        "SELECT avg(age), max(age), count(DISTINCT country) FROM singer WHERE name LIKE '%a%'",
        "add_join(singer)\nadd_condition(Name, LIKE, \"%a%\")\nset_answer(Age, AVG)\n"
        "set_answer(Age, MAX)\nset_answer(Country, COUNT DISTINCT)\nexecute()",
    ),
    (
        "SELECT name FROM stadium WHERE capacity IS NOT NULL ORDER BY capacity, name DESC",
        "add_join(stadium)\nadd_condition(Capacity, !=, NULL)\nset_answer(Name)\n"
        "add_order(Capacity, asc)\nadd_order(Name, desc)\nexecute()",
    ),
    (
        "SELECT count(*) AS n, country FROM singer GROUP BY country ORDER BY n DESC",
        "add_join(singer)\nadd_group_by(Country)\nset_answer(*, COUNT)\nset_answer(Country)\n"
        "add_order(COUNT(*), desc)\nexecute()",
    ),
]


@pytest.mark.parametrize(("sql", "expected"), PROGRAMS)
def test_to_program(sql: str, expected: str) -> None:
    program = to_program(sql, SCHEMA)
    assert isinstance(program, Program), program
    assert str(program) == expected
    assert Program.parse(str(program), "sql") == program  # prints back, parses back


UNSUPPORTED = [
    ("SELECT name FROM singer UNION ALL SELECT name FROM stadium", ("set_operation",)),
    ("SELECT name FROM singer WHERE country IN ('a|b', 'c')", ("in_list",)),
    ("SELECT name FROM singer WHERE country = 'a' OR age = 3", ("or",)),
    ("SELECT name FROM singer WHERE country = 'a' OR age > 3", ("or",)),
    ("SELECT name FROM singer LIMIT 3", ("limit_without_order",)),
    ("SELECT T1.name FROM singer AS T1 JOIN singer AS T2 ON T1.age = T2.age", ("self_join",)),
    ("SELECT name FROM singer AS T1 JOIN stadium AS T2", ("cross_join",)),
    ("SELECT name FROM singer LEFT JOIN concert ON 1 = 1", ("outer_join",)),
    ("SELECT count(*) FROM (SELECT name FROM singer)", ("subquery_from",)),
    ("SELECT age + 1 FROM singer", ("expression",)),
    ("SELECT name, name FROM singer", ("duplicate_answer",)),
    ("SELECT name FROM singers", ("unknown_table",)),
    ("SELECT nam FROM singer", ("unknown_column",)),
    ("SELECT name FROM singer ORDER BY age LIMIT 1 OFFSET 2", ("offset",)),
    ("DELETE FROM singer", ("not_select",)),
    ("SELECT FROM WHERE", ("unparseable",)),
    ("SELECT 1; SELECT 2", ("unparseable",)),
    ("SELECT name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = "
     "T2.singer_id AND T1.age = T2.concert_id", ("join_multi_key",)),
    ("SELECT name FROM singer AS T1 WHERE age > (SELECT avg(age) FROM singer AS T2 "
     "WHERE T2.country = T1.country)", ("correlated_subquery",)),
    ("SELECT T9.name FROM singer AS T1", ("unknown_table",)),
]


@pytest.mark.parametrize(("sql", "codes"), UNSUPPORTED)
def test_unsupported_constructs_are_named(sql: str, codes: tuple[str, ...]) -> None:
    result = to_program(sql, SCHEMA)
    assert isinstance(result, Unsupported), result
    assert not result
    assert result.constructs == codes
    assert all(code in CONSTRUCTS for code in result.constructs)
    assert result.detail


TREES = [
    ("SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM singer_in_concert)",
     'SELECT "Name" FROM "singer" WHERE NOT "Singer_ID" IN (SELECT "Singer_ID" FROM '
     '"singer_in_concert")'),
    ("SELECT name FROM singer UNION SELECT name FROM stadium",
     'SELECT "Name" FROM "singer" UNION SELECT "Name" FROM "stadium"'),
    ("SELECT country FROM singer WHERE age > 40 INTERSECT SELECT country FROM singer WHERE "
     "age < 30",
     'SELECT "Country" FROM "singer" WHERE "Age" > 40 INTERSECT SELECT "Country" FROM "singer" '
     'WHERE "Age" < 30'),
    ("SELECT name FROM singer WHERE country = 'a' OR country = 'b'",
     'SELECT "Name" FROM "singer" WHERE "Country" IN (\'a\', \'b\')'),
    ("SELECT name FROM singer LIMIT 3", 'SELECT "Name" FROM "singer" LIMIT 3'),
]


@pytest.mark.parametrize(("sql", "expected"), TREES)
def test_to_query_holds_what_the_tool_set_cannot_say(sql: str, expected: str) -> None:
    query = to_query(sql, SCHEMA)
    assert isinstance(query, Sql), query
    assert query.to_sql() == expected


def test_double_quoted_text_is_a_string_unless_it_names_a_column() -> None:
    program = to_program('SELECT name FROM singer WHERE country = "Name"', SCHEMA)
    assert isinstance(program, Unsupported) and program.constructs == ("column_comparison",)
    program = to_program('SELECT name FROM singer WHERE country = "Netherlands"', SCHEMA)
    assert 'add_condition(Country, =, "Netherlands")' in str(program)


def test_module_doctests() -> None:
    assert doctest.testmod(from_sql).failed == 0
    assert doctest.testmod(fidelity).failed == 0


# -- comparison --------------------------------------------------------------------------------------


def test_normalise_cell() -> None:
    assert normalise_cell(3.0) == 3 and isinstance(normalise_cell(3.0), int)
    assert normalise_cell(Decimal("1.50")) == 1.5
    assert normalise_cell(2 / 3) == normalise_cell(0.6666667)
    assert normalise_cell("Abc", casefold=True) == "abc"
    assert normalise_cell(True) == 1


def test_same_rows() -> None:
    assert same_rows([(1, "a"), (2, "b")], [(2.0, "b"), (1, "a")], ordered=False)
    assert not same_rows([(1, "a"), (2, "b")], [(2.0, "b"), (1, "a")], ordered=True)
    assert not same_rows([(1,), (1,)], [(1,)], ordered=False)  # multisets
    assert not same_rows([("1",)], [(1,)], ordered=False)  # text is not a number
    assert same_rows([("A",)], [("a",)], ordered=True, casefold=True)


# -- the datasets (seeded samples) ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def wikisql_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wikisql-db")


def test_wikisql_sample_agrees_with_wikisql_semantics(pyql_data: Path, wikisql_cache: Path) -> None:
    report = wikisql_fidelity(pyql_data, sample=300, seed=0, cache_dir=wikisql_cache)
    assert report.total == 300
    assert report.coverage == 1.0
    assert report.residue() == []
    assert report.agreement == 1.0
    # gold queries that match no row agree with a program that returns nothing: said apart
    empty = sum(1 for r in report.items if fidelity.empty_result(r.want))
    assert 0 < empty < 300 and report.gold_empty == report.empty_agree == empty
    assert report.to_dict()["gold_empty"] == empty and report.nonempty_agreement == 1.0
    assert f"gold result empty: {empty} of the 300 expressible" in report.render()


def test_spider_sample_agrees_with_the_gold_sql(pyql_data: Path) -> None:
    report = spider_fidelity(pyql_data, sample=150, seed=0)
    assert report.total == 150
    assert report.coverage >= 0.95  # 97.8% on the whole dev set
    assert report.residue() == []
    assert report.agreement == 1.0
    assert report.tree.get("agree", 0) >= 0.95 * report.total  # 98.0% on the whole dev set
    assert set(report.tree) <= {"agree", "unsupported"}
    assert set(report.constructs) <= set(CONSTRUCTS)
    text = report.render()
    assert "expressible as programs" in text and "unsupported constructs" in text


def test_command_line(pyql_data: Path) -> None:
    from typer.testing import CliRunner

    from pyql.cli import app

    def run(data: Path):  # noqa: ANN202 - typer's Result
        return CliRunner().invoke(app, ["fidelity", "sql", "spider", "--data-dir", str(data),
                                        "--sample", "5", "--json"])

    result = run(pyql_data)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["dataset"] == "spider" and data["total"] == 5
    assert data["disagree"] == 0 and data["failed"] == 0
    assert run(pyql_data / "nowhere").exit_code == 1
