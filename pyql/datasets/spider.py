"""Spider: questions with gold SQL, schemas from ``tables.json``, and the SQLite databases.

Data (see ``spider/SOURCE.md`` and ``spider/database/SOURCE.md`` in the shared data directory):
``dev.json`` (1,034 questions over 20 databases), ``tables.json`` (166 schemas, train + dev) and
``database/<db_id>/<db_id>.sqlite``. Table and column names are the ``*_original`` ones, which
are the names in the SQLite files. ``wta_1`` was rebuilt and its ``rankings`` table is empty, so
8 of its gold queries return no rows; ``flight_2`` stores values with stray spaces, so 30 gold
queries with ``= "APG"``-style literals return nothing. Empty is not an error.

>>> from pyql.datasets.paths import default_data_dir
>>> db = open_db(default_data_dir() / "spider", "concert_singer")  # doctest: +SKIP
>>> db.execute("SELECT count(*) FROM singer").rows  # doctest: +SKIP
((6,),)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pyql.datasets.files import field, json_file, question
from pyql.datasets.paths import default_data_dir
from pyql.db import SqlDB
from pyql.errors import DatasetFileError
from pyql.sql.schema import ColumnInfo, ForeignKey, Schema, TableInfo

__all__ = [
    "SpiderItem",
    "SPIDER_TYPES",
    "spider_dir",
    "db_path",
    "open_db",
    "load_items",
    "load_schemas",
    "schema_from_entry",
]

#: Spider's column types (``tables.json``) -> :mod:`pyql.sql.schema` type categories
SPIDER_TYPES: dict[str, str] = {
    "text": "text",
    "number": "numeric",
    "time": "date",
    "boolean": "boolean",
    "others": "other",
}


class SpiderItem(BaseModel):
    """One Spider question: ``id`` (``dev-<index>``), ``db_id``, ``question`` and the gold SQL
    ``query``. ``db_schema`` is the database's schema from ``tables.json`` when it was given."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    db_id: str
    question: str
    query: str
    db_schema: Schema | None = Field(default=None, repr=False)


def spider_dir(data_dir: str | Path | None = None) -> Path:
    """The Spider folder: ``data_dir`` itself if it holds ``database/``, else ``data_dir/spider``
    (so both the Spider folder and the shared data root work); default: under
    :func:`~pyql.datasets.paths.default_data_dir`."""
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    if (base / "database").is_dir() or not (base / "spider").is_dir():
        return base
    return base / "spider"


def db_path(data_dir: str | Path | None, db_id: str) -> Path:
    """``<spider>/database/<db_id>/<db_id>.sqlite`` (see :func:`spider_dir` for ``data_dir``)."""
    if not db_id or "/" in db_id or "\\" in db_id or db_id in (".", ".."):
        raise ValueError(f"not a Spider db_id: {db_id!r}")
    return spider_dir(data_dir) / "database" / db_id / f"{db_id}.sqlite"


def open_db(data_dir: str | Path | None, db_id: str, **options: Any) -> SqlDB:
    """The read-only :class:`~pyql.db.SqlDB` of one Spider database.

    Raises :class:`~pyql.errors.BackendUnavailableError` when the file is missing.
    """
    return SqlDB.sqlite(db_path(data_dir, db_id), **options)


def schema_from_entry(entry: Mapping[str, Any]) -> Schema:
    """The :class:`~pyql.sql.schema.Schema` of one ``tables.json`` entry (original names,
    Spider's column types, primary keys, foreign keys)."""
    tables = list(entry["table_names_original"])
    columns: list[list[tuple[str, str]]] = [[] for _ in tables]
    owner: dict[int, tuple[int, str]] = {}
    for index, ((table_index, name), spider_type) in enumerate(
        zip(entry["column_names_original"], entry["column_types"], strict=True)
    ):
        if table_index < 0:  # the "*" pseudo column
            continue
        columns[table_index].append((name, spider_type))
        owner[index] = (table_index, name)
    primary: list[list[str]] = [[] for _ in tables]
    for key in entry.get("primary_keys", []):
        for index in key if isinstance(key, list) else [key]:
            table_index, name = owner[index]
            primary[table_index].append(name)
    foreign: list[list[ForeignKey]] = [[] for _ in tables]
    for column_index, ref_index in entry.get("foreign_keys", []):
        table_index, name = owner[column_index]
        ref_table, ref_name = owner[ref_index]
        foreign[table_index].append(ForeignKey(name, tables[ref_table], ref_name))
    return Schema(
        tuple(
            TableInfo(
                table,
                tuple(ColumnInfo(name, SPIDER_TYPES.get(t, "other"), t) for name, t in columns[i]),
                primary_key=tuple(dict.fromkeys(primary[i])),
                foreign_keys=tuple(dict.fromkeys(foreign[i])),
            )
            for i, table in enumerate(tables)
        )
    )


def load_schemas(tables_json: str | Path) -> dict[str, Schema]:
    """Every schema in a Spider ``tables.json``, by ``db_id``."""
    path = Path(tables_json)
    entries = json_file(path)
    if not isinstance(entries, list):
        raise DatasetFileError(path, None, "expected a JSON list of database schemas")
    schemas = {}
    for index, entry in enumerate(entries):
        try:
            schemas[field(entry, "db_id", path, None, f"schema {index}")] = schema_from_entry(
                entry)
        except (KeyError, TypeError, IndexError) as exc:
            raise DatasetFileError(path, None, f"schema {index} is malformed: {exc!r}") from None
    return schemas


def load_items(
    dev_json: str | Path, tables_json: str | Path | Mapping[str, Schema] | None = None
) -> Iterator[SpiderItem]:
    """The questions of a Spider split (``dev.json``), in file order.

    With ``tables_json`` (the file, or :func:`load_schemas` output) each item carries its
    database's schema, and an unknown ``db_id`` raises :class:`KeyError`.
    """
    source = Path(dev_json)
    raw_items = json_file(source)
    if not isinstance(raw_items, list):
        raise DatasetFileError(source, None, "expected a JSON list of questions")
    schemas: Mapping[str, Schema] | None
    if tables_json is None or isinstance(tables_json, Mapping):
        schemas = tables_json
    else:
        schemas = load_schemas(tables_json)
    split = source.name.split(".")[0]
    for index, raw in enumerate(raw_items):
        what = f"question {index}"
        db_id = field(raw, "db_id", source, None, what)
        schema = None
        if schemas is not None:
            if db_id not in schemas:
                raise KeyError(f"{source} item {index}: db_id {db_id!r} is not in tables.json")
            schema = schemas[db_id]
        yield SpiderItem(
            id=f"{split}-{index}",
            db_id=db_id,
            question=question(field(raw, "question", source, None, what), source, None),
            query=field(raw, "query", source, None, what),
            db_schema=schema,
        )


def gold_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """All rows of a gold query on its SQLite file (read-only, no row cap, lenient UTF-8).

    The gold SQL is trusted dataset text: it runs directly, not through :class:`SqlDB`'s guard
    and row cap (two Spider gold answers have over 20,000 rows).
    """
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        conn.text_factory = lambda b: b.decode("utf-8", errors="replace")
        return [tuple(r) for r in conn.execute(sql).fetchall()]
    finally:
        conn.close()


def is_ordered(sql: str) -> bool:
    """Does the query order its top-level result (ORDER BY on the outer SELECT/set operation)?"""
    import sqlglot

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return "order by" in sql.lower()
    return tree.args.get("order") is not None
