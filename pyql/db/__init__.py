"""Read-only relational backends: :class:`SqlDB` (SQLAlchemy; SQLite default, PostgreSQL, DuckDB).

>>> from pyql.db import SqlDB
>>> db = SqlDB.sqlite_memory(lambda c: c.execute("CREATE TABLE t(x INT)"))
>>> db.dialect, db.table_names()
('sqlite', ['t'])
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyql.db.base import DB
from pyql.errors import LocationError

if TYPE_CHECKING:
    from pyql.db.guard import GuardError, ensure_read_only_sql
    from pyql.db.sqldb import SqlDB, sqlglot_dialect

__all__ = ["DB", "SqlDB", "GuardError", "ensure_read_only_sql", "sqlglot_dialect", "open_db"]

# Loaded on first use: importing pyql.db.base (for isinstance checks, as every strategy does)
# runs this module, and a KB run must not pay for SQLAlchemy (sqldb) or sqlglot (guard).
_LAZY = {
    "SqlDB": "pyql.db.sqldb",
    "sqlglot_dialect": "pyql.db.sqldb",
    "GuardError": "pyql.db.guard",
    "ensure_read_only_sql": "pyql.db.guard",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pyql.db' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def open_db(location: str, **options: Any) -> SqlDB:
    """A read-only :class:`SqlDB` from a location: a SQLAlchemy URL (anything with ``://``) or a
    SQLite file; anything else is a :class:`~pyql.errors.LocationError`. ``options`` go to
    :class:`SqlDB`. Every ``--db`` goes through here (``pyql run``, ``pyql ask``, ``pyql eval``,
    ``pyql mcp``)."""
    from pyql.db.sqldb import SqlDB

    if "://" in location:
        return SqlDB(location, **options)
    path = Path(location).expanduser()
    if not path.is_file():
        raise LocationError(location, kind="db")
    return SqlDB.sqlite(path, **options)
