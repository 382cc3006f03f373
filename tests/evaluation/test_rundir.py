"""The run directory type: one reader of results.jsonl (strict, a torn last line skipped, or
malformed lines counted for the report), one reader of trajectories.jsonl (the last trajectory
of each question id, only the wanted ids parsed), atomic config/metrics, and the usage record
the runner derives from a Usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyql.agent.evaluation.records import QuestionResult, RunConfig, usage_record
from pyql.agent.evaluation.rundir import RunDir, RunDirError
from pyql.agent.llm.accounting import Usage
from pyql.agent.trajectory import Step, Trajectory


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
    _write(run, "\n".join([_line(id="a"), "not json", _line(id="b", metrics={"f1": 1.0})])
           + "\n")
    read = list(run.lines(numbers={3}))  # line 2 is never parsed: no error
    assert [(n, r.id, r.metrics) for n, r in read] == [(3, "b", {"f1": 1.0})]


def test_a_result_holds_no_steps_and_an_older_line_with_steps_still_loads(tmp_path: Path
                                                                         ) -> None:
    assert "steps" not in QuestionResult.model_fields  # the steps are in trajectories.jsonl
    assert "steps" not in json.loads(_line(id="a", usage={"steps": 2.0}))
    run = RunDir(tmp_path)
    older = {"id": "a", "predicted": ["x"], "usage": {"steps": 2.0}, "guidelines": {"KB201": 1},
             "steps": [{"n": 1, "thought": "t", "action": "get_relation(x)", "hint": "KB201",
                        "status": "hint", "seconds": 0.5}, {"n": 2, "action": "execute()"}]}
    _write(run, json.dumps(older) + "\n")
    [result] = run.results()
    assert result == QuestionResult(id="a", predicted=("x",), usage={"steps": 2.0},
                                    guidelines={"KB201": 1})


# -- trajectories.jsonl ---------------------------------------------------------------------------


def _trajectory(qid: str, *actions: str, finished: bool = True, **meta: object) -> Trajectory:
    steps = tuple(Step(n=n, action=a, observation=f"o{n}", llm_latency=0.5, env_latency=0.25)
                  for n, a in enumerate(actions, 1))
    return Trajectory(question=f"question {qid}", steps=steps, finished=finished,
                      stop_reason="execute" if finished else "llm_error",
                      meta={"id": qid, **meta})


def _write_trajectories(run: RunDir, *lines: str, end: str = "\n") -> None:
    run.path.mkdir(parents=True, exist_ok=True)
    run.trajectories_path.write_text("\n".join(lines) + end, encoding="utf-8")


def test_the_last_trajectory_of_an_id_counts(tmp_path: Path) -> None:
    """A --resume runs an outage question again and appends its trajectory again."""
    run = RunDir(tmp_path)
    assert run.trajectories() == {}  # no file yet
    outage = _trajectory("a", "get_relation(x)", finished=False, status="llm_error")
    b = _trajectory("b", "get_relation(y)", "execute()")
    again = _trajectory("a", "get_relation(x)", "execute()")
    _write_trajectories(run, *outage.lines(), *b.lines(), *again.lines())
    found = run.trajectories()
    assert list(found) == ["a", "b"]  # the order the ids first appear
    assert found["a"] == again and found["b"] == b
    assert found["a"].steps[1].llm_latency + found["a"].steps[1].env_latency == 0.75
    assert run.trajectories(["b"]) == {"b": b}
    assert run.trajectories(set()) == {}


def test_only_the_wanted_trajectories_are_parsed(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    a, b = _trajectory("a", "execute()"), _trajectory("b", "execute()")
    head, *rest = b.lines()
    # a step of b that is not JSON: reading b fails, reading a never parses it
    _write_trajectories(run, *a.lines(), head, '{"record":"step","n": 1, "thou', *rest)
    assert run.trajectories(["a"]) == {"a": a}
    with pytest.raises(RunDirError, match=r"trajectories\.jsonl:5: not a JSON line"):
        run.trajectories()
    with pytest.raises(RunDirError, match=r"trajectories\.jsonl:5: not a JSON line"):
        run.trajectories(["b"])


def test_a_trajectory_cut_short_loads_unfinished(tmp_path: Path) -> None:
    """A crash can leave a trajectory without its result record, and a torn last line."""
    run = RunDir(tmp_path)
    cut = list(_trajectory("a", "get_relation(x)", "add_fact(x, r, ?y)").lines())[:-1]
    last = list(_trajectory("c", "execute()").lines())
    _write_trajectories(run, *cut, *_trajectory("b", "execute()").lines(), *cut,
                        last[0], last[1][:20], end="")
    found = run.trajectories()
    assert list(found) == ["a", "b", "c"]
    assert not found["a"].finished and found["a"].stop_reason == ""
    assert [s.action for s in found["a"].steps] == ["get_relation(x)", "add_fact(x, r, ?y)"]
    assert found["b"].finished
    assert not found["c"].finished and found["c"].steps == ()  # its step line is torn


@pytest.mark.parametrize(("bad", "line", "why"), [
    ("not json", 4, "not a JSON line"),
    ('{"record":"question","question":"q","meta":{}}', 4, "a question record without meta.id"),
    ('{"record":"step","n":1}', 1, "a step record outside a trajectory"),
    ('{"record":"elsewhere"}', 4, "not a trajectory record"),
    ('{"record":"question","question":"q","meta":{"id":"x"}}\n{"record":"step","n":"one"}',
     4, "not a trajectory"),
])
def test_a_malformed_trajectory_line_is_a_typed_error_naming_the_line(
        tmp_path: Path, bad: str, line: int, why: str) -> None:
    run = RunDir(tmp_path)
    a, b = _trajectory("a", "execute()"), _trajectory("b", "execute()")
    lines = [bad, *a.lines(), *b.lines()] if line == 1 else [*a.lines(), bad, *b.lines()]
    _write_trajectories(run, *lines)
    with pytest.raises(RunDirError, match=rf"trajectories\.jsonl:{line}: {why}"):
        run.trajectories()
    skipped: list[tuple[int, str]] = []
    found = run.trajectories(malformed=lambda n, why: skipped.append((n, why)))
    assert found == {"a": a, "b": b}
    assert [n for n, _ in skipped] == [line] and skipped[0][1].startswith(why)


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


def test_the_usage_record_is_derived_from_its_model() -> None:
    usage = Usage(llm_calls=2, prompt_tokens=10, estimated_tokens=True, cost=0.5,
                  guideline_triggers={"KB201": 1})
    numbers = usage_record(usage)
    scalar = {name for name, value in usage if not isinstance(value, dict)}
    assert set(numbers) == scalar  # every scalar field of Usage, no hand-kept list
    assert numbers["estimated_tokens"] == 1.0 and numbers["llm_calls"] == 2.0
    assert all(isinstance(v, float) for v in numbers.values())
