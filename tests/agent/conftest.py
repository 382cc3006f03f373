"""Fixtures of the agent tests: a tiny MetaQA KB, the local tiktoken files, the fake OpenAI
server (``fake_openai``, from ``tests/support/fake_openai.py``), and no network for tiktoken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyql.kb import OxigraphKB
from tests.conftest import data_dir
from tests.support.fake_openai import fake_openai  # noqa: F401 - a fixture
from tests.support.metaqa import metaqa_kb

#: lines of MetaQA's kb.txt (head|relation|tail) around the example questions
METAQA_LINES = """\
Kismet|directed_by|William Dieterle
Kismet|written_by|Edward Knoblock
Kismet|starred_actors|Marlene Dietrich
Kismet|starred_actors|Ronald Colman
Kismet|release_year|1944
Kismet|in_language|English
Never a Dull Moment|directed_by|Jerry Paris
Never a Dull Moment|written_by|John Godey
Never a Dull Moment|written_by|AJ Carothers
Never a Dull Moment|starred_actors|Dick Van Dyke
Never a Dull Moment|release_year|1968
Johnny Handsome|directed_by|Walter Hill
Johnny Handsome|written_by|John Godey
Johnny Handsome|written_by|Ken Friedman
Johnny Handsome|starred_actors|Mickey Rourke
Johnny Handsome|release_year|1989
Johnny Handsome|has_genre|Drama
The Taking of Pelham One Two Three|directed_by|Joseph Sargent
The Taking of Pelham One Two Three|written_by|Peter Stone
The Taking of Pelham One Two Three|written_by|John Godey
The Taking of Pelham One Two Three|starred_actors|Walter Matthau
The Taking of Pelham One Two Three|release_year|1974
The Taking of Pelham One Two Three|has_genre|Thriller
"""

QUESTION = "which person directed the movies written by [John Godey]"
ENTITIES = {"John Godey": "John Godey"}
GOLD = {"Walter Hill", "Joseph Sargent", "Jerry Paris"}


@pytest.fixture
def kb() -> OxigraphKB:
    return metaqa_kb(METAQA_LINES)


@pytest.fixture(scope="session")
def tiktoken_dir() -> Path:
    path = data_dir() / "tiktoken"
    if not (path / "cl100k_base.tiktoken").is_file():
        pytest.skip(f"no tiktoken files in {path} (set PYQL_DATA)")
    return path


@pytest.fixture(autouse=True)
def _offline_tiktoken(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[None]:
    """Token counters read the local files (or an empty directory: estimates), never the web."""
    path = data_dir() / "tiktoken"
    if not (path / "cl100k_base.tiktoken").is_file():
        path = tmp_path_factory.mktemp("no-tiktoken")
    monkeypatch.setenv("PYQL_TIKTOKEN_DIR", str(path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("PYQL_MODEL", raising=False)
    yield
