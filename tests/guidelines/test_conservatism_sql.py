"""Conservatism on SQL gold programs, and the once-only rule for result-based hints.

WikiSQL: no gold program whose answer is not empty fires a guideline (every dev program is
checked by the exhaustive test, ``-m exhaustive``; a seeded sample of 800 by default). A gold
program whose answer *is* empty (no row, NULL, a count of 0; 919 of the 8,421 dev questions) may
get an empty-result hint at the condition that empties it — no environment signal tells a right
empty answer from a wrong value — and repeating the same action right after the hint is accepted
(:class:`pyql.session.HintPolicy`), so a model that insists keeps its condition.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from pyql.datasets import spider, wikisql
from pyql.guidelines import Registry, default_registry
from pyql.guidelines.packs.original import for_dataset
from pyql.program import Call
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


def _check_wikisql(db, tables, items, registry=None, explore=False):
    """Run the gold programs; assert no hint where the gold answer is not empty. Returns the
    number of empty-answer programs that got a hint; prints the hints per code on those (DB102's
    count is the one the issue asks to report). ``explore``: call ``get_column(col)`` before each
    ``add_condition`` on ``col``, as the paper's agent does (the original's WikiSQL checks)."""
    registry = registry if registry is not None else default_registry()
    fired_on_empty = empty = 0
    codes: Counter[str] = Counter()
    for item in items:
        session = SqlSession(db, table=item.table, guidelines=registry)
        program = _explored(item.program) if explore else item.program
        hinted = [(str(c), o.hint.code) for c in program if (o := session.run(c)).hint]
        gold_is_empty = _gold_is_empty(tables[item.table_id], item.sql)
        empty += gold_is_empty
        if not gold_is_empty:
            assert not hinted, (item.id, hinted)
        elif hinted:
            fired_on_empty += 1
            codes.update(code for _, code in hinted)
            assert {code for _, code in hinted} <= {"DB102", "DB103"}, (item.id, hinted)
    print(f"WikiSQL: {len(items)} gold programs, {empty} with an empty gold answer; hints on "
          f"{fired_on_empty} of those: {dict(codes)}; none on the others")
    return fired_on_empty


def _explored(program):
    out, seen = [], set()
    for call in program:
        if call.name == "add_condition" and call.args[0].value not in seen:
            seen.add(call.args[0].value)
            out.append(Call(name="get_column", args=(call.args[0],)))
        out.append(call)
    return out


def test_wikisql_gold_programs_sample(wikisql_data):
    db, tables, items = wikisql_data
    _check_wikisql(db, tables, random.Random(0).sample(items, 800))


def test_wikisql_gold_programs_with_the_original_checks(wikisql_data):
    """The original's WikiSQL checks (opt-in) on gold programs that look at each condition's
    column first, as the paper's agent does: nothing more fires. Without that get_column,
    DB402 fires on every condition by construction (WikiSQL's gold programs never call it)."""
    db, tables, items = wikisql_data
    registry = Registry.from_classes([*(type(g) for g in default_registry()),
                                      *for_dataset("wikisql")])
    _check_wikisql(db, tables, random.Random(0).sample(items, 800), registry, explore=True)


@pytest.mark.slow
@pytest.mark.exhaustive
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
    dbs = {}  # one SqlDB per database: its schema (sample values included) is read once
    for item in random.Random(1).sample(items, 150):
        program = to_program(item.query, schemas[item.db_id])
        if isinstance(program, Unsupported):
            continue
        if item.db_id not in dbs:
            dbs[item.db_id] = spider.open_db(data, item.db_id)
        db = dbs[item.db_id]
        gold = db.execute(item.query)
        session = SqlSession(db, guidelines=registry)
        hinted = [(str(c), o.hint.code) for c in program if (o := session.run(c)).hint]
        if gold.rows and any(any(v not in (None, 0) for v in row) for row in gold.rows):
            assert not hinted, (item.id, item.query, hinted)
        checked += 1
    for db in dbs.values():
        db.close()
    assert checked > 100
