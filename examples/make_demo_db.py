"""Build ``pyql/data/demo.sqlite``: the small basketball database of ``pyql demo --sql``.

Three tables of a made-up league (every name and number is invented): ``teams``, ``players``
(``team_id`` references ``teams``) and ``coaches`` (``team_id`` references ``teams``). The file
is small (a few KB) and rebuilt the same way every time::

    python examples/make_demo_db.py            # writes pyql/data/demo.sqlite
    python examples/make_demo_db.py out.sqlite

Then try it::

    pyql run --db pyql/data/demo.sqlite --table players \\
        'add_condition(nationality, =, Spain)' 'set_answer(name)'
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

SCHEMA = """
CREATE TABLE teams (
    team_id     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    city        TEXT NOT NULL,
    conference  TEXT NOT NULL,
    founded     INTEGER
);
CREATE TABLE players (
    player_id        INTEGER PRIMARY KEY,
    name             TEXT NOT NULL,
    team_id          INTEGER REFERENCES teams (team_id),
    position         TEXT,
    nationality      TEXT,
    height_cm        INTEGER,
    points_per_game  REAL
);
CREATE TABLE coaches (
    coach_id  INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,
    team_id   INTEGER REFERENCES teams (team_id),
    since     INTEGER
);
"""

TEAMS = [
    (1, "Harbor City Herons", "Harbor City", "East", 1961),
    (2, "Maple Falls Moose", "Maple Falls", "East", 1972),
    (3, "Red Rock Rattlers", "Red Rock", "West", 1980),
    (4, "Silver Bay Sharks", "Silver Bay", "West", 1995),
    (5, "Harbor City Comets", "Harbor City", "West", 2004),
    (6, "Pine Ridge Pioneers", "Pine Ridge", "East", 1968),
]

PLAYERS = [
    (1, "Ada Okafor", 1, "Center", "Nigeria", 211, 18.4),
    (2, "Bruno Salgado", 1, "Guard", "Spain", 191, 12.1),
    (3, "Cole Whitaker", 1, "Forward", "United States", 203, 9.7),
    (4, "Dmitri Volkov", 2, "Center", "Russia", 213, 14.9),
    (5, "Eli Marchand", 2, "Guard", "France", 188, 21.3),
    (6, "Finn Larsen", 2, "Forward", "Denmark", 201, 7.2),
    (7, "Gabe Moreno", 3, "Guard", "Spain", 185, 16.5),
    (8, "Hugo Brandt", 3, "Forward", "Germany", 206, 11.0),
    (9, "Ivan Petrenko", 3, "Center", "Ukraine", 216, 8.8),
    (10, "Jamal Greene", 4, "Guard", "United States", 193, 24.6),
    (11, "Kenji Sato", 4, "Forward", "Japan", 198, 10.4),
    (12, "Luis Ortega", 4, "Center", "Spain", 209, 13.2),
    (13, "Marco Bellini", 5, "Guard", "Italy", 190, 15.8),
    (14, "Nate Harper", 5, "Forward", "Canada", 204, 19.1),
    (15, "Omar Haddad", 5, "Center", "Lebanon", 212, 6.5),
    (16, "Pablo Ruiz", 6, "Guard", "Spain", 187, 9.3),
    (17, "Quinn Foster", 6, "Forward", "United States", 202, 17.7),
    (18, "Rafael Costa", 6, "Center", "Brazil", 210, 12.6),
]

COACHES = [
    (1, "Sandra Kim", 1, 2019),
    (2, "Tom Becker", 2, 2015),
    (3, "Uma Patel", 3, 2021),
    (4, "Victor Hale", 4, 2012),
    (5, "Wendy Cho", 5, 2018),
    (6, "Xavier Duval", 6, 2020),
]

DEFAULT_TARGET = Path(__file__).resolve().parent.parent / "pyql" / "data" / "demo.sqlite"


def build(target: Path) -> Path:
    """Write the demo database to ``target`` (replacing it); return the path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    conn = sqlite3.connect(partial)
    try:
        conn.execute("PRAGMA page_size = 1024")
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO teams VALUES (?, ?, ?, ?, ?)", TEAMS)
        conn.executemany("INSERT INTO players VALUES (?, ?, ?, ?, ?, ?, ?)", PLAYERS)
        conn.executemany("INSERT INTO coaches VALUES (?, ?, ?, ?)", COACHES)
        conn.commit()
        problems = conn.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise RuntimeError(f"foreign keys violated: {problems}")
        conn.execute("VACUUM")
    finally:
        conn.close()
    partial.replace(target)
    return target


def main(argv: list[str]) -> int:
    target = Path(argv[1]) if len(argv) > 1 else DEFAULT_TARGET
    path = build(target)
    print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
