"""Fixtures of the ``pyql ask`` and entity-linking tests: the fake OpenAI server, the bundled
movie KB, and an environment without any LLM configured (tests set what they need)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from pyql.demo import movies_path
from pyql.kb import OxigraphKB
from pyql.profiles import GENERIC, Profile
from tests.conftest import data_dir
from tests.support.fake_openai import fake_openai  # noqa: F401 - a fixture

MOVIES_NS = "http://example.org/movies/"


def movies_profile() -> Profile:
    """The generic profile with the movie KB's ``ex:`` prefix (as examples/quickstart.py)."""
    return replace(GENERIC.with_prefixes(ex=MOVIES_NS), display_prefix="ex")


@pytest.fixture(scope="session")
def movies_kb() -> OxigraphKB:
    return OxigraphKB.from_file(movies_path(), profile=movies_profile())


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[None]:
    """No LLM from the environment; token counters read local files only (or estimate)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PYQL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    path = data_dir() / "tiktoken"
    if not (path / "cl100k_base.tiktoken").is_file():
        path = tmp_path_factory.mktemp("no-tiktoken")
    monkeypatch.setenv("PYQL_TIKTOKEN_DIR", str(path))
    yield
