"""The paper's case studies (Figures 5, 6 and 7) replayed as Session step sequences on small
Freebase-profile fixture KBs: the same steps get hints of the same kinds, correct steps get plain
results, and the questions end with the figures' answers."""

from __future__ import annotations

from pyql.session import Observation
from tests.guidelines.support import run_steps

FLOAT_1 = '"1.0"^^<http://www.w3.org/2001/XMLSchema#float>'
FREQ = "measurement_unit.angular_velocity_unit.frequency_in_radians_per_second"


def _codes(obs: list[Observation]) -> list[str | None]:
    return [o.hint.code if o.hint else None for o in obs]


def test_figure5_grailqa_angular_frequency() -> None:
    obs = run_steps(
        [
            "add_filter(?angular_frequency, =, 1.0)",
            "get_relation(1.0)",
            f"add_filter(?angular_frequency, {FREQ}, 1.0)",
            "get_relation(1.0)",
            f"add_fact(?angular_frequency, {FREQ}, 1.0)",
            'set_answer("yes")',
            "set_answer(?angular_frequency)",
            "execute()",
        ],
        kb="figure5", entities={"1.0": FLOAT_1},
    )
    # 1: filter before get_relation; 3: a relation as operator; 6: a literal answer
    assert _codes(obs) == ["RM205", None, "PY203", None, None, "PY207", None, None]
    assert obs[0].text == "You should use get_relation() first. Choose a parameter from ['1.0']."
    assert FREQ in obs[1].relations.backward
    assert obs[2].text.startswith(f"You used {FREQ} as operator in add_filter, which is invalid.")
    assert obs[4].values["?angular_frequency"].values == ("Radian per second",)
    assert obs[5].text.startswith("yes is invalid. You must set a")
    assert "['?angular_frequency']" in obs[5].text
    assert obs[7].answers == ("m.0radps",)


def test_figure6_graphq_live365_streams() -> None:
    obs = run_steps(
        [
            "get_relation(m.04rtjj)",
            "add_fact(m.04rtjj, broadcast.broadcast_on, ?stream)",
            "Since we couldn't find a suitable relation to directly represent the concept of "
            '"streams available on live365", we need to use a different approach to solve this '
            "question.",
            "get_relation(?stream)",
            "get_relation(m.04rtjj)",
            # the figure prints the triple the other way round; on Freebase the listed forward
            # relation starts from m.04rtjj (test_figure6_reversed_triple shows the hint)
            "add_fact(m.04rtjj, broadcast.distributor.distributes, ?stream)",
            "set_answer(?stream)",
            "execute()",
        ],
        kb="figure6", entities={"live365": "m.04rtjj"},
    )
    # 2: empty with the head's relation list; 3: invalid action; 4: unbound variable
    assert _codes(obs) == [None, "KB201", "PY102", "RM202", None, None, None, None]
    listing = str({"forward": list(obs[0].relations.forward),
                   "backward": list(obs[0].relations.backward)})
    assert f"The relations of m.04rtjj includes: {listing}" in obs[1].text
    assert obs[2].text.startswith("Invalid action, next time you must choose an action from:")
    assert obs[3].hint is not None and obs[3].hint.suggestions == ("get_relation(m.04rtjj)",)
    assert "You need to first query for get_relation(m.04rtjj)" in obs[3].text
    assert len(obs[7].answers or ()) == 5
    assert "ASCAP Nashville - 128kbps Stream" in obs[7].values["?stream"].values


def test_figure6_reversed_triple() -> None:
    obs = run_steps(["get_relation(m.04rtjj)",
                     "add_fact(?stream, broadcast.distributor.distributes, m.04rtjj)"],
                    kb="figure6", entities={"live365": "m.04rtjj"})
    assert _codes(obs) == [None, "KB202"]
    assert ("write add_fact(m.04rtjj, broadcast.distributor.distributes, ?stream) instead"
            in obs[1].text)


def test_figure7_webqsp_florida_panthers() -> None:
    obs = run_steps(
        [
            "get_relation(m.0j8js)",
            "add_fact(m.0j8js, sports.sports_team.venue, ?place)",
            "get_relation('UnName_Entity')",
            "get_relation(?place)",
            "add_fact(?place, sports.team_venue_relationship.venue, m.0j8js)",
            "get_relation(m.0j8js)",
            # the figure reuses ?place, which already holds the venue CVTs of step 2 (so the
            # fact would be empty here: see the KB202 cases); a fresh variable gets the arenas
            "add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)",
            "set_answer(?arena)",
            "execute()",
        ],
        kb="figure7", entities={"florida panthers": "m.0j8js"},
    )
    # 3: a label is not a node; 5: empty with ?place's relation list
    assert _codes(obs) == [None, None, "RM201", None, "KB202", None, None, None, None]
    assert obs[1].values["?place"].values == ("UnName_Entity", "UnName_Entity")
    assert "UnName_Entity is invalid in get_relation" in obs[2].text
    assert "such as ['?place']" in obs[2].text and "such as ['m.0j8js']" in obs[2].text
    assert set(obs[3].relations.forward) == {
        "sports.team_venue_relationship.from", "sports.team_venue_relationship.team",
        "sports.team_venue_relationship.to", "sports.team_venue_relationship.venue"}
    assert obs[4].text.startswith(
        "The relation sports.team_venue_relationship.venue that you choose leads to an empty "
        "result. Re-think the question again and choose another relation from "
        "['sports.team_venue_relationship.from'")
    assert set(obs[8].answers or ()) == {"m.0bbt", "m.0miaa"}
    assert set(obs[8].values["?arena"].values) == {"BB&T Center", "Miami Arena"}
