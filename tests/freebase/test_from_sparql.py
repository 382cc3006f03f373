"""Gold SPARQL -> PyQL (pyql.sparql.from_sparql) on real WebQSP, CWQ and GrailQA gold queries."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from pyql.program import Program
from pyql.sparql.from_sparql import CONSTRUCTS, UnsupportedQuery, from_sparql, standardize
from tests.freebase.gold_sparql import NS, WINDOW

# (gold SPARQL as in the dataset, expected program) -- real queries, verbatim
CASES = [
    (  # WebQTest-100: a CVT with a time window
        WINDOW,
        """add_fact(m.045c7b, business.consumer_company.products, ?y)
add_fact(?y, business.company_product_relationship.consumer_product, ?x)
add_filter(?x, !=, m.045c7b)
add_time_constrain(?y, business.company_product_relationship.from_date, \
business.company_product_relationship.to_date, "2015-08-10"^^xsd:dateTime, \
"2015-08-10"^^xsd:dateTime)
set_answer(?x)
execute()""",
    ),
    (  # CWQ composition with a superlative (ORDER BY ... LIMIT 1)
        NS + """SELECT DISTINCT ?x
WHERE {
FILTER (?x != ?c)
FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))
?c ns:sports.sports_team.team_mascot ns:m.03_dwn .
?c ns:sports.sports_team.championships ?x .
?x ns:time.event.start_date ?sk0 .
}
ORDER BY DESC(xsd:datetime(?sk0))
LIMIT 1
""",
        """add_fact(?c, sports.sports_team.team_mascot, m.03_dwn)
add_fact(?c, sports.sports_team.championships, ?x)
add_fact(?x, time.event.start_date, ?sk0)
add_filter(?x, !=, ?c)
add_max(?sk0)
set_answer(?x)
execute()""",
    ),
    (  # CWQ comparative with a str() filter and a cast comparison
        NS + """SELECT DISTINCT ?x
WHERE {
FILTER (?x != ns:m.029jpy)
FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))
ns:m.029jpy ns:location.location.contains ?x .
?x ns:base.biblioness.bibs_location.loc_type ?sk0 .
FILTER (str(?sk0) = "State")
?x ns:location.location.area ?n .
FILTER (xsd:integer(?n) < 18964000) .
}
""",
        """add_fact(m.029jpy, location.location.contains, ?x)
add_fact(?x, base.biblioness.bibs_location.loc_type, ?sk0)
add_fact(?x, location.location.area, ?n)
add_filter(?x, !=, m.029jpy)
add_filter(?sk0, =, "State")
add_filter(?n, <, 18964000)
set_answer(?x)
execute()""",
    ),
    (  # GrailQA count (qid 2102279005000 style): COUNT over SELECT DISTINCT, VALUES entity
        """PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX rdfs: \
<http://www.w3.org/2000/01/rdf-schema#> PREFIX : <http://rdf.freebase.com/ns/>
SELECT (COUNT(?x0) AS ?value) WHERE {
SELECT DISTINCT ?x0  WHERE {
?x0 :type.object.type :opera.librettist .
VALUES ?x1 { :m.05ssz1 }
?x1 :opera.opera.librettist ?x0 .
FILTER ( ?x0 != ?x1  )
}
}""",
        """add_fact(m.05ssz1, opera.opera.librettist, ?x0)
add_type(?x0, opera.librettist)
add_filter(?x0, !=, m.05ssz1)
set_answer(?x0)
add_count(?x0, ?value)
execute()""",
    ),
    (  # GrailQA argmax: a MAX sub-select over the renamed outer pattern
        """PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX rdfs: \
<http://www.w3.org/2000/01/rdf-schema#> PREFIX : <http://rdf.freebase.com/ns/>
SELECT (?x0 AS ?value) WHERE {
SELECT DISTINCT ?x0  WHERE {
?x0 :type.object.type :cvg.computer_game_region .
?x1 :type.object.type :cvg.game_version .
{
SELECT (MAX(?y2) AS ?x2)  WHERE {
?y0 :type.object.type :cvg.computer_game_region .
?y1 :type.object.type :cvg.game_version .
VALUES ?y3 { :m.01_4mn }
?y1 :cvg.game_version.regions ?y0 .
?y1 :cvg.game_version.release_date ?y2 .
?y1 :cvg.game_version.publisher ?y3 .
FILTER ( ?y0 != ?y1 && ?y0 != ?y2 && ?y0 != ?y3 && ?y1 != ?y2 && ?y1 != ?y3 && ?y2 != ?y3  )
}
}
VALUES ?x3 { :m.01_4mn }
?x1 :cvg.game_version.regions ?x0 .
?x1 :cvg.game_version.release_date ?x2 .
?x1 :cvg.game_version.publisher ?x3 .
FILTER ( ?x0 != ?x1 && ?x0 != ?x2 && ?x0 != ?x3 && ?x1 != ?x2 && ?x1 != ?x3 && ?x2 != ?x3  )
}
}""",
        """add_fact(?x1, cvg.game_version.publisher, m.01_4mn)
add_fact(?x1, cvg.game_version.regions, ?x0)
add_fact(?x1, cvg.game_version.release_date, ?x2)
add_type(?x0, cvg.computer_game_region)
add_type(?x1, cvg.game_version)
add_filter(?x0, !=, ?x1)
add_filter(?x0, !=, ?x2)
add_filter(?x0, !=, m.01_4mn)
add_filter(?x1, !=, ?x2)
add_filter(?x1, !=, m.01_4mn)
add_filter(?x2, !=, m.01_4mn)
add_max(?x2)
set_answer(?x0)
execute()""",
    ),
    (  # a class in a node position stays an IRI (CWQ's kg.object_profile.prominent_type)
        NS + """SELECT DISTINCT ?x WHERE {
ns:m.0f4vbz ns:film.director.film ?x .
?x ns:kg.object_profile.prominent_type ns:award.award_winning_work . }""",
        """add_fact(m.0f4vbz, film.director.film, ?x)
add_fact(?x, kg.object_profile.prominent_type, <http://rdf.freebase.com/ns/award.award_winning_work>)
set_answer(?x)
execute()""",
    ),
]


@pytest.mark.parametrize(("gold", "expected"), CASES)
def test_gold_queries_convert(gold: str, expected: str) -> None:
    program = from_sparql(gold)
    assert str(program) == expected
    assert Program.parse(str(program)) == program


def test_program_compiles_to_the_same_count() -> None:
    text = from_sparql(CASES[3][0]).to_sparql()
    assert "COUNT(DISTINCT ?x0) AS ?value" in text


UNSUPPORTED = [
    ("SELECT ?x WHERE { { ?x ns:a.b ns:m.1 } UNION { ?x ns:a.c ns:m.1 } }", "union"),
    ("SELECT ?x WHERE { ?x ns:a.b ns:m.1 OPTIONAL { ?x ns:a.c ?y } }", "optional"),
    ("SELECT ?x WHERE { ?x ?p ns:m.1 }", "variable_predicate"),
    ("SELECT ?x ?y WHERE { ?x ns:a.b ?y }", "projection"),
    ("SELECT ?x WHERE { ?x ns:a.b ?d . ns:m.1 ns:a.c ?e . FILTER (?d - ?e > 0) }",
     "filter_expression"),
    ("SELECT ?x WHERE { ?x ns:a.b ?d } ORDER BY ?d LIMIT 1 OFFSET 1", "limit"),
    ("SELECT ?x WHERE { ?x ns:a.b ?d } LIMIT 5", "limit"),
    ("SELECT ?x WHERE { VALUES ?x { ns:m.1 ns:m.2 } ?x ns:a.b ?d }", "values"),
    ("SELECT ?x WHERE { ?x ns:a.b ?y . FILTER(NOT EXISTS { ?y ns:a.c ?z } || "
     "EXISTS { ?y ns:a.c ?w . FILTER (?w <= \"2000\"^^xsd:dateTime) }) }", "time_half"),
    ("SELECT ?x WHERE { ?x ns:a.b ?y . FILTER (!isLiteral(?y) OR lang(?y) = '' OR "
     "langMatches(lang(?y), 'en')) }", "lang_filter"),
    ("SELECT ?x WHERE { ?x ns:a.b ns:m.1 . FILTER (ns:m.1 = ns:m.2) }", "constant_filter"),
    ("SELECT (COUNT(?x) AS ?n) WHERE { ?x ns:a.b ?y }", "aggregate"),
    ("ASK { ns:m.1 ns:a.b ?y }", "not_select"),
    ("SELECT ?x WHERE { ?x ns:a.b ", "unparseable"),
]


@pytest.mark.parametrize(("body", "construct"), UNSUPPORTED)
def test_unsupported_constructs_are_named(body: str, construct: str) -> None:
    with pytest.raises(UnsupportedQuery) as info:
        from_sparql(NS + body)
    assert info.value.construct == construct
    assert construct in CONSTRUCTS


def test_count_distinct_over_a_pattern_converts() -> None:
    program = from_sparql(NS + "SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { ns:m.1 ns:a.b ?x }")
    assert [c.name for c in program] == ["add_fact", "set_answer", "add_count", "execute"]


def test_standardize_leaves_strings_iris_and_comments() -> None:
    text = "SELECT ?x WHERE { ?x <http://e/OR> \"a OR b\" . # AND\n FILTER(?x = 1 AND ?x = 2) }"
    out = standardize(text)
    assert "<http://e/OR>" in out and '"a OR b"' in out and "# AND" in out
    assert "?x = 1 && ?x = 2" in out
    assert "PREFIX xsd" not in out  # not used, not declared


def _gold(pyql_data, dataset: str) -> list[str]:
    root = pyql_data / "freebase_questions"
    if dataset == "webqsp":
        rows = json.load(gzip.open(root / "WebQSP_test_processed.json.gz"))
        return [r["sparql_query"] for r in rows]
    if dataset == "cwq":
        return [r["sparql"] for r in json.load(gzip.open(root / "cwq_sample.json.gz"))]
    return [r["sparql_query"] for r in json.load(gzip.open(root / "grailqa_sample.json.gz"))]


@pytest.mark.parametrize(("dataset", "target"), [("webqsp", 0.95), ("cwq", 0.90), ("grailqa", 0.90)])
def test_coverage_on_a_sample(pyql_data, dataset: str, target: float) -> None:
    """The issue's coverage targets, on 80 gold queries of each dataset (the full runs are
    ``pyql fidelity sparql DATASET``, figures in docs/freebase.md)."""
    queries = random.Random(13).sample(_gold(pyql_data, dataset), 80)
    converted = 0
    for q in queries:
        try:
            from_sparql(q)
            converted += 1
        except UnsupportedQuery as exc:
            assert exc.construct in CONSTRUCTS
    assert converted / len(queries) >= target


def test_a_date_constant_in_a_triple_becomes_an_equality_filter() -> None:
    program = from_sparql(NS + 'SELECT DISTINCT ?x WHERE { ?x ns:a.b ?c . '
                               '?c ns:a.from "1961"^^xsd:dateTime . }')
    calls = {str(c) for c in program}
    assert {"add_fact(?c, a.from, ?date2)", 'add_filter(?date2, =, "1961"^^xsd:dateTime)'} <= calls


def test_literals_keep_their_lexical_form() -> None:
    program = from_sparql(NS + 'SELECT ?x WHERE { ?x ns:a.b ?d . '
                               'FILTER (?d <= "2009-03-29-08:00"^^xsd:date) }')
    assert 'add_filter(?d, <=, "2009-03-29-08:00"^^xsd:date)' in str(program)


def test_rdflib_literal_complaints_do_not_reach_stderr(capfd, caplog) -> None:  # noqa: ANN001
    """A bare year typed xsd:dateTime (everywhere in the gold queries) makes rdflib log a
    traceback; while pyql converts, that goes to pyql's debug log, not stderr."""
    import logging

    text = ("PREFIX ns: <http://rdf.freebase.com/ns/>\nSELECT DISTINCT ?x WHERE {\n"
            "ns:m.0kim ns:people.person.date_of_birth ?x .\n"
            'FILTER (?x > "1961"^^<http://www.w3.org/2001/XMLSchema#dateTime>) }')
    with caplog.at_level(logging.DEBUG, logger="pyql.sparql"):
        program = from_sparql(text)
    assert "add_filter" in str(program)
    assert "Traceback" not in capfd.readouterr().err
    assert any("rdflib.term" in r.getMessage() for r in caplog.records if r.name == "pyql.sparql")
