"""Fixtures and helpers of the evaluation tests.

- ``eval_cache`` (session, autouse in the modules that import it): ``$PYQL_CACHE`` points at a
  temporary directory, so built stores and databases never land in ``~/.cache``; the full
  MetaQA store is built there once per session.
- ``mini_metaqa`` (session): a data directory with the first 40 MetaQA 1-hop dev questions and
  the facts around their topics (loads in milliseconds, for subprocess tests).
- ``mini_wikisql`` (session): the first 60 WikiSQL dev questions and their tables.
- ``FakeClock``: an injectable clock whose ``sleep`` yields to other threads briefly (real time)
  and then moves the fake time forward.
"""

from __future__ import annotations

import gzip
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyql.agent.evaluation.records import QuestionResult
from tests.conftest import data_dir

MINI_METAQA_QUESTIONS = 40
MINI_WIKISQL_QUESTIONS = 60

#: fields of a result that depend on wall-clock time
TIMING = ("seconds", "llm_seconds")


def require_data(*parts: str) -> Path:
    path = data_dir().joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found (set PYQL_DATA)")
    return path


@pytest.fixture(scope="session", autouse=False)
def eval_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("pyql-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYQL_CACHE", str(path))
        mp.setenv("PYQL_TIKTOKEN_DIR", str(data_dir() / "tiktoken"))
        mp.delenv("OPENAI_API_KEY", raising=False)
        mp.delenv("PYQL_EVAL_TEST_DELAY", raising=False)
        yield path


@pytest.fixture(scope="session")
def mini_metaqa(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = require_data("metaqa")
    root = tmp_path_factory.mktemp("mini-data")
    hop = root / "metaqa" / "1-hop"
    hop.mkdir(parents=True)
    qa = (source / "1-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    qt = (source / "1-hop" / "qa_dev_qtype.txt").read_text(encoding="utf-8").splitlines()
    qa, qt = qa[:MINI_METAQA_QUESTIONS], qt[:MINI_METAQA_QUESTIONS]
    (hop / "qa_dev.txt").write_text("\n".join(qa) + "\n", encoding="utf-8")
    (hop / "qa_dev_qtype.txt").write_text("\n".join(qt) + "\n", encoding="utf-8")
    topics = {line.split("[", 1)[1].split("]", 1)[0] for line in qa}
    keep = []
    with (source / "kb.txt").open(encoding="utf-8") as handle:
        for line in handle:
            s, _, o = line.rstrip("\n").split("|")
            if s in topics or o in topics:
                keep.append(line)
    (root / "metaqa" / "kb.txt").write_text("".join(keep), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def mini_wikisql(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = require_data("wikisql")
    root = tmp_path_factory.mktemp("mini-wikisql")
    folder = root / "wikisql"
    folder.mkdir()
    lines = (source / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:MINI_WIKISQL_QUESTIONS]
    (folder / "dev.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    wanted = {json.loads(line)["table_id"] for line in lines}
    with gzip.open(source / "dev.tables.jsonl.gz", "rt", encoding="utf-8") as handle, \
            gzip.open(folder / "dev.tables.jsonl.gz", "wt", encoding="utf-8") as out:
        for line in handle:
            if json.loads(line)["id"] in wanted:
                out.write(line)
    return root


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def comparable(result: QuestionResult) -> dict[str, Any]:
    """A result without what depends on wall-clock time."""
    data = result.model_dump(mode="json")
    data["usage"] = {k: v for k, v in data["usage"].items() if k not in TIMING}
    for step in data["steps"]:
        step.pop("seconds", None)
    return data


def comparable_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics without timing and the per-session ``run`` section."""
    return {k: v for k, v in metrics.items() if k not in ("tpq", "seconds", "run")}


class FakeClock:
    """Fake time for the rate gate. ``sleep(s)`` first yields to the other threads for a few
    real milliseconds (so they reach the gate while it is closed), then moves the fake time
    ``s`` forward."""

    def __init__(self, yield_seconds: float = 0.02) -> None:
        self.now = 0.0
        self.sleeps: list[tuple[str, float]] = []
        self.yield_seconds = yield_seconds
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        time.sleep(self.yield_seconds)
        with self._lock:
            self.sleeps.append((threading.current_thread().name, seconds))
            self.now += seconds
