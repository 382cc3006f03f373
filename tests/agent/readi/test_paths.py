"""Reasoning paths: the paper's text format, relation binding, instantiation on a Freebase-shaped
KB through CVT nodes, and each stuck reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyql.agent.grounding.paths import (
    COMPOUND_NODE,
    Constraint,
    PathFormatError,
    PathInstantiator,
    ReasoningPath,
    RelationBinder,
    RelationVocabulary,
    parse_chain,
    parse_path,
)
from pyql.kb import OxigraphKB
from pyql.session import Session

KB_FILE = Path(__file__).parents[2] / "fixtures" / "kb" / "freebase_small.ttl"
ENTITIES = {"Kim Example": "m.0kim", "Jamaica": "m.03_r3", "North America": "m.0j0k"}

# Appendix F, as the paper's PDF text gives them (typographic quotes, spaces around arrows)
PAPER_GENERATION = (
    "Thought: There is only one topic entity, the answer is constrained by one path. For, the "
    "path from “Taste cannot be controlled by law”, firstly, it should cover the person quote it. "
    "Second, it should cover the place where the person died.\n"
    "Path: { “Taste cannot be controlled by law”: [ Taste cannot be controlled by law → "
    "people.person.quotations → people.deceased_person.place_of_death ]}"
)
PAPER_EDIT = (
    "Goal: The Initial Path starts from Miley Cyrus, which should cover the movies featured by "
    "Miley Cyrus.\nThought: In Instantiate Paths I know that Miley Cyrus acts some films, "
    'described by a compound node. In candidates, I find "film.performance.film" most relevant '
    'to get the films. Meanwhile, "film.film.producer" is not relevant to my Goal.\n'
    "Final Path: Miley Cyrus→film.actor.film→ film.performance.film"
)


# -- the text format ---------------------------------------------------------------------------
def test_paper_generation_output_parses():
    path = parse_path(PAPER_GENERATION)
    assert path.as_dict() == {"Taste cannot be controlled by law": [
        "people.person.quotations", "people.deceased_person.place_of_death"]}


def test_paper_edit_output_parses_as_a_chain():
    c = parse_chain(PAPER_EDIT, entities=["Miley Cyrus"])
    assert c == Constraint("Miley Cyrus", ("film.actor.film", "film.performance.film"))
    assert parse_chain(PAPER_EDIT) == c


def test_two_constraints_and_ascii_arrows():
    text = ('Path: {"France": [France -> border -> country], '
            '"Nijmegen": ["Nijmegen" -> serve_airport -> contain]}')
    path = parse_path(text, entities=["France", "Nijmegen"])
    assert path.as_dict() == {"France": ["border", "country"],
                              "Nijmegen": ["serve_airport", "contain"]}
    assert path.length == 4


def test_list_without_the_entity_and_empty_list():
    path = parse_path('Path: {"France": [border → country], "Paris": []}')
    assert path.as_dict() == {"France": ["border", "country"], "Paris": []}


@pytest.mark.parametrize(("text", "reason"), [
    ("Thought: no idea", "no_path"),
    ("Path: { France: [France → border] }", "bad_key"),
    ('Path: { "France" [France → border] }', "bad_list"),
    ('Path: { "France": France → border }', "bad_list"),
    ('Path: { "France": [France → border ', "unclosed"),
    ('Path: { "France": [France → border] ', "unclosed"),
    ('Path: { "France": [France → → border] }', "empty_relation"),
    ('Path: { "France": [France], "France": [France → x] }', "duplicate_entity"),
])
def test_malformed_paths_are_typed_errors(text, reason):
    with pytest.raises(PathFormatError) as info:
        parse_path(text)
    assert info.value.reason == reason
    assert 0 <= info.value.position <= len(text)


def test_unknown_entity():
    with pytest.raises(PathFormatError) as info:
        parse_path('Path: {"Paris": [Paris → mayor]}', entities=["France"])
    assert info.value.reason == "unknown_entity"
    with pytest.raises(PathFormatError) as info:
        parse_chain("Final Path: Paris → mayor", entities=["France"])
    assert info.value.reason == "unknown_entity"


_NAME = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1,
                max_size=20).map(str.strip).filter(
    lambda s: s and not any(t in s for t in ("→", "->", "⟶", "=>", "[", "]", "{", "}", '"', "'",
                                             "“", "”", "‘", "’"))
    and s[-1] not in "-=" and s[0] not in ">")


@given(st.dictionaries(_NAME, st.lists(_NAME, max_size=4), min_size=1, max_size=3))
def test_printed_paths_parse_back(mapping):
    path = ReasoningPath.of(mapping)
    assert parse_path(str(path)) == path
    for c in path.constraints:
        assert parse_chain(f"Final Path: {c.chain()}", entities=mapping) == c


# -- binding -----------------------------------------------------------------------------------
def test_binding_exact_first_then_ranked_and_cached():
    vocab = RelationVocabulary(["people.person.spouse_s", "people.marriage.spouse",
                                "film.film.directed_by", "location.country.languages_spoken",
                                "spouse"])
    binder = RelationBinder(vocab, top_k=3)
    bound = binder.bind("spouse")
    assert bound[0] == "spouse" and set(bound[1:]) == {"people.person.spouse_s",
                                                       "people.marriage.spouse"}
    assert binder.bind("spouse") is bound  # cached
    assert binder.bind("directed by") == ("film.film.directed_by",)
    assert binder.bind("weather") == ()  # nothing in common: no candidate


def test_vocabulary_from_kb_and_file(tmp_path):
    kb = OxigraphKB.from_file(KB_FILE, profile="freebase")
    vocab = RelationVocabulary.from_kb(kb)
    assert "people.person.spouse_s" in vocab and "type.object.name" not in vocab
    import gzip

    f = tmp_path / "rels.txt.gz"
    with gzip.open(f, "wt", encoding="utf-8") as h:
        h.write("a.b.c\n\nd.e.f\n")
    assert RelationVocabulary.from_file(f).relations == ("a.b.c", "d.e.f")


# -- instantiation -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kb() -> OxigraphKB:
    return OxigraphKB.from_file(KB_FILE, profile="freebase")


@pytest.fixture(scope="module")
def instantiator(kb) -> PathInstantiator:
    return PathInstantiator(kb, RelationBinder(RelationVocabulary.from_kb(kb)))


def test_instantiation_through_a_cvt_node_is_a_program(kb, instantiator):
    path = ReasoningPath.of({"Kim Example": ["person spouse", "marriage spouse"]})
    result = instantiator.instantiate(path, ENTITIES, "who is Kim Example married to")
    assert result.complete and not result.stuck
    hops = result.constraints[0].hops
    assert [h.bound for h in hops] == ["people.person.spouse_s", "people.marriage.spouse"]
    assert hops[0].compound and not hops[1].compound
    assert sorted(result.answers) == ["m.0p_alex", "m.0p_blake", "m.0p_casey", "m.0p_dana"]
    # the program replays on a Session to the same answers, and its SPARQL is the query
    session = Session(kb, ENTITIES)
    last = session.run_program(result.program)[-1]
    assert tuple(last.answers) == result.answers and last.query == result.query
    assert "SELECT" in result.query
    assert any(t[2] == COMPOUND_NODE for t in result.triples)


def test_path_ending_in_a_cvt_node_is_stuck(instantiator):
    path = ReasoningPath.of({"Kim Example": ["person spouse"]})
    result = instantiator.instantiate(path, ENTITIES, "who is Kim Example married to")
    assert not result.complete
    (stuck,) = result.stuck
    assert stuck.reason == "cvt_end" and stuck.at_compound and stuck.position == 1
    assert "people.marriage.spouse" in stuck.candidates
    assert stuck.messages() == [f"{COMPOUND_NODE} in the end."]
    assert f"Kim Example → people.person.spouse_s → {COMPOUND_NODE}" in stuck.render()
    # the longest prefix is kept: its program ends on the CVT nodes
    assert len(result.answers) == 4


def test_irrelevant_relation_after_a_cvt(instantiator):
    path = ReasoningPath.of({"Kim Example": ["person spouse", "film director"]})
    result = instantiator.instantiate(path, ENTITIES, "who is the spouse of Kim Example")
    (stuck,) = result.stuck
    assert stuck.reason == "irrelevant_relation" and stuck.position == 1
    assert stuck.relation == "film director" and stuck.at_compound
    assert stuck.tried and "film.film.directed_by" in stuck.tried
    # the relations around the marriage CVT nodes, ranked against the question
    assert set(stuck.candidates) == {"people.marriage.spouse", "people.person.spouse_s",
                                     "people.marriage.type_of_union", "people.marriage.from",
                                     "people.marriage.to"}
    assert stuck.candidates.index("people.marriage.spouse") < stuck.candidates.index(
        "people.marriage.from")
    assert stuck.messages() == [f"{COMPOUND_NODE} in the end.",
                                'relation "film director" not instantiated.']
    assert [h.bound for h in stuck.hops] == ["people.person.spouse_s"]


def test_empty_path_and_candidate_cap(kb):
    inst = PathInstantiator(kb, RelationBinder(RelationVocabulary.from_kb(kb)), max_candidates=1)
    result = inst.instantiate(ReasoningPath.empty(["Jamaica"]), ENTITIES, "languages of Jamaica")
    (stuck,) = result.stuck
    assert stuck.reason == "empty_path" and stuck.position == 0 and not stuck.hops
    assert stuck.candidates == ("location.country.languages_spoken",)
    assert result.program.calls == () and result.answers == ()


def test_two_constraints_intersect_on_the_answer(instantiator):
    path = ReasoningPath.of({"North America": ["countries within"],
                             "Jamaica": ["languages spoken", "languages spoken"]})
    result = instantiator.instantiate(path, ENTITIES, "which countries of North America "
                                      "speak a language of Jamaica")
    assert result.complete
    # countries of North America that share a language with Jamaica (Jamaica excluded)
    assert sorted(result.answers) == ["m.09c7w0", "m.0d060g"]


def test_unknown_topic_entity(instantiator):
    with pytest.raises(PathFormatError) as info:
        instantiator.instantiate(ReasoningPath.of({"Paris": ["x"]}), ENTITIES)
    assert info.value.reason == "unknown_entity"


# -- directions: ^relation and backtracking ---------------------------------------------------
def _metaqa(lines: str) -> OxigraphKB:
    from tests.support.metaqa import metaqa_kb

    return metaqa_kb(lines)


AMBIGUOUS = """\
Tom Jones|written_by|Henry Fielding
Tom Jones|has_genre|Comedy
What's New Pussycat|written_by|Tom Jones
What's New Pussycat|has_genre|Musical
Sands of Iwo Jima|written_by|Harry Brown
Harry Brown|written_by|Daniel Barber
Flying Leathernecks|written_by|Harry Brown
"""


def test_a_stuck_direction_is_backtracked():
    kb = _metaqa(AMBIGUOUS)
    inst = PathInstantiator(kb, RelationBinder(RelationVocabulary.from_kb(kb)))
    entities = {"Tom Jones": "Tom Jones"}
    # forward first: Tom Jones (the film) -> Henry Fielding, who has no genre: stuck, so the
    # backward option is walked: the films Tom Jones wrote
    result = inst.instantiate(ReasoningPath.of({"Tom Jones": ["written_by", "has_genre"]}),
                              entities, "what genres are the films written by Tom Jones")
    assert result.complete and result.answers == ("Musical",)
    assert [h.forward for h in result.constraints[0].hops] == [False, True]


def test_inverse_relations_follow_the_backward_direction_only():
    kb = _metaqa(AMBIGUOUS)
    inst = PathInstantiator(kb, RelationBinder(RelationVocabulary.from_kb(kb)))
    entities = {"Sands of Iwo Jima": "Sands of Iwo Jima"}
    loose = inst.instantiate(ReasoningPath.of({"Sands of Iwo Jima": ["written_by", "written_by"]}),
                             entities)
    assert loose.answers == ("Daniel Barber",)  # Harry Brown the film: forward first
    strict = inst.instantiate(
        ReasoningPath.of({"Sands of Iwo Jima": ["written_by", "^written_by"]}), entities)
    assert strict.answers == ("Flying Leathernecks",)
    assert "add_fact(?x2, written_by, ?x1)" in str(strict.program)
