"""The run directory type: one reader of results.jsonl (strict, a torn last line skipped, or
malformed lines counted for the report), atomic config/metrics, and the records the runner
derives from a Step and a Usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyql.agent.accounting import Usage
from pyql.agent.evaluation.records import (
    QuestionResult,
    RunConfig,
    StepRecord,
    usage_record,
)
from pyql.agent.evaluation.rundir import RunDir, RunDirError
from pyql.agent.trajectory import Step


def _line(**fields: object) -> str:
    return QuestionResult(**fields).model_dump_json()  # type: ignore[arg-type]


def _write(run: RunDir, text: str) -> None:
    run.path.mkdir(parents=True, exist_ok=True)
    run.results_path.write_text(text, encoding="utf-8")


def test_the_files_are_named_inside_the_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    paths = (run.config_path, run.results_path, run.trajectories_path, run.metrics_path)
    assert [p.relative_to(run.path).as_posix() for p in paths] == [
        "config.json", "results.jsonl", "trajectories.jsonl", "metrics.json"]
    assert RunDir(tmp_path / "other").config_path == tmp_path / "other" / "config.json"


def test_a_torn_last_line_is_skipped_and_the_last_line_of_an_id_counts(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    first = _line(id="a", status="llm_error", error="down")
    again = _line(id="a", metrics={"f1": 1.0})
    _write(run, "\n".join([first, _line(id="b"), "", again]) + '\n{"id": "c", "que')
    assert [(n, r.id) for n, r in run.lines()] == [(1, "a"), (2, "b"), (4, "a")]
    results = run.results()
    assert [r.id for r in results] == ["a", "b"]  # the order the ids first appear
    assert results[0].metrics == {"f1": 1.0} and results[0].status == "ok"


@pytest.mark.parametrize(("bad", "why"), [
    ("not json", "not a JSON line"),
    ('["a list"]', "not a result record"),
    ('{"id": "x", "metrics": "high"}', "not a question result"),
])
def test_a_malformed_line_is_a_typed_error_naming_the_line(tmp_path: Path, bad: str,
                                                          why: str) -> None:
    run = RunDir(tmp_path)
    _write(run, "\n".join([_line(id="a"), bad, _line(id="b")]) + "\n")
    with pytest.raises(RunDirError, match=rf"results\.jsonl:2: {why}"):
        run.results()
    skipped: list[tuple[int, str]] = []
    kept = [r.id for _, r in run.lines(malformed=lambda n, why: skipped.append((n, why)))]
    assert kept == ["a", "b"]
    assert [n for n, _ in skipped] == [2] and skipped[0][1].startswith(why)


def test_only_the_wanted_lines_are_parsed(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    _write(run, "\n".join([_line(id="a"), "not json", _line(id="b", steps=[{"n": 1}])]) + "\n")
    read = list(run.lines(numbers={3}))  # line 2 is never parsed: no error
    assert [(n, r.id, len(r.steps)) for n, r in read] == [(3, "b", 1)]


def test_steps_can_be_left_out(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    _write(run, _line(id="a", steps=[StepRecord(n=1), StepRecord(n=2)]) + "\n")
    assert len(run.results()[0].steps) == 2
    assert run.results(steps=False)[0].steps == ()


def test_config_and_metrics_round_trip(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert not run.holds_run() and run.read_metrics() is None
    with pytest.raises(RunDirError, match="not a run directory"):
        run.read_config()
    config = RunConfig(dataset="metaqa-1hop", llm="gold", limit=3)
    run.write_config(config)
    assert run.holds_run() and run.read_config() == config
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed
    _write(run, _line(id="a", metrics={"f1": 0.5}) + "\n")
    metrics = run.recompute_metrics(primary="f1", run={"complete": True})
    assert run.read_metrics() == json.loads(json.dumps(metrics))
    assert metrics["primary"] == "f1" and metrics["run"] == {"complete": True}
    run.metrics_path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(RunDirError, match="not a JSON object"):
        run.read_metrics()
    run.config_path.write_text('{"dataset": 1}', encoding="utf-8")
    with pytest.raises(RunDirError, match="not a run configuration"):
        run.read_config()


def test_a_locked_directory_is_refused(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    with run.lock(), pytest.raises(RunDirError, match="another pyql eval is running"), \
            run.lock():
        pass
    with run.lock():  # released
        pass


def test_step_records_and_usage_are_derived_from_their_models() -> None:
    step = Step(n=2, thought="t", action="execute()", observation="o", hint="KB201",
                status="hint", query="SELECT", prompt_tokens=7, completion_tokens=3,
                llm_latency=0.25, env_latency=0.5, reply_text="not recorded")
    record = StepRecord.of(step)
    assert record == StepRecord(n=2, thought="t", action="execute()", observation="o",
                                hint="KB201", status="hint", query="SELECT", prompt_tokens=7,
                                completion_tokens=3, seconds=0.75)
    usage = Usage(llm_calls=2, prompt_tokens=10, estimated_tokens=True, cost=0.5,
                  guideline_triggers={"KB201": 1})
    numbers = usage_record(usage)
    scalar = {name for name, value in usage if not isinstance(value, dict)}
    assert set(numbers) == scalar  # every scalar field of Usage, no hand-kept list
    assert numbers["estimated_tokens"] == 1.0 and numbers["llm_calls"] == 2.0
    assert all(isinstance(v, float) for v in numbers.values())
