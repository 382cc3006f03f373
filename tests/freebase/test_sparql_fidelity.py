"""Equivalence of gold SPARQL and converted programs on synthesized graphs."""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from pyql.datasets.sparql_fidelity import (
    OTHER_RELATION,
    GoldQuery,
    Unsynthesizable,
    check_query,
    load_gold_queries,
    sparql_fidelity,
    synthesize,
    virtuoso_reading,
)
from pyql.sparql.from_sparql import read_query
from tests.freebase.gold_sparql import NS, WINDOW

SUPERLATIVE = NS + """SELECT DISTINCT ?x WHERE {
FILTER (?x != ?c)
?c ns:sports.sports_team.team_mascot ns:m.03_dwn .
?c ns:sports.sports_team.championships ?x .
?x ns:time.event.start_date ?sk0 .
FILTER (?sk0 > "1950"^^xsd:dateTime) .
}
ORDER BY DESC(xsd:datetime(?sk0))
LIMIT 1"""


def _run(graph, text: str) -> set[str]:
    from pyql.datasets.sparql_fidelity import _ox

    store = ox.Store()
    store.bulk_extend(ox.Quad(_ox(s), _ox(p), _ox(o)) for s, p, o in graph)
    return {str(row[0]) for row in store.query(text)}


def test_time_window_graph_has_solutions_and_distractors() -> None:
    graph = synthesize(read_query(WINDOW))
    answers = _run(graph, virtuoso_reading(WINDOW))
    # the solution and the copy with an open period answer; the copies outside the window,
    # the one lacking an edge and the one where ?x is the topic entity do not
    assert len(answers) == 2
    assert any(str(p) == OTHER_RELATION for _s, p, _o in graph)
    assert check_query(GoldQuery("w", WINDOW)).status == "agree"


def test_a_program_missing_a_constraint_disagrees() -> None:
    """The check has teeth: drop the time window from the gold and compare with the program of
    the full query."""
    graph = synthesize(read_query(WINDOW))
    full = _run(graph, virtuoso_reading(WINDOW))
    loose = WINDOW.split("FILTER(NOT EXISTS")[0] + "}"
    assert _run(graph, virtuoso_reading(loose)) != full


def test_superlative_agrees_and_picks_the_best_solution() -> None:
    result = check_query(GoldQuery("s", SUPERLATIVE))
    assert result.status == "agree"
    assert len(result.gold) == 1


def test_count_compares_by_value(pyql_data) -> None:
    count = [q for q in load_gold_queries("grailqa", pyql_data) if "COUNT(" in q.sparql][0]
    result = check_query(count)
    assert result.status == "agree"
    assert result.gold and float(result.gold[0]) >= 1


def test_unsupported_and_unsynthesizable_are_reported() -> None:
    union = NS + "SELECT ?x WHERE { { ?x ns:a.b ns:m.1 } UNION { ?x ns:a.c ns:m.1 } }"
    assert check_query(GoldQuery("u", union)).construct == "union"
    both = NS + "SELECT ?x WHERE { ?x ns:a.b ?d . ?d ns:a.c ?e . FILTER (?d < 5) }"
    with pytest.raises(Unsynthesizable):
        synthesize(read_query(both))
    assert check_query(GoldQuery("o", both)).status == "unchecked"


def test_order_between_two_variables_is_checked() -> None:
    order = NS + "SELECT ?x WHERE { ?x ns:a.b ?d . ?x ns:a.c ?e . FILTER (?d < ?e) }"
    result = check_query(GoldQuery("o", order))
    assert result.status == "agree" and len(result.gold) == 1


def test_timezones_of_dates_are_kept() -> None:
    """rdflib would normalise "2011-02-14-08:00"^^xsd:date to "2011-02-14"."""
    gold = NS + ('SELECT ?x WHERE { ?x ns:a.b "2011-02-14-08:00"^^xsd:date }')
    graph = synthesize(read_query(gold))
    assert any(str(o) == "2011-02-14-08:00" for _s, _p, o in graph)
    assert check_query(GoldQuery("t", gold)).status == "agree"


def test_virtuoso_reading_expands_freebase_names() -> None:
    text = virtuoso_reading(NS + 'SELECT ?x WHERE { ns:m.0x ns:a.b.c ?x . FILTER(?x != "ns:q") }')
    assert "<http://rdf.freebase.com/ns/a.b.c>" in text and '"ns:q"' in text


@pytest.mark.parametrize("dataset", ["webqsp", "cwq", "grailqa"])
def test_real_queries_agree(pyql_data, dataset: str) -> None:
    report = sparql_fidelity(dataset, data_dir=pyql_data, sample=25, seed=1)
    summary = report.summary()
    assert summary["coverage"] >= 0.9
    assert summary["checked"] >= 20
    assert summary["agree"] == summary["checked"], report.format()


def test_command_prints_a_table(pyql_data) -> None:
    from typer.testing import CliRunner

    from pyql.cli import app

    result = CliRunner().invoke(app, ["fidelity", "sparql", "grailqa", "--data-dir",
                                      str(pyql_data), "--limit", "5"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("grailqa: 5/5 gold queries converted")
