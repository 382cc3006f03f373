"""``kill -9`` of ``pyql eval`` leaves no worker processes behind (issue 36, item 6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def _data(root: Path, questions: int) -> Path:
    hop = root / "metaqa" / "1-hop"
    hop.mkdir(parents=True)
    kb = [f"Movie {i}|has_genre|Genre {i % 7}" for i in range(questions)]
    (root / "metaqa" / "kb.txt").write_text("\n".join(kb) + "\n")
    (hop / "qa_dev.txt").write_text("".join(
        f"what genre is [Movie {i}]\tGenre {i % 7}\n" for i in range(questions)))
    (hop / "qa_dev_qtype.txt").write_text("movie_to_genre\n" * questions)
    return root


def test_sigkill_of_eval_takes_its_workers_along(tmp_path: Path) -> None:
    data = _data(tmp_path / "data", 60_000)
    env = {**os.environ, "PYQL_CACHE": str(tmp_path / "cache")}
    parent = subprocess.Popen(
        [sys.executable, "-m", "pyql", "eval", "-d", "metaqa-1hop", "--data-dir", str(data),
         "--llm", "gold", "--processes", "2", "--no-progress", "--out", str(tmp_path / "run")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        workers: list[int] = []
        until = time.monotonic() + 90
        while time.monotonic() < until and parent.poll() is None:
            workers = _children_of(parent.pid)
            results = tmp_path / "run" / "results.jsonl"
            if len(workers) >= 2 and results.exists() and results.stat().st_size > 0:
                break  # the workers are answering
            time.sleep(0.2)
        assert parent.poll() is None, "the run ended before it could be killed"
        assert len(workers) >= 2, workers
        workers = _children_of(parent.pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(map(_alive, workers)):
            time.sleep(0.1)
        left = [pid for pid in workers if _alive(pid)]
        assert not left, f"still alive after the parent's SIGKILL: {left}"
    finally:
        try:
            os.killpg(parent.pid, signal.SIGKILL)  # whatever the test left behind
        except ProcessLookupError:
            pass
