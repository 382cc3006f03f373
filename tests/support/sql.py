"""Shared data of the SQL builder tests: the dialects every query tree compiles to, and Spider's
``concert_singer`` schema (four tables, with the foreign keys the joins follow)."""

from __future__ import annotations

from pyql.sql import Schema, TableInfo

#: the sqlglot dialects the SQL tests compile every query tree to
SQL_DIALECTS = (
    "sqlite",
    "postgres",
    "duckdb",
    "mysql",
    "tsql",
    "bigquery",
    "snowflake",
    "trino",
    "spark",
)

CONCERT = Schema(
    (
        TableInfo(
            "stadium", ["Stadium_ID", "Location", "Name", "Capacity", "Average"], ["Stadium_ID"]
        ),
        TableInfo(
            "singer", ["Singer_ID", "Name", "Country", "Song_Name", ("Age", "INTEGER")],
            ["Singer_ID"],
        ),
        TableInfo(
            "concert",
            ["concert_ID", "concert_Name", "Stadium_ID", "Year"],
            ["concert_ID"],
            [("Stadium_ID", "stadium", "Stadium_ID")],
        ),
        TableInfo(
            "singer_in_concert",
            ["concert_ID", "Singer_ID"],
            ["concert_ID", "Singer_ID"],
            [("concert_ID", "concert", "concert_ID"), ("Singer_ID", "singer", "Singer_ID")],
        ),
    )
)
