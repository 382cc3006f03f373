"""The paper's case studies (appendix G, Figures 5, 6 and 7) replayed through the QueryAgent.

Each figure's model output — ``Thought n`` / ``Action n`` as printed — is the script of a
:class:`ScriptedLLM`; :class:`QueryAgent` (``guidelines=True``) runs it on the figure's fixture KB
(``tests/guidelines/fixtures/figure{5,6,7}.ttl``) with the figure's entity linking. At the steps
where the figure shows an ``ERROR_INFO`` the agent's observation is a hint of the same guideline
kind (the codes established by ``tests/guidelines/test_figures.py``) followed by the retry
wording, the step is rolled back, and every other step is a plain result; the run ends with the
figure's answers.

The text is the paper's (``../shared/seeds/queryagent-eraser.txt``), verbatim: the Thought/Action
lines of the three figures have no extraction artefacts, so nothing in them was changed
(:func:`test_scripts_are_the_papers_text` checks this against the paper when it is there). The
only artefact is Figure 5's entity line, ``{'1.0': '1.0'^http://www.w3.org/2001/XMLSchema#float'}``
(the ``^^<...>`` of the typed literal was lost), which is the float literal ``FLOAT_1`` here.

Deviations, the ones documented in ``tests/guidelines/test_figures.py`` (fixture limits):

- Figure 6, Action 6: the figure writes the triple backwards,
  ``add_fact(?stream, broadcast.distributor.distributes, m.04rtjj)``; on Freebase the listed
  forward relation starts from m.04rtjj, so the replay writes it the other way round.
  :func:`test_figure6_verbatim_action_6_is_corrected` runs the verbatim action: KB202, then the
  corrected triple.
- Figure 7, Action 7: the figure reuses ``?place``, which already holds the venue CVTs of step 2
  (the fact would be empty here); the replay uses a fresh ``?arena`` and, since the query then
  has two variables, sets the answer (one added step, ours) before the figure's step 8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from pyql.agent import QueryAgent, ScriptedLLM
from pyql.agent.strategies.queryagent.prompts import RETRY_WORDING
from pyql.agent.strategies.queryagent.strategy import Result
from tests.conftest import REPO
from tests.guidelines.support import fixture_kb

PAPER = REPO.parent / "shared" / "seeds" / "queryagent-eraser.txt"

FLOAT_1 = '"1.0"^^<http://www.w3.org/2001/XMLSchema#float>'
FREQ = "measurement_unit.angular_velocity_unit.frequency_in_radians_per_second"


@dataclass(frozen=True)
class PaperStep:
    """One step of a figure as printed: its number, its Thought line(s) and its Action."""

    n: int
    thoughts: tuple[str, ...]
    action: str

    def reply(self, n: int | None = None, action: str | None = None) -> str:
        """The model's output for this step (``n``/``action`` replace the printed ones)."""
        n = self.n if n is None else n
        lines = [f"Thought {n}: {t}" for t in self.thoughts]
        return "\n".join([*lines, f"Action {n}: {self.action if action is None else action}"])


def step(n: int, *lines: str) -> PaperStep:
    *thoughts, action = lines
    return PaperStep(n, tuple(thoughts), action)


# -- the figures' text, verbatim -----------------------------------------------------------------

FIGURE5 = (
    step(1, "This question aims to determine if the angular frequency is defined as 1.0 radians "
         "per second. To construct the query, we need to first constrain the angular frequency to "
         "be 1.0 radians per second and then check if there is any result.",
         "add_filter(?angular_frequency, =, 1.0)"),
    step(2, "Based on the question, we need to find the relation for the entity '1.0'. Let's use "
         "the get_relation() action to get the relations for this entity.",
         "get_relation(1.0)"),
    step(3, "Based on the relations obtained for the entity '1.0', there is a relation called "
         f"'{FREQ}' which seems to be related to angular frequency. We can use this relation to "
         "constrain the angular frequency to be 1.0 radians per second.",
         f"add_filter(?angular_frequency, {FREQ}, 1.0)"),
    # the figure prints two Thought 4 lines before Action 4: the reply has both
    step(4, f"Based on the error message, it seems that the relation '{FREQ}' cannot be used as "
         "an operator in the add_filter() action. We need to find another way to construct the "
         "query.",
         f"Since we cannot directly use the relation '{FREQ}' as an operator, we can try to find "
         "the relations for the entity '1.0' and see if there is any relation that can help us "
         "determine if the angular frequency is defined as 1.0 radians per second.",
         "get_relation(1.0)"),
    step(5, "Based on the relations obtained for the entity '1.0', there is a relation called "
         f"'{FREQ}' which seems to be related to angular frequency. We can use this relation to "
         "constrain the angular frequency to be 1.0 radians per second.",
         f"add_fact(?angular_frequency, {FREQ}, 1.0)"),
    step(6, "By executing the current query, we get the value of variable ?angular_frequency as "
         "['Radian per second']. This means that the angular frequency is defined as 1.0 radians "
         'per second. Therefore, the answer to the question is "yes".',
         'set_answer("yes")'),
    step(7, 'Based on the error message, it seems that I cannot set the answer as "yes". I need '
         "to set the answer as the variable that represents the angular frequency, which is "
         '"?angular_frequency".',
         "set_answer(?angular_frequency)"),
    step(8, "This SPARQL query seems to represent the intent of the question. We can now execute "
         "it to get the final answer.",
         "execute()"),
)

_LIVE365 = ('Since we couldn\'t find a suitable relation to directly represent the concept of '
            '"streams available on live365", ')
_STREAM = (_LIVE365 + "we may need to use a different approach to solve this question. One "
           'possible approach is to find a relation that represents the concept of "stream" and '
           "then filter the results to only include streams that are available on live365. "
           'Let\'s try to find a relation that represents the concept of "stream".')

FIGURE6 = (
    step(1, "This question aims to find all the streams available on live365. To construct the "
         "query, we need to first constrain that the streams are available on live365. We can use "
         "the relation 'broadcast.broadcast_on' to represent this constraint. Finally, we need to "
         "set the answer variable to be the streams (?stream) and execute the query.",
         "get_relation(m.04rtjj)"),
    step(2, "Based on the relations, the 'broadcast.broadcast_on' relation is the most possible "
         "relation. This is a forward relation. So we constrain (m.04rtjj, "
         "broadcast.broadcast_on, ?stream).",
         "add_fact(m.04rtjj, broadcast.broadcast_on, ?stream)"),
    step(3, "Based on the relations provided, none of them seem to directly represent the concept "
         'of "streams available on live365". We may need to use a different approach to solve '
         "this question.",
         _LIVE365 + "we need to use a different approach to solve this question."),
    step(4, _STREAM, "get_relation(?stream)"),
    step(5, _STREAM, "get_relation(m.04rtjj)"),
    step(6, "Based on the relations, the 'broadcast.distributor.distributes' relation is the most "
         "possible relation. This is a backward relation. So we constrain (?stream, "
         "broadcast.distributor.distributes, m.04rtjj).",
         "add_fact(?stream, broadcast.distributor.distributes, m.04rtjj)"),
    step(7, "By executing the current query, we get some instances of ?stream, and these "
         "instances seem to represent different streams. This result meets our expectation. Now "
         "we need to set the answer variable to be ?stream and execute the query to get the "
         "final answer.",
         "set_answer(?stream)"),
    step(8, "This SPARQL query seems to represent the intent of the question. We can now execute "
         "it to get the final answer.",
         "execute()"),
)

FIGURE7 = (
    step(1, "This question aims to find the place where the Florida Panthers (m.0j8js) play. To "
         "construct the query, we need to first find the relation between the Florida Panthers "
         "and the place they play, and then constrain the query to only return the corresponding "
         "place as the answer.",
         "get_relation(m.0j8js)"),
    step(2, "Based on the above relations, the most possible relation to find the place where the "
         "Florida Panthers play is 'sports.sports_team.venue'. So we constrain (m.0j8js, "
         "sports.sports_team.venue, ?place).",
         "add_fact(m.0j8js, sports.sports_team.venue, ?place)"),
    step(3, "By executing the current query, we get two instances of ?place, which are "
         "'UnName_Entity'. This result does not meet our expectation. We need to further "
         "constrain the query to get the actual place where the Florida Panthers play. Let's "
         "query for the relations of 'UnName_Entity'.",
         "get_relation('UnName_Entity')"),
    step(4, "There seems to be an error in the query. We cannot directly query for the relations "
         "of 'UnName_Entity'. Instead, we need to use the get_relation() action with a valid "
         "variable or Freebase mid. Let's modify the query to use a valid variable.",
         "get_relation(?place)"),
    step(5, "Based on the above relations, the most possible relation to find the place where the "
         "Florida Panthers play is 'sports.team_venue_relationship.venue'. So we constrain "
         "(?place, sports.team_venue_relationship.venue, m.0j8js).",
         "add_fact(?place, sports.team_venue_relationship.venue, m.0j8js)"),
    step(6, "There seems to be an error in the query. The relation "
         "'sports.team_venue_relationship.venue' does not provide any results. We need to rethink "
         "the question and choose another relation to find the place where the Florida Panthers "
         "play.",
         "get_relation(m.0j8js)"),
    step(7, "Based on the above relations, the most possible relation to find the place where the "
         "Florida Panthers play is 'sports.sports_team.arena_stadium'. So we constrain (m.0j8js, "
         "sports.sports_team.arena_stadium, ?place).",
         "add_fact(m.0j8js, sports.sports_team.arena_stadium, ?place)"),
    step(8, "This SPARQL query seems to represent the intent of the question. We can now execute "
         "it to get the final answer.",
         "execute()"),
)

#: Figure 7's Observation 1 / 6 (the team's relations: all forward in the fixture)
PANTHERS_RELATIONS = [
    "base.ontologies.ontology_instance.equivalent_instances", "broadcast.genre.content",
    "ice_hockey.hockey_team.captain", "ice_hockey.hockey_team.coach",
    "ice_hockey.hockey_team.conference", "ice_hockey.hockey_team.division",
    "kg.object_profile.prominent_type", "sports.professional_sports_team.draft_picks",
    "sports.professional_sports_team.owner_s", "sports.sports_team.arena_stadium",
    "sports.sports_team.coaches", "sports.sports_team.colors", "sports.sports_team.league",
    "sports.sports_team.location", "sports.sports_team.roster", "sports.sports_team.sport",
    "sports.sports_team.team_mascot", "sports.sports_team.venue", "type.object.key",
    "user.avh.default_domain.ellerdale_topic.ellerdale_id",
    "user.robert.default_domain.daylife.hero_image_id",
]
VENUE_RELATIONS = [
    "sports.team_venue_relationship.from", "sports.team_venue_relationship.team",
    "sports.team_venue_relationship.to", "sports.team_venue_relationship.venue",
]
STREAMS = ["ASCAP Nashville - 128kbps Stream", "Capital Radio - 16kbps Stream",
           "ASCAP Concert - 128kbps Stream", "POP GOES THE 70's! - 16kbps Stream",
           "Wild 4 The 80's - 16kbps Stream"]


def run(replies: list[str], kb: str, question: str, entities: dict[str, str]) -> Result:
    llm = ScriptedLLM(replies)
    result = QueryAgent(llm, fixture_kb(kb), guidelines=True).run(question, entities)
    assert llm.remaining == 0
    return result


def hints(result: Result) -> list[str | None]:
    return [s.hint for s in result.steps]


def check_steps(result: Result) -> None:
    """A hinted step is rolled back and ends with the retry wording; any other step is a plain,
    accepted result (no ERASER wording, no error)."""
    for s in result.steps:
        if s.hint is not None:
            assert not s.accepted and s.status == "hint"
            assert s.observation.endswith(RETRY_WORDING.format(n=s.n + 1))
        else:
            assert s.accepted and s.status == "ok", (s.n, s.observation)
            assert "re-generate" not in s.observation and not s.observation.startswith("Error")
    assert result.finished and result.stop_reason == "execute"


def relations(observation: str) -> tuple[list[str], list[str]]:
    """The forward and backward lists of a rendered relation observation."""
    m = re.fullmatch(r"\{'forward': \[(.*)\], 'backward': \[(.*)\]\}", observation)
    assert m is not None, observation
    forward, backward = (re.findall(r"'([^']*)'", part) for part in m.groups())
    return forward, backward


# -- Figure 5 (GrailQA) ----------------------------------------------------------------------------


def test_figure5_grailqa_angular_frequency() -> None:
    result = run([s.reply() for s in FIGURE5], "figure5",
                 "is angular frequency be defined by 1.0 radians per second?", {"1.0": FLOAT_1})
    # ERROR_INFO at 1 (filter before get_relation), 3 (a relation as operator), 6 ("yes")
    assert hints(result) == ["RM205", None, "PY203", None, None, "PY207", None, None]
    check_steps(result)
    obs = [s.observation for s in result.steps]
    # the figure's Observation 1, word for word (without the "ERROR_INFO: " label)
    assert obs[0] == ("You should use get_relation() first. Choose a parameter from ['1.0']. "
                      "Please re-generate only Thought 2 and Action 2.")
    # Observations 2 and 4: no forward relation; the figure's backward relations are listed
    for text in (obs[1], obs[3]):
        forward, backward = relations(text)
        assert forward == [] and {
            "astronomy.celestial_object.magnitude", "base.years.years.leap_year",
            "baseball.batting_statistics.rbis", "baseball.lifetime_batting_statistics.ibbs",
            FREQ} == set(backward)
    assert obs[2].startswith(
        f"You used {FREQ} as operator in add_filter, which is invalid. I strongly suggest you "
        "carefully check whether a comparison step and add_filter() is needed. If not needed and "
        "the result already meets our expectation, use set_answer() to determine which variable "
        "to return as")
    assert "make sure the second argument is one of [=, !=, >, <, >=, <=]." in obs[2]
    assert f"use add_fact(?angular_frequency, {FREQ}, 1.0)" in obs[2]  # pyql names the fix
    assert obs[5].startswith("yes is invalid. You must set a")
    assert ("Existing variables includes: ['?angular_frequency']. Please choose proper variable "
            "and set again.") in obs[5]
    # Observations 5, 7 and 8, word for word
    assert obs[4] == obs[6] == obs[7] == (
        "The value of variable ?angular_frequency is ['Radian per second']")
    # Answer: ['Radian per second'] (the label of m.0radps)
    assert result.answers == ("m.0radps",)
    # the two Thought 4 lines reach the trajectory as one thought
    assert result.steps[3].thought == "\n".join(FIGURE5[3].thoughts)


# -- Figure 6 (GraphQ) -----------------------------------------------------------------------------


def figure6_replies() -> list[str]:
    # Action 6 written forward (see the module docstring), the Thought kept as printed
    forward = "add_fact(m.04rtjj, broadcast.distributor.distributes, ?stream)"
    return [s.reply(action=forward if s.n == 6 else None) for s in FIGURE6]


def test_figure6_graphq_live365_streams() -> None:
    result = run(figure6_replies(), "figure6", "find all the streams available on live365.",
                 {"live365": "m.04rtjj"})
    # ERROR_INFO at 2 (empty, relation not listed), 3 (prose as action), 4 (unbound variable)
    assert hints(result) == [None, "KB201", "PY102", "RM202", None, None, None, None]
    check_steps(result)
    obs = [s.observation for s in result.steps]
    forward, backward = relations(obs[0])
    assert {"broadcast.content.artist", "broadcast.distributor.distributes",
            "kg.object_profile.prominent_type"} <= set(forward)
    assert {"broadcast.artist.content", "broadcast.broadcast.distributor",
            "type.type.instance"} <= set(backward)
    assert obs[4] == obs[0]  # Observation 5: the same relations again
    assert obs[1].startswith(
        "The relation broadcast.broadcast_on that you choose leads to an empty result. The "
        f"relations of m.04rtjj includes: {obs[0]}. Try to change a relation that matches the "
        "question best. If it still doesn't work, you may use other approach to solve the "
        "question.")
    assert obs[2].startswith("Invalid action, next time you must choose an action from: ")
    for name in ("get_relation", "add_fact", "add_max", "add_min", "add_count", "add_filter",
                 "set_answer", "execute"):
        assert f"{name}()" in obs[2]
    # the Freebase prompt profile's tool set (Table 10), not every function of the toolset
    assert "add_type()" not in obs[2] and "add_time_constrain()" not in obs[2]
    assert obs[3].startswith(
        "You cannot query for the relations of ?stream because it hasn't been bound to anything. "
        "You need to first query for get_relation(m.04rtjj).")
    # Observations 6, 7 and 8: the five streams
    assert obs[5] == obs[6] == obs[7]
    assert obs[5].startswith("The value of variable ?stream is [")
    assert all(name in obs[5] for name in STREAMS)
    assert len(result.answers) == 5 and set(result.answers) == {f"m.0str{i}" for i in range(1, 6)}
    assert re.search(r"m\.04rtjj\s+\S*broadcast\.distributor\.distributes>?\s+\?stream",
                     result.query)


def test_figure6_verbatim_action_6_is_corrected() -> None:
    """The figure's own Action 6 (the triple backwards) is refused with KB202, which names the
    fix; the corrected triple then gives the figure's streams."""
    replies = [s.reply() for s in FIGURE6[:6]]
    replies.append(FIGURE6[5].reply(
        n=7, action="add_fact(m.04rtjj, broadcast.distributor.distributes, ?stream)"))
    replies += [s.reply(n=s.n + 1) for s in FIGURE6[6:]]
    result = run(replies, "figure6", "find all the streams available on live365.",
                 {"live365": "m.04rtjj"})
    assert hints(result) == [None, "KB201", "PY102", "RM202", None, "KB202", None, None, None]
    check_steps(result)
    assert ("write add_fact(m.04rtjj, broadcast.distributor.distributes, ?stream) instead"
            in result.steps[5].observation)
    assert set(result.answers) == {f"m.0str{i}" for i in range(1, 6)}


# -- Figure 7 (WebQSP) -----------------------------------------------------------------------------


def figure7_replies() -> list[str]:
    replies = [s.reply() for s in FIGURE7[:6]]
    # Action 7 with a fresh variable (see the module docstring), the Thought kept as printed
    replies.append(FIGURE7[6].reply(
        action="add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)"))
    # the added step (not in the figure): choose the answer among ?place and ?arena
    replies.append("Thought 8: By executing the current query, we get the arenas where the "
                   "Florida Panthers play. Now we need to set the answer variable to be ?arena.\n"
                   "Action 8: set_answer(?arena)")
    replies.append(FIGURE7[7].reply(n=9))
    return replies


def test_figure7_webqsp_florida_panthers() -> None:
    result = run(figure7_replies(), "figure7", "where do florida panthers play",
                 {"florida panthers": "m.0j8js"})
    # ERROR_INFO at 3 (a label is not a node) and 5 (empty, relation listed for ?place)
    assert hints(result) == [None, None, "RM201", None, "KB202", None, None, None, None]
    check_steps(result)
    obs = [s.observation for s in result.steps]
    # Observations 1 and 6: the team's relations as the figure lists them (the figure prints one
    # list; the fixture's venue CVTs also link back to the team)
    for text in (obs[0], obs[5]):
        forward, backward = relations(text)
        assert forward == PANTHERS_RELATIONS
        assert backward == ["sports.team_venue_relationship.team"]
    # Observation 2, word for word
    assert obs[1] == "The value of variable ?place is ['UnName_Entity', 'UnName_Entity']"
    assert obs[2].startswith("UnName_Entity is invalid in get_relation")
    assert "It must be an existing variable, such as ['?place']" in obs[2]
    assert "such as ['m.0j8js']" in obs[2]
    # Observation 4: the relations of the venue CVTs
    forward, backward = relations(obs[3])
    assert forward == VENUE_RELATIONS
    # Observation 5, word for word up to the end of the figure's list (?place also has the
    # backward sports.sports_team.venue here)
    assert obs[4].startswith(
        "The relation sports.team_venue_relationship.venue that you choose leads to an empty "
        "result. Re-think the question again and choose another relation from "
        f"{str(VENUE_RELATIONS)[:-1]}")
    # Observation 7: the figure's two arenas
    assert obs[6].endswith("The value of variable ?arena is ['BB&T Center', 'Miami Arena']")
    assert obs[7] == obs[8] == "The value of variable ?arena is ['BB&T Center', 'Miami Arena']"
    # Answer: ['BB&T Center', 'Miami Arena']
    assert set(result.answers) == {"m.0bbt", "m.0miaa"}


# -- the scripts are the paper's text --------------------------------------------------------------


def paper_figures() -> dict[int, list[PaperStep]]:
    """The Thought/Action lines of appendix G, by figure (5, 6, 7)."""
    text = PAPER.read_text(encoding="utf-8")
    case_study = text[text.index("G Case Study"):]
    figures: dict[int, list[PaperStep]] = {}
    current: list[tuple[str, int, str]] = []
    for line in case_study.splitlines():
        caption = re.match(r"Figure (\d+): ", line)
        if caption:
            steps: list[PaperStep] = []
            for kind, n, body in current:
                if kind == "Thought" and (not steps or steps[-1].action):
                    steps.append(PaperStep(n, (body,), ""))
                elif kind == "Thought":
                    steps[-1] = PaperStep(n, (*steps[-1].thoughts, body), "")
                else:
                    steps[-1] = PaperStep(n, steps[-1].thoughts, body)
            figures[int(caption.group(1))] = steps
            current = []
            continue
        m = re.match(r"(Thought|Action) (\d+): (.*)$", line)
        if m:
            current.append((m.group(1), int(m.group(2)), m.group(3)))
    return figures


def test_scripts_are_the_papers_text() -> None:
    if not PAPER.is_file():
        pytest.skip(f"the paper's text is not at {PAPER}")
    figures = paper_figures()
    assert figures[5] == list(FIGURE5)
    assert figures[6] == list(FIGURE6)
    assert figures[7] == list(FIGURE7)
