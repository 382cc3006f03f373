"""`pyql eval --strategy srp --option references=DIR` leaves out the questions the reference
base was built from (SRP.held_out), before --limit: the evaluation never sees them."""

from __future__ import annotations

import json
from pathlib import Path

from pyql.agent.evaluation.compare import reference_part
from pyql.agent.evaluation.records import RESULTS, RunConfig
from pyql.agent.evaluation.runner import evaluate
from pyql.agent.strategies.srp.references import build_reference_base
from pyql.agent.strategies.srp.strategy import SRP
from tests.agent.srp.test_compare import data  # noqa: F401 - the small MetaQA data directory


def test_the_runner_leaves_out_the_reference_questions(data: Path, tmp_path: Path) -> None:  # noqa: F811
    questions, ids = reference_part(["metaqa-2hop"], "dev", fraction=0.5, data_dir=data)
    base = build_reference_base(questions, datasets=["metaqa-2hop"], split="dev", fraction=0.5,
                                source_ids=ids, embedding="bm25", size=2, clusters=2)
    directory = base.save(tmp_path / "refs")
    assert SRP.held_out({"references": str(directory)}) == frozenset(ids) != frozenset()
    assert SRP.held_out({}) == frozenset()
    config = RunConfig(dataset="metaqa-2hop", llm="gold", data_dir=str(data), strategy="srp",
                       options={"references": str(directory)}, limit=50)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    done = [json.loads(line) for line in (tmp_path / "run" / RESULTS).read_text().splitlines()]
    evaluated = {row["id"] for row in done}
    assert evaluated and not evaluated & set(ids)
    assert metrics["n"] == len(evaluated) and metrics["errors"] == 0
    assert metrics["hit@1"] == 1.0
    # SRP's own measures, pooled over the run: the gold judge is right every time
    own = metrics["strategy"]
    assert own["judge_accuracy"] == 1.0 and own["judge_accuracy:of"] >= 1.0
    assert own["reference_hit_rate"] is not None and 0.0 <= own["reference_hit_rate"] <= 1.0


def test_pyql_eval_references_flag(data: Path, tmp_path: Path) -> None:  # noqa: F811
    from typer.testing import CliRunner

    from pyql.cli import app

    questions, ids = reference_part(["metaqa-2hop"], "dev", fraction=0.5, data_dir=data)
    base = build_reference_base(questions, datasets=["metaqa-2hop"], split="dev", fraction=0.5,
                                source_ids=ids, embedding="bm25", size=2, clusters=2)
    directory = base.save(tmp_path / "refs")
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--dataset", "metaqa-2hop", "--data-dir", str(data),
                                 "--llm", "gold", "--strategy", "srp", "--references",
                                 str(directory), "--out", str(tmp_path / "run"), "--json",
                                 "--no-progress"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["hit@1"] == 1.0
    config = RunConfig.model_validate_json((tmp_path / "run" / "config.json").read_text())
    assert config.options["references"] == str(directory.resolve())
    bad = runner.invoke(app, ["eval", "--dataset", "metaqa-2hop", "--data-dir", str(data),
                              "--llm", "gold", "--strategy", "srp", "--references",
                              str(tmp_path), "--out", str(tmp_path / "never")])
    assert bad.exit_code == 1 and "not a reference base" in bad.stderr
    assert not (tmp_path / "never").exists()


def test_exclude_ids_leaves_the_same_questions_out_for_any_strategy(data: Path,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pyql.cli import app

    ids = tmp_path / "ids.txt"
    ids.write_text("2hop-dev-0\n2hop-dev-1\n")
    result = CliRunner().invoke(app, [
        "eval", "--dataset", "metaqa-2hop", "--data-dir", str(data), "--llm", "gold",
        "--strategy", "readi", "--exclude-ids", str(ids), "--limit", "3",
        "--out", str(tmp_path / "run"), "--json", "--no-progress"])
    assert result.exit_code == 0, result.stderr
    done = [json.loads(line)["id"] for line in (tmp_path / "run" / RESULTS).read_text().splitlines()]
    assert sorted(done) == ["2hop-dev-2", "2hop-dev-3", "2hop-dev-4"]
    missing = CliRunner().invoke(app, [
        "eval", "--dataset", "metaqa-2hop", "--data-dir", str(data), "--llm", "gold",
        "--exclude-ids", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "r2")])
    assert missing.exit_code == 1 and "no such file (--exclude-ids)" in missing.stderr
    assert not (tmp_path / "r2").exists()
