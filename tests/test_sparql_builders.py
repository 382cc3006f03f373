"""Golden SPARQL of the compiler's helper queries: labels, counts, label/entity scans and pages.

These were f-strings in the Session and in entity linking; the compiler owns them now. Every
text is also run on an empty pyoxigraph store (it must parse).
"""

from __future__ import annotations

from dataclasses import replace

import pyoxigraph as ox
import pytest

from pyql import Sparql
from pyql.profiles import FREEBASE, GENERIC, METAQA
from pyql.sparql.compile import (
    compile_counts,
    compile_entity_scan,
    compile_label_scan,
    compile_labels,
)
from pyql.terms import Var

FB = "http://rdf.freebase.com/ns/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
TWO_LABELS = replace(GENERIC, label_predicates=(RDFS_LABEL, "http://schema.org/name"))
COUNTRIES = (Sparql().add_fact("m.0j0k", "base.locations.continents.countries_within", "?c")
             .add_fact("?c", "topic_server.population_number", "?n"))

GOLDEN = [
    (
        compile_counts(COUNTRIES, (Var("c"), Var("n"))),
        "PREFIX ns: <http://rdf.freebase.com/ns/>\n"
        "SELECT (COUNT(DISTINCT ?c) AS ?pyql_n_c) (COUNT(DISTINCT ?n) AS ?pyql_n_n)\n"
        "WHERE {\n"
        f"  ns:m.0j0k <{FB}base.locations.continents.countries_within> ?c .\n"
        "  ?c ns:topic_server.population_number ?n .\n"
        "}",
    ),
    (
        compile_labels([FREEBASE.entity("m.0j0k"), FREEBASE.entity("m.03_r3")], FREEBASE),
        "PREFIX ns: <http://rdf.freebase.com/ns/>\n"
        "SELECT ?e ?l WHERE { VALUES ?e { ns:m.0j0k ns:m.03_r3 } "
        f"VALUES ?p {{ <{FB}type.object.name> }} ?e ?p ?l . }}",
    ),
    (
        compile_label_scan(FREEBASE),
        f"SELECT ?e ?l WHERE {{ ?e <{FB}type.object.name> ?l . FILTER(isIRI(?e) && isLiteral(?l) "
        '&& (lang(?l) = "" || langMatches(lang(?l), "en"))) }',
    ),
    (
        compile_label_scan(GENERIC, limit=10),
        f"SELECT ?e ?l WHERE {{ ?e <{RDFS_LABEL}> ?l . FILTER(isIRI(?e) && isLiteral(?l)) }} "
        "LIMIT 10",
    ),
    (
        compile_label_scan(TWO_LABELS, limit=500, offset=1000),
        f"SELECT ?e ?l WHERE {{ VALUES ?p {{ <{RDFS_LABEL}> <http://schema.org/name> }} "
        "?e ?p ?l . FILTER(isIRI(?e) && isLiteral(?l)) } ORDER BY ?e ?l LIMIT 500 OFFSET 1000",
    ),
    (
        compile_entity_scan(METAQA, limit=5),
        "SELECT DISTINCT ?e WHERE { { ?e ?p ?o } UNION { ?s ?p ?e } FILTER(isIRI(?e) && "
        'STRSTARTS(STR(?e), "http://pyql.dev/metaqa/entity/")) } LIMIT 5',
    ),
    (
        compile_entity_scan(METAQA, limit=100, offset=0),
        "SELECT DISTINCT ?e WHERE { { ?e ?p ?o } UNION { ?s ?p ?e } FILTER(isIRI(?e) && "
        'STRSTARTS(STR(?e), "http://pyql.dev/metaqa/entity/")) } ORDER BY ?e LIMIT 100 OFFSET 0',
    ),
]


@pytest.mark.parametrize(("text", "expected"), GOLDEN)
def test_golden(text: str, expected: str) -> None:
    assert text == expected
    ox.Store().query(text)  # valid SPARQL 1.1


def test_an_entity_base_with_a_quote_stays_inside_its_string() -> None:
    profile = replace(METAQA, entity_base='http://x.org/"a/')
    text = compile_entity_scan(profile)
    assert 'STRSTARTS(STR(?e), "http://x.org/\\"a/")' in text
    ox.Store().query(text)


def test_labels_need_entities_and_predicates() -> None:
    with pytest.raises(ValueError):
        compile_labels([], FREEBASE)
    with pytest.raises(ValueError):
        compile_labels([FREEBASE.entity("m.0x")], replace(FREEBASE, label_predicates=()))
    with pytest.raises(ValueError):
        compile_label_scan(replace(GENERIC, label_predicates=()))
