"""Results survive: kill -9 at random moments, resume, and every question is there exactly once
with the metrics of an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyql.agent.evaluation.metrics import aggregate
from pyql.agent.evaluation.records import CONFIG, RESULTS, QuestionResult, RunConfig
from pyql.agent.evaluation.runner import (
    TRAJECTORIES,
    ResultsLog,
    RunDirError,
    evaluate,
    iter_records,
    read_results,
    resume,
)
from pyql.agent.evaluation.specs import ReplayProvider
from tests.conftest import REPO
from tests.evaluation.conftest import eval_environment
from tests.evaluation.support import (
    MINI_METAQA_QUESTIONS,
    comparable_metrics,
    comparable_run,
)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _ids(out: Path) -> list[str]:
    data = (out / RESULTS).read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line)["id"] for line in data.splitlines()]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, mini_metaqa: Path,
                  eval_cache_dir: Path) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa),
                       concurrency=1)
    with pytest.MonkeyPatch.context() as mp:
        eval_environment(mp, eval_cache_dir)
        return evaluate(config, out, progress=False), out


def test_kill_9_and_resume_gives_every_question_once(
        tmp_path: Path, mini_metaqa: Path, uninterrupted: tuple[dict, Path]) -> None:
    out = tmp_path / "run"
    results = out / RESULTS
    env = {**os.environ, "PYQL_EVAL_TEST_DELAY": "0.03", "PYTHONPATH": str(REPO)}
    start = [sys.executable, "-m", "pyql", "eval", "--dataset", "metaqa-1hop", "--data-dir",
             str(mini_metaqa), "--llm", "gold", "--concurrency", "2", "--out", str(out),
             "--no-progress"]
    again = [sys.executable, "-m", "pyql", "eval", "--resume", str(out), "--no-progress"]
    rng = random.Random(20240611)
    kills = 0
    for attempt in range(3):
        before = _lines(results)
        proc = subprocess.Popen(start if attempt == 0 else again, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while _lines(results) <= before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.35))  # a random moment, mid-question or mid-write
        if proc.poll() is None:
            proc.kill()  # SIGKILL: no cleanup, no flush
            kills += 1
        _, err = proc.communicate(timeout=30)
        assert proc.returncode in (0, -9), err.decode()
        assert _lines(results) < MINI_METAQA_QUESTIONS, "the run ended before it was killed"
    assert kills == 3
    done = subprocess.run(again, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()

    ids = _ids(out)
    assert len(ids) == len(set(ids)) == MINI_METAQA_QUESTIONS
    expected, reference = uninterrupted
    metrics = json.loads((out / "metrics.json").read_text())
    assert comparable_metrics(metrics) == comparable_metrics(expected)
    assert metrics["run"]["complete"] is True
    mine = comparable_run(out)
    theirs = comparable_run(reference)
    assert mine == theirs
    # the trajectories of the finished questions can be replayed
    replay = ReplayProvider(out)
    assert set(ids) <= set(replay.trajectories)


def test_a_partial_last_line_is_cut_and_the_rest_runs_once(
        tmp_path: Path, mini_metaqa: Path, uninterrupted: tuple[dict, Path]) -> None:
    expected, reference = uninterrupted
    out = tmp_path / "run"
    out.mkdir()
    (out / CONFIG).write_bytes((reference / CONFIG).read_bytes())
    lines = (reference / RESULTS).read_bytes().splitlines(keepends=True)
    # 10 whole lines, then half of the 11th, as a crash in the middle of a write leaves it
    (out / RESULTS).write_bytes(b"".join(lines[:10]) + lines[10][: len(lines[10]) // 2])
    traj = (reference / TRAJECTORIES).read_bytes()
    (out / TRAJECTORIES).write_bytes(traj[: len(traj) // 3])
    metrics = resume(out, progress=False)
    ids = _ids(out)
    assert len(ids) == len(set(ids)) == MINI_METAQA_QUESTIONS
    assert ids[:10] == [json.loads(line)["id"] for line in lines[:10]]
    assert comparable_metrics(metrics) == comparable_metrics(expected)
    # a second resume has nothing to do
    again = resume(out, progress=False)
    assert again["run"]["this_session"]["questions"] == 0
    assert _ids(out) == ids
    ReplayProvider(out)  # the trajectories file was repaired too


def test_replaying_a_run_reproduces_it(tmp_path: Path, mini_metaqa: Path,
                                       uninterrupted: tuple[dict, Path]) -> None:
    expected, reference = uninterrupted
    config = RunConfig(dataset="metaqa-1hop", llm=f"replay:{reference}",
                       data_dir=str(mini_metaqa), concurrency=3)
    metrics = evaluate(config, tmp_path / "replay", progress=False)
    assert comparable_metrics(metrics) == comparable_metrics(expected)


def test_run_directory_errors(tmp_path: Path, mini_metaqa: Path,
                              uninterrupted: tuple[dict, Path]) -> None:
    _, reference = uninterrupted
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa))
    with pytest.raises(RunDirError, match="already holds a run"):
        evaluate(config, reference, progress=False)
    with pytest.raises(RunDirError, match="not a run directory"):
        resume(tmp_path, progress=False)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / CONFIG).write_bytes((reference / CONFIG).read_bytes())
    (broken / RESULTS).write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(RunDirError, match="not a JSON line"):
        resume(broken, progress=False)


def test_a_locked_run_directory_is_refused(tmp_path: Path, mini_metaqa: Path,
                                           uninterrupted: tuple[dict, Path]) -> None:
    import fcntl

    _, reference = uninterrupted
    out = tmp_path / "run"
    out.mkdir()
    (out / CONFIG).write_bytes((reference / CONFIG).read_bytes())
    with open(out / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with pytest.raises(RunDirError, match="another pyql eval is running"):
            resume(out, progress=False)


def test_results_log_writes_whole_lines(tmp_path: Path) -> None:
    log = ResultsLog(tmp_path / "r.jsonl").open()
    log.append('{"id": "1"}')
    log.append('{"id": "2"}', '{"id": "3"}')
    with pytest.raises(ValueError, match="one line"):
        log.append('{"id":\n"4"}')
    log.close()
    path = tmp_path / "r.jsonl"
    assert [r["id"] for r in iter_records(path)] == ["1", "2", "3"]
    with open(path, "ab") as handle:
        handle.write(b'{"id": "4", "long": "' + b"x" * 200_000)  # cut short, longer than a block
    assert [r["id"] for r in iter_records(path)] == ["1", "2", "3"]  # not yet repaired: skipped
    assert ResultsLog(path).repair() == 200_000 + len(b'{"id": "4", "long": "')
    assert path.read_bytes().endswith(b'{"id": "3"}\n')
    assert ResultsLog(path).repair() == 0


def test_the_last_line_of_a_repeated_id_counts(tmp_path: Path) -> None:
    lines = [QuestionResult(id="a", metrics={"hit@1": 0.0}), QuestionResult(id="b"),
             QuestionResult(id="a", metrics={"hit@1": 1.0})]
    (tmp_path / RESULTS).write_text("".join(r.model_dump_json() + "\n" for r in lines))
    results = read_results(tmp_path)
    assert [(r.id, r.metrics.get("hit@1")) for r in results] == [("a", 1.0), ("b", None)]



def test_the_last_metrics_are_those_of_the_file(
        tmp_path: Path, uninterrupted: tuple[dict, Path]) -> None:
    """The run keeps its results in memory instead of reading results.jsonl again at the end:
    what it writes is what the file's lines give, with an id written twice (the last line
    counts) and an outage line (run again) among the earlier session's lines."""
    _, reference = uninterrupted
    out = tmp_path / "run"
    out.mkdir()
    (out / CONFIG).write_bytes((reference / CONFIG).read_bytes())
    lines = [QuestionResult.model_validate_json(line)
             for line in (reference / RESULTS).read_bytes().splitlines()]
    wrong = lines[2].model_copy(update={"metrics": {**lines[2].metrics, "hit@1": 0.0}})
    outage = lines[5].model_copy(update={"status": "backend_error", "metrics": {}})
    earlier = [*lines[:6], wrong, outage]
    (out / RESULTS).write_text("".join(r.model_dump_json() + "\n" for r in earlier))
    metrics = resume(out, progress=False)
    assert metrics["run"]["this_session"]["questions"] == MINI_METAQA_QUESTIONS - 5
    assert metrics["hit@1"] < 1.0  # the wrong line of the earlier session counts
    from_file = aggregate(read_results(out), primary=metrics["primary"])
    assert comparable_metrics(metrics) == comparable_metrics(from_file)
    assert metrics["run"]["done"] == metrics["run"]["items"] == MINI_METAQA_QUESTIONS
