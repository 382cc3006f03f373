"""The SQL tours of ``pyql demo --sql``, on the bundled basketball database.

``pyql/data/demo.sqlite`` (built by ``examples/make_demo_db.py``; a made-up league) has three
tables: ``teams``, ``players`` and ``coaches``, the last two with a foreign key to ``teams``.
The tours are in ``pyql/data/tours-sql.json``; each runs in a fresh
:class:`~pyql.sql.session.SqlSession` on the database file, opened read-only. Importing this
module registers the tour set ``"sql"`` with :mod:`pyql.demo`.

>>> from pyql.demo import run_tour
>>> [run_tour(SQL_TOUR_SET, tour).ok for tour in SQL_TOURS]
[True, True, True]
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from pyql.db import SqlDB
from pyql.demo import Tour, TourSet, register_tour_set
from pyql.sql.session import SqlSession

__all__ = ["SQL_TOURS", "SQL_TOUR_SET", "demo_db_path", "demo_db"]


def demo_db_path() -> Path:
    """Where the bundled demo database is installed."""
    return Path(str(resources.files("pyql").joinpath("data/demo.sqlite")))


def demo_db() -> SqlDB:
    """The demo database, read-only."""
    return SqlDB.sqlite(demo_db_path())


@lru_cache(maxsize=1)
def _shared_db() -> SqlDB:
    # read-only: every tour gets its own session, they can share the connection pool
    return demo_db()


def _open_session(tour: Tour) -> SqlSession:
    return SqlSession(_shared_db(), table=tour.table)


SQL_TOUR_SET = TourSet.load(resources.files("pyql").joinpath("data/tours-sql.json"),
                            open_session=_open_session)
SQL_TOURS: tuple[Tour, ...] = SQL_TOUR_SET.tours

register_tour_set(SQL_TOUR_SET)
