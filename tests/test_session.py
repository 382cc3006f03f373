"""The Session: observations, memory, errors that never raise, and backend failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyql import Call, Program, Session
from pyql.errors import BackendTimeoutError, BackendUnavailableError
from pyql.feedback import Feedback, Hint
from pyql.kb import OxigraphKB
from pyql.results import ResultSet

KB_FILE = Path(__file__).parent / "fixtures" / "kb" / "freebase_small.ttl"
ENTITIES = {
    "Jamaica": "m.03_r3",
    "Kim Example": "m.0kim",
    "North America": "m.0j0k",
    "The Green Mile": "m.0green",
}
MARRIAGE = [
    "add_fact(Kim Example, people.person.spouse_s, ?m)",
    "add_fact(?m, people.marriage.spouse, ?s)",
    "add_filter(?s, !=, Kim Example)",
    'add_time_constrain(?m, people.marriage.from, people.marriage.to, "2015-08-10"^^xsd:dateTime, '
    '"2015-08-10"^^xsd:dateTime)',
    "set_answer(?s)",
]


@pytest.fixture(scope="module")
def kb() -> OxigraphKB:
    return OxigraphKB.from_file(KB_FILE, profile="freebase")


@pytest.fixture()
def session(kb: OxigraphKB) -> Session:
    return Session(kb, entities=ENTITIES)


def run_all(session: Session, actions: list[str]) -> None:
    for action in actions:
        obs = session.run(action)
        assert obs.ok, (action, obs.text)


# -- get_relation ---------------------------------------------------------------------------------


def test_relations_of_an_entity(session: Session) -> None:
    obs = session.run("get_relation(Jamaica)")
    assert obs.ok and obs.status == "ok"
    assert obs.relations is not None
    assert set(obs.relations.forward) == {
        "location.country.languages_spoken",
        "topic_server.population_number",
        "type.object.type",
    }
    assert obs.relations.backward == ("base.locations.continents.countries_within",)
    assert "type.object.name" not in obs.relations  # labels are hidden
    assert obs.feedback.kb.node == "m.03_r3"
    assert obs.feedback.notes  # the mention was read as the linked id
    assert "location.country.languages_spoken" in obs.text


def test_relations_of_an_id(session: Session) -> None:
    obs = session.run("get_relation(m.0kim)")
    assert obs.relations is not None
    assert obs.relations.forward == ("people.person.spouse_s", "type.object.type")
    assert obs.relations.backward == ("people.marriage.spouse",)
    assert session.query.is_empty  # get_relation does not change the query


def test_relations_of_a_variable_under_the_current_constraints(session: Session) -> None:
    session.run("add_fact(Kim Example, people.person.spouse_s, ?m)")
    obs = session.run("get_relation(?m)")
    assert obs.relations is not None
    assert set(obs.relations.forward) == {
        "people.marriage.from",
        "people.marriage.to",
        "people.marriage.spouse",
        "people.marriage.type_of_union",
    }
    assert obs.relations.backward == ("people.person.spouse_s",)
    # only the domestic partnership is left, and it has no start date
    session.run("add_fact(?m, people.marriage.type_of_union, m.0dp)")
    narrowed = session.run("get_relation(?m)").relations
    assert narrowed is not None
    assert "people.marriage.from" not in narrowed.forward
    assert "people.marriage.to" in narrowed.forward


def test_relations_of_a_literal_are_backward_only(session: Session) -> None:
    obs = session.run('get_relation("Green Mile")')
    assert obs.relations is not None
    assert obs.relations.forward == ()
    assert obs.relations.backward == ("common.topic.alias",)


def test_relations_of_an_unknown_node_are_empty(session: Session) -> None:
    obs = session.run("get_relation(m.0nothing)")
    assert obs.status == "empty"
    assert obs.relations is not None and len(obs.relations) == 0


# -- values -----------------------------------------------------------------------------------------


def test_values_are_labels(session: Session) -> None:
    obs = session.run("add_fact(Jamaica, location.country.languages_spoken, ?x)")
    assert obs.ok and obs.status == "ok"
    values = obs.values["?x"]
    assert set(values.values) == {"English Language", "Jamaican English"}
    assert values.total == 2 and values.unnamed == 0
    assert "English Language" in obs.text
    assert "ns:m.03_r3" in obs.query


def test_literal_values_are_lexical_forms(session: Session) -> None:
    obs = session.run("add_fact(The Green Mile, film.film.runtime, ?r)")
    (value,) = obs.values["?r"].values
    assert float(value) == 189.0  # the store's canonical form of "189.0"^^xsd:float


def test_values_are_bounded_with_totals(kb: OxigraphKB) -> None:
    session = Session(kb, entities=ENTITIES, max_values=3)
    obs = session.run("add_fact(North America, base.locations.continents.countries_within, ?c)")
    values = obs.values["?c"]
    assert len(values.values) == 3
    assert values.total == 4
    assert "4 in total" in obs.text


def test_totals_when_rows_exceed_the_cap(kb: OxigraphKB) -> None:
    session = Session(kb, entities=ENTITIES, row_cap=2)
    session.run("add_fact(North America, base.locations.continents.countries_within, ?c)")
    obs = session.run("add_fact(?c, topic_server.population_number, ?n)")
    assert obs.feedback.kb.row_count == 2
    assert obs.values["?c"].total == 4
    assert obs.values["?n"].total == 3  # two countries share a population


def test_cvt_nodes_are_unnamed(session: Session) -> None:
    obs = session.run("add_fact(Kim Example, people.person.spouse_s, ?m)")
    values = obs.values["?m"]
    assert set(values.values) == {"UnName_Entity"}
    assert values.total == values.unnamed == 4
    assert values.all_unnamed
    assert "UnName_Entity" in obs.text
    spouses = session.run("add_fact(?m, people.marriage.spouse, ?s)").values["?s"]
    assert not spouses.all_unnamed
    assert "Casey Example" in spouses.values


def test_empty_result(session: Session) -> None:
    obs = session.run("add_fact(Jamaica, film.film.directed_by, ?x)")
    assert obs.ok and obs.status == "empty"
    assert obs.values == {}


# -- execute ----------------------------------------------------------------------------------------


def test_answers_from_execute(session: Session) -> None:
    run_all(session, MARRIAGE)
    obs = session.run("execute()")
    assert obs.ok and obs.status == "ok"
    assert obs.answers == ("m.0p_casey",)
    assert obs.values["?s"].values == ("Casey Example",)
    assert "Casey Example" in obs.text


def test_execute_aggregate(session: Session) -> None:
    run_all(
        session,
        [
            "add_fact(North America, base.locations.continents.countries_within, ?c)",
            "add_count(?c)",
        ],
    )
    assert session.run("execute()").answers == ("4",)


def test_execute_argmax_keeps_ties(session: Session) -> None:
    run_all(
        session,
        [
            "add_fact(North America, base.locations.continents.countries_within, ?c)",
            "add_fact(?c, topic_server.population_number, ?n)",
            "add_max(?n)",
            "set_answer(?c)",
        ],
    )
    assert set(session.run("execute()").answers or ()) == {"m.09c7w0", "m.0atl"}


def test_execute_without_set_answer_and_one_variable(session: Session) -> None:
    session.run("add_fact(Jamaica, location.country.languages_spoken, ?x)")
    obs = session.run("execute()")
    assert obs.ok
    assert set(obs.answers or ()) == {"m.02h40lc", "m.01428y"}


def test_execute_without_set_answer_and_several_variables(session: Session) -> None:
    run_all(session, MARRIAGE[:2])
    obs = session.run("execute()")
    assert not obs.ok and obs.status == "error"
    assert obs.feedback.python.status == "query_error"
    assert obs.feedback.python.error_code == "no_answer"
    assert set(obs.feedback.python.suggestions) == {"set_answer(?m)", "set_answer(?s)"}
    assert obs.answers is None


def test_execute_on_an_empty_query(session: Session) -> None:
    obs = session.run("execute()")
    assert obs.feedback.python.status == "query_error"
    assert obs.feedback.python.error_code == "empty_query"


def test_execute_empty_answer(session: Session) -> None:
    run_all(
        session,
        [
            "add_fact(Jamaica, location.country.languages_spoken, ?x)",
            "add_filter(?x, =, Kim Example)",
            "set_answer(?x)",
        ],
    )
    obs = session.run("execute()")
    assert obs.ok and obs.status == "empty"
    assert obs.answers == ()


# -- memory -----------------------------------------------------------------------------------------


def test_memory_after_steps(session: Session) -> None:
    assert session.memory.calls == ()
    assert dict(session.memory.entities) == ENTITIES
    session.run("get_relation(Kim Example)")
    run_all(session, MARRIAGE[:2])
    session.run("get_relation(?m)")
    session.run("set_answer(?s)")
    memory = session.memory
    assert [c.name for c in memory.calls] == [
        "get_relation",
        "add_fact",
        "add_fact",
        "get_relation",
        "set_answer",
    ]
    assert memory.calls[1] == Call.parse(MARRIAGE[0])
    assert memory.variables == ("?m", "?s")
    assert memory.bound_variables == ("?m", "?s")
    assert memory.answer == "?s"
    assert memory.fetched_nodes == ("m.0kim", "?m")
    kim = memory.relations_of("m.0kim")
    assert kim is not None and "people.person.spouse_s" in kim.forward
    assert "people.marriage.to" in memory.known_relations()
    assert memory.nodes_listing("people.person.spouse_s") == ("m.0kim", "?m")
    assert memory.called("set_answer") and not memory.called("execute")
    assert set(memory.last_values) == {"?s"}


def test_memory_is_read_only(session: Session) -> None:
    session.run("get_relation(Jamaica)")
    with pytest.raises(TypeError):
        session.memory.relations["x"] = None  # type: ignore[index]
    with pytest.raises(AttributeError):
        session.memory.answer = "?x"  # type: ignore[misc]


def test_program_query_and_steps(session: Session) -> None:
    run_all(session, MARRIAGE)
    assert session.program == Program.parse("\n".join(MARRIAGE))
    assert session.to_sparql() == session.query.to_sparql()
    assert session.step == len(MARRIAGE)
    assert [o.step for o in session.observations] == list(range(1, len(MARRIAGE) + 1))
    session.reset()
    assert session.query.is_empty and len(session.program) == 0 and session.memory.calls == ()


def test_run_accepts_calls_and_programs(session: Session) -> None:
    obs = session.run(Call.parse("get_relation(m.0kim)"))
    assert obs.ok and obs.call == Call.parse("get_relation(m.0kim)")
    observations = session.run_program("\n".join(MARRIAGE) + "\nexecute()")
    assert [o.ok for o in observations] == [True] * (len(MARRIAGE) + 1)
    assert observations[-1].answers == ("m.0p_casey",)


# -- errors never raise and change nothing --------------------------------------------------------

BAD_ACTIONS = [
    # (action, python status, error type)
    ("hello there", "parse_error", "ParseError"),
    ("", "no_action", "ParseError"),
    ("add_fact(m.0kim, a.b, ?x)\nadd_fact(m.0kim, a.b, ?y)", "multiple_actions", "ParseError"),
    ('add_fact(m.0kim, people.person.spouse_s, "oops)', "parse_error", "ParseError"),
    ("add_fact(m.0kim, people.person.spouse_s, ?x", "parse_error", "ParseError"),
    ("add_relation(m.0kim)", "unknown_function", "UnknownFunctionError"),
    ("add_fact(m.0kim, people.person.spouse_s)", "arity", "ArityError"),
    ("set_answer()", "arity", "ArityError"),
    ("execute(?x)", "arity", "ArityError"),
    ("add_fact(Barack Obama, people.person.spouse_s, ?x)", "bad_term", "UnknownEntityError"),
    ("get_relation(Barack Obama)", "bad_term", "UnknownEntityError"),
    ("add_fact(?x, not a relation, ?y)", "bad_term", "TermError"),
    ("add_type(m.0kim, people.person)", "bad_term", "TermError"),
    ("get_relation(?nowhere)", "query_error", "QueryError"),
    ("get_relation(?gone)", "query_error", "QueryError"),  # ?gone occurs only in a filter
    ("set_answer(?nowhere)", "query_error", "QueryError"),
    ("add_max(?nowhere)", "query_error", "QueryError"),
    ("add_count(?s, ?m)", "query_error", "QueryError"),
    ("add_filter(?s, ~, 3)", "query_error", "QueryError"),
    ("add_filter(3, <, 4)", "query_error", "QueryError"),
    ('add_fact(?x, a.b, "\ud800")', "bad_term", "TermError"),
]


@pytest.mark.parametrize(
    ("action", "status", "error_type"), BAD_ACTIONS, ids=[repr(a[0][:40]) for a in BAD_ACTIONS]
)
def test_errors_never_raise_and_change_nothing(
    session: Session, action: str, status: str, error_type: str
) -> None:
    run_all(session, MARRIAGE[:2])
    session.run("add_filter(?m, !=, ?gone)")  # ?gone occurs only in a filter
    query, program, memory = session.query, session.program, session.memory
    obs = session.run(action)
    assert not obs.ok
    assert obs.status == "error"
    assert obs.feedback.python.status == status
    assert obs.feedback.python.error_type == error_type
    assert obs.error and obs.text.startswith("Error")
    assert session.query is query and session.program is program and session.memory is memory
    assert session.run("execute()").feedback.python.error_code == "no_answer"  # still usable


def test_bad_term_feedback_locates_the_argument(session: Session) -> None:
    obs = session.run("add_fact(m.0kim, people.person.spouse_s, Barack Obama)")
    python = obs.feedback.python
    assert python.function == "add_fact"
    assert python.arg_index == 2
    assert python.arg_text == "Barack Obama"
    assert python.expected


def test_arity_feedback(session: Session) -> None:
    python = session.run("add_count()").feedback.python
    assert python.expected_arity == (1, 2) and python.got_arity == 0
    assert python.function == "add_count"


def test_unknown_function_feedback(session: Session) -> None:
    python = session.run("add_relation(m.0kim)").feedback.python
    assert python.function == "add_relation"
    assert "get_relation" in python.suggestions


def test_unbound_variable_in_get_relation_suggests(session: Session) -> None:
    session.run("add_fact(Kim Example, people.person.spouse_s, ?m)")
    python = session.run("get_relation(?x)").feedback.python
    assert python.error_code == "unbound_variable"
    assert "get_relation(?m)" in python.suggestions


def test_run_with_an_invalid_call_object(session: Session) -> None:
    obs = session.run(Call.of("add_relation", "m.0kim"))
    assert obs.feedback.python.status == "unknown_function"
    obs = session.run(Call.of("add_fact", "m.0kim"))
    assert obs.feedback.python.status == "arity"


# -- backend failures -------------------------------------------------------------------------------


class DownKB(OxigraphKB):
    """An Oxigraph KB whose engine has gone away."""

    error: type[Exception] = BackendUnavailableError

    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        raise self.error("connection refused", backend="test", query=query)


class SlowKB(DownKB):
    error = BackendTimeoutError


@pytest.mark.parametrize(("kb_class", "status"), [(DownKB, "backend_error"), (SlowKB, "timeout")])
@pytest.mark.parametrize(
    "action",
    ["get_relation(Kim Example)", "add_fact(Kim Example, people.person.spouse_s, ?m)"],
)
def test_backend_failure_is_never_empty(kb_class: type[DownKB], status: str, action: str) -> None:
    session = Session(kb_class(profile="freebase"), entities=ENTITIES)
    obs = session.run(action)
    assert obs.status == status
    assert obs.status != "empty"
    assert not obs.ok and obs.error
    assert obs.feedback.python.status == "ok"
    assert obs.text.startswith("Error")
    assert session.query.is_empty and len(session.program) == 0 and session.memory.calls == ()


def test_backend_failure_on_execute(kb: OxigraphKB) -> None:
    session = Session(kb, entities=ENTITIES)
    run_all(session, MARRIAGE)
    program, memory = session.program, session.memory
    session.kb = DownKB(profile="freebase")
    obs = session.run("execute()")
    assert obs.status == "backend_error" and obs.answers is None
    assert session.program is program and session.memory is memory


# -- guidelines -------------------------------------------------------------------------------------


class NoTypeObjectType:
    """A guideline checker that refuses add_fact with type.object.type."""

    def evaluate(self, feedback: Feedback) -> Hint | None:
        call = feedback.call
        if call is not None and call.name == "add_fact" and "type.object.type" in str(call):
            return Hint(code="T001", message="use add_type()", suggestions=("add_type(?x, t)",))
        return None


def test_a_hint_rolls_the_step_back(kb: OxigraphKB) -> None:
    session = Session(kb, entities=ENTITIES, guidelines=NoTypeObjectType())
    session.run("add_fact(Kim Example, people.person.spouse_s, ?m)")
    query, program, memory = session.query, session.program, session.memory
    obs = session.run("add_fact(?m, type.object.type, people.person)")
    assert obs.status == "hint" and not obs.ok
    assert obs.hint is not None and obs.hint.code == "T001"
    assert obs.text == "use add_type()"
    assert session.query is query and session.program is program and session.memory is memory
    assert session.run("get_relation(?m)").ok


def test_filters_on_unbound_variables_wait_for_their_variable(session: Session) -> None:
    """WebQSP programs start with add_filter(?x, !=, m.0x): intermediate steps must not be empty."""
    first = session.run("add_filter(?x, !=, m.03_r3)")
    assert first.ok and first.status == "ok"
    step = session.run("add_fact(m.03_r3, location.country.languages_spoken, ?lang)")
    assert step.status == "ok" and step.values["?lang"].total == 2
    assert "?x" in step.feedback.kb.unconstrained
    # the final query keeps the filter
    assert "FILTER (?x != ns:m.03_r3)" in session.query.to_sparql()


def test_answer_language_filter_applies_to_every_step(session: Session) -> None:
    session.run("add_fact(m.03_r3, type.object.name, ?name)")
    shown = session.run("set_answer(?name)")
    answers = session.run("execute()").answers
    assert shown.values["?name"].values == ("Jamaica",)  # not the @fr name
    assert answers == ("Jamaica",)


def test_a_result_hint_is_given_once() -> None:
    """A repeated action right after a KB (result-based) hint is accepted (HintPolicy)."""
    from pyql.guidelines import default_registry

    kb = OxigraphKB.from_file(KB_FILE, profile="freebase")
    s = Session(kb, entities={"Jamaica": "m.03_r3"}, guidelines=default_registry())
    s.run("get_relation(m.03_r3)")
    action = "add_fact(m.03_r3, location.country.official_language, ?lang)"
    first = s.run(action)
    assert first.hint is not None and first.hint.code.startswith("KB")
    assert len(s.program) == 1  # rolled back
    again = s.run(action)
    assert again.hint is None and again.status == "empty"
    assert str(s.program).splitlines()[-1] == action


def test_shown_values_order_is_the_sort_order_whatever_the_path() -> None:
    """The fast path for entity-only values orders exactly as the general sort key does."""
    from pyql.session import _first, _sort_key
    from pyql.terms import BlankNode, Entity, Literal

    ents = [Entity(f"http://x.org/{n}", n) for n in ("b", "a", "c", "a2", "B")]
    mixed = [*ents, Literal("10", "http://www.w3.org/2001/XMLSchema#integer"), Literal("9"),
             BlankNode("z"), Entity("http://x.org/noid")]
    many = [Entity(f"http://x.org/{i}", f"e{(i * 7919) % 101}") for i in range(101)]  # heap path
    same_id = [Entity("http://x.org/1", "a"), Entity("http://x.org/2", "a"), ents[0]]
    for cells in (ents, mixed, many, same_id):
        kinds = set(map(type, cells))
        expected = sorted(cells, key=_sort_key)
        assert _first(None, cells, kinds) == expected
        for n in (0, 1, 3, 20):
            assert _first(n, cells, kinds) == expected[:n]


def test_a_fact_between_two_constants_that_holds_is_not_empty() -> None:
    """The query has no variables: a matching fact is one solution of no columns."""
    from pyql.kb import OxigraphKB

    kb = OxigraphKB(profile="metaqa")
    kb.load_bytes(b"<http://pyql.dev/metaqa/entity/Kismet> <http://pyql.dev/metaqa/relation/"
                  b"directed_by> <http://pyql.dev/metaqa/entity/William_Dieterle> .",
                  format="ntriples")
    rs = kb.select("SELECT * WHERE { <http://pyql.dev/metaqa/entity/Kismet> "
                   "<http://pyql.dev/metaqa/relation/directed_by> "
                   "<http://pyql.dev/metaqa/entity/William_Dieterle> }")
    assert rs.columns == () and rs.rows == ((),)
    s = Session(kb, entities={"Kismet": "Kismet", "William Dieterle": "William Dieterle"})
    holds = s.run("add_fact(Kismet, directed_by, William Dieterle)")
    assert holds.ok and holds.status == "ok"
    s.reset()
    assert s.run("add_fact(Kismet, written_by, William Dieterle)").status == "empty"
