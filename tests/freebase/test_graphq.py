"""GraphQ (GraphQuestions, the QueryAgent paper's processed version) as an eval dataset: the
question file is not in the shipped data, only Pangu's entity links; with the file in place the
questions load with gold or predicted links, gold programs and the paper preset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pyql.agent.evaluation.datasets import DatasetError, dataset_names, get_dataset
from pyql.agent.strategies.queryagent.presets import get_preset
from pyql.datasets.freebase import FILES, load_graphq

_SPARQL = ("PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX : "
           "<http://rdf.freebase.com/ns/> \nSELECT (?x0 AS ?value) WHERE {\nSELECT DISTINCT ?x0  "
           "WHERE { \n?x0 :type.object.type :business.brand . \nVALUES ?x1 { :m.0gx1q5 } \n"
           "?x0 :business.brand.products ?x1 . \nFILTER ( ?x0 != ?x1  )\n}\n}")

#: two records in the format of graphquestions_v1_fb15_test_091420.json (GrailQA's); the
#: qids are GraphQ test ids of the shipped entity links, the rest is made up for the test
RECORDS = [
    {"qid": 251000000, "question": "xtracycle is a product of which brand?",
     "answer": [{"answer_type": "Entity", "answer_argument": "m.0b_x1", "entity_name": "X"}],
     "function": "none", "num_node": 2, "num_edge": 1,
     "graph_query": {"nodes": [
         {"nid": 0, "node_type": "class", "id": "business.brand", "friendly_name": "Brand"},
         {"nid": 1, "node_type": "entity", "id": "m.0gx1q5", "friendly_name": "Xtracycle "}],
         "edges": []},
     "sparql_query": _SPARQL},
    {"qid": 255000000, "question": "how many letters did paul the apostle write?",
     "answer": [{"answer_type": "Value", "answer_argument": "13"}],
     "function": "count", "num_node": 2, "num_edge": 1,
     "graph_query": {"nodes": [
         {"nid": 1, "node_type": "entity", "id": "m.060nc", "friendly_name": "Paul the Apostle"}],
         "edges": []},
     "sparql_query": "SELECT DISTINCT ?x WHERE { ?x ?p ?o } GROUP BY ?x"},
]


@pytest.fixture
def graphq_data(pyql_data: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "freebase_questions"
    folder.mkdir()
    shutil.copy(pyql_data / "freebase_questions" / FILES["graphq_el"], folder)
    (folder / FILES["graphq"]).write_text(json.dumps(RECORDS), encoding="utf-8")
    return tmp_path


def test_without_the_question_file_the_error_names_it(pyql_data: Path) -> None:
    assert not (pyql_data / "freebase_questions" / FILES["graphq"]).exists()
    dataset = get_dataset("graphq", pyql_data)
    assert dataset.splits() == []
    with pytest.raises(DatasetError, match=FILES["graphq"]):
        dataset.items("test")
    with pytest.raises(FileNotFoundError, match=FILES["graphq"]):
        load_graphq(pyql_data)


def test_questions_with_gold_and_predicted_links(graphq_data: Path) -> None:
    gold = load_graphq(graphq_data)
    assert [q.id for q in gold] == ["251000000", "255000000"]
    assert gold[0].entities == {"Xtracycle": "m.0gx1q5"} and gold[0].answers == ("m.0b_x1",)
    assert gold[1].answers == ("13",) and gold[1].meta["function"] == "count"
    linked = load_graphq(graphq_data, entity_links="predicted")
    assert linked[0].entities == {"xtracycle": "m.0gx1q5"}
    assert linked[1].entities == {"paul the apostle": "m.060nc"}


def test_registered_for_eval_with_the_paper_preset(graphq_data: Path) -> None:
    assert {"graphq", "graphq-el"} <= set(dataset_names())
    dataset = get_dataset("graphq", graphq_data)
    assert dataset.splits() == ["test"] and dataset.primary == "f1"
    items = dataset.items("test")
    assert "add_fact(?x0, business.brand.products, m.0gx1q5)" in (items[0].program or "")
    assert items[0].meta["qtype"] == "none" and items[1].meta["qtype"] == "count"
    linked = get_dataset("graphq-el", graphq_data).items("test")
    assert linked[0].entities == {"xtracycle": "m.0gx1q5"}
    preset = get_preset("paper", "graphq-el")
    assert preset.prompt == "paper-graphq" and preset.max_steps == 8
    with pytest.raises(DatasetError, match="--kb"):
        dataset.backend()
