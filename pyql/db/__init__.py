"""Read-only relational backends: :class:`SqlDB` (SQLAlchemy; SQLite default, PostgreSQL, DuckDB).

>>> from pyql.db import SqlDB
>>> db = SqlDB.sqlite_memory(lambda c: c.execute("CREATE TABLE t(x INT)"))
>>> db.dialect, db.table_names()
('sqlite', ['t'])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyql.db.base import DB
from pyql.db.guard import GuardError, ensure_read_only_sql
from pyql.db.sqldb import SqlDB, sqlglot_dialect
from pyql.errors import LocationError

__all__ = ["DB", "SqlDB", "GuardError", "ensure_read_only_sql", "sqlglot_dialect", "open_db"]


def open_db(location: str, **options: Any) -> SqlDB:
    """A read-only :class:`SqlDB` from a location: a SQLAlchemy URL (anything with ``://``) or a
    SQLite file; anything else is a :class:`~pyql.errors.LocationError`. ``options`` go to
    :class:`SqlDB`. Every ``--db`` goes through here (``pyql run``, ``pyql ask``, ``pyql eval``,
    ``pyql mcp``)."""
    if "://" in location:
        return SqlDB(location, **options)
    path = Path(location).expanduser()
    if not path.is_file():
        raise LocationError(location, kind="db")
    return SqlDB.sqlite(path, **options)
