"""``pyql eval --dataset grailqa|cwq|webqsp --llm gold --kb STORE`` end to end, on a store that
holds, for the first questions of each dataset, a solution of their gold query with the gold
answers (built from the gold SPARQL by :func:`~pyql.datasets.sparql_fidelity.gold_graph`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pyql.cli import app
from pyql.datasets.freebase import load_questions
from pyql.datasets.sparql_fidelity import gold_graph, write_ntriples
from pyql.kb.loader import load_store
from pyql.sparql.from_sparql import UnsupportedQuery, read_query

runner = CliRunner()
N = 4


@pytest.fixture(scope="module")
def store(pyql_data, tmp_path_factory):
    """The store, and the ids of the questions it covers (those whose gold SPARQL converts)."""
    graph, covered = [], set()
    for dataset in ("grailqa", "cwq", "webqsp"):
        for i, q in enumerate(load_questions(dataset, pyql_data)[:N]):
            try:
                parsed = read_query(q.sparql)
            except UnsupportedQuery:
                continue
            label = q.answer_names[0] if dataset == "cwq" else None
            graph += gold_graph(parsed, q.answers, label=label, prefix=f"{dataset}{i}q")
            covered.add(q.id)
    root = tmp_path_factory.mktemp("e2e")
    write_ntriples(graph, root / "fixture.nt")
    load_store([root / "fixture.nt"], root / "store")
    return root / "store", covered


@pytest.mark.parametrize("dataset", ["grailqa", "cwq", "webqsp"])
def test_gold_runs_end_to_end(store, pyql_data, tmp_path, dataset) -> None:
    store, covered = store
    out = tmp_path / dataset
    result = runner.invoke(app, [
        "eval", "--dataset", dataset, "--llm", "gold", "--kb", str(store), "--limit", str(N),
        "--data-dir", str(pyql_data), "--out", str(out), "--no-progress", "--json",
    ])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == N
    ours = [r for r in rows if r["id"] in covered]
    assert len(ours) >= N - 1
    assert all(r["metrics"].get("f1") == 1.0 for r in ours), [
        (r["id"], r["predicted"], r["gold"], r.get("error")) for r in ours]
    if dataset != "webqsp":
        assert "qtype" in metrics["by"]
