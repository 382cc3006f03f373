"""Read-only relational backends: :class:`SqlDB` (SQLAlchemy; SQLite default, PostgreSQL, DuckDB).

>>> from pyql.db import SqlDB
>>> db = SqlDB.sqlite_memory(lambda c: c.execute("CREATE TABLE t(x INT)"))
>>> db.dialect, db.table_names()
('sqlite', ['t'])
"""

from __future__ import annotations

from pyql.db.base import DB
from pyql.db.guard import GuardError, ensure_read_only_sql
from pyql.db.sqldb import SqlDB, sqlglot_dialect

__all__ = ["DB", "SqlDB", "GuardError", "ensure_read_only_sql", "sqlglot_dialect"]
