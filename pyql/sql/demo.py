"""The SQL tours of ``pyql demo --sql``, on the bundled basketball database.

``pyql/data/demo.sqlite`` (built by ``examples/make_demo_db.py``; a made-up league) has three
tables: ``teams``, ``players`` and ``coaches``, the last two with a foreign key to ``teams``.
Each tour runs in a fresh :class:`~pyql.sql.session.SqlSession` on the file, opened read-only.
Importing this module registers the tour set ``"sql"`` with :mod:`pyql.demo`.

>>> from pyql.demo import run_tour
>>> [run_tour(SQL_TOUR_SET, tour).ok for tour in SQL_TOURS]
[True, True, True]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pyql.db import SqlDB
from pyql.demo import Tour, TourSet, register_tour_set
from pyql.sql.session import SqlSession

__all__ = ["SqlTour", "SQL_TOURS", "SQL_TOUR_SET", "demo_db_path", "demo_db"]


@dataclass(frozen=True)
class SqlTour(Tour):
    """A tour that starts from ``table`` (None: every table of the database is in scope)."""

    table: str | None = None


SQL_TOURS: tuple[SqlTour, ...] = (
    SqlTour(
        title="conditions and an answer column",
        question="Which Spanish players score more than 10 points per game?",
        table="players",
        steps=(
            "get_column(nationality)",
            "add_condition(nationality, =, Spain)",
            'add_condition(points_per_game, >, "10")',
            "set_answer(name)",
            "execute()",
        ),
        expected=frozenset({"Bruno Salgado", "Gabe Moreno", "Luis Ortega"}),
        note='get_column shows how values are spelled; "10" is compared as a number because '
        "points_per_game is a REAL column.",
    ),
    SqlTour(
        title="a join along a foreign key, grouping and ordering",
        question="Which team has the tallest players on average?",
        table="players",
        steps=(
            "add_join(teams)",
            "add_group_by(teams.name)",
            "set_answer(teams.name)",
            "add_order(AVG(players.height_cm), desc, 1)",
            "execute()",
        ),
        expected=frozenset({"Red Rock Rattlers"}),
        note="add_join(teams) follows the declared foreign key players.team_id -> teams.team_id.",
    ),
    SqlTour(
        title="a count per group with HAVING",
        question="Which cities have more than one team?",
        table="teams",
        steps=(
            "add_group_by(city)",
            "add_having(*, COUNT, >, 1)",
            "set_answer(city)",
            "execute()",
        ),
        expected=frozenset({"Harbor City"}),
        note="add_having filters groups, as HAVING COUNT(*) > 1 does.",
    ),
)


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
    table = tour.table if isinstance(tour, SqlTour) else None
    return SqlSession(_shared_db(), table=table)


SQL_TOUR_SET = TourSet(
    name="sql",
    title="SQL on a small basketball database",
    language="sql",
    tours=SQL_TOURS,
    open_session=_open_session,
    source="pyql/data/demo.sqlite (bundled SQLite, read-only; examples/make_demo_db.py builds it)",
)

register_tour_set(SQL_TOUR_SET)
