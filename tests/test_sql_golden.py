"""Golden tests: builder expression -> expected SQL text, per sqlglot dialect (table-driven).

Each line of :data:`GOLDEN` is ``case | dialect | SQL``; :data:`BUILDERS` builds the query of each
case. Besides text equality, every golden SQL must re-parse in its dialect to the same tree.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlglot

from pyql.sql import ColumnRef, Sql, program_to_sql
from tests.support.sql import CONCERT, SQL_DIALECTS


def _flights(airport: str) -> Sql:
    return (
        Sql("AIRLINES")
        .add_join("FLIGHTS", "uid", "Airline")
        .add_condition("FLIGHTS.SourceAirport", "=", airport)
        .set_answer("AIRLINES.Airline")
    )


BUILDERS: dict[str, Callable[[], Sql | str]] = {
    # WikiSQL: headers with spaces, '/', '.', quotes; the paper's SQL tool set
    "wikisql_header": lambda: (
        Sql("table_1_10015132_11")
        .add_condition("School/Club Team", "=", "Duke")
        .add_condition('Player\'s "nick" name', "!=", "O'Neal")
        .set_answer("No.")
    ),
    "count_limit": lambda: Sql("singer").add_condition("age", ">", 20).set_answer("*", "COUNT"),
    "top_n": lambda: (
        Sql("singer").set_answer("Song Name").set_answer("age").add_order("age", "desc", 3)
    ),
    "group_having_order": lambda: (
        Sql("singer")
        .set_answer("country")
        .set_answer("age", "AVG")
        .add_group_by("country")
        .add_having("*", "COUNT", ">=", 2)
        .add_order("COUNT(*)", "desc", 1)
    ),
    "contains_distinct": lambda: (
        Sql("songs")
        .set_answer("Lyrics theme/style")
        .set_distinct()
        .add_condition("title", "contains", "100%_[x]\\")
    ),
    "subquery_in": lambda: (
        Sql("singer")
        .set_answer("name")
        .add_condition("age", ">", Sql("singer").set_answer("age", "avg"))
        .add_condition("Singer_ID", "not in", Sql("singer_in_concert").set_answer("Singer_ID"))
    ),
    "null_and_numbers": lambda: (
        Sql("t")
        .set_answer("x", "sum")
        .add_condition("y", "=", None)
        .add_condition("z", "<=", -2.5)
        .add_condition("w", "in", ["a", 3])
    ),
    # Spider shapes
    "fk_join_chain": lambda: (
        Sql("singer", schema=CONCERT)
        .add_join("singer_in_concert")
        .add_join("concert")
        .add_condition("Year", "=", 2014)
        .set_answer("singer.Name")
    ),
    "fk_join_reverse_group": lambda: (
        Sql("stadium", schema=CONCERT)
        .add_join("concert")
        .set_answer("stadium.Name")
        .set_answer("*", "COUNT")
        .add_group_by("stadium.Stadium_ID")
        .add_order("COUNT(*)", "desc", 1)
    ),
    "union": lambda: (
        Sql("Owners").set_answer("state").union(Sql("Professionals").set_answer("state"))
    ),
    "union_all_limit": lambda: (
        Sql("a")
        .set_answer("x")
        .add_order("x", "desc", 1)
        .union(Sql("b").set_answer("y").add_order("y"), all=True)
    ),
    "except_join": lambda: _flights("CVO").except_(_flights("APG")),
    "count_distinct_like": lambda: (
        Sql("Degree_Programs")
        .set_answer("degree_summary_name", "count distinct")
        .add_condition("name", "not like", "B%")
    ),
    "column_compare": lambda: (
        Sql("Students")
        .set_answer("first_name")
        .add_condition("current_address_id", "!=", ColumnRef("permanent_address_id"))
    ),
    "scalar_subquery_order": lambda: (
        Sql("CARS_DATA")
        .set_answer("*", "COUNT")
        .add_condition(
            "Accelerate",
            ">",
            Sql("CARS_DATA").set_answer("Accelerate").add_order("Horsepower", "desc", 1),
        )
    ),
    "having_avg": lambda: (
        Sql("country")
        .set_answer("Population", "SUM")
        .set_answer("LifeExpectancy", "AVG")
        .set_answer("Continent")
        .add_group_by("Continent")
        .add_having("LifeExpectancy", "avg", "<", 72)
    ),
    "value_counts": lambda: (
        Sql("t")
        .add_condition("Position", "=", "Guard")
        .set_answer("Player")
        .value_counts("School/Club Team", limit=10)
    ),
    "program": lambda: program_to_sql(
        'add_condition("Player\'s team", contains, "St. Mary\'s")\n'
        "add_condition(Year, >=, 1999)\n"
        "set_answer(Points, MAX)",
        table="2007 NBA draft",
    ),
    "in_list_between": lambda: (
        Sql("stadium")
        .set_answer("Location")
        .set_answer("Name")
        .add_condition("Capacity", ">=", 5000)
        .add_condition("Capacity", "<=", 10000)
        .add_condition("Name", "in", ("A", "B"))
    ),
}

GOLDEN = r"""
wikisql_header          | sqlite   | SELECT "No." FROM "table_1_10015132_11" WHERE "School/Club Team" = 'Duke' AND "Player's ""nick"" name" <> 'O''Neal'
wikisql_header          | postgres | SELECT "No." FROM "table_1_10015132_11" WHERE "School/Club Team" = 'Duke' AND "Player's ""nick"" name" <> 'O''Neal'
wikisql_header          | duckdb   | SELECT "No." FROM "table_1_10015132_11" WHERE "School/Club Team" = 'Duke' AND "Player's ""nick"" name" <> 'O''Neal'
wikisql_header          | mysql    | SELECT `No.` FROM `table_1_10015132_11` WHERE `School/Club Team` = 'Duke' AND `Player's "nick" name` <> 'O''Neal'
wikisql_header          | tsql     | SELECT [No.] FROM [table_1_10015132_11] WHERE [School/Club Team] = 'Duke' AND [Player's "nick" name] <> 'O''Neal'
wikisql_header          | bigquery | SELECT `No.` FROM `table_1_10015132_11` WHERE `School/Club Team` = 'Duke' AND `Player's "nick" name` <> 'O\'Neal'
wikisql_header          | snowflake| SELECT "No." FROM "table_1_10015132_11" WHERE "School/Club Team" = 'Duke' AND "Player's ""nick"" name" <> 'O\'Neal'
wikisql_header          | trino    | SELECT "No." FROM "table_1_10015132_11" WHERE "School/Club Team" = 'Duke' AND "Player's ""nick"" name" <> 'O''Neal'
wikisql_header          | spark    | SELECT `No.` FROM `table_1_10015132_11` WHERE `School/Club Team` = 'Duke' AND `Player's "nick" name` <> 'O\'Neal'

count_limit             | sqlite   | SELECT COUNT(*) FROM "singer" WHERE "age" > 20
count_limit             | postgres | SELECT COUNT(*) FROM "singer" WHERE "age" > 20
count_limit             | duckdb   | SELECT COUNT(*) FROM "singer" WHERE "age" > 20
count_limit             | mysql    | SELECT COUNT(*) FROM `singer` WHERE `age` > 20
count_limit             | tsql     | SELECT COUNT(*) FROM [singer] WHERE [age] > 20
count_limit             | bigquery | SELECT COUNT(*) FROM `singer` WHERE `age` > 20
count_limit             | snowflake| SELECT COUNT(*) FROM "singer" WHERE "age" > 20
count_limit             | trino    | SELECT COUNT(*) FROM "singer" WHERE "age" > 20
count_limit             | spark    | SELECT COUNT(*) FROM `singer` WHERE `age` > 20

top_n                   | sqlite   | SELECT "Song Name", "age" FROM "singer" ORDER BY "age" DESC LIMIT 3
top_n                   | postgres | SELECT "Song Name", "age" FROM "singer" ORDER BY "age" DESC NULLS LAST LIMIT 3
top_n                   | duckdb   | SELECT "Song Name", "age" FROM "singer" ORDER BY "age" DESC LIMIT 3
top_n                   | mysql    | SELECT `Song Name`, `age` FROM `singer` ORDER BY `age` DESC LIMIT 3
top_n                   | tsql     | SELECT TOP 3 [Song Name], [age] FROM [singer] ORDER BY [age] DESC
top_n                   | bigquery | SELECT `Song Name`, `age` FROM `singer` ORDER BY `age` DESC LIMIT 3
top_n                   | snowflake| SELECT "Song Name", "age" FROM "singer" ORDER BY "age" DESC NULLS LAST LIMIT 3
top_n                   | trino    | SELECT "Song Name", "age" FROM "singer" ORDER BY "age" DESC LIMIT 3
top_n                   | spark    | SELECT `Song Name`, `age` FROM `singer` ORDER BY `age` DESC LIMIT 3

group_having_order      | sqlite   | SELECT "country", AVG("age") FROM "singer" GROUP BY "country" HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC LIMIT 1
group_having_order      | postgres | SELECT "country", AVG("age") FROM "singer" GROUP BY "country" HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC NULLS LAST LIMIT 1
group_having_order      | duckdb   | SELECT "country", AVG("age") FROM "singer" GROUP BY "country" HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC LIMIT 1
group_having_order      | mysql    | SELECT `country`, AVG(`age`) FROM `singer` GROUP BY `country` HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC LIMIT 1
group_having_order      | tsql     | SELECT TOP 1 [country], AVG([age]) FROM [singer] GROUP BY [country] HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC
group_having_order      | bigquery | SELECT `country`, AVG(`age`) FROM `singer` GROUP BY `country` HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC LIMIT 1
group_having_order      | snowflake| SELECT "country", AVG("age") FROM "singer" GROUP BY "country" HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC NULLS LAST LIMIT 1
group_having_order      | trino    | SELECT "country", AVG("age") FROM "singer" GROUP BY "country" HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC LIMIT 1
group_having_order      | spark    | SELECT `country`, AVG(`age`) FROM `singer` GROUP BY `country` HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC LIMIT 1

contains_distinct       | sqlite   | SELECT DISTINCT "Lyrics theme/style" FROM "songs" WHERE "title" LIKE '%100\%\_[x]\\%' ESCAPE '\'
contains_distinct       | postgres | SELECT DISTINCT "Lyrics theme/style" FROM "songs" WHERE "title" ILIKE '%100\%\_[x]\\%' ESCAPE '\'
contains_distinct       | duckdb   | SELECT DISTINCT "Lyrics theme/style" FROM "songs" WHERE "title" ILIKE '%100\%\_[x]\\%' ESCAPE '\'
contains_distinct       | mysql    | SELECT DISTINCT `Lyrics theme/style` FROM `songs` WHERE `title` LIKE '%100\\%\\_[x]\\\\%' ESCAPE '\\'
contains_distinct       | tsql     | SELECT DISTINCT [Lyrics theme/style] FROM [songs] WHERE [title] LIKE '%100\%\_\[x]\\%' ESCAPE '\'
contains_distinct       | bigquery | SELECT DISTINCT `Lyrics theme/style` FROM `songs` WHERE LOWER(`title`) LIKE LOWER('%100\\%\\_[x]\\\\%')
contains_distinct       | snowflake| SELECT DISTINCT "Lyrics theme/style" FROM "songs" WHERE "title" ILIKE '%100\\%\\_[x]\\\\%' ESCAPE '\\'
contains_distinct       | trino    | SELECT DISTINCT "Lyrics theme/style" FROM "songs" WHERE LOWER("title") LIKE LOWER('%100\%\_[x]\\%') ESCAPE '\'
contains_distinct       | spark    | SELECT DISTINCT `Lyrics theme/style` FROM `songs` WHERE LOWER(`title`) LIKE LOWER('%100\\%\\_[x]\\\\%') ESCAPE '\\'

subquery_in             | sqlite   | SELECT "name" FROM "singer" WHERE "age" > (SELECT AVG("age") FROM "singer") AND NOT "Singer_ID" IN (SELECT "Singer_ID" FROM "singer_in_concert")
subquery_in             | postgres | SELECT "name" FROM "singer" WHERE "age" > (SELECT AVG("age") FROM "singer") AND NOT "Singer_ID" IN (SELECT "Singer_ID" FROM "singer_in_concert")
subquery_in             | duckdb   | SELECT "name" FROM "singer" WHERE "age" > (SELECT AVG("age") FROM "singer") AND NOT "Singer_ID" IN (SELECT "Singer_ID" FROM "singer_in_concert")
subquery_in             | mysql    | SELECT `name` FROM `singer` WHERE `age` > (SELECT AVG(`age`) FROM `singer`) AND NOT `Singer_ID` IN (SELECT `Singer_ID` FROM `singer_in_concert`)
subquery_in             | tsql     | SELECT [name] FROM [singer] WHERE [age] > (SELECT AVG([age]) FROM [singer]) AND NOT [Singer_ID] IN (SELECT [Singer_ID] FROM [singer_in_concert])
subquery_in             | bigquery | SELECT `name` FROM `singer` WHERE `age` > (SELECT AVG(`age`) FROM `singer`) AND NOT `Singer_ID` IN (SELECT `Singer_ID` FROM `singer_in_concert`)
subquery_in             | snowflake| SELECT "name" FROM "singer" WHERE "age" > (SELECT AVG("age") FROM "singer") AND NOT "Singer_ID" IN (SELECT "Singer_ID" FROM "singer_in_concert")
subquery_in             | trino    | SELECT "name" FROM "singer" WHERE "age" > (SELECT AVG("age") FROM "singer") AND NOT "Singer_ID" IN (SELECT "Singer_ID" FROM "singer_in_concert")
subquery_in             | spark    | SELECT `name` FROM `singer` WHERE `age` > (SELECT AVG(`age`) FROM `singer`) AND NOT `Singer_ID` IN (SELECT `Singer_ID` FROM `singer_in_concert`)

null_and_numbers        | sqlite   | SELECT SUM("x") FROM "t" WHERE "y" IS NULL AND "z" <= -2.5 AND "w" IN ('a', 3)
null_and_numbers        | postgres | SELECT SUM("x") FROM "t" WHERE "y" IS NULL AND "z" <= -2.5 AND "w" IN ('a', 3)
null_and_numbers        | duckdb   | SELECT SUM("x") FROM "t" WHERE "y" IS NULL AND "z" <= -2.5 AND "w" IN ('a', 3)
null_and_numbers        | mysql    | SELECT SUM(`x`) FROM `t` WHERE `y` IS NULL AND `z` <= -2.5 AND `w` IN ('a', 3)
null_and_numbers        | tsql     | SELECT SUM([x]) FROM [t] WHERE [y] IS NULL AND [z] <= -2.5 AND [w] IN ('a', 3)
null_and_numbers        | bigquery | SELECT SUM(`x`) FROM `t` WHERE `y` IS NULL AND `z` <= -2.5 AND `w` IN ('a', 3)
null_and_numbers        | snowflake| SELECT SUM("x") FROM "t" WHERE "y" IS NULL AND "z" <= -2.5 AND "w" IN ('a', 3)
null_and_numbers        | trino    | SELECT SUM("x") FROM "t" WHERE "y" IS NULL AND "z" <= -2.5 AND "w" IN ('a', 3)
null_and_numbers        | spark    | SELECT SUM(`x`) FROM `t` WHERE `y` IS NULL AND `z` <= -2.5 AND `w` IN ('a', 3)

fk_join_chain           | sqlite   | SELECT "singer"."Name" FROM "singer" JOIN "singer_in_concert" ON "singer"."Singer_ID" = "singer_in_concert"."Singer_ID" JOIN "concert" ON "singer_in_concert"."concert_ID" = "concert"."concert_ID" WHERE "concert"."Year" = 2014
fk_join_chain           | postgres | SELECT "singer"."Name" FROM "singer" JOIN "singer_in_concert" ON "singer"."Singer_ID" = "singer_in_concert"."Singer_ID" JOIN "concert" ON "singer_in_concert"."concert_ID" = "concert"."concert_ID" WHERE "concert"."Year" = 2014
fk_join_chain           | tsql     | SELECT [singer].[Name] FROM [singer] JOIN [singer_in_concert] ON [singer].[Singer_ID] = [singer_in_concert].[Singer_ID] JOIN [concert] ON [singer_in_concert].[concert_ID] = [concert].[concert_ID] WHERE [concert].[Year] = 2014

fk_join_reverse_group   | sqlite   | SELECT "stadium"."Name", COUNT(*) FROM "stadium" JOIN "concert" ON "stadium"."Stadium_ID" = "concert"."Stadium_ID" GROUP BY "stadium"."Stadium_ID" ORDER BY COUNT(*) DESC LIMIT 1
fk_join_reverse_group   | postgres | SELECT "stadium"."Name", COUNT(*) FROM "stadium" JOIN "concert" ON "stadium"."Stadium_ID" = "concert"."Stadium_ID" GROUP BY "stadium"."Stadium_ID" ORDER BY COUNT(*) DESC NULLS LAST LIMIT 1
fk_join_reverse_group   | tsql     | SELECT TOP 1 [stadium].[Name], COUNT(*) FROM [stadium] JOIN [concert] ON [stadium].[Stadium_ID] = [concert].[Stadium_ID] GROUP BY [stadium].[Stadium_ID] ORDER BY COUNT(*) DESC

union                   | sqlite   | SELECT "state" FROM "Owners" UNION SELECT "state" FROM "Professionals"
union                   | postgres | SELECT "state" FROM "Owners" UNION SELECT "state" FROM "Professionals"
union                   | tsql     | SELECT [state] FROM [Owners] UNION SELECT [state] FROM [Professionals]

union_all_limit         | sqlite   | SELECT * FROM (SELECT "x" FROM "a" ORDER BY "x" DESC LIMIT 1) AS "_q0" UNION ALL SELECT "y" FROM "b"
union_all_limit         | postgres | SELECT * FROM (SELECT "x" FROM "a" ORDER BY "x" DESC NULLS LAST LIMIT 1) AS "_q0" UNION ALL SELECT "y" FROM "b"
union_all_limit         | tsql     | SELECT * FROM (SELECT TOP 1 [x] AS [x] FROM [a] ORDER BY [x] DESC) AS [_q0] UNION ALL SELECT [y] FROM [b]

except_join             | sqlite   | SELECT "AIRLINES"."Airline" FROM "AIRLINES" JOIN "FLIGHTS" ON "AIRLINES"."uid" = "FLIGHTS"."Airline" WHERE "FLIGHTS"."SourceAirport" = 'CVO' EXCEPT SELECT "AIRLINES"."Airline" FROM "AIRLINES" JOIN "FLIGHTS" ON "AIRLINES"."uid" = "FLIGHTS"."Airline" WHERE "FLIGHTS"."SourceAirport" = 'APG'
except_join             | postgres | SELECT "AIRLINES"."Airline" FROM "AIRLINES" JOIN "FLIGHTS" ON "AIRLINES"."uid" = "FLIGHTS"."Airline" WHERE "FLIGHTS"."SourceAirport" = 'CVO' EXCEPT SELECT "AIRLINES"."Airline" FROM "AIRLINES" JOIN "FLIGHTS" ON "AIRLINES"."uid" = "FLIGHTS"."Airline" WHERE "FLIGHTS"."SourceAirport" = 'APG'
except_join             | tsql     | SELECT [AIRLINES].[Airline] FROM [AIRLINES] JOIN [FLIGHTS] ON [AIRLINES].[uid] = [FLIGHTS].[Airline] WHERE [FLIGHTS].[SourceAirport] = 'CVO' EXCEPT SELECT [AIRLINES].[Airline] FROM [AIRLINES] JOIN [FLIGHTS] ON [AIRLINES].[uid] = [FLIGHTS].[Airline] WHERE [FLIGHTS].[SourceAirport] = 'APG'

count_distinct_like     | sqlite   | SELECT COUNT(DISTINCT "degree_summary_name") FROM "Degree_Programs" WHERE NOT "name" LIKE 'B%'
count_distinct_like     | postgres | SELECT COUNT(DISTINCT "degree_summary_name") FROM "Degree_Programs" WHERE NOT "name" ILIKE 'B%'
count_distinct_like     | tsql     | SELECT COUNT(DISTINCT [degree_summary_name]) FROM [Degree_Programs] WHERE NOT [name] LIKE 'B%'

column_compare          | sqlite   | SELECT "first_name" FROM "Students" WHERE "current_address_id" <> "permanent_address_id"
column_compare          | postgres | SELECT "first_name" FROM "Students" WHERE "current_address_id" <> "permanent_address_id"
column_compare          | tsql     | SELECT [first_name] FROM [Students] WHERE [current_address_id] <> [permanent_address_id]

scalar_subquery_order   | sqlite   | SELECT COUNT(*) FROM "CARS_DATA" WHERE "Accelerate" > (SELECT "Accelerate" FROM "CARS_DATA" ORDER BY "Horsepower" DESC LIMIT 1)
scalar_subquery_order   | postgres | SELECT COUNT(*) FROM "CARS_DATA" WHERE "Accelerate" > (SELECT "Accelerate" FROM "CARS_DATA" ORDER BY "Horsepower" DESC NULLS LAST LIMIT 1)
scalar_subquery_order   | tsql     | SELECT COUNT(*) FROM [CARS_DATA] WHERE [Accelerate] > (SELECT TOP 1 [Accelerate] FROM [CARS_DATA] ORDER BY [Horsepower] DESC)

having_avg              | sqlite   | SELECT SUM("Population"), AVG("LifeExpectancy"), "Continent" FROM "country" GROUP BY "Continent" HAVING AVG("LifeExpectancy") < 72
having_avg              | postgres | SELECT SUM("Population"), AVG("LifeExpectancy"), "Continent" FROM "country" GROUP BY "Continent" HAVING AVG("LifeExpectancy") < 72
having_avg              | tsql     | SELECT SUM([Population]), AVG([LifeExpectancy]), [Continent] FROM [country] GROUP BY [Continent] HAVING AVG([LifeExpectancy]) < 72

value_counts            | sqlite   | SELECT "School/Club Team", COUNT(*) FROM "t" WHERE "Position" = 'Guard' GROUP BY "School/Club Team" ORDER BY COUNT(*) DESC, "School/Club Team" LIMIT 10
value_counts            | postgres | SELECT "School/Club Team", COUNT(*) FROM "t" WHERE "Position" = 'Guard' GROUP BY "School/Club Team" ORDER BY COUNT(*) DESC NULLS LAST, "School/Club Team" NULLS FIRST LIMIT 10
value_counts            | tsql     | SELECT TOP 10 [School/Club Team], COUNT(*) FROM [t] WHERE [Position] = 'Guard' GROUP BY [School/Club Team] ORDER BY COUNT(*) DESC, [School/Club Team]

program                 | sqlite   | SELECT MAX("Points") FROM "2007 NBA draft" WHERE "Player's team" LIKE '%St. Mary''s%' ESCAPE '\' AND "Year" >= 1999

in_list_between         | sqlite   | SELECT "Location", "Name" FROM "stadium" WHERE "Capacity" >= 5000 AND "Capacity" <= 10000 AND "Name" IN ('A', 'B')
in_list_between         | postgres | SELECT "Location", "Name" FROM "stadium" WHERE "Capacity" >= 5000 AND "Capacity" <= 10000 AND "Name" IN ('A', 'B')
in_list_between         | tsql     | SELECT [Location], [Name] FROM [stadium] WHERE [Capacity] >= 5000 AND [Capacity] <= 10000 AND [Name] IN ('A', 'B')
"""


def _cases() -> list[tuple[str, str, str]]:
    rows = []
    for line in GOLDEN.strip().splitlines():
        if not line.strip():
            continue
        case, dialect, sql = (part.strip() for part in line.split("|", 2))
        rows.append((case, dialect, sql))
    return rows


CASES = _cases()


#: BigQuery reads a dot inside a backtick-quoted name as a path (`No.` -> `No`.``); BigQuery
#: column names cannot contain dots anyway, so such WikiSQL headers cannot exist there.
REPARSE_DIFFERS = {("wikisql_header", "bigquery"): "BigQuery splits dotted quoted identifiers"}


def _render(case: str, dialect: str) -> str:
    built = BUILDERS[case]()
    if isinstance(built, str):  # program_to_sql cases are rendered for sqlite
        assert dialect == "sqlite"
        return built
    return built.to_sql(dialect)


@pytest.mark.parametrize(
    ("case", "dialect", "expected"), CASES, ids=[f"{c}-{d}" for c, d, _ in CASES]
)
def test_golden(case: str, dialect: str, expected: str) -> None:
    assert _render(case, dialect) == expected


@pytest.mark.parametrize(
    ("case", "dialect", "expected"), CASES, ids=[f"{c}-{d}" for c, d, _ in CASES]
)
def test_golden_reparses_to_the_same_tree(case: str, dialect: str, expected: str) -> None:
    if (case, dialect) in REPARSE_DIFFERS:
        pytest.skip(REPARSE_DIFFERS[(case, dialect)])
    parsed = sqlglot.parse(expected, read=dialect)
    assert len(parsed) == 1
    assert parsed[0].sql(dialect=dialect) == expected


def test_every_builder_and_dialect_is_covered() -> None:
    assert {c for c, _, _ in CASES} == set(BUILDERS)
    multi = {c for c in BUILDERS if {d for cc, d, _ in CASES if cc == c} == set(SQL_DIALECTS)}
    assert len(multi) >= 6  # each dialect: LIMIT, aggregation, WikiSQL header, ...
    assert {"wikisql_header", "top_n", "count_limit"} <= multi


def test_tsql_uses_top_not_limit() -> None:
    for case, dialect, sql in CASES:
        if dialect == "tsql":
            assert " LIMIT " not in sql, case
    assert "TOP 3" in _render("top_n", "tsql")


def test_pretty_output_is_the_same_query() -> None:
    q = BUILDERS["group_having_order"]()
    assert isinstance(q, Sql)
    pretty = q.to_sql("postgres", pretty=True)
    assert "\n" in pretty
    assert sqlglot.parse_one(pretty, read="postgres") == sqlglot.parse_one(
        q.to_sql("postgres"), read="postgres"
    )
