"""One opener for ``--kb`` / ``--db``: :func:`pyql.kb.open_kb` and :func:`pyql.db.open_db`, which
the core CLI, ``pyql ask``, ``pyql mcp`` and ``pyql eval`` all go through."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pyql.agent.evaluation import datasets as eval_datasets
from pyql.cli import backends as cli_backends
from pyql.cli.errors import CliError
from pyql.db import SqlDB, open_db
from pyql.errors import LocationError, ProfileError
from pyql.kb import open_kb

KB_TXT = "Kismet|directed_by|William Dieterle\nKismet|release_year|1944\n"


@pytest.fixture
def kb_txt(tmp_path: Path) -> Path:
    path = tmp_path / "kb.txt"
    path.write_text(KB_TXT)
    return path


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t(x INT)")
        conn.execute("INSERT INTO t VALUES (1)")
    return path


def test_eval_reads_a_txt_kb_with_another_profile_as_the_core_does(kb_txt: Path) -> None:
    """The divergent case: ``pyql eval`` loaded a ``.txt`` with a non-MetaQA profile as RDF
    (and failed on its format); every opener now refuses it with the core's ProfileError."""
    with pytest.raises(ProfileError):
        open_kb(str(kb_txt), profile="freebase")
    with pytest.raises(ProfileError):
        eval_datasets.open_kb(str(kb_txt), "freebase")


def test_eval_opens_a_metaqa_kb_txt_with_an_identity(kb_txt: Path) -> None:
    kb, identity = eval_datasets.open_kb(str(kb_txt), "metaqa")
    assert kb.profile.name == "metaqa" and len(kb) > 0  # type: ignore[arg-type]
    assert identity.startswith(f"metaqa:{kb_txt.resolve()}:")


@pytest.mark.parametrize("opener", [
    lambda p: open_kb(p),
    lambda p: eval_datasets.open_kb(p, "generic"),
])
def test_a_missing_kb_is_a_location_error(tmp_path: Path, opener) -> None:
    missing = str(tmp_path / "nope.ttl")
    with pytest.raises(LocationError) as caught:
        opener(missing)
    assert (caught.value.kind, caught.value.location) == ("kb", missing)


@pytest.mark.parametrize("opener", [open_db, eval_datasets.open_db])
def test_a_missing_db_is_a_location_error(tmp_path: Path, opener) -> None:
    missing = str(tmp_path / "nope.sqlite")
    with pytest.raises(LocationError) as caught:
        opener(missing)
    assert (caught.value.kind, caught.value.location) == ("db", missing)


def test_every_db_opener_reads_a_sqlite_file_read_only(sqlite_file: Path) -> None:
    core = open_db(str(sqlite_file))
    evaluated, identity = eval_datasets.open_db(str(sqlite_file))
    command = cli_backends.open_db(str(sqlite_file))
    try:
        for db in (core, evaluated, command):
            assert isinstance(db, SqlDB) and db.table_names() == ["t"]
        assert identity.startswith(f"sqlite:{sqlite_file.resolve()}:")
    finally:
        for db in (core, evaluated, command):
            db.close()


def test_the_command_line_says_a_missing_db_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="no such database file"):
        cli_backends.open_db(str(tmp_path / "nope.sqlite"))
