"""SRP's prompts (Appendix C) and the parsers of the paper's output formats."""

from __future__ import annotations

import pytest

from pyql.agent.strategies.srp.prompts import (
    SRPParseError,
    answer_messages,
    edit_messages,
    judge_messages,
    parse_answer,
    parse_edit,
    parse_judge,
    parse_plan,
    parse_relation_check,
    plan_messages,
    relation_check_messages,
    render_triple,
)
from pyql.agent.strategies.srp.references import Reference

REF = Reference(id="r1", question="who directed [Heat]", topic="Heat",
                path=("directed_by",), answers=tuple(f"A{i}" for i in range(7)))


# -- relation check (Table 6) -------------------------------------------------------------------

PAPER_RELATION_CHECK = """\
1. (’language.human_language.main_country’, 0.4): This relation is highly relevant as it
directly relates to the country whose president is being asked for.
2. (’language.human_language.countries_spoken_in’, 0.3): This relation is also relevant.
3. (’base.rosetta.languoid.parent’, 0.2): This relation is less relevant."""
CANDIDATES = ["language.human_language.main_country", "language.human_language.language_family",
              "base.rosetta.languoid.parent", "language.human_language.countries_spoken_in"]


def test_the_papers_relation_check_output_parses_best_first() -> None:
    check = parse_relation_check(PAPER_RELATION_CHECK, CANDIDATES)
    assert check.names == ("language.human_language.main_country",
                           "language.human_language.countries_spoken_in",
                           "base.rosetta.languoid.parent")
    assert [r.score for r in check.relations] == [0.4, 0.3, 0.2]
    assert parse_relation_check(PAPER_RELATION_CHECK, CANDIDATES, count=1).names == \
        ("language.human_language.main_country",)


def test_relations_that_are_not_candidates_are_dropped_and_reported() -> None:
    check = parse_relation_check("('directed_by', 0.5)\n(\"made.up\", 0.4)\n('directed_by', 0.1)",
                                 ["directed_by", "written_by"])
    assert check.names == ("directed_by",) and check.relations[0].score == 0.5
    assert check.unknown == ("made.up",)
    spelled = parse_relation_check("('Written_By', 0.6)\n('ns:directed_by', 0.4)",
                                   ["directed_by", "written_by"])
    assert spelled.names == ("written_by", "directed_by")


@pytest.mark.parametrize("text", ["I think directed_by is best.", "('made.up', 0.9)"])
def test_a_relation_check_without_a_rated_candidate_is_a_typed_error(text: str) -> None:
    with pytest.raises(SRPParseError) as err:
        parse_relation_check(text, ["directed_by"])
    assert (err.value.stage, err.value.reason, err.value.text) == \
        ("relation_check", "no_relations", text)


def test_the_relation_check_prompt_has_the_instruction_demo_references_and_candidates() -> None:
    system, user = relation_check_messages("who directed [Kismet]", "Kismet",
                                           ["directed_by", "written_by"], [REF], count=2,
                                           profile="metaqa")
    assert "Please retrieve 2 relations" in system["content"]
    assert "Demonstration Example\nQuestion: what genres are the films" in system["content"]
    assert "Question: who directed [Heat]\nRelation Path: Heat -> directed_by" in user["content"]
    assert user["content"].endswith("Candidate Relations: directed_by; written_by\nAnswer:")
    with pytest.raises(ValueError):
        relation_check_messages("q", "t", ["r"], profile="wikidata")


# -- path planning (Table 7) --------------------------------------------------------------------

PAPER_PLAN = """\
Thought: Firstly, the path should cover the movies portrying princess leia. Secondly, the path
should cover the actors in that movie.
Path: {
“princess leia”:[
“princess leia -> film.film_character.portrayed_in_films -> film.performance.actor”,
“princess leia -> movie.movie_character.movie -> film.actor.actor”
]
}"""


def test_the_papers_plan_output_parses_into_path_texts() -> None:
    reply = parse_plan(PAPER_PLAN)
    assert reply.thought.startswith("Firstly, the path should cover")
    assert reply.paths == (
        ("princess leia", "princess leia -> film.film_character.portrayed_in_films -> "
                          "film.performance.actor"),
        ("princess leia", "princess leia -> movie.movie_character.movie -> film.actor.actor"))


def test_plans_as_python_literals_or_bare_lines_parse_too() -> None:
    assert parse_plan("Path: {'Kismet': ['Kismet -> directed_by -> has_genre']}").paths == \
        (("Kismet", "Kismet -> directed_by -> has_genre"),)
    assert parse_plan("Thought: x\nPath:\n- Kismet → directed_by\n").paths == \
        (("Kismet", "Kismet -> directed_by"),)


@pytest.mark.parametrize("text", ["Thought: no idea", "Path: {\"Kismet\": []}"])
def test_a_plan_without_a_path_is_a_typed_error(text: str) -> None:
    with pytest.raises(SRPParseError) as err:
        parse_plan(text)
    assert (err.value.stage, err.value.reason) == ("plan", "no_path")


def test_the_plan_prompt_lists_the_checked_relations_per_topic() -> None:
    _, user = plan_messages("who directed [Kismet]", {"Kismet": ["directed_by"]}, [REF],
                            profile="metaqa")
    assert 'Valuable Relations: {"Kismet": ["directed_by"]}' in user["content"]
    assert user["content"].endswith("Thought:")


# -- sequence judge (Table 8) -------------------------------------------------------------------

AVIANO = [[("Aviano Air Base", "location.location.containedby", "Italy")],
          [("Aviano Air Base", "aviation.airport.serves", "Aviano")]]
PAPER_JUDGE = """\
Thinking Process: First, based on the triplet (“Aviano Air Base”,
“location.location.containedby”, “Italy”), I can answer the question. So, I think these triplet
sequences have enough information to answer the question. <HAVE_ANSWER>
Retained sequences:
1. [(“Aviano Air Base”, “location.location.containedby”, “Italy”)]
2. []"""


def test_the_papers_judge_output_parses_with_its_verdict_and_retained_triples() -> None:
    judgement = parse_judge(PAPER_JUDGE, AVIANO)
    assert judgement.verdict == "HAVE_ANSWER" and judgement.have_answer
    assert judgement.retained == ((AVIANO[0][0],), ())
    assert judgement.kept == (AVIANO[0][0],)
    assert judgement.thinking.startswith("First, based on the triplet")
    assert "<HAVE_ANSWER>" not in judgement.thinking and judgement.unknown == ()


def test_a_no_answer_verdict_keeps_a_prefix_and_gives_the_edit_message() -> None:
    sequences = [[("Johnny Handsome", "directed_by", "Walter Hill"),
                  ("Johnny Handsome", "written_by", "John Godey")]]
    text = ('Thinking Process: the language is missing. <NO_ANSWER>\nRetained sequences:\n'
            '1. [("Johnny Handsome", "directed_by", "Walter Hill")]')
    judgement = parse_judge(text, sequences)
    assert judgement.verdict == "NO_ANSWER"
    assert judgement.retained == ((sequences[0][0],),)
    message = judgement.message()
    assert message.startswith("Current Information is not enough. the language is missing.")
    assert 'Retained sequence 1: [("Johnny Handsome", "directed_by", "Walter Hill")]' in message


def test_the_last_verdict_counts_and_invented_triples_are_dropped() -> None:
    text = ("I first thought <NO_ANSWER> but Italy is there. <HAVE_ANSWER>\nRetained sequences:\n"
            '1. [("Aviano Air Base", "location.location.containedby", "France")]\n'
            '3. [("X", "y", "Z")]')
    judgement = parse_judge(text, AVIANO)
    assert judgement.verdict == "HAVE_ANSWER"
    assert judgement.retained == ((), ())
    assert judgement.unknown == (("Aviano Air Base", "location.location.containedby", "France"),
                                 ("X", "y", "Z"))


def test_names_with_quotes_and_commas_round_trip_through_the_prompt() -> None:
    triple = ("Don't Go Breaking My Heart", "written_by", 'Dick "Clement", Jr.')
    sequences = [[triple]]
    _, user = judge_messages("q", sequences)
    line = next(x for x in user["content"].splitlines() if x.startswith("1. "))
    assert line == f"1. [{render_triple(triple)}]"
    judgement = parse_judge(f"ok <HAVE_ANSWER>\nRetained sequences:\n{line}", sequences)
    assert judgement.retained == ((triple,),)


def test_a_judge_reply_without_a_verdict_or_with_a_broken_sequence_is_a_typed_error() -> None:
    with pytest.raises(SRPParseError) as err:
        parse_judge("Retained sequences:\n1. []", AVIANO)
    assert (err.value.stage, err.value.reason) == ("judge", "no_verdict")
    with pytest.raises(SRPParseError) as err:
        parse_judge("<NO_ANSWER>\nRetained sequences:\n1. [(Aviano, containedby)]", AVIANO)
    assert err.value.reason == "bad_sequence"


def test_the_judge_prompt_shows_reference_answers_capped() -> None:
    _, user = judge_messages("where is it", AVIANO, [REF], profile="freebase")
    assert "Answer: A0, A1, A2, A3, A4 ..." in user["content"]
    assert '1. [("Aviano Air Base", "location.location.containedby", "Italy")]' in user["content"]
    assert user["content"].endswith("Thinking Process:")


# -- path edit (Table 9) ------------------------------------------------------------------------

PAPER_EDIT = """\
Goal: The Initial Path starts from United Kingdom, which should cover the major religion in United
Kingdom.
Thought: In Instantiate Paths, I find that United Kingdom has some religions, described by a cvt
node. In candidates, I find “location.religion_percentage.religion” most relevant to major
religions.
Final Path: United Kingdom -> location.statistical_region.religions -> location.religion
_percentage.religion"""


def test_the_papers_edit_output_parses() -> None:
    reply = parse_edit(PAPER_EDIT.replace("religion\n_percentage", "religion_percentage"))
    assert reply.paths == ("United Kingdom -> location.statistical_region.religions -> "
                           "location.religion_percentage.religion",)
    assert reply.goal.startswith("The Initial Path starts from United Kingdom")
    assert "cvt" in reply.thought


def test_an_edit_without_a_final_path_is_a_typed_error() -> None:
    with pytest.raises(SRPParseError) as err:
        parse_edit("Goal: g\nThought: I would keep it.")
    assert (err.value.stage, err.value.reason) == ("edit", "no_path")


def test_the_edit_prompt_carries_the_errors_the_context_and_the_candidates() -> None:
    _, user = edit_messages("q", ["Dick Van Dyke -> directed_by"],
                            ['relation "directed_by" not instantiated.',
                             "Current Information is not enough."],
                            ["Dick Van Dyke"], {"Dick Van Dyke": ["starred_actors"]}, [REF],
                            profile="metaqa")
    text = user["content"]
    assert "Initial Path: Dick Van Dyke -> directed_by\n>> Error Message\n1. relation" in text
    assert "2. Current Information is not enough." in text
    assert 'Candidate Relations: {"Dick Van Dyke": ["starred_actors"]}' in text


# -- answering (Table 10) -----------------------------------------------------------------------

def test_answers_are_read_from_braces_or_from_the_answer_is() -> None:
    assert parse_answer("So, the answer is {Jerry Paris}, {Walter Hill}, {Jerry Paris}.") == \
        ("Jerry Paris", "Walter Hill")
    assert parse_answer("Based on my own knowledge... So, the answer is Charlottesville .") == \
        ("Charlottesville",)
    assert parse_answer("Nothing in the triplets. So, the answer is {}.") == ()
    with pytest.raises(SRPParseError) as err:
        parse_answer("I cannot tell.")
    assert (err.value.stage, err.value.reason) == ("answer", "no_answer")


def test_the_answer_prompt_lists_the_kept_triples() -> None:
    system, user = answer_messages("who directed [Kismet]",
                                   [("Kismet", "directed_by", "William Dieterle")],
                                   profile="metaqa")
    assert "Use {} to enclose the answer!" in system["content"]
    assert user["content"] == ('Q: who directed [Kismet]\nKnowledge Triplets: ("Kismet", '
                               '"directed_by", "William Dieterle")\nA:')
