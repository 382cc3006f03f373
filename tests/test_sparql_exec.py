"""Compiled queries executed on the embedded store: every function gives the right answers.

The KB is tests/fixtures/kb/freebase_small.ttl (profile "freebase"); see its comments for the data.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from pyql import Program, Sparql
from pyql.kb import OxigraphKB
from pyql.profiles import GENERIC, METAQA
from pyql.terms import BlankNode, Entity, Literal

KB_DIR = Path(__file__).parent / "fixtures" / "kb"
WINDOW = ("people.marriage.from", "people.marriage.to")


@pytest.fixture(scope="module")
def kb() -> OxigraphKB:
    return OxigraphKB.from_file(KB_DIR / "freebase_small.ttl", profile="freebase")


def answers(kb: OxigraphKB, query: Sparql) -> set[str]:
    """The distinct values of the first column: ids for entities, lexical forms for literals."""
    rs = kb.select(query.to_sparql())
    out = set()
    for cell in rs.column(0):
        if isinstance(cell, Entity):
            out.add(cell.short)
        elif isinstance(cell, Literal):
            out.add(cell.lexical)
        elif isinstance(cell, BlankNode):
            out.add(str(cell))
    return out


def q(*, mode: str = "ties") -> Sparql:
    return Sparql(extremum_mode=mode)  # type: ignore[arg-type]


COUNTRIES = q().add_fact("m.0j0k", "base.locations.continents.countries_within", "?c")
POPULATIONS = COUNTRIES.add_fact("?c", "topic_server.population_number", "?n")
FILMS = q().add_fact("?x", "film.film.directed_by", "m.0darabont")
SPOUSES = (
    q()
    .add_fact("m.0kim", "people.person.spouse_s", "?m")
    .add_fact("?m", "people.marriage.spouse", "?s")
    .add_filter("?s", "!=", "m.0kim")
)


def test_fixture_loaded(kb: OxigraphKB) -> None:
    assert len(kb) > 90
    assert kb.profile.name == "freebase"


# -- add_fact ---------------------------------------------------------------------------------------


def test_fact_forward(kb: OxigraphKB) -> None:
    query = q().add_fact("m.03_r3", "location.country.languages_spoken", "?x").set_answer("?x")
    assert answers(kb, query) == {"m.02h40lc", "m.01428y"}


def test_fact_backward(kb: OxigraphKB) -> None:
    assert answers(kb, FILMS.set_answer("?x")) == {"m.0green", "m.0shawshank", "m.0mist"}


def test_fact_two_hops_through_a_cvt(kb: OxigraphKB) -> None:
    query = (
        q()
        .add_fact("m.0green", "film.film.starring", "?p")
        .add_fact("?p", "film.performance.actor", "?a")
        .set_answer("?a")
    )
    assert answers(kb, query) == {"m.0bxtg", "m.0duncan"}


@pytest.mark.parametrize(
    ("relation", "value", "expected"),
    [
        ("common.topic.alias", '"Green Mile"', {"m.0green"}),  # plain string
        ("type.object.name", '"La milla verde"@es', {"m.0green"}),  # language-tagged
        ("type.object.name", '"The Green Mile"@en', {"m.0green"}),
        ("type.object.name", '"The Green Mile"', set()),  # an @en label is not a plain string
        ("film.film.runtime", "189.0^^http://www.w3.org/2001/XMLSchema#float", {"m.0green"}),
        ("film.film.runtime", '"142.0"^^xsd:float', {"m.0shawshank"}),
        ("film.film.initial_release_date", '"1999-12-10"^^xsd:date', {"m.0green"}),
        ("film.film.initial_release_date", "1999-12-10", {"m.0green"}),  # bare date: xsd:date
        ("film.film.estimated_budget", "60000000", set()),  # not the stored xsd:decimal term
        ("film.film.estimated_budget", '"60000000"^^xsd:decimal', {"m.0green"}),
    ],
)
def test_fact_with_a_literal_object(
    kb: OxigraphKB, relation: str, value: str, expected: set[str]
) -> None:
    query = q().add_fact("?x", relation, value).set_answer("?x")
    assert answers(kb, query) == expected


def test_literal_answers_keep_english_and_plain_strings(kb: OxigraphKB) -> None:
    names = q().add_fact("m.03_r3", "type.object.name", "?n").set_answer("?n")
    assert answers(kb, names) == {"Jamaica"}  # "Jamaïque"@fr is filtered out
    alias = q().add_fact("m.0green", "common.topic.alias", "?a").set_answer("?a")
    assert answers(kb, alias) == {"Green Mile"}
    # without set_answer every variable is returned, any language
    assert answers(kb, q().add_fact("m.03_r3", "type.object.name", "?n")) == {"Jamaica", "Jamaïque"}


# -- add_type ---------------------------------------------------------------------------------------


def test_type(kb: OxigraphKB) -> None:
    assert answers(kb, q().add_type("?x", "film.film").set_answer("?x")) == {
        "m.0green",
        "m.0shawshank",
        "m.0mist",
    }
    directors = q().add_fact("?f", "film.film.directed_by", "?d").add_type("?d", "film.director")
    assert answers(kb, directors.set_answer("?d")) == {"m.0darabont"}
    assert answers(kb, directors.add_type("?d", "location.country").set_answer("?d")) == set()


# -- add_filter -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relation", "op", "value", "expected"),
    [
        # numbers (typed literals compare numerically, across integer/float/decimal)
        ("film.film.runtime", ">", "130", {"m.0green", "m.0shawshank"}),
        ("film.film.runtime", "<=", '"142.0"^^xsd:float', {"m.0shawshank", "m.0mist"}),
        ("film.film.runtime", "=", "126", {"m.0mist"}),
        ("film.film.runtime", "!=", "126", {"m.0green", "m.0shawshank"}),
        ("film.film.runtime", "<", "1.0^^http://www.w3.org/2001/XMLSchema#float", set()),
        ("film.film.estimated_budget", ">=", "2.5e7", {"m.0green", "m.0shawshank"}),
        ("film.film.estimated_budget", "<", "25000000.5", {"m.0shawshank", "m.0mist"}),
        # dates at mixed precisions (date, dateTime values; date, year windows)
        ("film.film.initial_release_date", ">=", '"1999-01-01"^^xsd:date', {"m.0green", "m.0mist"}),
        ("film.film.initial_release_date", "<", "1999-12-31", {"m.0green", "m.0shawshank"}),
        ("film.film.initial_release_date", "=", "2007-11-21", {"m.0mist"}),
        ("film.film.initial_release_date", ">", '"2007-11-20T23:00:00"^^xsd:dateTime', {"m.0mist"}),
        ("film.film.initial_release_date", ">=", '"1999"^^xsd:gYear', {"m.0green", "m.0mist"}),
        ("film.film.initial_release_date", "<=", '"1999"^^xsd:gYear', {"m.0green", "m.0shawshank"}),
        ("film.film.initial_release_date", "=", '"1994"^^xsd:gYear', {"m.0shawshank"}),
        (
            "film.film.initial_release_date",
            "<",
            '"2015-08-10"^^xsd:dateTime',
            {"m.0green", "m.0shawshank", "m.0mist"},
        ),
        # strings compare with STR(): language tags do not matter
        ("type.object.name", "=", '"The Green Mile"', {"m.0green"}),
        ("type.object.name", "=", '"La milla verde"', {"m.0green"}),
        ("type.object.name", "=", '"The Green Mile"@en', {"m.0green"}),
        ("type.object.name", "=", '"The Green Mile"@es', set()),
        ("type.object.name", ">", '"The R"', {"m.0shawshank"}),
    ],
)
def test_filter(kb: OxigraphKB, relation: str, op: str, value: str, expected: set[str]) -> None:
    query = FILMS.add_fact("?x", relation, "?v").add_filter("?v", op, value).set_answer("?x")
    assert answers(kb, query) == expected


def test_filter_value_first_is_flipped(kb: OxigraphKB) -> None:
    query = FILMS.add_fact("?x", "film.film.runtime", "?r").add_filter("150", ">", "?r")
    assert answers(kb, query.set_answer("?x")) == {"m.0shawshank", "m.0mist"}


def test_filter_entities_and_variables(kb: OxigraphKB) -> None:
    everyone = q().add_fact("m.0kim", "people.person.spouse_s", "?m")
    everyone = everyone.add_fact("?m", "people.marriage.spouse", "?s").set_answer("?s")
    assert "m.0kim" in answers(kb, everyone)
    spouses = {"m.0p_alex", "m.0p_blake", "m.0p_casey", "m.0p_dana"}
    assert answers(kb, SPOUSES.set_answer("?s")) == spouses
    pairs = (
        q()
        .add_fact("?m", "people.marriage.spouse", "?a")
        .add_fact("?m", "people.marriage.spouse", "?b")
        .add_filter("?a", "!=", "?b")
        .add_filter("?a", "=", "m.0kim")
        .set_answer("?b")
    )
    assert answers(kb, pairs) == spouses


def test_two_filters_are_both_applied(kb: OxigraphKB) -> None:
    query = FILMS.add_fact("?x", "film.film.runtime", "?r").add_filter("?r", ">", "130")
    query = query.add_filter("?r", "<", "150").set_answer("?x")
    assert answers(kb, query) == {"m.0shawshank"}


# -- add_time_constrain -----------------------------------------------------------------------------
# Kim's marriages: Alex 1990 (year) .. 1995-06-01; Blake 2001-05 (month) .. 2010-12-31;
# Casey 2012-03-04T00:00:00 .. (no end); Dana (no start) .. 1989 (year).


@pytest.mark.parametrize(
    ("window_start", "window_end", "expected"),
    [
        ('"2015-08-10"^^xsd:dateTime', '"2015-08-10"^^xsd:dateTime', {"m.0p_casey"}),  # no end
        ("1993-01-01", "1993-12-31", {"m.0p_alex"}),
        ("1980-01-01", "1989-06-30", {"m.0p_dana"}),  # no start
        ('"1989"^^xsd:gYear', '"1989"^^xsd:gYear', {"m.0p_dana"}),  # end "1989" >= "1989"
        ("1990-06-15", "1990-06-15", {"m.0p_alex"}),  # start "1990" (year) <= 1990-06-15
        ("2001-05-20", "2001-05-20", {"m.0p_blake"}),  # start "2001-05" (month) <= 2001-05-20
        ("2005", "2005", {"m.0p_blake"}),
        ("2012-03-04", "2012-03-04", {"m.0p_casey"}),  # dateTime start on the window's day
        ("2011-01-01", "2011-12-31", set()),  # between Blake and Casey
        ("1995-06-01", "1995-06-01", {"m.0p_alex"}),  # the end day is inside
        ("1995-06-02", "1995-06-02", set()),
        ("1900-01-01", "2100-12-31", {"m.0p_alex", "m.0p_blake", "m.0p_casey", "m.0p_dana"}),
    ],
)
def test_time_constrain(
    kb: OxigraphKB, window_start: str, window_end: str, expected: set[str]
) -> None:
    # the original PyQL's argument order: the end of the window comes first
    query = SPOUSES.add_time_constrain("?m", *WINDOW, window_end, window_start).set_answer("?s")
    assert answers(kb, query) == expected


def test_webqsp_style_program_with_time_constraint(kb: OxigraphKB) -> None:
    program = Program.parse(
        "a=PyQL()\n"
        "a.add_filter('x0', '!=', 'm.04ztj')\n"
        "a.add_filter('x0', '!=', 'm.0kim')\n"
        "a.add_fact('x1', 'people.marriage.type_of_union', 'm.04ztj')\n"
        "a.add_fact('m.0kim', 'people.person.spouse_s', 'x1')\n"
        "a.add_time_constrain('x1', 'people.marriage.from', 'people.marriage.to', "
        "'\"2015-08-10\"^^xsd:dateTime', '\"2015-08-10\"^^xsd:dateTime')\n"
        "a.add_fact('x1', 'people.marriage.spouse', 'x0')\n"
        "a.add_filter('x0', '!=', 'x1')\n"
        "a.set_answer('x0')\n"
    )
    assert answers(kb, program.to_query()) == {"m.0p_casey"}


# -- add_max / add_min ------------------------------------------------------------------------------


def test_argmax_keeps_ties(kb: OxigraphKB) -> None:
    assert answers(kb, POPULATIONS.add_max("?n").set_answer("?c")) == {"m.09c7w0", "m.0atl"}


def test_argmin(kb: OxigraphKB) -> None:
    assert answers(kb, POPULATIONS.add_min("?n").set_answer("?c")) == {"m.03_r3"}
    assert answers(kb, POPULATIONS.add_min("?n").set_answer("?n")) == {"2890000"}


def test_extrema_are_sequential(kb: OxigraphKB) -> None:
    named = POPULATIONS.add_fact("?c", "type.object.name", "?name")
    # the most populous, then the first by name among those
    assert answers(kb, named.add_max("?n").add_min("?name").set_answer("?c")) == {"m.0atl"}
    assert answers(kb, named.add_max("?n").add_max("?name").set_answer("?c")) == {"m.09c7w0"}


def test_extremum_after_a_filter(kb: OxigraphKB) -> None:
    query = POPULATIONS.add_filter("?n", "<", "100000000").add_max("?n").set_answer("?c")
    assert answers(kb, query) == {"m.0d060g"}


def test_argmax_of_dates(kb: OxigraphKB) -> None:
    query = FILMS.add_fact("?x", "film.film.runtime", "?r").add_min("?r").set_answer("?x")
    assert answers(kb, query) == {"m.0mist"}


def _limited(kind: str) -> Sparql:
    query = (
        q(mode="limit")
        .add_fact("m.0j0k", "base.locations.continents.countries_within", "?c")
        .add_fact("?c", "topic_server.population_number", "?n")
    )
    return query.add_max("?n") if kind == "max" else query.add_min("?n")


def test_limit_mode_keeps_one_solution(kb: OxigraphKB) -> None:
    top = answers(kb, _limited("max").set_answer("?c"))
    assert len(top) == 1 and top <= {"m.09c7w0", "m.0atl"}
    assert answers(kb, _limited("min").set_answer("?c")) == {"m.03_r3"}


def test_limit_mode_then_aggregate(kb: OxigraphKB) -> None:
    assert answers(kb, _limited("min").add_count("?c")) == {"1"}
    assert answers(kb, _limited("max").add_sum("?n")) == {"331000000"}


# -- aggregates -------------------------------------------------------------------------------------


def test_count(kb: OxigraphKB) -> None:
    assert answers(kb, COUNTRIES.add_count("?c")) == {"4"}
    languages = COUNTRIES.add_fact("?c", "location.country.languages_spoken", "?l")
    assert answers(kb, languages.add_count("?l", "?k")) == {"3"}  # distinct values
    assert answers(kb, POPULATIONS.add_max("?n").add_count("?c")) == {"2"}
    assert answers(kb, COUNTRIES.add_filter("?c", "=", "m.0nowhere").add_count("?c")) == {"0"}


def test_sum_over_distinct_solutions(kb: OxigraphKB) -> None:
    # two countries share 331000000: both count (distinct solutions, not distinct values)
    assert answers(kb, POPULATIONS.add_sum("?n")) == {"702890000"}
    languages = POPULATIONS.add_fact("?c", "location.country.languages_spoken", "?l")
    assert answers(kb, languages.add_sum("?n", "?total")) == {
        str(2 * 2890000 + 2 * 38000000 + 331000000)
    }


def test_avg(kb: OxigraphKB) -> None:
    (value,) = answers(kb, POPULATIONS.add_avg("?n", "?mean"))
    assert Decimal(value) == Decimal(702890000) / 4
    (runtime,) = answers(kb, FILMS.add_fact("?x", "film.film.runtime", "?r").add_avg("?r"))
    assert float(runtime) == pytest.approx((189 + 142 + 126) / 3)


def test_aggregate_column_is_the_new_variable(kb: OxigraphKB) -> None:
    rs = kb.select(COUNTRIES.add_count("?c", "?how_many").to_sparql())
    assert rs.columns == ("how_many",)


# -- other profiles ---------------------------------------------------------------------------------


def test_generic_profile() -> None:
    kb = OxigraphKB.from_file(KB_DIR / "generic_small.ttl", profile="generic")
    ex = GENERIC.with_prefixes(ex="http://example.org/")
    query = Sparql(profile=ex).add_fact("ex:kismet", "ex:directed_by", "?d").set_answer("?d")
    assert answers(kb, query) == {"<http://example.org/dieterle>"}
    latest = (
        Sparql(profile=ex)
        .add_type("?f", "ex:Film")
        .add_fact("?f", "ex:release_year", "?y")
        .add_max("?y")
        .set_answer("?f")
    )
    assert answers(kb, latest) == {"<http://example.org/green_mile>"}


def test_metaqa_profile() -> None:
    kb = OxigraphKB(profile="metaqa")
    e, r = METAQA.entity, METAQA.relation
    triples = [
        (e("Kismet"), r("directed_by"), e("William Dieterle")),
        (e("Kismet_2"), r("directed_by"), e("William Dieterle")),
        (e("Amélie (film) 100%"), r("directed_by"), e("William Dieterle")),
    ]
    kb.load_bytes("\n".join(f"{s} {p} {o} ." for s, p, o in triples).encode(), format="ntriples")
    query = (
        Sparql(profile=METAQA, entities={"Kismet": "Kismet"})
        .add_fact("Kismet", "directed_by", "?d")
        .add_fact("?m", "directed_by", "?d")
        .add_filter("?m", "!=", "Kismet")
        .set_answer("?m")
    )
    assert answers(kb, query) == {"Kismet_2", "Amélie (film) 100%"}
