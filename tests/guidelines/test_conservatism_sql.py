"""Conservatism on SQL gold programs, and the once-only rule for result-based hints.

WikiSQL: no gold program whose answer is not empty fires a guideline (every dev program is
checked in the slow test, a seeded sample by default). A gold program whose answer *is* empty
(no row, NULL, a count of 0; 919 of the 8,421 dev questions) may get an empty-result hint at the
condition that empties it — no environment signal tells a right empty answer from a wrong value —
and repeating the same action right after the hint is accepted (:class:`pyql.session.HintPolicy`),
so a model that insists keeps its condition.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyql.datasets import spider, wikisql
from pyql.guidelines import default_registry
from pyql.sql.from_sql import Unsupported, to_program
from pyql.sql.session import SqlSession


@pytest.fixture(scope="module")
def wikisql_data(pyql_data: Path):
    root = pyql_data / "wikisql"
    tables = root / "dev.tables.jsonl.gz"
    items = list(wikisql.load_questions(root / "dev.jsonl", tables))
    return wikisql.load_db(tables), wikisql.load_tables(tables), items


def _gold_is_empty(table, sql) -> bool:
    gold = wikisql.wikisql_execute(table, sql["sel"], sql["agg"], sql["conds"])
    return not gold or all(g is None for g in gold) or gold == [0]


def _check_wikisql(db, tables, items):
    registry = default_registry()
    fired_on_empty = 0
    for item in items:
        session = SqlSession(db, table=item.table, guidelines=registry)
        hinted = [(str(c), o.hint.code) for c in item.program if (o := session.run(c)).hint]
        if not _gold_is_empty(tables[item.table_id], item.sql):
            assert not hinted, (item.id, hinted)
        elif hinted:
            fired_on_empty += 1
            assert {code for _, code in hinted} <= {"DB102", "DB103"}, (item.id, hinted)
    return fired_on_empty


def test_wikisql_gold_programs_sample(wikisql_data):
    db, tables, items = wikisql_data
    _check_wikisql(db, tables, random.Random(0).sample(items, 800))


@pytest.mark.slow
def test_wikisql_gold_programs_all(wikisql_data):
    db, tables, items = wikisql_data
    assert _check_wikisql(db, tables, items) <= 919


def test_repeating_the_hinted_action_is_accepted(wikisql_data):
    db, tables, items = wikisql_data
    registry = default_registry()
    for item in items:
        if not _gold_is_empty(tables[item.table_id], item.sql):
            continue
        session = SqlSession(db, table=item.table, guidelines=registry)
        for call in item.program:
            obs = session.run(call)
            if obs.hint is not None:
                before = str(session.program)
                again = session.run(call)  # the model insists
                assert again.hint is None and again.ok
                assert str(session.program) == f"{before}\n{call}".strip()
                return
    pytest.fail("no empty-answer gold program got a hint")


def test_spider_gold_programs_fire_nothing(pyql_data: Path):
    data = pyql_data / "spider"
    schemas = spider.load_schemas(data / "tables.json")
    registry = default_registry()
    items = [i for i in spider.load_items(data / "dev.json") if i.db_id != "wta_1"]
    checked = 0
    for item in random.Random(1).sample(items, 150):
        program = to_program(item.query, schemas[item.db_id])
        if isinstance(program, Unsupported):
            continue
        db = spider.open_db(data, item.db_id)
        gold = db.execute(item.query)
        session = SqlSession(db, guidelines=registry)
        hinted = [(str(c), o.hint.code) for c in program if (o := session.run(c)).hint]
        if gold.rows and any(any(v not in (None, 0) for v in row) for row in gold.rows):
            assert not hinted, (item.id, item.query, hinted)
        checked += 1
    assert checked > 100
