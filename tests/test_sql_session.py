"""SqlSession: the PyQL-SQL environment, step by step on a small SQLite database.

Also the SQL parts of the CLI (``pyql compile --sql``, ``pyql run --db``, ``pyql demo --sql``)
and the bundled demo database.
"""

from __future__ import annotations

import doctest
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pyql.sql.session as sql_session
from pyql import Session
from pyql import demo as demos
from pyql.cli import app
from pyql.db import SqlDB
from pyql.feedback import Feedback, Hint
from pyql.program import Call, Program
from pyql.session import Observation
from pyql.sql.session import SqlObservation, SqlSession, coerce_value, parse_number

SCHEMA = """
CREATE TABLE teams (team_id INTEGER PRIMARY KEY, name TEXT, city TEXT);
CREATE TABLE players (
    player_id INTEGER PRIMARY KEY, name TEXT, team_id INTEGER REFERENCES teams (team_id),
    nationality TEXT, points REAL, "No." TEXT
);
CREATE TABLE arenas (arena_id INTEGER PRIMARY KEY, team_id INTEGER, seats INTEGER);
INSERT INTO teams VALUES (1, 'Raptors', 'Toronto'), (2, 'Celtics', 'Boston'),
                         (3, 'Knicks', 'New York');
INSERT INTO players VALUES
    (1, 'Terrence Ross', 1, 'United States', 10.5, '31'),
    (2, 'Jose Calderon', 1, 'Spain', 8, '8'),
    (3, 'Jayson Tatum', 2, 'United States', 27.1, '0'),
    (4, 'Jonas Valanciunas', 1, 'Lithuania', 12, '17'),
    (5, 'Big Spender', 3, 'United States', 18000, '1');
INSERT INTO arenas VALUES (1, 1, 19800), (2, 2, 19156);
"""


@pytest.fixture(scope="module")
def db_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlsession") / "league.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def db(db_file: Path) -> SqlDB:
    return SqlDB.sqlite(db_file)


@pytest.fixture
def session(db: SqlDB) -> SqlSession:
    return SqlSession(db, table="players")


def state(s: SqlSession) -> tuple[object, ...]:
    return (s.query, s.program, s.memory, s.schema)


# -- the contract ---------------------------------------------------------------------------------


def test_session_dispatches_on_a_sql_db(db: SqlDB) -> None:
    s = Session(db, table="players")
    assert isinstance(s, SqlSession)
    assert s.table == "players"
    assert s.tools == "sql"


def test_observations_are_observations(session: SqlSession) -> None:
    obs = session.run("add_condition(nationality, =, Spain)")
    assert isinstance(obs, Observation) and isinstance(obs, SqlObservation)
    assert obs.ok and obs.status == "ok"
    assert obs.feedback.tools == "sql"
    assert obs.step == 1
    assert obs.query == 'SELECT * FROM "players" WHERE "nationality" = \'Spain\''
    assert session.observations == [obs]


def test_a_wikisql_style_question(session: SqlSession) -> None:
    session.run("add_condition(nationality, =, United States)")
    obs = session.run("add_condition(points, >, 20)")
    assert obs.feedback.db.row_count == 2
    assert obs.text.startswith("2 rows match. Columns: player_id, name, team_id, nationality")
    obs = session.run("set_answer(name)")
    assert obs.values["name"].values == ("Jayson Tatum", "Big Spender")
    assert obs.text == "name: ['Jayson Tatum', 'Big Spender']"
    obs = session.run("execute()")
    assert obs.ok
    assert obs.answers == ("Jayson Tatum", "Big Spender")
    assert obs.text == "The answer is ['Jayson Tatum', 'Big Spender']"
    assert str(session.program) == (
        "add_condition(nationality, =, United States)\nadd_condition(points, >, 20)\n"
        "set_answer(name)\nexecute()"
    )
    assert session.last_result is not None and len(session.last_result) == 2
    assert session.to_sql("postgres") == (
        'SELECT "name" FROM "players" WHERE "nationality" = \'United States\' AND "points" > 20'
    )


def test_aggregates_and_multi_column_answers(session: SqlSession) -> None:
    assert session.run("set_answer(points, MAX)").values == {
        "MAX(points)": session.observations[-1].values["MAX(points)"]
    }
    assert session.run("execute()").answers == (18000.0,)
    session.reset()
    session.run("add_group_by(nationality)")
    session.run("set_answer(nationality)")
    obs = session.run("set_answer(*, COUNT)")
    assert obs.text.startswith("3 rows match. Columns: nationality, COUNT(*).")
    obs = session.run("execute()")
    assert sorted(obs.answers) == [("Lithuania", 1), ("Spain", 1), ("United States", 3)]
    assert set(obs.values) == {"nationality", "COUNT(*)"}


def test_get_column_lists_values_with_counts_and_adds_nothing(session: SqlSession) -> None:
    obs = session.run("get_column(nationality)")
    assert obs.ok
    assert obs.values["nationality"].values == ("United States", "Lithuania", "Spain")
    assert obs.values["nationality"].total == 3
    assert "'United States' (3)" in obs.text
    assert obs.feedback.db.column_types == {"nationality": "text"}
    assert session.query.conditions == () and session.query.answers == ()
    assert [c.name for c in session.program] == ["get_column"]  # recorded, as get_relation is
    # under the current conditions
    session.run("add_condition(team_id, =, 1)")
    obs = session.run("get_column(nationality)")
    assert set(obs.values["nationality"].values) == {"United States", "Spain", "Lithuania"}
    assert obs.values["nationality"].total == 3
    assert "under the current conditions" in obs.text
    session.run("add_condition(nationality, =, Spain)")
    assert session.run("get_column(name)").values["name"].values == ("Jose Calderon",)


def test_get_column_bounds_the_values(db: SqlDB) -> None:
    s = SqlSession(db, table="players", max_values=2)
    obs = s.run("get_column(name)")
    assert len(obs.values["name"].values) == 2
    assert obs.values["name"].total == 5
    assert "(5 distinct values in total)" in obs.text


def test_joins_group_having_order_distinct(db: SqlDB) -> None:
    s = SqlSession(db, table="players")
    obs = s.run("add_join(teams)")  # along the declared foreign key
    assert obs.ok, obs.text
    assert "players.name" in obs.values and "teams.name" in obs.values
    s.run("add_group_by(teams.name)")
    obs = s.run("add_having(*, COUNT, >=, 2)")
    assert obs.text == "1 group. Columns: teams.name, COUNT(*). Rows: ('Raptors', 3)"
    s.run("set_answer(teams.city)")
    obs = s.run("execute()")
    assert obs.answers == ("Toronto",)
    # order and limit, distinct
    s2 = SqlSession(db, table="players")
    s2.run("add_join(teams, team_id, team_id)")
    s2.run("set_answer(teams.city)")
    s2.run("set_distinct()")
    assert sorted(s2.run("execute()").answers) == ["Boston", "New York", "Toronto"]
    s2.run("add_order(players.points, desc, 1)")
    assert s2.run("execute()").answers == ("New York",)


def test_add_join_widens_the_scope(db: SqlDB) -> None:
    s = SqlSession(db, table="players")
    assert s.memory.columns == ("player_id", "name", "team_id", "nationality", "points", "No.")
    before = s.schema
    obs = s.run("add_join(arenas, team_id, team_id)")
    assert obs.ok, obs.text
    assert s.schema is not before and s.schema.find_table("arenas") is not None
    assert "arenas.seats" in s.memory.columns
    assert s.run("set_answer(arenas.seats, SUM)").ok
    assert s.run("execute()").answers == (19800 * 3 + 19156,)


def test_a_step_reads_the_schema_s_column_labels_made_once(db: SqlDB) -> None:
    """Every step's memory lists the columns in scope: made once per schema, not per step (on
    WikiSQL's 2,716-table dev database that list was 80 % of a step's time)."""
    s = SqlSession(db)
    assert s.run("set_answer(city)").ok
    first = s.memory.columns
    assert s.run("execute()").ok
    again = s.memory.columns
    assert first is again is s.schema.column_labels and "teams.city" in first


def test_no_table_scope_is_the_whole_database(db: SqlDB) -> None:
    s = SqlSession(db)
    assert s.table is None and "teams.city" in s.memory.columns
    assert s.run("set_answer(city)").ok  # the first column picks the base table
    assert s.table == "teams"
    s2 = SqlSession(db)
    obs = s2.run("set_answer(name)")
    assert obs.feedback.python.error_code == "ambiguous_column"
    assert s2.run("add_join(teams)").ok  # sets the base table
    assert s2.run("set_answer(name)").ok
    s3 = SqlSession(db, tables=["players", "teams"])
    assert {t.name for t in s3.schema} == {"players", "teams"}


# -- errors leave the state unchanged --------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "status", "code"),
    [
        ("add_condition(nationality =, Spain", "parse_error", None),
        ("add_fact(?x, r, ?y)", "unknown_function", None),
        ("add_condition(nationality, Spain)", "arity", None),
        ("add_condition(nationalty, =, Spain)", "schema_error", None),
        ("add_join(tems)", "schema_error", None),
        ("add_condition(nationality, ~, Spain)", "bad_term", None),
        ("add_order(points, sideways)", "bad_term", None),
        ("add_join(teams)\nset_answer(name)", "multiple_actions", None),
        ("", "no_action", None),
        ("execute()", "query_error", "no_answer"),
        ("set_answer(*, MAX)", "query_error", "bad_star"),
    ],
)
def test_errors_leave_the_state_unchanged(
    session: SqlSession, action: str, status: str, code: str | None
) -> None:
    session.run("add_condition(team_id, =, 1)")
    before = state(session)
    obs = session.run(action)
    assert not obs.ok
    assert obs.status == "error"
    assert obs.feedback.python.status == status
    assert obs.feedback.python.error_code == code
    assert obs.text.startswith("Error: ")
    assert state(session) == before
    assert obs.query == session.to_sql()


def test_schema_errors_name_close_matches(session: SqlSession) -> None:
    obs = session.run("add_condition(nationalty, =, Spain)")
    assert "nationality" in obs.feedback.python.suggestions
    assert obs.feedback.python.error_type == "SchemaError"
    obs = session.run("add_join(tems)")
    assert obs.feedback.python.suggestions == ("teams",)


def test_execute_before_set_answer(session: SqlSession) -> None:
    session.run("add_condition(nationality, =, Spain)")
    obs = session.run("execute()")
    assert obs.feedback.python.status == "query_error"
    assert obs.feedback.python.error_code == "no_answer"
    assert "set_answer(players.nationality)" in obs.feedback.python.suggestions
    assert [c.name for c in session.program] == ["add_condition"]
    empty = SqlSession(session.db)
    assert empty.run("execute()").feedback.python.error_code == "empty_query"


def test_calls_are_validated(session: SqlSession) -> None:
    obs = session.run(Call.of("add_condition", "nationality", "="))
    assert obs.feedback.python.status == "arity"
    obs = session.run(Call.of("add_fact", "a", "b", "c"))
    assert obs.feedback.python.status == "unknown_function"
    assert session.run(Call.of("add_condition", "nationality", "=", "Spain")).ok


def test_a_dead_database_is_a_backend_error_not_an_empty_result(tmp_path: Path) -> None:
    path = tmp_path / "gone.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.commit()
    conn.close()
    db = SqlDB.sqlite(path)
    s = SqlSession(db, table="players")
    assert s.run("add_condition(nationality, =, Spain)").ok
    before = state(s)
    db.close()
    path.unlink()
    for action in ("add_condition(points, >, 1)", "get_column(name)", "set_answer(name)"):
        obs = s.run(action)
        assert obs.feedback.db.status == "backend_error", obs.text
        assert obs.status == "backend_error"
        assert obs.error and "cannot connect" in obs.error
        assert obs.text.startswith("Error: the database failed")
        assert state(s) == before


def test_a_timeout_is_reported_as_such(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ((i, f"v{i % 997}") for i in range(60000)))
    conn.commit()
    conn.close()
    s = SqlSession(SqlDB.sqlite(path, statement_timeout=1e-6, sample_values=0), table="t")
    obs = s.run("get_column(b)")
    assert obs.feedback.db.status == "timeout"
    assert obs.status == "timeout" and obs.text.startswith("Error: the query timed out")
    assert len(s.program) == 0


# -- values: coercion, NULL, LIKE --------------------------------------------------------------------


def test_text_on_a_numeric_column_is_a_number(session: SqlSession) -> None:
    obs = session.run('add_condition(points, >, "17,999")')
    assert obs.ok
    assert obs.feedback.notes == ('"17,999" read as the number 17999 (column points is real)',)
    assert session.to_sql() == 'SELECT * FROM "players" WHERE "points" > 17999'
    assert str(session.program) == 'add_condition(points, >, "17,999")'  # as written
    assert obs.feedback.db.row_count == 1


def test_a_number_on_a_text_column_is_text(session: SqlSession) -> None:
    obs = session.run("add_condition(No., =, 31)")
    assert obs.ok and obs.feedback.db.row_count == 1
    assert session.to_sql() == 'SELECT * FROM "players" WHERE "No." = \'31\''
    assert "read as the text 31" in obs.feedback.notes[0]


def test_having_values_follow_the_aggregate(session: SqlSession) -> None:
    session.run("add_group_by(nationality)")
    obs = session.run('add_having(*, COUNT, >, "1")')
    assert obs.ok and obs.feedback.notes
    assert session.to_sql().endswith("HAVING COUNT(*) > 1")


def test_like_and_null_are_left_alone(session: SqlSession) -> None:
    assert session.run('add_condition(name, LIKE, "J%")').feedback.db.row_count == 3
    assert not session.observations[-1].feedback.notes
    assert session.run("add_condition(points, !=, NULL)").ok
    assert session.to_sql().endswith('AND NOT "points" IS NULL')


@pytest.mark.parametrize(
    ("text", "number"),
    [("18,000", 18000), ("3", 3), ("-2.5", -2.5), (" 7 ", 7), ("3 goals", 3), ("1.5e2", 150.0),
     ("n/a", None), ("", None), ("inf", None)],
)
def test_parse_number(text: str, number: float | None) -> None:
    assert parse_number(text) == number


def test_coerce_value() -> None:
    assert coerce_value("12", "integer") == (12, "read as the number 12")
    assert coerce_value(2.0, "text") == ("2.0", "read as the text 2.0")
    assert coerce_value("x", "text") == ("x", None)
    assert coerce_value("2020-01-01", "date") == ("2020-01-01", None)
    assert coerce_value(None, "real") == (None, None)


# -- feedback for the guidelines --------------------------------------------------------------------


def test_value_found_and_column_values(session: SqlSession) -> None:
    obs = session.run("add_condition(nationality, =, Spain)")
    assert obs.feedback.db.value_found is True
    obs = session.run("add_condition(name, =, Terrence Ross)")  # exists, not with Spain
    assert obs.feedback.db.status == "empty"
    assert obs.feedback.db.value_found is True
    assert "Terrence Ross" in obs.feedback.db.column_values["name"]
    obs = session.run("add_condition(name, =, Terrence Rose)")
    assert obs.feedback.db.value_found is False
    obs = session.run("set_answer(name, SUM)")
    assert obs.feedback.db.column_types == {"name": "text"}
    assert set(obs.feedback.db.column_values["name"]) >= {"Terrence Ross", "Jose Calderon"}


class Refuse:
    """A guideline checker that rejects every add_condition with an empty result."""

    def __init__(self) -> None:
        self.seen: list[Feedback] = []

    def evaluate(self, feedback: Feedback) -> Hint | None:
        self.seen.append(feedback)
        if feedback.function == "add_condition" and feedback.db.status == "empty":
            return Hint(code="DB999", message="empty: try again")
        return None


def test_the_guideline_hook_rolls_back(db: SqlDB) -> None:
    checker = Refuse()
    s = SqlSession(db, table="players", guidelines=checker)
    assert s.run("add_condition(nationality, =, Spain)").ok
    before = state(s)
    obs = s.run("add_condition(points, >, 100)")
    assert obs.status == "hint" and obs.text == "empty: try again"
    assert obs.hint is not None and obs.hint.code == "DB999"
    assert state(s) == before
    assert [f.function for f in checker.seen] == ["add_condition", "add_condition"]
    assert checker.seen[-1].memory is before[2]  # guidelines see the memory before the step
    assert all(f.tools == "sql" for f in checker.seen)


def test_the_builtin_guidelines(db: SqlDB) -> None:
    s = SqlSession(db, table="players", guidelines=True)
    obs = s.run("execute()")
    assert obs.hint is not None and obs.hint.code == "DB105"
    obs = s.run("add_condition(nationality, =, Spian)")
    assert obs.hint is not None and obs.hint.code == "DB102"
    assert "Spain" in obs.text
    assert len(s.program) == 0


def test_memory(session: SqlSession) -> None:
    session.run("add_condition(nationality, =, Spain)")
    session.run("set_answer(name)")
    session.run("set_answer(points, MAX)")
    memory = session.memory
    assert [c.name for c in memory.calls] == ["add_condition", "set_answer", "set_answer"]
    assert memory.answer == "name, MAX(points)"
    assert memory.columns[:2] == ("player_id", "name")
    assert set(memory.last_values) == {"name", "MAX(points)"}
    assert memory.called("set_answer")
    session.run("add_condition(points, >, 100)")  # empty: last values kept
    assert set(session.memory.last_values) == {"name", "MAX(points)"}


def test_reset_and_run_program(session: SqlSession) -> None:
    observations = session.run_program("add_condition(nationality, =, Spain)\nset_answer(name)")
    assert [o.ok for o in observations] == [True, True]
    session.reset()
    assert session.step == 0 and len(session.program) == 0 and session.query.conditions == ()
    program = Program.parse("set_answer(name)\nexecute()", "sql")
    assert session.run_program(program)[-1].answers == (
        "Terrence Ross", "Jose Calderon", "Jayson Tatum", "Jonas Valanciunas", "Big Spender",
    )


def test_an_unknown_start_table_is_a_schema_error(db: SqlDB) -> None:
    from pyql.errors import SchemaError

    with pytest.raises(SchemaError) as info:
        SqlSession(db, table="player")
    assert info.value.suggestions == ("players",)


def test_module_doctests() -> None:
    assert doctest.testmod(sql_session).failed == 0


# -- the demo database and tours ----------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def sql_tours(monkeypatch: pytest.MonkeyPatch):
    """The SQL tour set, registered without leaving pyql.demo's registry changed."""
    monkeypatch.setattr(demos, "TOUR_SETS", dict(demos.TOUR_SETS))
    from pyql.sql import demo as sql_demo

    demos.TOUR_SETS["sql"] = sql_demo.SQL_TOUR_SET
    return sql_demo


def test_demo_db_is_small_and_has_a_foreign_key(sql_tours) -> None:
    path = sql_tours.demo_db_path()
    assert path.is_file() and path.stat().st_size < 100_000
    schema = sql_tours.demo_db().schema()
    assert set(schema.table_names) == {"teams", "players", "coaches"}
    assert schema.table("players").foreign_keys[0].ref_table == "teams"


def test_demo_db_script_rebuilds_the_same_content(tmp_path: Path, sql_tours) -> None:
    import runpy

    module = runpy.run_path(str(REPO / "examples" / "make_demo_db.py"), run_name="make_demo_db")
    out = module["build"](tmp_path / "demo.sqlite")

    def dump(p: Path) -> list[str]:
        conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return list(conn.iterdump())
        finally:
            conn.close()

    assert dump(out) == dump(sql_tours.demo_db_path())


def test_sql_tours_reach_their_answers(sql_tours) -> None:
    for tour in sql_tours.SQL_TOURS:
        result = demos.run_tour(sql_tours.SQL_TOUR_SET, tour)
        assert result.ok, [o.text for o in result.observations]


runner = CliRunner()


def test_cli_demo_sql(sql_tours) -> None:
    result = runner.invoke(app, ["demo", "--sql"])
    assert result.exit_code == 0, result.output
    assert "SQL on a small basketball database" in result.stdout
    assert "Answer: Red Rock Rattlers" in result.stdout
    assert "3 tours done" in result.stdout


def test_cli_compile_sql() -> None:
    program = "add_condition(nationality, =, Spain)\nset_answer(name)\nadd_order(points, desc, 2)"
    result = runner.invoke(
        app, ["compile", "--sql", "--dialect", "tsql", "--table", "players", program]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        "SELECT TOP 2 [name] FROM [players] WHERE [nationality] = 'Spain' ORDER BY [points] DESC"
    )


def test_cli_run_sql(db_file: Path) -> None:
    program = "add_condition(nationality, =, United States)\nset_answer(name, COUNT)"
    result = runner.invoke(app, ["run", "--db", str(db_file), "--table", "players", program])
    assert result.exit_code == 0, result.output
    assert "(added: the program has no execute())" in result.stdout
    assert "Answers: 3" in result.stdout
    result = runner.invoke(
        app, ["run", "--json", "--db", f"sqlite:///{db_file}", "--table", "players", program]
    )
    data = json.loads(result.stdout)
    assert data["ok"] and data["answers"] == [3]
    assert data["sql"] == (
        'SELECT COUNT("name") FROM "players" WHERE "nationality" = \'United States\''
    )


def test_cli_run_sql_errors(db_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--db", str(db_file), "--table", "player", "set_answer(a)"])
    assert result.exit_code == 1
    assert "unknown table 'player'" in result.stderr and "hint: tables: players" in result.stderr
    result = runner.invoke(app, ["run", "--db", str(tmp_path / "none.db"), "set_answer(a)"])
    assert result.exit_code == 1 and "no such database file" in result.stderr
    result = runner.invoke(
        app, ["run", "--db", str(db_file), "--table", "players", "add_condition(nme, =, x)"]
    )
    assert result.exit_code == 1
    assert "step 1 failed" in result.stderr and "name" in result.stderr
