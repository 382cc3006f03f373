"""The original QueryAgent prompts' tool spellings (the paper's demos) read as canonical calls.

WebQSP's ``add_time_constrain(var, relation, year)`` and MetaQA's ``relate(relation)`` /
``get_relation()`` (prompts/paper/webqsp.txt, prompts/paper/metaqa.txt).
"""

from __future__ import annotations

import pytest

from pyql.errors import ArityError, UnknownFunctionError
from pyql.kb import OxigraphKB
from pyql.program import Call, Program, parse_call
from pyql.session import Session
from tests.support.metaqa import metaqa_kb

FILMS = """\
The Green Mile|written_by|Stephen King
The Green Mile|written_by|Frank Darabont
The Green Mile|directed_by|Frank Darabont
The Shawshank Redemption|written_by|Stephen King
The Shawshank Redemption|directed_by|Frank Darabont
Firestarter|written_by|Stephen King
Firestarter|directed_by|Mark L. Lester
The Majestic|directed_by|Frank Darabont
"""


@pytest.fixture(scope="module")
def kb() -> OxigraphKB:
    return metaqa_kb(FILMS)


def session(kb: OxigraphKB) -> Session:
    return Session(kb, entities={"The Green Mile": "The Green Mile"})


# -- WebQSP: add_time_constrain(var, relation, year) -----------------------------------------------

@pytest.mark.parametrize(("written", "canonical"), [
    ("add_time_constrain(?team, sports.sports_team_roster.from, 2010)",
     'add_time_constrain(?team, sports.sports_team_roster.from, sports.sports_team_roster.to, '
     '"2010", "2010")'),
    ("add_time_constrain(?x, government.government_position_held.to, 2011)",
     'add_time_constrain(?x, government.government_position_held.from, '
     'government.government_position_held.to, "2011", "2011")'),
    ("add_time_constrain(?x, people.marriage.end_date, 1999)",
     'add_time_constrain(?x, people.marriage.start_date, people.marriage.end_date, "1999", '
     '"1999")'),
    ("add_time_constrain(?x, a.b.from_date, 2001)",
     'add_time_constrain(?x, a.b.from_date, a.b.to_date, "2001", "2001")'),
    ("add_time_constrain(?film, film.film.initial_release_date, 1997)",
     'add_time_constrain(?film, film.film.initial_release_date, film.film.initial_release_date, '
     '"1997", "1997")'),
])
def test_three_argument_time_constraint_is_the_five_argument_call(written: str,
                                                                  canonical: str) -> None:
    program = Program.parse(written)
    assert str(program) == canonical
    assert Program.parse(str(program)) == program


def test_three_argument_time_constraint_keeps_the_period_containing_the_year() -> None:
    from pyql.kb import OxigraphKB as KB

    kb = KB(profile="freebase")
    fb = "http://rdf.freebase.com/ns/"
    rows = [("m.0t", "sports.sports_team.roster", "m.0r1"), ("m.0t", "sports.sports_team.roster", "m.0r2")]
    dates = [("m.0r1", "from", "2008"), ("m.0r1", "to", "2011"), ("m.0r2", "from", "2012")]
    text = [f"<{fb}{s}> <{fb}{r}> <{fb}{o}> ." for s, r, o in rows]
    text += [f'<{fb}{s}> <{fb}sports.sports_team_roster.{r}> "{y}" .' for s, r, y in dates]
    kb.load_bytes("\n".join(text).encode(), format="ntriples")
    s = Session(kb, entities={"team": "m.0t"})
    s.run("add_fact(m.0t, sports.sports_team.roster, ?r)")
    obs = s.run("add_time_constrain(?r, sports.sports_team_roster.from, 2010)")
    assert obs.ok, obs.text
    assert s.run("execute()").answers == ("m.0r1",)
    assert "add_time_constrain(?r, sports.sports_team_roster.from, sports.sports_team_roster.to" \
        in str(s.program)
    # a Call object in the paper's spelling too (e.g. built by a strategy)
    call = Call.of("add_time_constrain", "?r", "sports.sports_team_roster.from", "2012")
    assert s.parse(call).args[2].value == "sports.sports_team_roster.to"


def test_other_arities_are_still_arity_errors() -> None:
    with pytest.raises(ArityError):
        Program.parse("add_time_constrain(?x, a.b.from, 2010, 2011)")


# -- MetaQA: relate(relation), get_relation() ------------------------------------------------------

#: the actions of the original MetaQA 3-hop demo (prompts/paper/metaqa.txt), verbatim
DEMO = ["relate(writtern_by)", "get_relation()", "relate(writtern_by)", "get_relation()",
        "relate(directed_by)", "execute()"]


def test_the_demo_actions_verbatim_typo_included(kb: OxigraphKB) -> None:
    s = session(kb)
    first = s.run(DEMO[0])
    # `writtern_by` is no relation: the usual feedback of an add_fact with it, no crash
    assert first.error is None
    assert first.status == "empty"
    assert str(first.call) == "add_fact(The Green Mile, writtern_by, ?e1)"
    # with ERASER: the hint of an empty add_fact with a relation not chosen from a list
    hinted = Session(kb, entities={"The Green Mile": "The Green Mile"}, guidelines=True)
    obs = hinted.run(DEMO[0])
    assert obs.error is None and obs.hint is not None and "writtern_by" in obs.hint.message
    assert len(hinted.program) == 0


def test_relate_walks_from_the_current_node(kb: OxigraphKB) -> None:
    s = Session(kb, entities={"The Green Mile": "The Green Mile"}, walk=True)
    assert s.run("get_relation()").relations.forward == ("directed_by", "written_by")
    writers = s.run("relate(written_by)")
    assert str(writers.call) == "add_fact(The Green Mile, written_by, ?e1)"
    assert set(writers.values["?e1"].values) == {"Frank Darabont", "Stephen King"}
    # the writers have written_by only backward: the walk goes back to their films
    assert s.run("get_relation()").relations.backward == ("directed_by", "written_by")
    films = s.run("relate(written_by)")
    assert str(films.call) == "add_fact(?e2, written_by, ?e1)"
    s.run("relate(directed_by)")
    done = s.run("execute()")
    assert set(done.answers) == {"Frank Darabont", "Mark L. Lester"}
    assert str(s.program) == (
        "get_relation(The Green Mile)\n"
        "add_fact(The Green Mile, written_by, ?e1)\n"
        "get_relation(?e1)\n"
        "add_fact(?e2, written_by, ?e1)\n"
        "add_fact(?e2, directed_by, ?e3)\n"
        "set_answer(?e3)\n"
        "execute()")


def test_a_walk_program_replays(kb: OxigraphKB) -> None:
    s = session(kb)
    for action in ["relate(written_by)", "relate(written_by)", "relate(directed_by)", "execute()"]:
        s.run(action)
    replayed = session(kb)
    answers = [o.answers for o in replayed.run_program(str(s.program))][-1]
    assert answers == s.observations[-1].answers
    query = Program.parse(str(s.program)).to_query("metaqa", s.entities)
    assert set(a.short for a, in kb.select(query.to_sparql()).rows) == set(answers)


def test_get_relation_without_argument_outside_a_walk_is_an_arity_error(kb: OxigraphKB) -> None:
    s = session(kb)  # walk=False: as on Freebase, get_relation() is a mistake (PY104's case)
    assert s.run("get_relation()").feedback.python.status == "arity"
    s.run("relate(written_by)")  # a walk has started: get_relation() is its current node's
    assert s.run("get_relation()").relations.backward == ("directed_by", "written_by")


def test_walk_aliases_need_a_session() -> None:
    with pytest.raises(UnknownFunctionError):
        parse_call("relate(directed_by)")
    with pytest.raises(ArityError):
        parse_call("get_relation()")


def test_relate_without_a_linked_entity(kb: OxigraphKB) -> None:
    obs = Session(kb).run("relate(directed_by)")
    assert obs.feedback.python.error_code == "no_current_entity"


def test_relate_both_ways_walks_on_through_the_node() -> None:
    # "James Dean" is an actor and a film (MetaQA names entities by label)
    kb = metaqa_kb("The James Dean Story|starred_actors|James Dean\n"
                   "Giant|starred_actors|James Dean\n"
                   "James Dean|starred_actors|James Franco")
    s = Session(kb, entities={"The James Dean Story": "The James Dean Story"})
    s.run("relate(starred_actors)")
    second = s.run("relate(starred_actors)")  # back to the films, not on to James Franco
    assert str(second.call) == "add_fact(?e2, starred_actors, ?e1)"
    assert set(second.values["?e2"].values) == {"Giant", "The James Dean Story"}
