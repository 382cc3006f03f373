"""A plain data model of a relational schema: tables, columns, keys, sample values.

The model is deliberately dumb: frozen dataclasses built from simple values, so the DB layer can
fill it from SQLAlchemy introspection (or a Spider ``tables.json``) and the query builder
(:class:`pyql.sql.Sql`) can resolve the column names an LLM writes against it.

Column types are kept twice: ``raw_type`` as the engine spells it (``VARCHAR(20)``,
``DOUBLE PRECISION``) and ``type``, one normalised category (see :data:`TYPE_CATEGORIES`).

>>> players = TableInfo("players", ["Player", ColumnInfo("No.", "INTEGER")])
>>> players.column("no.").type
'integer'
>>> schema = Schema([players])
>>> schema.table("PLAYERS").name
'players'
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from pyql.errors import SchemaError

__all__ = [
    "TYPE_CATEGORIES",
    "TypeCategory",
    "SampleValue",
    "normalise_type",
    "ColumnInfo",
    "ForeignKey",
    "TableInfo",
    "Schema",
    "close_matches",
]

TypeCategory = Literal["text", "integer", "real", "numeric", "date", "boolean", "other"]

#: the normalised column type categories, in no particular order
TYPE_CATEGORIES: tuple[str, ...] = (
    "text",
    "integer",
    "real",
    "numeric",
    "date",
    "boolean",
    "other",
)

SampleValue = str | int | float | None

# Ordered rules on the upper-cased type name (parameters like "(20)" removed).
_TYPE_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), category)
    for pattern, category in (
        (r"(INTERVAL|POINT|GEOMETRY|GEOGRAPHY|POLYGON)\b.*", "other"),
        (r"(BOOL|BOOLEAN|BIT|LOGICAL)", "boolean"),
        (
            r"(DATE|DATETIME\d*|SMALLDATETIME|DATETIMEOFFSET|TIME|TIMESTAMP|TIMESTAMPTZ|TIMETZ"
            r"|TIMESTAMP_[A-Z]+|YEAR)\b.*",
            "date",
        ),
        (r"(DOUBLE|DOUBLE PRECISION|FLOAT\d*|REAL|FLOAT4|FLOAT8|FLOAT32|FLOAT64)", "real"),
        (r"(DECIMAL|DEC|NUMERIC|NUMBER|MONEY|SMALLMONEY|BIGNUMERIC|BIGDECIMAL)", "numeric"),
        (
            r"(UNSIGNED\s+)?(TINY|SMALL|MEDIUM|BIG|HUGE|U|UTINY|USMALL|UBIG|UHUGE)?INT(EGER)?\d*"
            r"(\s+UNSIGNED)?|(SMALL|BIG)?SERIAL\d*|INT64|UNSIGNED BIG INT",
            "integer",
        ),
        (
            r"(N?VAR)?CHAR(ACTER)?(\s+VARYING)?|N?TEXT|TINYTEXT|MEDIUMTEXT|LONGTEXT|CLOB|N?CHAR"
            r"|STRING|VARYING CHARACTER|NATIVE CHARACTER|NVARCHAR2?|VARCHAR2|ENUM|CITEXT|NAME",
            "text",
        ),
    )
)


def normalise_type(raw_type: str | None) -> str:
    """The category of an engine type name (SQLite affinity rules as the fallback).

    >>> [normalise_type(t) for t in ("VARCHAR(20)", "bigint", "DOUBLE PRECISION", "decimal(10,2)")]
    ['text', 'integer', 'real', 'numeric']
    >>> [normalise_type(t) for t in ("TIMESTAMP WITH TIME ZONE", "BOOLEAN", "", "BLOB")]
    ['date', 'boolean', 'other', 'other']
    """
    if not raw_type:
        return "other"
    if raw_type in TYPE_CATEGORIES:
        return raw_type
    name = re.sub(r"\(.*?\)", "", raw_type).strip().upper()
    name = re.sub(r"\s+", " ", name)
    for pattern, category in _TYPE_RULES:
        if pattern.fullmatch(name):
            return category
    # SQLite's affinity rules (https://sqlite.org/datatype3.html), as a last resort.
    if "INT" in name:
        return "integer"
    if any(k in name for k in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if any(k in name for k in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "other"


def close_matches(word: str, candidates: Iterable[str], n: int = 5) -> list[str]:
    """Up to ``n`` candidates close to ``word`` (case-insensitive difflib), best first."""
    pool = list(dict.fromkeys(candidates))
    by_fold: dict[str, str] = {}
    for c in pool:
        by_fold.setdefault(c.casefold(), c)
    hits = difflib.get_close_matches(word.casefold(), list(by_fold), n=n, cutoff=0.5)
    return [by_fold[h] for h in hits]


def _find(name: str, items: Sequence[_Named]) -> _Named | None:
    """Exact match, else the unique case-insensitive match (else None)."""
    for item in items:
        if item.name == name:
            return item
    folded = name.casefold()
    hits = [item for item in items if item.name.casefold() == folded]
    if len(hits) == 1:
        return hits[0]
    return None


@dataclass(frozen=True)
class ColumnInfo:
    """One column: its name, normalised ``type`` category, ``raw_type`` and a few sample values.

    ``type`` may be given as a category or as a raw engine type (then ``raw_type`` is filled from
    it and ``type`` normalised):

    >>> ColumnInfo("age", "INT(11)")
    ColumnInfo(name='age', type='integer', raw_type='INT(11)', sample_values=())
    """

    name: str
    type: str = "other"
    raw_type: str = ""
    sample_values: tuple[SampleValue, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"column name must be a non-empty string, got {self.name!r}")
        if self.type not in TYPE_CATEGORIES:
            raw = self.raw_type or self.type
            object.__setattr__(self, "raw_type", raw)
            object.__setattr__(self, "type", normalise_type(self.type))
        object.__setattr__(self, "sample_values", tuple(self.sample_values))


@dataclass(frozen=True)
class ForeignKey:
    """``column`` of the owning table references ``ref_table.ref_column``."""

    column: str
    ref_table: str
    ref_column: str


class _Named:  # typing helper for _find
    name: str


@dataclass(frozen=True)
class TableInfo:
    """One table: name, columns (in order), primary key column names and foreign keys.

    Columns may be given as names, :class:`ColumnInfo` values or ``(name, type)`` pairs; foreign
    keys as :class:`ForeignKey` values or ``(column, ref_table, ref_column)`` triples.

    >>> t = TableInfo("concert", ["concert_ID", ("Year", "TEXT"), "Stadium_ID"],
    ...               primary_key=["concert_ID"], foreign_keys=[("Stadium_ID", "stadium", "Stadium_ID")])
    >>> t.column_names
    ('concert_ID', 'Year', 'Stadium_ID')
    >>> t.foreign_keys[0].ref_table
    'stadium'
    """

    name: str
    columns: tuple[ColumnInfo, ...] = ()
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"table name must be a non-empty string, got {self.name!r}")
        columns = tuple(_as_column(c) for c in self.columns)
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"table {self.name!r} has duplicate columns: {dupes}")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "primary_key", tuple(self.primary_key))
        object.__setattr__(
            self,
            "foreign_keys",
            tuple(
                fk if isinstance(fk, ForeignKey) else ForeignKey(*fk) for fk in self.foreign_keys
            ),
        )

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def find_column(self, name: str) -> ColumnInfo | None:
        """The column called ``name`` (exact, else unique case-insensitive match), or None."""
        return _find(name, self.columns)  # type: ignore[return-value]

    def column(self, name: str) -> ColumnInfo:
        """The column called ``name``; :class:`~pyql.errors.SchemaError` with close matches."""
        found = self.find_column(name)
        if found is None:
            raise SchemaError(
                f"unknown column {name!r} in table {self.name!r}",
                name=name,
                suggestions=close_matches(name, self.column_names),
            )
        return found


def _as_column(value: ColumnInfo | str | Sequence[str]) -> ColumnInfo:
    if isinstance(value, ColumnInfo):
        return value
    if isinstance(value, str):
        return ColumnInfo(value)
    return ColumnInfo(*value)


@dataclass(frozen=True)
class Schema:
    """The tables of one database.

    >>> s = Schema.from_mapping({"singer": ["Singer_ID", "Name"], "concert": {"Year": "TEXT"}})
    >>> s.table_names
    ('singer', 'concert')
    >>> s.table("Singr")
    Traceback (most recent call last):
    ...
    pyql.errors.SchemaError: unknown table 'Singr'; did you mean: singer?
    """

    tables: tuple[TableInfo, ...] = ()
    _by_name: Mapping[str, TableInfo] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        tables = tuple(self.tables)
        names = [t.name for t in tables]
        if len(set(names)) != len(names):
            raise ValueError(
                f"duplicate tables: {sorted({n for n in names if names.count(n) > 1})}"
            )
        object.__setattr__(self, "tables", tables)
        object.__setattr__(self, "_by_name", {t.name: t for t in tables})

    @classmethod
    def from_mapping(cls, tables: Mapping[str, Sequence[str] | Mapping[str, str]]) -> Schema:
        """A schema from ``{table: [column, ...]}`` or ``{table: {column: type}}``."""
        infos = []
        for name, columns in tables.items():
            if isinstance(columns, Mapping):
                infos.append(TableInfo(name, [ColumnInfo(c, t) for c, t in columns.items()]))
            else:
                infos.append(TableInfo(name, list(columns)))
        return cls(tuple(infos))

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    @cached_property
    def column_labels(self) -> tuple[str, ...]:
        """The columns as a query names them: bare in a one-table schema, else ``table.column``.
        Made once per schema (WikiSQL's dev database has some 17,000; a step reads them).

        >>> Schema.from_mapping({"singer": ["Name"], "concert": ["Year"]}).column_labels
        ('singer.Name', 'concert.Year')
        """
        if len(self.tables) == 1:
            return self.tables[0].column_names
        return tuple(f"{t.name}.{c.name}" for t in self.tables for c in t.columns)

    def __iter__(self) -> Iterator[TableInfo]:
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    def find_table(self, name: str) -> TableInfo | None:
        """The table called ``name`` (exact, else unique case-insensitive match), or None."""
        exact = self._by_name.get(name)
        if exact is not None:
            return exact
        return _find(name, self.tables)  # type: ignore[return-value]

    def table(self, name: str) -> TableInfo:
        """The table called ``name``; :class:`~pyql.errors.SchemaError` with close matches."""
        found = self.find_table(name)
        if found is None:
            suggestions = close_matches(name, self.table_names)
            hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else ""
            raise SchemaError(f"unknown table {name!r}{hint}", name=name, suggestions=suggestions,
                              kind="table")
        return found

    def foreign_keys_between(self, a: str, b: str) -> list[tuple[str, str, str, str]]:
        """Declared foreign keys linking tables ``a`` and ``b`` in either direction.

        Each link is ``(table, column, other_table, other_column)`` with ``table == a``.
        """
        ta, tb = self.table(a), self.table(b)
        links: list[tuple[str, str, str, str]] = []
        for fk in ta.foreign_keys:
            ref = self.find_table(fk.ref_table)
            if ref is not None and ref.name == tb.name:
                links.append((ta.name, fk.column, tb.name, fk.ref_column))
        if ta.name != tb.name:
            for fk in tb.foreign_keys:
                ref = self.find_table(fk.ref_table)
                if ref is not None and ref.name == ta.name:
                    links.append((ta.name, fk.ref_column, tb.name, fk.column))
        return list(dict.fromkeys(links))
