"""Sub-queries, set operations and IN lists as PyQL-SQL programs: ``begin_subquery(?q1)`` ...
``end_subquery()``, ``?q1`` as a value, ``add_union``/``add_intersect``/``add_except`` and
``a|b|c`` lists (pyql.sql.apply, pyql.sql.session, pyql.sql.from_sql)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyql.datasets.sql_fidelity import spider_fidelity
from pyql.db import SqlDB
from pyql.errors import QueryError, TermError
from pyql.program import SQL_TOOLS, Call, ParamKind, Program
from pyql.sql import Sql, SqlBuild, program_to_query, program_to_sql
from pyql.sql.apply import apply_call
from pyql.sql.from_sql import Unsupported, to_program
from pyql.sql.schema import Schema, TableInfo
from pyql.sql.session import SqlSession

SCHEMA = Schema(
    (
        TableInfo("singer", [("Singer_ID", "INT"), ("Name", "TEXT"), ("Country", "TEXT"),
                             ("Age", "INT")], primary_key=["Singer_ID"]),
        TableInfo("concert", [("concert_ID", "INT"), ("Year", "TEXT")]),
        TableInfo(
            "singer_in_concert",
            [("concert_ID", "INT"), ("Singer_ID", "INT")],
            foreign_keys=[("Singer_ID", "singer", "Singer_ID"),
                          ("concert_ID", "concert", "concert_ID")],
        ),
    )
)

SCRIPT = """
CREATE TABLE singer(Singer_ID INT PRIMARY KEY, Name TEXT, Country TEXT, Age INT);
CREATE TABLE concert(concert_ID INT PRIMARY KEY, Year TEXT);
CREATE TABLE singer_in_concert(concert_ID INT, Singer_ID INT,
    FOREIGN KEY (Singer_ID) REFERENCES singer(Singer_ID),
    FOREIGN KEY (concert_ID) REFERENCES concert(concert_ID));
INSERT INTO singer VALUES (1, 'Ann', 'France', 20), (2, 'Bob', 'Spain', 30),
    (3, 'Cid', 'France', 40), (4, 'Dee', 'Peru', 50);
INSERT INTO concert VALUES (1, '2014'), (2, '2015');
INSERT INTO singer_in_concert VALUES (1, 1), (1, 2), (2, 2);
"""


@pytest.fixture()
def db() -> SqlDB:
    return SqlDB.sqlite_memory(lambda c: c.executescript(SCRIPT))


def sql(text: str) -> str:
    return program_to_sql(text, schema=SCHEMA)


# ------------------------------------------------------------------ tool set and syntax


def test_new_calls_are_declared_in_the_tool_set() -> None:
    for name in ("begin_subquery", "end_subquery", "add_union", "add_intersect", "add_except"):
        assert name in SQL_TOOLS
    assert SQL_TOOLS["begin_subquery"].params[0].kind is ParamKind.QUERY
    assert str(SQL_TOOLS["add_union"]) == "add_union(query)"
    assert SQL_TOOLS["end_subquery"].arity == (0, 0)
    assert "?name" in SQL_TOOLS["add_condition"].params[2].doc
    assert "a|b|c" in SQL_TOOLS["add_condition"].params[2].doc


ROUND_TRIPS = [
    "begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age, AVG)\nend_subquery()\n"
    "add_join(singer)\nadd_condition(Age, >, ?q1)\nset_answer(Name)\nexecute()",
    "add_join(singer)\nadd_condition(Country, IN, \"France|Spain\")\n"
    "add_condition(Age, NOT IN, 20|30)\nset_answer(Name)\nexecute()",
    "add_join(singer)\nset_answer(Name)\nbegin_subquery(?q1)\nadd_join(singer)\n"
    "set_answer(Name)\nend_subquery()\nadd_except(?q1)\nexecute()",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_programs_print_and_parse_back(text: str) -> None:
    program = Program.parse(text, "sql")
    assert str(program) == text
    assert Program.parse(str(program), tools="sql") == program


# ------------------------------------------------------------------ replay (SqlBuild)


def test_scalar_subquery_in_a_condition() -> None:
    assert sql("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age, AVG)\nend_subquery()\n"
               "add_join(singer)\nadd_condition(Age, >, ?q1)\nset_answer(Name)") == (
        'SELECT "Name" FROM "singer" WHERE "Age" > (SELECT AVG("Age") FROM "singer")')


@pytest.mark.parametrize("op", ["IN", "NOT IN"])
def test_in_and_not_in_a_subquery(op: str) -> None:
    text = ("add_join(singer)\nbegin_subquery(?q1)\nadd_join(singer_in_concert)\n"
            f"set_answer(Singer_ID)\nend_subquery()\nadd_condition(Singer_ID, {op}, ?q1)\n"
            "set_answer(Name)")
    inner = 'SELECT "Singer_ID" FROM "singer_in_concert"'
    where = f'"Singer_ID" IN ({inner})'
    assert sql(text) == (
        f'SELECT "Name" FROM "singer" WHERE {"NOT " if op == "NOT IN" else ""}{where}')


def test_subquery_in_having() -> None:
    text = ("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age, MIN)\nend_subquery()\n"
            "add_join(singer)\nadd_group_by(Country)\nadd_having(Age, AVG, >, ?q1)\n"
            "set_answer(Country)")
    assert sql(text) == ('SELECT "Country" FROM "singer" GROUP BY "Country" HAVING AVG("Age") > '
                         '(SELECT MIN("Age") FROM "singer")')


@pytest.mark.parametrize(("call", "word"), [("add_union", "UNION"),
                                            ("add_intersect", "INTERSECT"),
                                            ("add_except", "EXCEPT")])
def test_set_operations(call: str, word: str) -> None:
    text = ("add_join(singer)\nadd_condition(Age, >, 30)\nset_answer(Country)\n"
            "begin_subquery(?q1)\nadd_join(singer)\nadd_condition(Age, <, 30)\n"
            f"set_answer(Country)\nend_subquery()\n{call}(?q1)")
    assert sql(text) == (f'SELECT "Country" FROM "singer" WHERE "Age" > 30 {word} '
                         'SELECT "Country" FROM "singer" WHERE "Age" < 30')


@pytest.mark.parametrize(("value", "expected"), [
    ('"France|Spain"', "('France', 'Spain')"),
    ("France | Spain", "('France', 'Spain')"),
    ('"1|2"', "('1', '2')"),
    ("20|30", "(20, 30)"),
    ("-1|2.5", "(-1, 2.5)"),
    ("20", "(20)"),
])
def test_in_value_lists(value: str, expected: str) -> None:
    column = "Age" if "2" in value else "Country"
    got = sql(f"add_join(singer)\nadd_condition({column}, IN, {value})")
    assert got == f'SELECT * FROM "singer" WHERE "{column}" IN {expected}'


def test_nested_blocks() -> None:
    text = ("add_join(singer)\nbegin_subquery(?q1)\nadd_join(singer_in_concert)\n"
            "begin_subquery(?q2)\nadd_join(concert)\nadd_condition(Year, =, \"2015\")\n"
            "set_answer(concert_ID)\nend_subquery()\nadd_condition(concert_ID, IN, ?q2)\n"
            "set_answer(Singer_ID)\nend_subquery()\nadd_condition(Singer_ID, IN, ?q1)\n"
            "set_answer(Name)")
    assert sql(text) == (
        'SELECT "Name" FROM "singer" WHERE "Singer_ID" IN (SELECT "Singer_ID" FROM '
        '"singer_in_concert" WHERE "concert_ID" IN (SELECT "concert_ID" FROM "concert" WHERE '
        '"Year" = \'2015\'))')


def test_build_state_is_immutable_and_names_the_current_query() -> None:
    start = SqlBuild(Sql(schema=SCHEMA))
    opened = start.apply(Call.parse("begin_subquery(?q1)", "sql"))
    assert start.blocks == () and opened.in_block and opened.current.table is None
    built = opened.apply(Call.parse("add_join(singer)", "sql"))
    assert built.current.table == "singer" and built.query.table is None
    assert opened.current.table is None


# ------------------------------------------------------------------ errors


INVALID = [
    # (program, error type, QueryError code)
    ("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age, MAX)\nend_subquery()\n"
     "add_join(singer)\nadd_condition(Age, >, ?q9)", QueryError, "unknown_subquery"),
    ("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age, MAX)\nend_subquery()\n"
     "add_join(singer)\nadd_group_by(Country)\nadd_having(Age, MAX, >, ?q2)", QueryError,
     "unknown_subquery"),
    ("add_join(singer)\nset_answer(Name)\nadd_union(?q1)", QueryError, "unknown_subquery"),
    ("end_subquery()", QueryError, "no_subquery"),
    ("begin_subquery(?q1)\nadd_join(singer)\nend_subquery()", QueryError, "bad_subquery"),
    ("begin_subquery(?q1)\nbegin_subquery(?q1)", QueryError, "duplicate_subquery"),
    ("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age)\nend_subquery()\n"
     "begin_subquery(?q1)", QueryError, "duplicate_subquery"),
    ("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age)\nexecute()", QueryError,
     "open_subquery"),
    ("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age)", QueryError, "open_subquery"),
    ("begin_subquery(?q1)\nadd_join(singer)\nset_answer(Age)\nset_answer(Name)\nend_subquery()\n"
     "add_join(singer)\nadd_condition(Age, IN, ?q1)", QueryError, "bad_subquery"),
    # bad arguments
    ("begin_subquery(q1)", TermError, None),
    ('begin_subquery("q1")', TermError, None),
    ("add_join(singer)\nadd_union(q1)", TermError, None),
    ("add_join(singer)\nadd_condition(Age, IN, 1||2)", TermError, None),
    ("add_join(singer)\nadd_condition(Age, IN, 1|NULL)", TermError, None),
]


@pytest.mark.parametrize(("text", "error", "code"), INVALID)
def test_errors_are_typed(text: str, error: type[QueryError | TermError], code: str | None) -> None:
    with pytest.raises(error) as info:
        program_to_query(text, schema=SCHEMA)
    if code is not None:
        assert info.value.code == code


def test_apply_call_alone_refuses_block_calls() -> None:
    with pytest.raises(QueryError) as info:
        apply_call(Sql("singer"), Call.parse("begin_subquery(?q1)", "sql"))
    assert info.value.code == "needs_state"


@pytest.mark.parametrize("text", [
    "add_join(singer)\nadd_condition(Name, =, ?q1)",
    "add_join(singer)\nadd_condition(Singer_ID, IN, ?q1)",
    "add_join(singer)\nadd_group_by(Country)\nadd_having(Age, MAX, >, ?q1)",
])
def test_an_undefined_subquery_is_an_error_not_the_text_q1(text: str) -> None:
    """Issue 14: ``?q1`` with no stored query used to compile as the literal '?q1'."""
    with pytest.raises(QueryError) as info:
        program_to_query(text, schema=SCHEMA)
    assert info.value.code == "unknown_subquery" and "no stored query ?q1" in str(info.value)
    stored = "begin_subquery(?q2)\nadd_join(singer)\nset_answer(Singer_ID)\nend_subquery()\n"
    with pytest.raises(QueryError) as info:
        program_to_query(stored + text, schema=SCHEMA)
    assert info.value.suggestions == ("?q2",)


def test_question_mark_values_are_subqueries_unless_quoted() -> None:
    stored = "begin_subquery(?q1)\nadd_join(singer)\nset_answer(Name, MAX)\nend_subquery()\n"
    assert sql(stored + 'add_join(singer)\nadd_condition(Name, =, "?q1")') == (
        'SELECT * FROM "singer" WHERE "Name" = \'?q1\'')
    assert sql(stored + "add_join(singer)\nadd_condition(Name, =, ?q1)") == (
        'SELECT * FROM "singer" WHERE "Name" = (SELECT MAX("Name") FROM "singer")')


# ------------------------------------------------------------------ the session


def test_session_observes_the_subquery_while_it_is_open(db: SqlDB) -> None:
    s = SqlSession(db, tables=["singer", "singer_in_concert", "concert"])
    assert s.run("add_join(singer)").ok
    obs = s.run("begin_subquery(?q1)")
    assert obs.ok and "?q1" in obs.text
    obs = s.run("add_join(singer_in_concert)")
    assert obs.ok and obs.query == 'SELECT * FROM "singer_in_concert"'
    obs = s.run("get_column(Singer_ID)")
    assert obs.ok and "(with row counts)" in obs.text and "'2' (2)" in obs.text
    assert s.run("set_answer(Singer_ID)").text == "Singer_ID: ['1', '2']"
    obs = s.run("end_subquery()")
    assert obs.ok and obs.text.startswith("Stored the sub-query ?q1.")
    assert obs.query == 'SELECT * FROM "singer"'
    assert s.run("add_condition(Singer_ID, NOT IN, ?q1)").ok
    assert s.run("set_answer(Name)").ok
    assert s.run("execute()").answers == ("Cid", "Dee")
    assert s.to_sql() == ('SELECT "Name" FROM "singer" WHERE NOT "Singer_ID" IN (SELECT '
                          '"Singer_ID" FROM "singer_in_concert")')


def test_execute_inside_a_block_is_a_query_error_and_is_rolled_back(db: SqlDB) -> None:
    s = SqlSession(db, table="singer")
    s.run("begin_subquery(?q1)")
    s.run("set_answer(Age, MAX)")
    before = (s.build, s.program, s.memory, s.query)
    obs = s.run("execute()")
    assert not obs.ok and obs.feedback.python.status != "ok"
    assert "end_subquery" in obs.text
    assert (s.build, s.program, s.memory, s.query) == before
    assert s.run("end_subquery()").ok
    assert s.run("add_condition(Age, =, ?q1)").ok
    assert s.run("set_answer(Name)").ok
    assert s.run("execute()").answers == ("Dee",)


def test_rejected_steps_leave_the_state_unchanged(db: SqlDB) -> None:
    s = SqlSession(db, table="singer")
    s.run("begin_subquery(?q1)")
    s.run("set_answer(Age, MIN)")
    s.run("end_subquery()")
    before = (s.build, s.program, s.memory, s.query)
    for bad in ("add_condition(Age, >, ?q2)", "end_subquery()", "begin_subquery(?q1)",
                "add_union(?q1)", "add_condition(Nope, IN, ?q1)", "begin_subquery(q3)"):
        obs = s.run(bad)
        assert not obs.ok, bad
        assert (s.build, s.program, s.memory, s.query) == before, bad
    assert len(s.program) == 3


def test_session_set_operation_and_in_list(db: SqlDB) -> None:
    s = SqlSession(db, table="singer")
    steps = ["add_condition(Country, IN, France|Peru)", "set_answer(Country)",
             "begin_subquery(?q1)", "add_condition(Age, <, 35)", "set_answer(Country)",
             "end_subquery()", "add_intersect(?q1)"]
    for step in steps:
        assert s.run(step).ok, step
    assert sorted(s.run("execute()").answers) == ["France"]


def test_session_coerces_in_list_values(db: SqlDB) -> None:
    s = SqlSession(db, table="singer")
    obs = s.run('add_condition(Age, IN, "20|40")')
    assert obs.ok and obs.feedback.notes
    assert s.run("set_answer(Name)").ok
    assert s.run("execute()").answers == ("Ann", "Cid")


def test_schema_widening_replays_blocks(db: SqlDB) -> None:
    s = SqlSession(db, tables=["singer"])
    assert s.run("add_join(singer)").ok
    assert s.run("begin_subquery(?q1)").ok
    assert s.run("add_join(singer_in_concert)").ok  # outside the scope: the schema widens
    assert s.run("set_answer(Singer_ID)").ok
    assert s.run("end_subquery()").ok
    assert s.run("add_condition(Singer_ID, IN, ?q1)").ok
    assert s.run("set_answer(Name)").ok
    assert s.run("execute()").answers == ("Ann", "Bob")


# ------------------------------------------------------------------ gold SQL -> programs


CONVERTED = [
    ("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)",
     "add_join(singer)\nbegin_subquery(?q1)\nadd_join(singer)\nset_answer(Age, AVG)\n"
     "end_subquery()\nadd_condition(Age, >, ?q1)\nset_answer(Name)\nexecute()"),
    ("SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM singer_in_concert)",
     "add_join(singer)\nbegin_subquery(?q1)\nadd_join(singer_in_concert)\n"
     "set_answer(Singer_ID)\nend_subquery()\nadd_condition(Singer_ID, NOT IN, ?q1)\n"
     "set_answer(Name)\nexecute()"),
    ("SELECT country FROM singer WHERE age > 40 INTERSECT SELECT country FROM singer "
     "WHERE age < 30",
     "add_join(singer)\nadd_condition(Age, >, 40)\nset_answer(Country)\nbegin_subquery(?q1)\n"
     "add_join(singer)\nadd_condition(Age, <, 30)\nset_answer(Country)\nend_subquery()\n"
     "add_intersect(?q1)\nexecute()"),
    ("SELECT name FROM singer WHERE country = 'a' OR country = 'b'",
     "add_join(singer)\nadd_condition(Country, IN, \"a|b\")\nset_answer(Name)\nexecute()"),
    ("SELECT name FROM singer WHERE age IN (20, 30)",
     "add_join(singer)\nadd_condition(Age, IN, 20|30)\nset_answer(Name)\nexecute()"),
    ("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert "
     "WHERE concert_id IN (SELECT concert_id FROM concert WHERE year = '2015'))",
     "add_join(singer)\nbegin_subquery(?q1)\nadd_join(singer_in_concert)\nbegin_subquery(?q2)\n"
     "add_join(concert)\nadd_condition(Year, =, \"2015\")\nset_answer(concert_ID)\n"
     "end_subquery()\nadd_condition(concert_ID, IN, ?q2)\nset_answer(Singer_ID)\n"
     "end_subquery()\nadd_condition(Singer_ID, IN, ?q1)\nset_answer(Name)\nexecute()"),
    ("SELECT country FROM singer GROUP BY country HAVING avg(age) > (SELECT avg(age) FROM "
     "singer) UNION SELECT country FROM singer WHERE age = 50 EXCEPT SELECT country FROM "
     "singer WHERE name = 'Bob'",
     "add_join(singer)\nadd_group_by(Country)\nset_answer(Country)\nbegin_subquery(?q1)\n"
     "add_join(singer)\nset_answer(Age, AVG)\nend_subquery()\nadd_having(Age, AVG, >, ?q1)\n"
     "begin_subquery(?q2)\nadd_join(singer)\nadd_condition(Age, =, 50)\nset_answer(Country)\n"
     "end_subquery()\nadd_union(?q2)\nbegin_subquery(?q3)\nadd_join(singer)\n"
     "add_condition(Name, =, \"Bob\")\nset_answer(Country)\nend_subquery()\nadd_except(?q3)\n"
     "execute()"),
]


@pytest.mark.parametrize(("gold", "expected"), CONVERTED)
def test_to_program_emits_blocks(gold: str, expected: str, db: SqlDB) -> None:
    program = to_program(gold, SCHEMA)
    assert isinstance(program, Program), program
    assert str(program) == expected
    assert Program.parse(str(program), tools="sql") == program
    # the program's rows are the gold SQL's rows
    s = SqlSession(db)
    assert all(o.ok for o in s.run_program(program))
    got = sorted(map(tuple, s.last_result.rows)) if s.last_result else []
    want = sorted(map(tuple, db.execute(gold).rows))
    assert got == want


@pytest.mark.parametrize(("gold", "code"), [
    ("SELECT name FROM singer UNION ALL SELECT name FROM singer", "set_operation"),
    ("SELECT name FROM singer WHERE country IN ('a|b', 'c')", "in_list"),
    ("SELECT name FROM singer WHERE country IN (' a', 'c')", "in_list"),
    ("SELECT name FROM singer WHERE age IN (1, 'c')", "in_list"),
])
def test_what_stays_unsupported(gold: str, code: str) -> None:
    result = to_program(gold, SCHEMA)
    assert isinstance(result, Unsupported) and result.constructs == (code,)


def test_spider_sample_with_subqueries_agrees(pyql_data: Path) -> None:
    report = spider_fidelity(pyql_data, sample=150, seed=0, tree=False)
    assert report.residue() == [] and report.agreement == 1.0
    assert report.coverage >= 0.95  # 97.8% on the whole dev set
    assert not {"in_subquery", "scalar_subquery"} & set(report.constructs)


# ------------------------------------------------------------------ refused at the step (issue 14)


def test_having_without_group_by_is_refused_with_the_fix() -> None:
    with pytest.raises(QueryError) as info:
        program_to_query("add_join(singer)\nset_answer(Country)\nadd_having(Age, MAX, >, 30)",
                         schema=SCHEMA)
    assert info.value.code == "having_without_group_by"
    assert info.value.suggestions == ("add_group_by(Country)",)
    assert "add_group_by" in str(info.value)
    assert sql("add_join(singer)\nset_answer(Country)\nadd_group_by(Country)\n"
               "add_having(Age, MAX, >, 30)") == (
        'SELECT "Country" FROM "singer" GROUP BY "Country" HAVING MAX("Age") > 30')


@pytest.mark.parametrize("kind", ["add_union", "add_intersect", "add_except"])
def test_set_operations_of_different_widths_are_refused_naming_both_lists(kind: str) -> None:
    sub = "begin_subquery(?q1)\nadd_join(concert)\nset_answer(concert_ID)\nend_subquery()\n"
    with pytest.raises(QueryError) as info:
        program_to_query(sub + f"add_join(singer)\nset_answer(Name)\nset_answer(Age)\n{kind}(?q1)",
                         schema=SCHEMA)
    assert info.value.code == "bad_set_operation"
    assert "(Name, Age)" in str(info.value) and "(concert_ID)" in str(info.value)
    # SELECT * with a schema has a known width too
    with pytest.raises(QueryError) as info:
        program_to_query(sub + f"add_join(singer)\n{kind}(?q1)", schema=SCHEMA)
    assert info.value.code == "bad_set_operation"
    # a second answer added after the set operation would break it too: refused at that step
    with pytest.raises(QueryError) as info:
        program_to_query(sub + f"add_join(singer)\nset_answer(Name)\n{kind}(?q1)\nset_answer(Age)",
                         schema=SCHEMA)
    assert info.value.code == "bad_set_operation"
    assert program_to_query(sub + f"add_join(singer)\nset_answer(Name)\n{kind}(?q1)",
                            schema=SCHEMA).set_operations
