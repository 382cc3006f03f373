"""Readi with the gold stand-in on real MetaQA and WikiSQL dev questions, through the evaluation
runner: at the Session's ceiling with one LLM call per question (slow: loads the datasets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.runner import evaluate

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dataset", ["metaqa-1hop", "metaqa-2hop", "metaqa-3hop"])
def test_metaqa_gold_paths(dataset, pyql_data: Path, tmp_path: Path):
    if not (pyql_data / "metaqa" / "kb.txt").is_file():
        pytest.skip("no MetaQA data")
    metrics = evaluate(RunConfig(dataset=dataset, llm="gold", strategy="readi", sample=40,
                                 data_dir=str(pyql_data)), tmp_path / "run", progress=False)
    assert metrics["hit@1"] == 1.0 and metrics["llm_calls"] == 1.0
    assert metrics["strategy"]["instantiated"] == 1.0
    line = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert line["program"].startswith("add_fact(")


def test_noisy_gold_edits_help(pyql_data: Path, tmp_path: Path):
    if not (pyql_data / "metaqa" / "kb.txt").is_file():
        pytest.skip("no MetaQA data")
    runs = {}
    for edits in ("0", "3"):
        runs[edits] = evaluate(RunConfig(dataset="metaqa-2hop", llm="noisy-gold:0.3",
                                         strategy="readi", limit=60, seed=1,
                                         options={"max_edits": edits},
                                         data_dir=str(pyql_data)),
                               tmp_path / edits, progress=False)
    assert runs["0"]["strategy"].get("edits", 0.0) == 0.0
    assert runs["3"]["strategy"]["edits"] > 0
    assert runs["3"]["hit@1"] > runs["0"]["hit@1"]
    assert runs["3"]["strategy"]["instantiated"] > runs["0"]["strategy"]["instantiated"]


def test_wikisql_gold_paths(pyql_data: Path, tmp_path: Path):
    if not (pyql_data / "wikisql" / "dev.jsonl").is_file():
        pytest.skip("no WikiSQL data")
    metrics = evaluate(RunConfig(dataset="wikisql", llm="gold", strategy="readi", sample=40,
                                 data_dir=str(pyql_data)), tmp_path / "run", progress=False)
    assert metrics["accuracy"] >= 0.95 and metrics["llm_calls"] <= 1.1
