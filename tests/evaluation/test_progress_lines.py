"""Progress lines when stderr is not a terminal (issue 36, item 19): whole log lines, never a
bar cut mid-number at the terminal width. The real ``pyql eval`` in a subprocess, stderr a
pipe, 40 columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pyql.agent.evaluation.progress import RunProgress
from pyql.agent.evaluation.records import QuestionResult

LINE = re.compile(r"metaqa-1hop dev · gold: (\d+)/5 questions, \d+:\d\d:\d\d elapsed, "
                  r"ETA (?:\d+:\d\d:\d\d|-) · hit@1 \d\.\d{3} · F1 \d\.\d{3} · errors \d+")


def test_eval_prints_whole_progress_lines_to_a_pipe(tmp_path: Path, mini_metaqa: Path) -> None:
    env = {**os.environ, "COLUMNS": "40", "TERM": "xterm-256color"}
    result = subprocess.run(
        [sys.executable, "-m", "pyql", "eval", "--dataset", "metaqa-1hop", "--data-dir",
         str(mini_metaqa), "--llm", "gold", "--limit", "5", "--out", str(tmp_path / "r"),
         "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines and all(LINE.fullmatch(line) for line in lines), lines
    assert LINE.fullmatch(lines[-1]).group(1) == "5"  # the last line: the run's end
    assert "\x1b" not in result.stderr and "…" not in result.stderr


def _result(n: int) -> QuestionResult:
    return QuestionResult(id=f"q{n}", question="q", gold=["a"], predicted=["a"],
                          metrics={"hit@1": 1.0, "f1": 1.0})


def test_lines_come_at_most_once_an_interval_and_once_at_the_end(capsys) -> None:
    from pyql.cli.output import shared_stderr

    shared_stderr.cache_clear()  # the console of this test's (captured, not a terminal) stderr
    try:
        with RunProgress(True, 4, 0, "hit@1", "label", interval=3600) as progress:
            for n in range(4):
                progress.add(_result(n))
        lines = capsys.readouterr().err.splitlines()
        assert [line.split(": ", 1)[1].split(",")[0] for line in lines] == [
            "1/4 questions", "4/4 questions"]
        with RunProgress(True, 2, 0, "hit@1", "label", interval=0) as progress:
            for n in range(2):
                progress.add(_result(n))
        assert len(capsys.readouterr().err.splitlines()) == 2  # no repeated last line
    finally:
        shared_stderr.cache_clear()
