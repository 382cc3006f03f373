"""Golden SPARQL: ``(builder expression, expected text)`` pairs, every output parsed by pyoxigraph.

The expected text is the contract of the compiler (see the coercions in
:mod:`pyql.sparql.compile`). Relation names with two dots are written as full IRIs because
Oxigraph rejects prefixed names such as ``ns:a.b.c``; ids and one-dot names use ``ns:``.
"""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from pyql import Sparql
from pyql.errors import QueryError, TermError
from pyql.profiles import GENERIC, METAQA
from pyql.sparql.compile import compile_relations
from pyql.terms import Entity, Literal, Relation, Var

FB = "http://rdf.freebase.com/ns/"
EX = GENERIC.with_prefixes(ex="http://example.org/")
COUNTRIES = Sparql().add_fact("m.0j0k", "base.locations.continents.countries_within", "?c")

#: what the expressions in the table can use
NAMESPACE = {
    "Sparql": Sparql,
    "GENERIC": GENERIC,
    "METAQA": METAQA,
    "EX": EX,
    "FB": FB,
    "Var": Var,
    "Literal": Literal,
    "Entity": Entity,
    "Relation": Relation,
    "compile_relations": compile_relations,
    "Q": Sparql(),
    # countries of a continent with their populations, in both extremum modes
    "C": COUNTRIES.add_fact("?c", "topic_server.population_number", "?n"),
    "LC": Sparql(extremum_mode="limit")
    .add_fact("m.0j0k", "base.locations.continents.countries_within", "?c")
    .add_fact("?c", "topic_server.population_number", "?n"),
    "M": Sparql().add_fact("m.0kim", "people.person.spouse_s", "?m"),  # marriages (CVT)
    "F": Sparql().add_fact("?x", "film.film.runtime", "?r"),
    "D": Sparql().add_fact("?x", "film.film.initial_release_date", "?d"),
    "N": Sparql().add_fact("?x", "type.object.name", "?n"),
    "MQ": Sparql(profile=METAQA, entities={"Kismet": "Kismet", "The Green Mile": "The Green Mile"}),
}

GOLDEN = [
    (
        "fact_answer",
        'Q.add_fact("m.0crbvqz", "meteorology.tropical_cyclone.category", "?c").set_answer("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?c
WHERE {
  ns:m.0crbvqz <http://rdf.freebase.com/ns/meteorology.tropical_cyclone.category> ?c .
  FILTER (!isLiteral(?c) || lang(?c) = "" || langMatches(lang(?c), "en"))
}
""",
    ),
    (
        "fact_bare_var",
        'Q.add_fact("m.03_r3", "location.country.languages_spoken", "x0")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x0
WHERE {
  ns:m.03_r3 <http://rdf.freebase.com/ns/location.country.languages_spoken> ?x0 .
}
""",
    ),
    (
        "fact_prefixed_relation",
        'Q.add_fact("?x", "ns:film.film.directed_by", "m.0darabont")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.directed_by> ns:m.0darabont .
}
""",
    ),
    (
        "fact_grailqa_literal",
        'Q.add_fact("?x", f"<{FB}film.film.runtime>", "1.0^^http://www.w3.org/2001/XMLSchema#float")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.runtime> "1.0"^^<http://www.w3.org/2001/XMLSchema#float> .
}
""",
    ),
    (
        "fact_lang_literal",
        'Q.add_fact("?x", "common.topic.alias", \'"Green Mile"@en\')',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x
WHERE {
  ?x <http://rdf.freebase.com/ns/common.topic.alias> "Green Mile"@en .
}
""",
    ),
    (
        "fact_escaped_literal",
        'Q.add_fact("?x", "common.topic.alias", \'"say \\\\"hi\\\\"\\\\nbye"\')',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x
WHERE {
  ?x <http://rdf.freebase.com/ns/common.topic.alias> "say \\"hi\\"\\nbye" .
}
""",
    ),
    (
        "fact_terms",
        'Q.add_fact(Var("x"), Relation(FB + "film.film.directed_by"), Entity(FB + "m.0darabont"))',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.directed_by> ns:m.0darabont .
}
""",
    ),
    (
        "answer_entity_var",
        'F.set_answer("?x")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.runtime> ?r .
  FILTER (!isLiteral(?x) || lang(?x) = "" || langMatches(lang(?x), "en"))
}
""",
    ),
    (
        "type",
        'Q.add_type("?x", "film.film").add_fact("?x", "film.film.directed_by", "?d")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?d
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.directed_by> ?d .
  ?x <http://rdf.freebase.com/ns/type.object.type> ns:film.film .
}
""",
    ),
    (
        "filter_integer",
        'F.add_filter("?r", ">", "130")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?r
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.runtime> ?r .
  FILTER (?r > "130"^^<http://www.w3.org/2001/XMLSchema#integer>)
}
""",
    ),
    (
        "filter_float",
        'F.add_filter("?r", "<=", \'"1.0"^^xsd:float\')',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?r
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.runtime> ?r .
  FILTER (?r <= "1.0"^^<http://www.w3.org/2001/XMLSchema#float>)
}
""",
    ),
    (
        "filter_double",
        'F.add_filter("?r", ">=", "2.5e7")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?r
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.runtime> ?r .
  FILTER (?r >= "2.5e7"^^<http://www.w3.org/2001/XMLSchema#double>)
}
""",
    ),
    (
        "filter_not_equal_alias",
        'F.add_filter("?r", "<>", "100")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?r
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.runtime> ?r .
  FILTER (?r != "100"^^<http://www.w3.org/2001/XMLSchema#integer>)
}
""",
    ),
    (
        "filter_twice_is_and",
        'F.add_filter("?r", ">", "100").add_filter("?r", "<", "150")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?r
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.runtime> ?r .
  FILTER (?r > "100"^^<http://www.w3.org/2001/XMLSchema#integer>)
  FILTER (?r < "150"^^<http://www.w3.org/2001/XMLSchema#integer>)
}
""",
    ),
    (
        "filter_datetime",
        'D.add_filter("?d", ">=", \'"2015-08-10"^^xsd:dateTime\')',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?d
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.initial_release_date> ?d .
  FILTER (SUBSTR(STR(?d), 1, IF(STRLEN(STR(?d)) < 10, STRLEN(STR(?d)), 10)) >= SUBSTR("2015-08-10", 1, IF(STRLEN(STR(?d)) < 10, STRLEN(STR(?d)), 10)))
}
""",
    ),
    (
        "filter_bare_date",
        'D.add_filter("?d", "<", "1999-12-31")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?d
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.initial_release_date> ?d .
  FILTER (SUBSTR(STR(?d), 1, IF(STRLEN(STR(?d)) < 10, STRLEN(STR(?d)), 10)) < SUBSTR("1999-12-31", 1, IF(STRLEN(STR(?d)) < 10, STRLEN(STR(?d)), 10)))
}
""",
    ),
    (
        "filter_year_flipped",
        'D.add_filter(\'"1999"^^xsd:gYear\', "<=", "?d")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?d
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.initial_release_date> ?d .
  FILTER (SUBSTR(STR(?d), 1, IF(STRLEN(STR(?d)) < 4, STRLEN(STR(?d)), 4)) >= SUBSTR("1999", 1, IF(STRLEN(STR(?d)) < 4, STRLEN(STR(?d)), 4)))
}
""",
    ),
    (
        "filter_plain_string",
        'N.add_filter("?n", "=", \'"The Green Mile"\')',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?n
WHERE {
  ?x <http://rdf.freebase.com/ns/type.object.name> ?n .
  FILTER (STR(?n) = "The Green Mile")
}
""",
    ),
    (
        "filter_lang_string",
        'N.add_filter("?n", "=", \'"The Green Mile"@en\')',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?n
WHERE {
  ?x <http://rdf.freebase.com/ns/type.object.name> ?n .
  FILTER (?n = "The Green Mile"@en)
}
""",
    ),
    (
        "filter_entity",
        'M.add_fact("?m", "people.marriage.spouse", "?s").add_filter("?s", "!=", "m.0kim")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?m ?s
WHERE {
  ns:m.0kim <http://rdf.freebase.com/ns/people.person.spouse_s> ?m .
  ?m <http://rdf.freebase.com/ns/people.marriage.spouse> ?s .
  FILTER (?s != ns:m.0kim)
}
""",
    ),
    (
        "filter_variables",
        'Q.add_fact("?x", "film.film.directed_by", "?y").add_filter("?x", "!=", "?y")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?x ?y
WHERE {
  ?x <http://rdf.freebase.com/ns/film.film.directed_by> ?y .
  FILTER (?x != ?y)
}
""",
    ),
    (
        "time_datetime",
        'M.add_time_constrain("?m", "people.marriage.from", "people.marriage.to", \'"2015-08-10"^^xsd:dateTime\', \'"2015-01-01"^^xsd:dateTime\')',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?m
WHERE {
  ns:m.0kim <http://rdf.freebase.com/ns/people.person.spouse_s> ?m .
  FILTER (NOT EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.from> ?pyql_t1 } || EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.from> ?pyql_t2 . FILTER (SUBSTR(STR(?pyql_t2), 1, IF(STRLEN(STR(?pyql_t2)) < 10, STRLEN(STR(?pyql_t2)), 10)) <= SUBSTR("2015-08-10", 1, IF(STRLEN(STR(?pyql_t2)) < 10, STRLEN(STR(?pyql_t2)), 10))) })
  FILTER (NOT EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.to> ?pyql_t3 } || EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.to> ?pyql_t4 . FILTER (SUBSTR(STR(?pyql_t4), 1, IF(STRLEN(STR(?pyql_t4)) < 10, STRLEN(STR(?pyql_t4)), 10)) >= SUBSTR("2015-01-01", 1, IF(STRLEN(STR(?pyql_t4)) < 10, STRLEN(STR(?pyql_t4)), 10))) })
}
""",
    ),
    (
        "time_year",
        'M.add_time_constrain("?m", "people.marriage.from", "people.marriage.to", "1999", "1999")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?m
WHERE {
  ns:m.0kim <http://rdf.freebase.com/ns/people.person.spouse_s> ?m .
  FILTER (NOT EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.from> ?pyql_t1 } || EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.from> ?pyql_t2 . FILTER (SUBSTR(STR(?pyql_t2), 1, IF(STRLEN(STR(?pyql_t2)) < 4, STRLEN(STR(?pyql_t2)), 4)) <= SUBSTR("1999", 1, IF(STRLEN(STR(?pyql_t2)) < 4, STRLEN(STR(?pyql_t2)), 4))) })
  FILTER (NOT EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.to> ?pyql_t3 } || EXISTS { ?m <http://rdf.freebase.com/ns/people.marriage.to> ?pyql_t4 . FILTER (SUBSTR(STR(?pyql_t4), 1, IF(STRLEN(STR(?pyql_t4)) < 4, STRLEN(STR(?pyql_t4)), 4)) >= SUBSTR("1999", 1, IF(STRLEN(STR(?pyql_t4)) < 4, STRLEN(STR(?pyql_t4)), 4))) })
}
""",
    ),
    (
        "max_ties",
        'C.add_max("?n").set_answer("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?c
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
  { SELECT (MAX(?n) AS ?pyql_max1) WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
  } }
  FILTER (?n = ?pyql_max1)
  FILTER (!isLiteral(?c) || lang(?c) = "" || langMatches(lang(?c), "en"))
}
""",
    ),
    (
        "min_ties",
        'C.add_min("?n")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?c ?n
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
  { SELECT (MIN(?n) AS ?pyql_min1) WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
  } }
  FILTER (?n = ?pyql_min1)
}
""",
    ),
    (
        "max_then_min_ties",
        'C.add_fact("?c", "type.object.name", "?name").add_max("?n").add_min("?name").set_answer("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?c
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
  ?c <http://rdf.freebase.com/ns/type.object.name> ?name .
  { SELECT (MAX(?n) AS ?pyql_max1) WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
    ?c <http://rdf.freebase.com/ns/type.object.name> ?name .
  } }
  FILTER (?n = ?pyql_max1)
  { SELECT (MIN(?name) AS ?pyql_min2) WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
    ?c <http://rdf.freebase.com/ns/type.object.name> ?name .
    { SELECT (MAX(?n) AS ?pyql_max1) WHERE {
      ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
      ?c ns:topic_server.population_number ?n .
      ?c <http://rdf.freebase.com/ns/type.object.name> ?name .
    } }
    FILTER (?n = ?pyql_max1)
  } }
  FILTER (?name = ?pyql_min2)
  FILTER (!isLiteral(?c) || lang(?c) = "" || langMatches(lang(?c), "en"))
}
""",
    ),
    (
        "max_limit",
        'LC.add_max("?n").set_answer("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?c
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
  FILTER (!isLiteral(?c) || lang(?c) = "" || langMatches(lang(?c), "en"))
}
ORDER BY DESC(?n)
LIMIT 1
""",
    ),
    (
        "max_then_min_limit",
        'LC.add_max("?n").add_min("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?c ?n
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
}
ORDER BY DESC(?n) ASC(?c)
LIMIT 1
""",
    ),
    (
        "count",
        'C.add_count("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT (COUNT(DISTINCT ?c) AS ?count)
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
}
""",
    ),
    (
        "count_named",
        'C.add_count("?c", "?how_many")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT (COUNT(DISTINCT ?c) AS ?how_many)
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
}
""",
    ),
    (
        "sum",
        'C.add_sum("?n")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT (SUM(?n) AS ?sum)
WHERE {
  { SELECT DISTINCT ?c ?n WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
  } }
}
""",
    ),
    (
        "avg_named",
        'C.add_avg("?n", "?mean")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT (AVG(?n) AS ?mean)
WHERE {
  { SELECT DISTINCT ?c ?n WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
  } }
}
""",
    ),
    (
        "count_after_max_ties",
        'C.add_max("?n").add_count("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT (COUNT(DISTINCT ?c) AS ?count)
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
  { SELECT (MAX(?n) AS ?pyql_max1) WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
  } }
  FILTER (?n = ?pyql_max1)
}
""",
    ),
    (
        "count_after_min_limit",
        'LC.add_min("?n").add_count("?c")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT (COUNT(DISTINCT ?c) AS ?count)
WHERE {
  { SELECT DISTINCT ?c ?n WHERE {
    ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
    ?c ns:topic_server.population_number ?n .
  } ORDER BY ASC(?n) LIMIT 1 }
}
""",
    ),
    (
        "select_override",
        'C.to_sparql(select=(Var("n"),), limit=5)',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?n
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
}
LIMIT 5
""",
    ),
    (
        "relations_forward_entity",
        'compile_relations(Q, Entity(FB + "m.03_r3"), "forward")',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?pyql_r1
WHERE {
  ns:m.03_r3 ?pyql_r1 ?pyql_o2 .
}
""",
    ),
    (
        "relations_backward_variable",
        'compile_relations(C.add_max("?n"), Var("c"), "backward", limit=50)',
        """\
PREFIX ns: <http://rdf.freebase.com/ns/>
SELECT DISTINCT ?pyql_r1
WHERE {
  ns:m.0j0k <http://rdf.freebase.com/ns/base.locations.continents.countries_within> ?c .
  ?c ns:topic_server.population_number ?n .
  ?pyql_o2 ?pyql_r1 ?c .
}
LIMIT 50
""",
    ),
    (
        "generic_iris",
        'Sparql(profile=GENERIC).add_fact("<http://example.org/kismet>", "<http://example.org/directed_by>", "?d").set_answer("?d")',
        """\
SELECT DISTINCT ?d
WHERE {
  <http://example.org/kismet> <http://example.org/directed_by> ?d .
}
""",
    ),
    (
        "generic_prefixed",
        'Sparql(profile=EX).add_fact("ex:kismet", "ex:directed_by", "?d").add_type("?d", "ex:Person").add_filter("?d", "!=", "ex:nobody").set_answer("?d")',
        """\
SELECT DISTINCT ?d
WHERE {
  <http://example.org/kismet> <http://example.org/directed_by> ?d .
  ?d <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://example.org/Person> .
  FILTER (?d != <http://example.org/nobody>)
}
""",
    ),
    (
        "generic_max",
        'Sparql(profile=EX).add_fact("?f", "ex:release_year", "?y").add_filter("?y", ">=", "1990").add_max("?y").set_answer("?f")',
        """\
SELECT DISTINCT ?f
WHERE {
  ?f <http://example.org/release_year> ?y .
  FILTER (?y >= "1990"^^<http://www.w3.org/2001/XMLSchema#integer>)
  { SELECT (MAX(?y) AS ?pyql_max1) WHERE {
    ?f <http://example.org/release_year> ?y .
    FILTER (?y >= "1990"^^<http://www.w3.org/2001/XMLSchema#integer>)
  } }
  FILTER (?y = ?pyql_max1)
}
""",
    ),
    (
        "metaqa_two_hop",
        'MQ.add_fact("Kismet", "directed_by", "?d").add_fact("?m", "directed_by", "?d").add_filter("?m", "!=", "Kismet").set_answer("?m")',
        """\
SELECT DISTINCT ?m
WHERE {
  <http://pyql.dev/metaqa/entity/Kismet> <http://pyql.dev/metaqa/relation/directed_by> ?d .
  ?m <http://pyql.dev/metaqa/relation/directed_by> ?d .
  FILTER (?m != <http://pyql.dev/metaqa/entity/Kismet>)
}
""",
    ),
    (
        "metaqa_count",
        'MQ.add_fact("The Green Mile", "starred_actors", "?a").add_count("?a")',
        """\
SELECT (COUNT(DISTINCT ?a) AS ?count)
WHERE {
  <http://pyql.dev/metaqa/entity/The_Green_Mile> <http://pyql.dev/metaqa/relation/starred_actors> ?a .
}
""",
    ),
    (
        "metaqa_label_encoding",
        'Sparql(profile=METAQA, entities={"Amelie": "Amélie (film) 100%_x"}).add_fact("Amelie", "written_by", "?w")',
        """\
SELECT DISTINCT ?w
WHERE {
  <http://pyql.dev/metaqa/entity/Am%C3%A9lie_(film)_100%25%5Fx> <http://pyql.dev/metaqa/relation/written_by> ?w .
}
""",
    ),
]


def _compile(expression: str) -> str:
    result = eval(expression, dict(NAMESPACE))  # noqa: S307 - expressions of this file's table
    return result if isinstance(result, str) else result.to_sparql()


@pytest.mark.parametrize(
    ("expression", "expected"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_golden(expression: str, expected: str) -> None:
    assert _compile(expression) + "\n" == expected


@pytest.mark.parametrize(
    ("expression", "expected"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_golden_parses_in_pyoxigraph(expression: str, expected: str) -> None:
    ox.Store().query(expected)


def test_table_ids_are_unique() -> None:
    assert len({g[0] for g in GOLDEN}) == len(GOLDEN)


# -- builders are copy-on-write ---------------------------------------------------------------------


def test_builders_never_modify_the_receiver() -> None:
    base = NAMESPACE["C"]
    before = base.to_sparql()
    for step in (
        lambda q: q.add_fact("?c", "type.object.name", "?name"),
        lambda q: q.add_type("?c", "location.country"),
        lambda q: q.add_filter("?n", ">", "5"),
        lambda q: q.add_time_constrain("?c", "a.b.from", "a.b.to", "2000", "1999"),
        lambda q: q.add_max("?n"),
        lambda q: q.add_min("?n"),
        lambda q: q.add_count("?c"),
        lambda q: q.add_sum("?n"),
        lambda q: q.add_avg("?n"),
        lambda q: q.set_answer("?c"),
    ):
        assert step(base) != base
        assert base.to_sparql() == before
    assert str(base) == before


def test_variables_and_bound_variables() -> None:
    q = NAMESPACE["C"].add_filter("?other", "!=", "?c").add_count("?c", "?k")
    assert q.variables == (Var("c"), Var("n"), Var("other"), Var("k"))
    assert q.bound_variables == frozenset({Var("c"), Var("n")})
    assert q.answer == Var("k")
    assert Sparql().is_empty and not q.is_empty


# -- invalid steps --------------------------------------------------------------------------------


INVALID = [
    # (expression, error type, QueryError code)
    ('C.set_answer("?nope")', QueryError, "unknown_variable"),
    ('C.add_max("?nope")', QueryError, "unknown_variable"),
    ('C.add_min("?nope")', QueryError, "unknown_variable"),
    ('C.add_count("?nope")', QueryError, "unknown_variable"),
    ('C.add_sum("?nope")', QueryError, "unknown_variable"),
    ('C.add_avg("?nope")', QueryError, "unknown_variable"),
    ('C.add_filter("?n", "~", "3")', QueryError, "invalid_operator"),
    ('C.add_filter("?n", "LIKE", "3")', QueryError, "invalid_operator"),
    ('C.add_filter("3", "<", "4")', QueryError, "no_variable"),
    ('C.add_filter("m.0x", "=", "m.0y")', QueryError, "no_variable"),
    ('C.add_count("?c", "?n")', QueryError, "variable_exists"),
    ('C.add_count("?c").add_sum("?n", "?s")', QueryError, "aggregate_exists"),
    # terms in the wrong place
    ('Q.add_fact("?x", "?p", "?y")', TermError, None),  # relations are not variables
    ('Q.add_fact("?x", \'"a literal"@en\', "?y")', TermError, None),
    ('Q.add_fact("?x", "not a relation", "?y")', TermError, None),
    ('Q.add_fact("nobody known", "a.b", "?y")', TermError, None),
    ('Q.add_type("m.0x", "film.film")', TermError, None),
    ('Q.add_type("?x", "?t")', TermError, None),
    ('M.add_time_constrain("?m", "a.b", "a.c", "?x", "2000")', TermError, None),
    ('M.add_time_constrain("?m", "a.b", "a.c", "2000", "m.0x")', TermError, None),
    ('M.add_time_constrain("m.0x", "a.b", "a.c", "2000", "2000")', TermError, None),
    ('Q.set_answer("m.0x")', TermError, None),
    ('C.add_max("5")', TermError, None),
]


@pytest.mark.parametrize(("expression", "error", "code"), INVALID, ids=[i[0] for i in INVALID])
def test_invalid_steps_raise_typed_errors(
    expression: str, error: type[QueryError | TermError], code: str | None
) -> None:
    with pytest.raises(error) as info:
        _compile(expression)
    if code is not None:
        assert info.value.code == code


def test_unknown_variable_suggests_existing_ones() -> None:
    with pytest.raises(QueryError) as info:
        NAMESPACE["C"].set_answer("?x")
    assert set(info.value.suggestions) == {"?c", "?n"}


def test_extremum_mode_is_checked() -> None:
    with pytest.raises(ValueError):
        Sparql(extremum_mode="first")  # type: ignore[arg-type]


def test_profile_by_name() -> None:
    assert Sparql(profile="metaqa").profile is METAQA  # type: ignore[arg-type]
