"""The Python floor is 3.10, for real (issue 24, item 13): declared alike in pyproject, ruff and
the README; CI runs the suite on 3.10 when it is installed; a bare ``postgresql://`` URL uses
psycopg 3 (the ``[postgres]`` extra) whichever SQLAlchemy pip picked (2.0 on 3.10 would ask for
psycopg2); the tests read TOML with tomli where tomllib is missing."""

from __future__ import annotations

import re
import socket
import sys

import pytest

from pyql.db import SqlDB
from pyql.errors import BackendUnavailableError
from tests.conftest import REPO

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_floor_is_declared_alike_everywhere() -> None:
    assert PYPROJECT["project"]["requires-python"] == ">=3.10"
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py310"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert set(re.findall(r"Python ≥ 3\.\d+", readme)) == {"Python ≥ 3.10"}
    assert any("tomli" in d and "3.11" in d for d in PYPROJECT["project"]["optional-dependencies"]
               ["dev"])
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "\"$py310\" -m venv" in ci and "sys.version_info[:2] == (3, 10)" in ci


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_bare_postgresql_url_uses_psycopg_3() -> None:
    pytest.importorskip("psycopg")
    database = SqlDB(f"postgresql://pyql:secret@127.0.0.1:{_free_port()}/nothing")
    assert database._engine.dialect.driver == "psycopg"
    with pytest.raises(BackendUnavailableError):  # not an ImportError for psycopg2
        database.execute("SELECT 1")
    explicit = SqlDB(f"postgresql+psycopg://pyql@127.0.0.1:{_free_port()}/nothing")
    assert explicit._engine.dialect.driver == "psycopg"
