"""The database backend contract, the SQL counterpart of :class:`pyql.kb.base.KB`.

A :class:`DB` runs read-only SQL and returns a :class:`~pyql.results.ResultSet` whose cells are
Python values. :meth:`DB.execute` is a template: the read-only guard (sqlglot) verifies the
statement and fills its parameters, the query is counted, and the backend's :meth:`DB._execute`
runs the verified text. Native failures become :mod:`pyql.errors` (a failure is never an empty
result). Wrappers (per-question views, caches) subclass ``DB`` and override the hooks, so they
need no attribute forwarding.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlglot import exp

    from pyql.results import ResultSet
    from pyql.session import Session
    from pyql.sql.schema import Schema

__all__ = ["DB"]


class DB(ABC):
    """A read-only SQL database with a sqlglot ``dialect`` (``""``: sqlglot's generic SQL)."""

    def __init__(self, dialect: str = "") -> None:
        #: the sqlglot dialect queries are parsed and generated in
        self.dialect = dialect
        #: how many queries this backend ran (for QPQ accounting)
        self.query_count = 0
        self._count_lock = threading.Lock()

    @staticmethod
    def session_class() -> type[Session]:
        """The Session ``Session(db)`` makes: a :class:`~pyql.sql.session.SqlSession` (asked of
        the backend, so that :mod:`pyql.session` never imports its SQL subclass)."""
        from pyql.sql.session import SqlSession

        return SqlSession

    def check(self, sql: str | exp.Expression) -> exp.Expression:
        """The guard alone: the verified tree of ``sql``, or :class:`~pyql.db.guard.GuardError`."""
        from pyql.db.guard import ensure_read_only_sql

        return ensure_read_only_sql(sql, self.dialect)

    def verified(
        self, sql: str | exp.Expression, params: Mapping[str, Any] | Sequence[Any] | None = None
    ) -> str:
        """The text that runs for ``sql``: the guard's verified tree, parameters filled in as
        typed literals (``:name`` from a mapping, ``?`` in order from a sequence)."""
        from sqlglot import exp

        tree = self.check(sql)
        if isinstance(tree, exp.Subquery) and {k for k, v in tree.args.items() if v} == {"this"}:
            tree = tree.unnest()  # "(SELECT 1)": not every engine takes a bare parenthesised query
        if params is not None:
            if isinstance(params, Mapping):
                tree = exp.replace_placeholders(tree, **params)
            else:
                tree = exp.replace_placeholders(tree, *params)
        return tree.sql(dialect=self.dialect or None)

    def execute(
        self, sql: str | exp.Expression, params: Mapping[str, Any] | Sequence[Any] | None = None
    ) -> ResultSet:
        """Run one read query; return its rows (cells are Python values).

        Raises :class:`~pyql.errors.ReadOnlyError` (refused by the guard),
        :class:`~pyql.errors.BackendUnavailableError`, :class:`~pyql.errors.BackendTimeoutError`
        or :class:`~pyql.errors.BackendQueryError`.
        """
        text = self.verified(sql, params)
        with self._count_lock:
            self.query_count += 1
        return self._execute(text)

    @abstractmethod
    def _execute(self, text: str) -> ResultSet:
        """Run verified SQL text (the guard has passed it)."""

    @abstractmethod
    def table_names(self) -> list[str]:
        """Tables, then views, as the engine names them."""

    @abstractmethod
    def schema(self, tables: Iterable[str] | None = None) -> Schema:
        """Tables with columns, keys and sample values (all tables, or the given ones)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (connections)."""

    def __enter__(self) -> DB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
