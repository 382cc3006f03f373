"""Spider: items, schemas from tables.json, and every dev gold query on its SQLite database."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pyql.datasets import spider
from pyql.datasets.paths import default_data_dir
from pyql.errors import BackendUnavailableError
from tests.conftest import require_data


@pytest.fixture(scope="session")
def spider_dir() -> Path:
    return require_data("spider", "dev.json").parent


@pytest.fixture(scope="session")
def items(spider_dir: Path) -> list[spider.SpiderItem]:
    return list(spider.load_items(spider_dir / "dev.json", spider_dir / "tables.json"))


def test_items(items: list[spider.SpiderItem]) -> None:
    assert len(items) == 1034
    assert len({i.id for i in items}) == 1034
    assert len({i.db_id for i in items}) == 20
    first = items[0]
    assert (first.id, first.db_id, first.question, first.query) == (
        "dev-0",
        "concert_singer",
        "How many singers do we have?",
        "SELECT count(*) FROM singer",
    )
    assert first.db_schema is not None and "singer" in first.db_schema.table_names
    assert "db_schema" not in repr(first)


def test_items_without_tables_and_unknown_db(spider_dir: Path) -> None:
    item = next(spider.load_items(spider_dir / "dev.json"))
    assert item.db_schema is None
    with pytest.raises(KeyError):
        next(spider.load_items(spider_dir / "dev.json", {}))


def test_schema_from_tables_json(spider_dir: Path) -> None:
    schemas = spider.load_schemas(spider_dir / "tables.json")
    assert len(schemas) == 166
    schema = schemas["concert_singer"]
    assert schema.table_names == ("stadium", "singer", "concert", "singer_in_concert")
    concert = schema.table("concert")
    assert concert.column_names == ("concert_ID", "concert_Name", "Theme", "Stadium_ID", "Year")
    assert concert.primary_key == ("concert_ID",)
    assert concert.column("Stadium_ID").raw_type == "text"
    assert schema.table("stadium").column("Capacity").type == "numeric"
    assert [(fk.column, fk.ref_table, fk.ref_column) for fk in concert.foreign_keys] == [
        ("Stadium_ID", "stadium", "Stadium_ID")
    ]
    link = schema.table("singer_in_concert")
    assert {(fk.column, fk.ref_table) for fk in link.foreign_keys} == {
        ("Singer_ID", "singer"),
        ("concert_ID", "concert"),
    }


def test_tables_json_agrees_with_the_databases(
    spider_dir: Path, items: list[spider.SpiderItem]
) -> None:
    schemas = spider.load_schemas(spider_dir / "tables.json")
    for db_id in sorted({i.db_id for i in items}):
        introspected = spider.open_db(spider_dir, db_id, sample_values=0).schema()
        declared = schemas[db_id]
        names = {t.name.lower() for t in declared} - {"sqlite_sequence"}
        assert {t.name.lower() for t in introspected} == names, db_id
        for table in introspected:
            other = declared.table(table.name)
            assert table.column_names == other.column_names, (db_id, table.name)

            def keys(t):
                return {
                    (f.column.lower(), f.ref_table.lower(), f.ref_column.lower())
                    for f in t.foreign_keys
                }

            assert keys(table) == keys(other), (db_id, table.name)


def test_paths(spider_dir: Path, pyql_data: Path) -> None:
    expected = spider_dir / "database" / "concert_singer" / "concert_singer.sqlite"
    assert spider.db_path(spider_dir, "concert_singer") == expected
    assert spider.db_path(pyql_data, "concert_singer") == expected  # the shared data root works too
    with pytest.raises(ValueError):
        spider.db_path(spider_dir, "../wikisql")
    with pytest.raises(BackendUnavailableError):
        spider.open_db(spider_dir, "no_such_db")


def test_every_dev_gold_query_executes(spider_dir: Path, items: list[spider.SpiderItem]) -> None:
    files = sorted((spider_dir / "database").glob("*/*.sqlite"))
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    dbs = {}
    non_empty = 0
    for item in items:
        if item.db_id not in dbs:
            dbs[item.db_id] = spider.open_db(spider_dir, item.db_id)
        result = dbs[item.db_id].execute(item.query)
        non_empty += not result.is_empty
    assert sum(db.query_count for db in dbs.values()) == 1034
    assert non_empty == 977  # database/SOURCE.md: 977 of 1,034 return rows
    for db in dbs.values():
        db.close()
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == before


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYQL_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.setenv("PYQL_DATA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="PYQL_DATA"):
        default_data_dir()
    monkeypatch.delenv("PYQL_DATA")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="PYQL_DATA"):
        default_data_dir()
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert default_data_dir() == (tmp_path / "shared" / "data").resolve()
    nested = tmp_path / "checkout"
    nested.mkdir()
    monkeypatch.chdir(nested)
    assert default_data_dir() == (tmp_path / "shared" / "data").resolve()
