"""The one result shape every backend returns.

A :class:`ResultSet` is a table: named columns and rows. KB backends fill cells with terms
(:class:`~pyql.terms.Entity`, :class:`~pyql.terms.Literal`, :class:`~pyql.terms.BlankNode`),
SQL backends with Python values. ``None`` is an unbound/NULL cell. An empty ``rows`` means the
query ran and matched nothing; a failure is always an exception from :mod:`pyql.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

__all__ = ["ResultSet"]


@dataclass(frozen=True)
class ResultSet:
    """Rows of a query. Index a row by position; get a column with :meth:`column`.

    >>> rs = ResultSet(("x", "y"), ((1, "a"), (2, "b")))
    >>> rs.column("y")
    ['a', 'b']
    >>> len(rs), rs.is_empty
    (2, False)
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    #: the backend stopped at a row limit; more rows exist
    truncated: bool = False
    #: seconds spent in the backend
    elapsed: float = 0.0
    #: the query text that produced these rows (for logs and trajectories)
    query: str = ""

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)

    @property
    def is_empty(self) -> bool:
        return not self.rows

    def column(self, name: str | int) -> list[Any]:
        index = name if isinstance(name, int) else self.columns.index(name)
        return list(map(itemgetter(index), self.rows))

    def distinct(self, name: str | int) -> list[Any]:
        """Distinct non-null values of a column, in first-seen order."""
        index = name if isinstance(name, int) else self.columns.index(name)
        seen = dict.fromkeys(map(itemgetter(index), self.rows))
        seen.pop(None, None)
        return list(seen)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]

    @classmethod
    def from_records(cls, columns: Sequence[str], rows: Sequence[Sequence[Any]], **kw: Any) -> ResultSet:
        return cls(tuple(columns), tuple(tuple(r) for r in rows), **kw)
