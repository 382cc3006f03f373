"""Golden SPARQL: builder expressions and the exact text they compile to, every output parsed
by pyoxigraph, and the builds that must raise a typed error.

The cases live in ``fixtures/golden/sparql.yaml`` (as the guidelines' cases live in YAML); the
expected text is the contract of the compiler (see the coercions in
:mod:`pyql.sparql.compile`). Relation names with two dots are written as full IRIs because
Oxigraph rejects prefixed names such as ``ns:a.b.c``; ids and one-dot names use ``ns:``.
"""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest
import yaml

from pyql import Sparql
from pyql.errors import QueryError, TermError
from pyql.profiles import GENERIC, METAQA
from pyql.sparql.compile import compile_relations
from pyql.terms import Entity, Literal, Relation, Var

FB = "http://rdf.freebase.com/ns/"
EX = GENERIC.with_prefixes(ex="http://example.org/")
COUNTRIES = Sparql().add_fact("m.0j0k", "base.locations.continents.countries_within", "?c")

#: what the expressions of the golden file can use
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

GOLDEN_FILE = Path(__file__).parent / "fixtures" / "golden" / "sparql.yaml"
with GOLDEN_FILE.open(encoding="utf-8") as _fh:
    _CASES = yaml.safe_load(_fh)
#: (case, build expression, expected SPARQL) of the golden file
GOLDEN = [(c["case"], c["build"], c["sparql"]) for c in _CASES["compiles"]]
#: (build expression, error type, QueryError code or None)
INVALID = [
    (c["build"], {"QueryError": QueryError, "TermError": TermError}[c["error"]], c.get("code"))
    for c in _CASES["rejects"]
]


def _compile(expression: str) -> str:
    result = eval(expression, dict(NAMESPACE))  # noqa: S307 - expressions of the golden file
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
