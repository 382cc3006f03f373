"""Wikidata question sets: the QALD JSON format, WikiWebQuestions, the QALD/GRASP answer
comparison, and ``pyql eval --dataset wwq --llm gold`` on a synthesized slice of WWQ train."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.evaluation.metrics import normalise_answer, qald_scores, score_item
from pyql.agent.evaluation.records import EvalItem
from pyql.cli import app
from pyql.datasets.wikidata import (
    WikidataDataError,
    answers_from_results,
    gold_program,
    load_qald,
    load_wwq,
    topic_entities,
)

runner = CliRunner()

#: a QALD file in the QALD-10 / QALD-9-plus layout, written for these tests (not QALD's data)
QALD = {
    "dataset": {"id": "pyql-test"},
    "questions": [
        {"id": "1",
         "question": [{"language": "en", "string": "Who played Ford Prefect?"},
                      {"language": "de", "string": "Wer spielte Ford Prefect?"}],
         "query": {"sparql": "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX p: "
                             "<http://www.wikidata.org/prop/> PREFIX ps: <http://www.wikidata.org/"
                             "prop/statement/> PREFIX pq: <http://www.wikidata.org/prop/qualifier/>"
                             " SELECT ?x WHERE { wd:Q836821 p:P161 ?s . ?s ps:P161 ?x ; "
                             "pq:P453 wd:Q1267823 . }"},
         "answers": [{"head": {"vars": ["x"]}, "results": {"bindings": [
             {"x": {"type": "uri", "value": "http://www.wikidata.org/entity/Q223117"}}]}}]},
        {"id": "2",
         "question": [{"language": "en", "string": "Is Douglas Adams human?"}],
         "query": {"sparql": "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: "
                             "<http://www.wikidata.org/prop/direct/> ASK { wd:Q42 wdt:P31 wd:Q5 }"},
         "answers": [{"head": {}, "boolean": True}]},
        {"id": "3",
         "question": [{"language": "en", "string": "How many countries are there?"}],
         "query": {"sparql": "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: "
                             "<http://www.wikidata.org/prop/direct/> SELECT (COUNT(DISTINCT ?c) "
                             "AS ?n) WHERE { ?c wdt:P31 wd:Q6256 }"},
         "answers": [{"head": {"vars": ["n"]}, "results": {"bindings": [
             {"n": {"type": "literal", "value": "3",
                    "datatype": "http://www.w3.org/2001/XMLSchema#integer"}}]}}]},
        {"id": "4", "question": [{"language": "de", "string": "Nur deutsch"}],
         "query": {"sparql": "ASK {}"}, "answers": [{"boolean": False}]},
    ],
}


def test_qald_json_is_read(tmp_path: Path) -> None:
    path = tmp_path / "qald.json"
    path.write_text(json.dumps(QALD), encoding="utf-8")
    questions = load_qald(path)
    assert [q.id for q in questions] == ["1", "2", "3"]  # English only
    assert questions[0].answers == ("Q223117",) and questions[0].translations["de"]
    assert (questions[1].answers, questions[1].boolean) == (("true",), True)
    assert questions[2].answers == ("3",)
    assert [q.id for q in load_qald(path, language="de")] == ["1", "4"]
    program, construct = gold_program(questions[0])
    assert construct is None and "pq:P453" in program
    assert gold_program(questions[1]) == (None, "not_select")  # ASK: no program yet
    assert topic_entities(program) == {"Q836821": "Q836821", "Q1267823": "Q1267823"}


def test_a_file_in_another_format_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"id": 1}]), encoding="utf-8")
    with pytest.raises(WikidataDataError) as info:
        load_qald(path)
    assert info.value.path == str(path)
    with pytest.raises(WikidataDataError):
        load_wwq(path=path)


def test_answers_from_results_keep_other_iris_and_literals() -> None:
    results = {"head": {"vars": ["x"]}, "results": {"bindings": [
        {"x": {"type": "uri", "value": "http://example.org/a"}},
        {"x": {"type": "literal", "value": "Arthur", "xml:lang": "en"}},
        {"x": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"}}]}}
    assert answers_from_results(results) == ("http://example.org/a", "Arthur", "Q1")


@pytest.mark.parametrize(("predicted", "gold", "f1"), [
    (["Q1", "Q2"], ["Q1"], 2 / 3),
    (["3"], ["3.0"], 1.0),  # a count compares by value
    (["0.50"], ["0.5"], 1.0),
    (["true"], ["true"], 1.0),  # booleans: the same one
    (["false"], ["true"], 0.0),
    (["2009-01-20T00:00:00Z"], ["2009-01-20"], 0.0),  # literals by their exact lexical form
    ([], [], 1.0),
    (["Q1"], [], 0.0),
])
def test_qald_f1(predicted: list[str], gold: list[str], f1: float) -> None:
    assert qald_scores(predicted, gold)["f1"] == pytest.approx(f1)
    item = EvalItem(id="q", question="?", answers=tuple(gold))
    assert score_item("qald", item, predicted)["f1"] == pytest.approx(f1)


def test_normalise_answer() -> None:
    assert [normalise_answer(v) for v in ("10", "1e1", "10.00", "Q10", False)] == [
        "10", "10", "10", "Q10", "false"]


def test_wwq_train_is_read(pyql_data: Path) -> None:
    questions = load_wwq(pyql_data)
    assert len(questions) == 2431
    assert questions[0].id == "WebQTrn-0" and questions[0].gold_from_kb
    assert questions[0].answers == ()


def test_wwq_gold_on_a_synthesized_slice_scores_at_the_conversion_ceiling(
        pyql_data: Path, tmp_path: Path) -> None:
    n = 30
    result = runner.invoke(app, ["fidelity", "sparql", "wwq", "--data-dir", str(pyql_data),
                                 "--limit", str(n), "--slice", str(tmp_path / "slice.nt"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["agree"] == summary["covered"]
    result = runner.invoke(app, ["kb", "load", str(tmp_path / "slice.nt"), "--store",
                                 str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "run"
    result = runner.invoke(app, [
        "eval", "--dataset", "wwq", "--llm", "gold", "--kb", str(tmp_path / "store"),
        "--limit", str(n), "--data-dir", str(pyql_data), "--out", str(out), "--no-progress",
        "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == n
    ceiling = summary["covered"] / summary["total"]
    assert metrics["f1"] == pytest.approx(ceiling)
    converted = [r for r in rows if "unsupported" not in r["meta"]]
    assert len(converted) == summary["covered"]
    # the gold answers are the gold query's results on the slice, recorded with each result
    assert all(r["gold"] and r["metrics"]["f1"] == 1.0 for r in converted)
    assert all(r["status"] for r in rows)  # a typed end on every question


def test_topic_entities_are_named_by_their_labels_for_the_model(tmp_path: Path) -> None:
    from pyql.agent.evaluation.wikidata_datasets import WWQDataset

    fixture = Path(__file__).parent.parent / "fixtures" / "kb" / "wikidata_small.ttl"
    dataset = WWQDataset(tmp_path)
    dataset.backend(kb=str(fixture))
    item = EvalItem(id="q", question="?", entities={"Q42": "Q42", "Q999999": "Q999999"})
    assert dataset.entities_for(item).entities == {"Douglas Adams": "Q42",
                                                   "Q999999 (no label)": "Q999999"}


def test_qald_gold_run_scores_counts_and_ends_asks_typed(tmp_path: Path) -> None:
    folder = tmp_path / "wikidata" / "qald"
    folder.mkdir(parents=True)
    (folder / "pyql_test.json").write_text(json.dumps(QALD), encoding="utf-8")
    fixture = Path(__file__).parent.parent / "fixtures" / "kb" / "wikidata_small.ttl"
    out = tmp_path / "run"
    result = runner.invoke(app, [
        "eval", "--dataset", "qald", "--split", "pyql_test", "--llm", "gold", "--kb",
        str(fixture), "--data-dir", str(tmp_path), "--out", str(out), "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(rows) == {"1", "2", "3"}
    assert rows["1"]["metrics"]["f1"] == 1.0 and rows["1"]["predicted"] == ["Q223117"]
    assert rows["3"]["metrics"]["f1"] == 1.0 and rows["3"]["gold"] == ["3"]  # a count, by value
    # an ASK has no program yet: a typed end naming the construct, scored 0
    assert rows["2"]["status"] == "error" and "not_select" in rows["2"]["error"]
    assert rows["2"]["metrics"]["f1"] == 0.0 and rows["2"]["meta"]["qtype"] == "boolean"
