"""Fixtures of the evaluation tests.

- ``eval_cache`` (autouse: every test of this folder): ``$PYQL_CACHE`` points at a temporary
  directory of the session (``eval_cache_dir``), so built stores and databases never land in
  ``~/.cache`` (the full MetaQA store is built there once per session), ``$PYQL_TIKTOKEN_DIR``
  at the shared tiktoken files (no network), and no OpenAI key or test delay leaks in;
- ``mini_metaqa`` (session): a data directory with the first 40 MetaQA 1-hop dev questions and
  the facts around their topics (loads in milliseconds, for subprocess tests);
- ``mini_wikisql`` (session): the first 60 WikiSQL dev questions and their tables;
- ``fake_openai``: the fake OpenAI-compatible server of ``tests/support/fake_openai.py``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import data_dir
from tests.evaluation.support import MINI_METAQA_QUESTIONS, MINI_WIKISQL_QUESTIONS, require_data
from tests.support.fake_openai import fake_openai  # noqa: F401 - a fixture


@pytest.fixture(scope="session")
def eval_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the whole session (the MetaQA store is built once)."""
    return tmp_path_factory.mktemp("pyql-cache")


def eval_environment(mp: pytest.MonkeyPatch, cache: Path) -> None:
    mp.setenv("PYQL_CACHE", str(cache))
    mp.setenv("PYQL_TIKTOKEN_DIR", str(data_dir() / "tiktoken"))
    mp.delenv("OPENAI_API_KEY", raising=False)
    mp.delenv("OPENAI_BASE_URL", raising=False)
    mp.delenv("PYQL_EVAL_TEST_DELAY", raising=False)


@pytest.fixture(autouse=True)
def eval_cache(monkeypatch: pytest.MonkeyPatch, eval_cache_dir: Path) -> Iterator[Path]:
    eval_environment(monkeypatch, eval_cache_dir)
    yield eval_cache_dir


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
