"""The ``exhaustive`` marker: every item of a dataset, left out of the default run (which checks a
seeded sample of the same thing) and run by ``-m exhaustive``, ``--exhaustive``, or by name."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

FILE = "tests/test_wikisql.py"
ALL = f"{FILE}::test_gold_programs_execute_like_wikisql_all"
SAMPLE = f"{FILE}::test_gold_programs_execute_like_wikisql_sample"


def _collected(*args: str) -> tuple[list[str], str]:
    """Node ids pytest would run with ``args``, and its summary line."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    return [line for line in lines if "::" in line], lines[-1]


def test_the_default_run_deselects_the_exhaustive_checks_and_keeps_their_sample() -> None:
    ids, summary = _collected(FILE)
    assert SAMPLE in ids and ALL not in ids
    assert "1 deselected" in summary


def test_marker_option_or_name_runs_them() -> None:
    assert _collected(FILE, "-m", "exhaustive")[0] == [ALL]
    ids, summary = _collected(FILE, "--exhaustive")
    assert ALL in ids and SAMPLE in ids and "deselected" not in summary
    assert _collected(ALL)[0] == [ALL]
