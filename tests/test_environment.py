"""The environment contract: one base, one step template, one Observation, for KB and SQL."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from pyql import Session
from pyql.db import DB, SqlDB
from pyql.environment import Environment, Observation, python_feedback_for
from pyql.errors import ParseError, ReadOnlyError, SchemaError, ToolsetError
from pyql.feedback import Feedback, Hint
from pyql.kb import OxigraphKB
from pyql.program import Program, parse_call
from pyql.results import ResultSet
from pyql.session import KBSession
from pyql.sql.schema import Schema
from pyql.sql.session import SqlSession

KB_FILE = Path(__file__).parent / "fixtures" / "kb" / "freebase_small.ttl"
ENTITIES = {"Jamaica": "m.03_r3"}


@pytest.fixture(scope="module")
def kb() -> OxigraphKB:
    return OxigraphKB.from_file(KB_FILE, profile="freebase")


@pytest.fixture(scope="module")
def db() -> SqlDB:
    return SqlDB.sqlite_memory(lambda c: c.executescript(
        "CREATE TABLE players(Player TEXT, Nationality TEXT, Points REAL);"
        "INSERT INTO players VALUES ('Terrence Ross', 'United States', 10),"
        " ('Jose Calderon', 'Spain', 8);"))


class Always:
    """A guideline checker that rejects every step it sees (with one code)."""

    def __init__(self) -> None:
        self.seen: list[Feedback] = []

    def evaluate(self, feedback: Feedback) -> Hint | None:
        self.seen.append(feedback)
        return Hint(code="RM999", message="no.")


# -- one base, one factory ------------------------------------------------------------------------
def test_session_of_a_database_is_a_session(db: SqlDB) -> None:
    s = Session(db, table="players")
    assert isinstance(s, SqlSession) and isinstance(s, Session) and isinstance(s, Environment)
    assert s.tools == "sql" and s.toolset.name == "sql"


def test_session_of_a_database_takes_entities_positionally(db: SqlDB) -> None:
    s = Session(db, {"Ross": "Terrence Ross"}, table="players")
    assert dict(s.memory.entities) == {"Ross": "Terrence Ross"}
    s.reset()
    assert dict(s.memory.entities) == {"Ross": "Terrence Ross"}


def test_session_of_a_kb_is_a_kb_session(kb: OxigraphKB) -> None:
    s = Session(kb, ENTITIES)
    assert type(s) is KBSession and isinstance(s, Session) and isinstance(s, Environment)
    assert s.tools == "sparql"


def test_one_step_template_for_both(kb: OxigraphKB, db: SqlDB) -> None:
    for s in (Session(kb, ENTITIES), Session(db, table="players")):
        # the backends fill in hooks; the step itself is the contract's
        for member in ("run", "run_program", "reset", "reject", "parse"):
            assert getattr(type(s), member) is getattr(Environment, member), member


@pytest.mark.parametrize("backend", ["kb", "db"])
def test_rejected_steps_roll_back_on_both(backend: str, kb: OxigraphKB, db: SqlDB) -> None:
    checker = Always()
    if backend == "kb":
        s: Session = Session(kb, ENTITIES, guidelines=checker)
        action = "add_fact(m.03_r3, location.country.languages_spoken, ?x)"
    else:
        s = Session(db, table="players", guidelines=checker)
        action = "set_answer(Player)"
    query, memory = s.to_query(), s.memory
    obs = s.run(action)
    assert obs.status == "hint" and obs.text == "no."
    assert s.to_query() == query and s.memory is memory and len(s.program) == 0
    assert [f.tools for f in checker.seen] == [s.tools]
    assert s.observations == [obs] and s.step == 1


def test_accepted_steps_commit_on_both(kb: OxigraphKB, db: SqlDB) -> None:
    k = Session(kb, ENTITIES)
    k.run_program("add_fact(m.03_r3, location.country.languages_spoken, ?x)\nset_answer(?x)")
    assert len(k.program) == 2 and k.memory.answer == "?x" and "?x" in k.to_query()
    d = Session(db, table="players")
    d.run_program("set_answer(Player)")
    assert d.to_query() == 'SELECT "Player" FROM "players"' and d.memory.answer == "Player"


# -- one observation shape, one renderer ------------------------------------------------------------
def test_observations_have_one_shape(kb: OxigraphKB, db: SqlDB) -> None:
    k = Session(kb, ENTITIES).run("get_relation(m.03_r3)")
    d = Session(db, table="players").run("get_column(Nationality)")
    assert type(k) is Observation and type(d) is Observation
    assert k.tools == "sparql" and d.tools == "sql"
    assert k.summary == k.text and d.summary == d.text  # no hint, no error: the summary shows


def test_answers_are_typed_per_backend(kb: OxigraphKB, db: SqlDB) -> None:
    k = Session(kb, ENTITIES)
    k.run_program("add_fact(m.03_r3, location.country.languages_spoken, ?x)\nset_answer(?x)")
    answers = k.run("execute()").answers
    assert answers and all(isinstance(a, str) for a in answers)
    d = Session(db, table="players")
    d.run_program("set_answer(Points)")
    assert d.run("execute()").answers == (10.0, 8.0)
    d.run("set_answer(Player)")
    assert d.run("execute()").answers == ((10.0, "Terrence Ross"), (8.0, "Jose Calderon"))


class _FailingKB(OxigraphKB):
    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        raise ReadOnlyError("refused")


def test_backend_errors_render_with_the_backend_name(db: SqlDB) -> None:
    obs = Session(_FailingKB(profile="freebase"), ENTITIES).run("get_relation(m.03_r3)")
    assert obs.status == "backend_error" and obs.text == "Error: the KB failed: refused"
    view = _View(db, refuse=True)
    obs = Session(view, table="players").run("get_column(Player)")
    assert obs.text == "Error: the database failed: refused"



def test_each_backend_gives_its_own_feedback_with_the_shared_fields_alike(
        kb: OxigraphKB, db: SqlDB) -> None:
    from dataclasses import fields

    from pyql.feedback import BackendFeedback, DBFeedback, FeedbackKindError, KBFeedback

    on_kb = Session(kb, ENTITIES).run("get_relation(m.03_r3)").feedback
    on_db = Session(db, table="players").run("add_condition(Player, =, Nobody)").feedback
    assert type(on_kb.backend) is KBFeedback and on_kb.kb is on_kb.backend
    assert type(on_db.backend) is DBFeedback and on_db.db is on_db.backend
    assert on_db.backend.status == "empty" and on_db.db.value_found is False
    # no SQL field on the KB's type, no KB field on the database's
    kb_only = {f.name for f in fields(KBFeedback)} - {f.name for f in fields(BackendFeedback)}
    db_only = {f.name for f in fields(DBFeedback)} - {f.name for f in fields(BackendFeedback)}
    assert kb_only == {"relations", "node", "unconstrained"}
    assert db_only == {"column_types", "column_values", "value_found"}
    with pytest.raises(FeedbackKindError) as caught:
        on_db.kb  # noqa: B018 - the read is the test
    assert (caught.value.wanted, caught.value.tools) == ("kb", "sql")
    with pytest.raises(FeedbackKindError):
        on_kb.db  # noqa: B018
    # a failure the environment reports itself is its backend's kind too
    failed = Session(_View(db, refuse=True), table="players").run("get_column(Player)")
    assert type(failed.feedback.backend) is DBFeedback and failed.status == "backend_error"


# -- reject: an action that never reached run --------------------------------------------------------
def test_reject_is_a_judged_step(kb: OxigraphKB) -> None:
    checker = Always()
    s = Session(kb, ENTITIES, guidelines=checker)
    error = ParseError("two tool calls", "a()\nb()", kind="multiple_actions", found=2)
    obs = s.reject("a()\nb()", error)
    assert obs.feedback.python.status == "multiple_actions" and obs.hint is not None
    assert s.step == 1 and s.observations == [obs] and len(s.program) == 0


# -- structured ParseError ------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "kind", "found"), [
    ("# nothing but a comment", "no_action", 0),
    ("", "no_action", 0),
    ("execute()\nexecute()", "multiple_actions", 2),
    ("add_fact(m.0x, r, ?y", "syntax", None),
])
def test_parse_error_fields(text: str, kind: str, found: int | None) -> None:
    with pytest.raises(ParseError) as info:
        parse_call(text)
    assert (info.value.kind, info.value.found) == (kind, found)


def test_feedback_reads_the_fields_not_the_message() -> None:
    worded = ParseError("something else entirely", "x", kind="multiple_actions", found=3)
    assert python_feedback_for(worded).status == "multiple_actions"
    plain = ParseError("expected one call, found 0", "x")  # wording alone means nothing
    assert python_feedback_for(plain).status == "parse_error"
    with pytest.raises(ValueError, match="kind"):
        ParseError("x", kind="nonsense")


def test_session_statuses_for_no_and_several_actions(kb: OxigraphKB) -> None:
    s = Session(kb, ENTITIES)
    assert s.run("  ").feedback.python.status == "no_action"
    assert s.run("just thinking").feedback.python.status == "parse_error"
    assert s.run("execute()\nexecute()").feedback.python.status == "multiple_actions"


def test_schema_error_kind_reaches_the_feedback(db: SqlDB) -> None:
    s = Session(db, table="players")
    obs = s.run("add_join(Singr)")
    assert obs.feedback.python.status == "schema_error" and obs.feedback.python.expected == "table"
    obs = s.run("set_answer(Playr)")
    assert obs.feedback.python.expected == "column"
    with pytest.raises(ValueError):
        SchemaError("x", kind="view")


# -- programs replay per toolset --------------------------------------------------------------------
def test_sql_program_to_sparql_is_a_typed_error() -> None:
    program = Program.parse("add_condition(Player, =, Ross)\nset_answer(Points)", "sql")
    with pytest.raises(ToolsetError) as info:
        program.to_sparql()
    assert (info.value.tools, info.value.expected) == ("sql", "sparql")
    with pytest.raises(ToolsetError):
        program.to_query()


def test_sparql_program_still_replays() -> None:
    program = Program.parse("add_fact(m.0x, people.person.spouse_s, ?y)\nset_answer(?y)")
    assert "SELECT DISTINCT ?y" in program.to_sparql()


# -- the DB base: wrappers override hooks, nothing is forwarded ---------------------------------------
class _View(DB):
    """A per-question view of a shared database, written the way the contract intends."""

    def __init__(self, inner: SqlDB, *, refuse: bool = False) -> None:
        super().__init__(inner.dialect)
        self.inner = inner
        self.refuse = refuse
        self.texts: list[str] = []

    def _execute(self, text: str) -> ResultSet:
        if self.refuse:
            raise ReadOnlyError("refused")
        self.texts.append(text)
        return self.inner._execute(text)

    def table_names(self) -> list[str]:
        return self.inner.table_names()

    def schema(self, tables: Iterable[str] | None = None) -> Schema:
        return self.inner.schema(tables)


def test_db_base_guards_and_counts_for_every_subclass(db: SqlDB) -> None:
    assert isinstance(db, DB)
    view = _View(db)
    s = Session(view, table="players")
    assert isinstance(s, SqlSession)
    s.run_program("set_answer(Player)\nexecute()")
    assert view.query_count == len(view.texts) > 0
    before = view.query_count
    with pytest.raises(ReadOnlyError):
        view.execute("DELETE FROM players")
    assert view.query_count == before and all("DELETE" not in t for t in view.texts)
    assert view.execute("SELECT Player FROM players WHERE Points > ?", [9]).rows == (
        ("Terrence Ross",),)


# -- guideline facts re-use the step's own result -----------------------------------------------------
def test_sql_condition_alone_needs_no_probe_query(db: SqlDB) -> None:
    view = _View(db)
    s = Session(view, table="players")
    before = view.query_count
    obs = s.run('add_condition(Player, =, "Nobody")')
    db_said = obs.feedback.db
    assert db_said.status == "empty" and db_said.value_found is False
    assert "Terrence Ross" in db_said.column_values["Player"]
    # the step's query and the column sample; whether the value occurs at all is the step's own
    # (empty) result, not a third query
    assert view.query_count - before == 2


def test_sql_condition_among_others_is_probed(db: SqlDB) -> None:
    view = _View(db)
    s = Session(view, table="players")
    s.run('add_condition(Nationality, =, "Spain")')
    before = view.query_count
    obs = s.run('add_condition(Player, =, "Terrence Ross")')
    db_said = obs.feedback.db
    assert db_said.status == "empty" and db_said.value_found is True  # alone yes, together not
    assert view.query_count - before == 3


def test_step_records_are_frozen_values_that_check_their_status() -> None:
    from dataclasses import FrozenInstanceError

    from pyql.feedback import KBFeedback, PythonFeedback, Relations, VariableValues

    with pytest.raises(ValueError, match="KBFeedback.status must be one of"):
        KBFeedback(status="fine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="PythonFeedback.status"):
        PythonFeedback(status="broken")  # type: ignore[arg-type]
    hint = Hint(code="X1", message="m", suggestions=["a", "b"])  # type: ignore[arg-type]
    assert hint.suggestions == ("a", "b")  # a list given is kept as a tuple
    assert Relations(forward=["r"]).all == ("r",)  # type: ignore[arg-type]
    assert VariableValues(values=["v"], total=1).values == ("v",)  # type: ignore[arg-type]
    with pytest.raises(FrozenInstanceError):
        hint.message = "changed"  # type: ignore[misc]


def test_memory_updates_are_copies_with_read_only_mappings() -> None:
    from pyql.memory import Memory

    memory = Memory()
    relations = {"m.0x": None}
    later = memory.with_(relations=relations, variables=("?x",))
    relations["m.0y"] = None  # the caller's dict is not the memory's
    assert dict(later.relations) == {"m.0x": None} and later.variables == ("?x",)
    assert memory.relations == {} and memory.variables == ()
    with pytest.raises(TypeError):
        later.relations["m.0z"] = None  # type: ignore[index]
    with pytest.raises(TypeError, match="Memory has no field"):
        memory.with_(relation={})
