"""The test databases are byte-identical after the suite: nothing wrote to them.

pyql opens every database read-only; this checks it where it matters. The SHA-256 of each
Spider SQLite file, the WikiSQL tables file and the bundled demo database is taken when this
module is imported (at collection, before any test runs) and compared again by the test below
(named to run last) and once more when the test session ends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, data_dir


def _files() -> list[Path]:
    data = data_dir()
    files = sorted((data / "spider" / "database").glob("*/*.sqlite"))
    files += [data / "wikisql" / "dev.tables.jsonl.gz", REPO / "pyql" / "data" / "demo.sqlite"]
    return [f for f in files if f.is_file()]


def _digests() -> dict[str, str]:
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in _files()}


_AT_START = _digests()


@pytest.fixture(scope="session", autouse=True)
def _unchanged_at_the_end() -> Iterator[None]:
    yield
    changed = [f for f, digest in _digests().items() if _AT_START.get(f) != digest]
    assert not changed, f"test databases changed during the test session: {changed}"


def test_databases_are_unchanged() -> None:
    if not _AT_START:
        pytest.skip("no test databases found (set PYQL_DATA)")
    assert len([f for f in _AT_START if f.endswith(".sqlite")]) >= 21  # 20 Spider + demo
    now = _digests()
    assert now.keys() == _AT_START.keys()
    assert [f for f in now if now[f] != _AT_START[f]] == []
