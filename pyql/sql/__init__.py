"""SQL query trees: an immutable builder compiled with sqlglot for any dialect.

>>> from pyql.sql import Sql
>>> Sql("players").add_condition("Player", "=", "Terrence Ross").set_answer("Nationality").to_sql("postgres")
'SELECT "Nationality" FROM "players" WHERE "Player" = \\'Terrence Ross\\''
"""

from __future__ import annotations

from pyql.sql import query
from pyql.sql.apply import SqlBuild, apply_call, atom_value, program_to_query, program_to_sql
from pyql.sql.query import *  # noqa: F403 - its __all__ is part of ours
from pyql.sql.schema import (
    TYPE_CATEGORIES,
    ColumnInfo,
    ForeignKey,
    Schema,
    TableInfo,
    normalise_type,
)

__all__ = [
    *query.__all__,
    "Schema",
    "TableInfo",
    "ColumnInfo",
    "ForeignKey",
    "TYPE_CATEGORIES",
    "normalise_type",
    "apply_call",
    "atom_value",
    "program_to_query",
    "program_to_sql",
    "SqlBuild",
]


def __getattr__(name: str):
    # The SQL session and the gold-SQL converter load on first use: pyql.sql.session imports
    # pyql.db (SQLAlchemy), which itself imports pyql.sql.schema.
    if name == "SqlSession":
        from pyql.sql.session import SqlSession

        return SqlSession
    if name in ("to_program", "to_query"):
        from pyql.sql import from_sql

        return getattr(from_sql, name)
    raise AttributeError(f"module 'pyql.sql' has no attribute {name!r}")
