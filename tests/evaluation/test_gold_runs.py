"""Gold programs run through the whole harness (datasets, agent, runner, metrics) score like the
datasets' own gold answers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pyql.agent.evaluation.datasets import DatasetError, get_dataset
from pyql.agent.evaluation.records import CONFIG, METRICS, RESULTS, RunConfig
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import TRAJECTORIES, evaluate, read_results
from tests.evaluation.support import require_data


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_metaqa_gold_hit1_is_one(tmp_path: Path, hops: int) -> None:
    require_data("metaqa")
    config = RunConfig(dataset=f"metaqa-{hops}hop", llm="gold", limit=20, concurrency=2)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["n"] == 20
    assert metrics["hit@1"] == 1.0
    assert metrics["errors"] == 0
    assert metrics["finished"] == 1.0
    assert metrics["accuracy"] is None  # not defined for KBQA
    assert metrics["primary"] == "hit@1"
    assert list(metrics["by"]["hops"]) == [str(hops)]
    assert metrics["qpq"] > 0 and metrics["llm_calls"] > hops
    assert metrics["run"]["complete"] is True
    results = read_results(tmp_path / "run")
    # results.jsonl is in completion order
    assert sorted(r.id for r in results) == sorted(f"{hops}hop-dev-{i}" for i in range(20))
    first = results[0]
    assert first.question.count("[") == 1  # the topic in brackets, as MetaQA writes it
    steps = RunDir(tmp_path / "run").trajectories([first.id])[first.id].steps
    assert steps and steps[-1].action == "execute()"
    assert first.usage["steps"] == len(steps)
    assert first.program.splitlines()[-1] == "execute()"
    # the run directory
    for name in (CONFIG, RESULTS, METRICS, TRAJECTORIES):
        assert (tmp_path / "run" / name).is_file()
    # a question's steps are written once, in its trajectory; its result line counts them
    lines = (tmp_path / "run" / RESULTS).read_text().splitlines()
    assert len(lines) == 20 and all("steps" not in json.loads(line) for line in lines)
    trajectories = RunDir(tmp_path / "run").trajectories()
    assert sorted(trajectories) == sorted(r.id for r in results)
    for r in results:
        hints = Counter(s.hint for s in trajectories[r.id].steps if s.hint)
        assert r.usage["steps"] == len(trajectories[r.id].steps) and r.guidelines == hints
    saved = json.loads((tmp_path / "run" / METRICS).read_text())
    assert saved["hit@1"] == 1.0
    assert RunConfig.model_validate_json((tmp_path / "run" / CONFIG).read_text()).dataset == \
        config.dataset


def test_wikisql_gold_accuracy_is_one(tmp_path: Path, mini_wikisql: Path) -> None:
    config = RunConfig(dataset="wikisql", llm="gold", data_dir=str(mini_wikisql), concurrency=3)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["n"] == 60
    assert metrics["accuracy"] == 1.0
    assert metrics["hit@1"] is None
    assert metrics["errors"] == 0
    assert set(metrics["by"]["agg"]) <= {"none", "COUNT", "MAX", "MIN", "SUM", "AVG"}
    result = read_results(tmp_path / "run")[0]
    assert result.meta["table"].startswith("table_")
    assert result.usage["kb_queries"] >= 1


def test_spider_gold_where_expressible(tmp_path: Path) -> None:
    require_data("spider", "dev.json")
    config = RunConfig(dataset="spider", llm="gold", sample=30, seed=3, concurrency=2,
                       guidelines=False)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["n"] == 30
    expressible = metrics["by"]["expressible"]["true"]
    assert expressible["accuracy"] == 1.0 and expressible["errors"] == 0
    for result in read_results(tmp_path / "run"):
        if result.meta["expressible"]:
            assert result.error is None
        else:  # no gold program: recorded as an error, scored 0
            assert result.error and "no gold program" in result.error
            assert result.metrics["accuracy"] == 0.0


def test_webqsp_runs_on_a_given_kb(tmp_path: Path) -> None:
    require_data("freebase_questions", "WebQSP_test_processed.json.gz")
    # WebQTest-0: what does jamaican people speak -> (m.03_r3 languages_spoken ?x)
    fb = "http://rdf.freebase.com/ns/"
    ttl = tmp_path / "fb.nt"
    triples = [
        ("m.03_r3", "location.country.languages_spoken", "m.04ygk0"),
        ("m.03_r3", "location.country.languages_spoken", "m.01428y"),
    ]
    lines = [f"<{fb}{s}> <{fb}{p}> <{fb}{o}> ." for s, p, o in triples]
    lines += [f'<{fb}m.04ygk0> <{fb}type.object.name> "Jamaican English"@en .',
              f'<{fb}m.01428y> <{fb}type.object.name> "Jamaican Creole English Language"@en .',
              f'<{fb}m.03_r3> <{fb}type.object.name> "Jamaica"@en .']
    ttl.write_text("\n".join(lines) + "\n")
    config = RunConfig(dataset="webqsp", split="test", llm="gold", limit=1, kb=str(ttl))
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["primary"] == "f1"
    assert metrics["f1"] == 1.0 and metrics["hit@1"] == 1.0
    [result] = read_results(tmp_path / "run")
    assert result.id == "WebQTest-0"
    assert set(result.predicted) == {"m.04ygk0", "m.01428y"}


def test_webqsp_without_a_kb_is_a_clear_error(tmp_path: Path) -> None:
    require_data("freebase_questions", "WebQSP_test_processed.json.gz")
    config = RunConfig(dataset="webqsp", split="test", llm="gold", limit=1)
    with pytest.raises(DatasetError, match="--kb"):
        evaluate(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / CONFIG).exists()  # nothing half-started


def test_items_of_each_dataset(mini_wikisql: Path) -> None:
    require_data("metaqa")
    [item] = get_dataset("metaqa-3hop").items(limit=1)
    assert item.tools == "sparql" and item.meta["hops"] == 3 and item.program
    assert list(item.entities) == list(item.entities.values())
    [item] = get_dataset("wikisql", mini_wikisql).items(limit=1)
    assert item.tools == "sql" and item.table and item.program and item.answers
    webqsp = get_dataset("webqsp").items(limit=50)
    assert any(i.program is None for i in webqsp)
    assert all(i.program is None or i.program.endswith("execute()") for i in webqsp)
    with pytest.raises(DatasetError, match="no .dev. split .* the data has: test"):
        get_dataset("webqsp").items("dev")
    with pytest.raises(DatasetError, match="unknown dataset"):
        get_dataset("nope")
