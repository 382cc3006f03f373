"""The one result shape every backend returns.

A :class:`ResultSet` is a table: named columns and rows. KB backends fill cells with terms
(:class:`~pyql.terms.Entity`, :class:`~pyql.terms.Literal`, :class:`~pyql.terms.BlankNode`),
SQL backends with Python values. ``None`` is an unbound/NULL cell. An empty ``rows`` means the
query ran and matched nothing; a failure is always an exception from :mod:`pyql.errors`.

Backends bound what one query may return (:class:`Limits`): at most ``max_rows`` rows
(``truncated`` says more existed) and at most ``max_cell`` characters (bytes for a blob) per
cell (``cells_cut`` counts the cells cut to that length). A model-written query cannot take the
process to gigabytes, and the cut is stated in the result, never silent.

>>> cut_cell("x" * 10, 4), cut_cell(b"0123456789", 4), cut_cell(7, 4)
('xxxx', b'0123', 7)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

__all__ = ["DEFAULT_LIMITS", "KB_LIMITS", "Limits", "ResultSet", "cut_cell"]


@dataclass(frozen=True)
class Limits:
    """What one query may return: ``max_rows`` rows and ``max_cell`` characters (or bytes) a
    cell. The defaults are 10,000 rows and 65,536 characters (:data:`DEFAULT_LIMITS`, what a
    database applies); a KB applies :data:`KB_LIMITS` (1,000,000 rows).

    >>> Limits(max_rows=5).max_cell
    65536
    >>> Limits(max_rows=0)
    Traceback (most recent call last):
    ValueError: max_rows must be at least 1, got 0
    """

    max_rows: int = 10_000
    max_cell: int = 65_536

    def __post_init__(self) -> None:
        for name in ("max_rows", "max_cell"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be at least 1, got {value!r}")


#: the limits a database applies unless given others (10,000 rows, 65,536 characters a cell)
DEFAULT_LIMITS = Limits()
#: the limits a KB applies unless given others: 1,000,000 rows (pyql's own whole-KB scans, such
#: as MetaQA's 43,000 labels for entity linking, are single queries), 65,536 characters a cell
KB_LIMITS = Limits(max_rows=1_000_000)


def cut_cell(value: Any, max_cell: int) -> Any:
    """``value`` cut to ``max_cell`` characters (a string) or bytes (a blob); anything else as
    it is."""
    if isinstance(value, (str, bytes, bytearray, memoryview)) and len(value) > max_cell:
        return value[:max_cell] if not isinstance(value, memoryview) else bytes(value[:max_cell])
    return value


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
    #: how many cells the backend cut to its cell limit (:class:`Limits`)
    cells_cut: int = 0

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
