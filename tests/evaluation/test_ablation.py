"""The ERASER on/off ablation as a mode of the runner: two resumable sub-runs, one combined
summary and table, on any split."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pyql.agent.evaluation import ablation
from pyql.agent.evaluation.datasets import DatasetError, get_dataset
from pyql.agent.evaluation.records import CONFIG, METRICS, RunConfig
from pyql.agent.evaluation.runner import evaluate, load_config, read_results, resume
from pyql.plugins import PluginConflictError

# the fixes named as the oracle: the test is about the bookkeeping, not the fix rates
NOISY = ("noisy-gold:1.0:reversed_direction,invalid_action:"
         "fix_on_hint=1,fix_on_error=1,silent=0")


def test_ablation_mode_runs_eraser_on_and_off(tmp_path: Path, mini_metaqa: Path) -> None:
    config = RunConfig(dataset="metaqa-1hop", llm=NOISY, data_dir=str(mini_metaqa), limit=8,
                       ablation=True)
    out = tmp_path / "abl"
    summary = evaluate(config, out, progress=False)
    assert load_config(out).ablation is True
    assert load_config(out / "eraser_on").guidelines is True
    assert load_config(out / "eraser_off").guidelines is False
    on, off = summary["settings"]["eraser_on"], summary["settings"]["eraser_off"]
    assert on["n"] == off["n"] == 8 and summary["primary"] == "hit@1" and summary["complete"]
    # the same mistakes at the same gold calls; ERASER names them, without it they stay
    assert on["hit@1"] > off["hit@1"] and summary["gain"] == on["hit@1"] - off["hit@1"]
    rows_on, rows_off = summary["injections"]["eraser_on"], summary["injections"]["eraser_off"]
    assert set(rows_on) <= {"reversed_direction", "invalid_action", "all"}
    assert rows_on["reversed_direction"]["detection_rate"] == 1.0
    assert rows_on["reversed_direction"]["correction_rate"] == 1.0
    assert rows_off["reversed_direction"]["kept"] == rows_off["reversed_direction"]["n"] > 0
    assert rows_on["all"]["n"] == rows_off["all"]["n"]
    assert json.loads((out / METRICS).read_text())["settings"] == summary["settings"]
    table = (out / ablation.ABLATION_TABLE).read_text()
    assert ablation.NOTE in table and "| reversed_direction |" in table
    # each side is a run directory of its own, with the runner's aggregate
    assert json.loads((out / "eraser_on" / METRICS).read_text())["hit@1"] == on["hit@1"]
    assert len(read_results(out / "eraser_off")) == 8


def test_ablation_resumes_the_side_that_is_missing(tmp_path: Path, mini_metaqa: Path) -> None:
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=5,
                       ablation=True)
    out = tmp_path / "abl"
    first = evaluate(config, out, progress=False)
    assert first["settings"]["eraser_on"]["hit@1"] == 1.0 and first["injections"] == {}
    shutil.rmtree(out / "eraser_off")
    again = resume(out, progress=False)
    assert again["settings"] == first["settings"]
    assert (out / "eraser_off" / CONFIG).exists()


def test_the_ablation_runs_on_a_test_split(tmp_path: Path, mini_metaqa: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(mini_metaqa, data)
    hop = data / "metaqa" / "1-hop"
    for name in ("qa_{}.txt", "qa_{}_qtype.txt"):
        shutil.copy(hop / name.format("dev"), hop / name.format("test"))
    dataset = get_dataset("metaqa-1hop", data)
    assert dataset.splits() == ["dev", "test"]
    with pytest.raises(DatasetError, match="no 'train' split .* the data has: dev, test"):
        dataset.items("train")
    config = RunConfig(dataset="metaqa-1hop", split="test", llm="gold", data_dir=str(data),
                       limit=4, ablation=True)
    summary = evaluate(config, tmp_path / "abl", progress=False)
    assert summary["split"] == "test" and summary["settings"]["eraser_on"]["n"] == 4
    assert all(r.id.startswith("1hop-test-") for r in read_results(tmp_path / "abl/eraser_on"))


def test_the_registry_takes_more_datasets(mini_metaqa: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pyql.agent.evaluation import datasets

    class Renamed(datasets.MetaQA1Hop):
        name = "metaqa-1hop-copy"

    monkeypatch.setattr(datasets, "DATASETS", dict(datasets.DATASETS))
    assert datasets.register_dataset(Renamed) is Renamed
    assert "metaqa-1hop-copy" in datasets.dataset_names()
    assert len(get_dataset("metaqa-1hop-copy", mini_metaqa).items(limit=2)) == 2

    class Clash(datasets.MetaQA2Hop):
        name = "metaqa-1hop"

    with pytest.raises(PluginConflictError) as clash:
        datasets.register_dataset(Clash)
    assert clash.value.name == "metaqa-1hop" and len(clash.value.plugins) == 2
    with pytest.raises(TypeError):
        datasets.register_dataset(dict)  # type: ignore[arg-type]
