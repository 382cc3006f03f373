"""The QueryAgent with the SQL tool set on real WikiSQL and Spider dev items: scripted gold programs
reach the gold execution results (WikiSQL: ``table=`` the item's table, the ``wikisql`` prompt;
Spider: the database's schema after the question, the ``spider`` prompt with the full SQL tool
set), an unknown column gets DB101 with suggestions and is corrected, and the Spider one-shot
example is what SqlSession and the renderer produce on its database."""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyql.agent import QueryAgent, ScriptedLLM
from pyql.agent.evaluation.datasets import select_indices
from pyql.agent.evaluation.metrics import spider_accuracy, wikisql_accuracy
from pyql.agent.strategies.queryagent.prompts import (
    RETRY_WORDING,
    format_columns,
    format_schema,
    get_prompt_profile,
    render_observation,
    system_prompt,
)
from pyql.agent.strategies.queryagent.strategy import Result
from pyql.datasets import spider, wikisql
from pyql.db import SqlDB
from pyql.program import SQL_TOOLS, Program
from pyql.sql.from_sql import Unsupported, to_program
from pyql.sql.session import SqlSession

SEED = 3
#: WikiSQL questions drawn with SEED (plus dev-0, the prompt's example, for the mistake)
WIKISQL_SAMPLE = 10
#: Spider questions: the first expressible ones of a SEED shuffle (plus a join and a group by)
SPIDER_SAMPLE = 10


def replies(program: Program | list[str], start: int = 1) -> list[str]:
    return [f"Thought {n} : the next step of the query.\nAction {n} : {call}"
            for n, call in enumerate(program, start)]


def run(llm: ScriptedLLM, db: SqlDB, question: str, **options: Any) -> Result:
    table = options.pop("table", None)
    result = QueryAgent(llm, db, **options).run(question, table=table)
    assert llm.remaining == 0
    return result


# -- WikiSQL ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wikisql_dir(pyql_data: Path) -> Path:
    path = pyql_data / "wikisql"
    if not (path / "dev.tables.jsonl.gz").is_file() or not (path / "dev.jsonl").is_file():
        pytest.skip(f"WikiSQL data not found in {path}")
    return path


@pytest.fixture(scope="module")
def wikisql_items(wikisql_dir: Path) -> list[wikisql.WikiSQLItem]:
    tables = wikisql.load_tables(wikisql_dir / "dev.tables.jsonl.gz")
    items = list(wikisql.load_questions(wikisql_dir / "dev.jsonl", tables))
    chosen = [items[i] for i in select_indices(len(items), sample=WIKISQL_SAMPLE, seed=SEED)]
    return [items[0], *chosen] if items[0] not in chosen else chosen


@pytest.fixture(scope="module")
def wikisql_tables(wikisql_dir: Path, wikisql_items: list[wikisql.WikiSQLItem]
                   ) -> dict[str, wikisql.WikiSQLTable]:
    wanted = {item.table_id for item in wikisql_items}
    return {k: t for k, t in wikisql.load_tables(wikisql_dir / "dev.tables.jsonl.gz").items()
            if k in wanted}


@pytest.fixture(scope="module")
def wikisql_db(wikisql_dir: Path, wikisql_items: list[wikisql.WikiSQLItem],
               tmp_path_factory: pytest.TempPathFactory) -> SqlDB:
    """The WikiSQL database of the sampled items' tables only (built as load_db builds all)."""
    wanted = {item.table_id for item in wikisql_items}
    folder = tmp_path_factory.mktemp("wikisql")
    subset = folder / "sample.tables.jsonl"
    with gzip.open(wikisql_dir / "dev.tables.jsonl.gz", "rt", encoding="utf-8") as source:
        subset.write_text("".join(line for line in source if json.loads(line)["id"] in wanted),
                          encoding="utf-8")
    return wikisql.load_db(subset, path=folder / "sample.sqlite")


def test_wikisql_gold_programs_reach_the_gold_execution(
        wikisql_items: list[wikisql.WikiSQLItem], wikisql_tables: dict[str, wikisql.WikiSQLTable],
        wikisql_db: SqlDB) -> None:
    assert len(wikisql_items) >= WIKISQL_SAMPLE
    for item in wikisql_items:
        gold = wikisql.wikisql_execute(wikisql_tables[item.table_id], **item.sql)
        llm = ScriptedLLM(replies(item.program))
        result = run(llm, wikisql_db, item.question, guidelines=True, table=item.table)
        assert result.finished, (item.id, [s.observation for s in result.steps])
        assert all(s.accepted and s.hint is None for s in result.steps), item.id
        assert wikisql_accuracy(result.answers, gold) == {"accuracy": 1.0}, (
            item.id, result.answers, gold)
        assert str(result.program) == str(item.program)
        messages = llm.calls[0]["messages"]
        assert messages[0]["content"] == system_prompt(get_prompt_profile("wikisql"))
        assert messages[1]["content"] == (
            f"Question : {item.question}\nTable Header : {format_columns(item.columns)}")


# -- Spider -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spider_folder(pyql_data: Path) -> Path:
    folder = spider.spider_dir(pyql_data)
    if not (folder / "dev.json").is_file() or not (folder / "database").is_dir():
        pytest.skip(f"Spider data not found in {folder}")
    return folder


#: a Spider question, its gold program and the rows of its gold SQL
SpiderCase = tuple[spider.SpiderItem, Program, list[tuple[Any, ...]]]

#: what the Spider sample must contain: a join of two tables, a grouping
FEATURES = {
    "join": lambda program: [c.name for c in program].count("add_join") >= 2,
    "group_by": lambda program: any(c.name == "add_group_by" for c in program),
}


class SpiderDBs:
    """The read-only databases of the Spider items, opened once each."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._dbs: dict[str, SqlDB] = {}

    def __call__(self, db_id: str) -> SqlDB:
        if db_id not in self._dbs:
            self._dbs[db_id] = spider.open_db(self.folder, db_id)
        return self._dbs[db_id]

    def close(self) -> None:
        for db in self._dbs.values():
            db.close()


@pytest.fixture(scope="module")
def spider_dbs(spider_folder: Path) -> Iterator[SpiderDBs]:
    dbs = SpiderDBs(spider_folder)
    yield dbs
    dbs.close()


@pytest.fixture(scope="module")
def spider_items(spider_folder: Path, spider_dbs: SpiderDBs
                 ) -> list[SpiderCase]:
    """(item, gold program, gold rows) of Spider dev items the DSL expresses and whose gold SQL
    returns rows: the first SPIDER_SAMPLE of a seeded shuffle, then the first item with a
    two-table join and the first with a group by if the sample has none."""
    items = list(spider.load_items(spider_folder / "dev.json"))
    order = random.Random(SEED).sample(range(len(items)), len(items))
    chosen: list[SpiderCase] = []
    extra: dict[str, SpiderCase] = {}
    for index in order:
        item = items[index]
        program = to_program(item.query, spider_dbs(item.db_id).schema())
        if isinstance(program, Unsupported):
            continue
        rows = spider.gold_rows(spider.db_path(spider_folder, item.db_id), item.query)
        if not rows:
            continue
        if len(chosen) < SPIDER_SAMPLE:
            chosen.append((item, program, rows))
        for feature in FEATURES:
            if FEATURES[feature](program):
                extra.setdefault(feature, (item, program, rows))
        if len(chosen) == SPIDER_SAMPLE and len(extra) == len(FEATURES):
            break
    for feature, entry in extra.items():
        if not any(FEATURES[feature](program) for _, program, _ in chosen):
            chosen.append(entry)
    return chosen


def test_spider_sample_covers_joins_and_grouping(
        spider_items: list[SpiderCase]) -> None:
    assert len(spider_items) >= SPIDER_SAMPLE
    for feature, has in FEATURES.items():
        assert any(has(program) for _, program, _ in spider_items), feature
    assert len({item.db_id for item, _, _ in spider_items}) > 1


def test_spider_gold_programs_reach_the_gold_execution(
        spider_items: list[SpiderCase],
        spider_dbs: SpiderDBs) -> None:
    systems = set()
    for item, program, rows in spider_items:
        db = spider_dbs(item.db_id)
        llm = ScriptedLLM(replies(program))
        result = run(llm, db, item.question, guidelines=True, profile="spider")
        assert result.finished, (item.id, [s.observation for s in result.steps])
        assert all(s.accepted and s.hint is None for s in result.steps), (
            item.id, [(s.action, s.observation) for s in result.steps if s.hint])
        ordered = spider.is_ordered(item.query)
        assert spider_accuracy(result.answers, rows, ordered=ordered) == {"accuracy": 1.0}, (
            item.id, item.query, result.answers[:5], rows[:5])
        assert str(result.program) == str(program)
        system, user = (m["content"] for m in llm.calls[0]["messages"])
        systems.add(system)
        # the database schema follows the question: tables, columns and foreign keys
        schema = format_schema(db.schema())
        assert user == f"Question : {item.question}\nDatabase Schema :\n{schema}"
        for table in db.schema():
            assert re.search(rf"^{re.escape(table.name)}\(", user, re.MULTILINE)
        assert "\nForeign Keys : " in user
    # the static prefix is byte-identical across questions (and databases)
    assert systems == {system_prompt(get_prompt_profile("spider"))}


def test_spider_profile_documents_the_full_sql_tool_set() -> None:
    profile = get_prompt_profile("spider")
    assert profile.tools == "sql" and profile.context == "schema"
    assert set(profile.functions) == set(SQL_TOOLS)
    text = system_prompt(profile)
    for name in ("add_join", "add_group_by", "add_having", "add_order", "set_distinct",
                 "begin_subquery", "end_subquery", "add_union", "add_intersect", "add_except"):
        assert str(SQL_TOOLS[name]) in text
    assert "You can only choose actions from these 14 actions:" in text


def test_spider_dataset_uses_the_spider_profile() -> None:
    from pyql.agent.evaluation.datasets import SpiderDataset

    assert SpiderDataset.profile == "spider"


# -- an unknown column --------------------------------------------------------------------------


def test_wikisql_unknown_column_gets_db101_and_is_corrected(
        wikisql_items: list[wikisql.WikiSQLItem], wikisql_db: SqlDB) -> None:
    item = wikisql_items[0]  # dev-0: What position does the player who played for butler cc ...
    assert item.id == "dev-0"
    script = [
        'add_condition("School/Club Team", =, "Butler CC (KS)")',
        "set_answer(Positon, None)",  # a typo of Position
        "set_answer(Position, None)",
        "execute()",
    ]
    result = run(ScriptedLLM(replies(script)), wikisql_db, item.question, guidelines=True,
                 table=item.table)
    assert [s.hint for s in result.steps] == [None, "DB101", None, None]
    wrong = result.steps[1]
    assert not wrong.accepted
    assert wrong.observation.startswith(
        "There is no column called Positon. The closest columns are: ['Position'].")
    assert wrong.observation.endswith(RETRY_WORDING.format(n=3))
    assert result.finished and result.answers == ("Guard-Forward",)

    raw = run(ScriptedLLM(replies(script)), wikisql_db, item.question, guidelines=None,
              table=item.table)
    assert raw.steps[1].observation.startswith("Error: ") and raw.steps[1].hint is None
    assert raw.answers == ("Guard-Forward",)


def test_spider_unknown_column_gets_db101_with_suggestions(spider_folder: Path,
                                                          spider_dbs: SpiderDBs) -> None:
    item = next(i for i in spider.load_items(spider_folder / "dev.json") if i.id == "dev-108")
    assert item.question == "What is the name of the country with the most car makers?"
    db = spider_dbs(item.db_id)
    program = to_program(item.query, db.schema())
    assert isinstance(program, Program)
    calls = [str(c) for c in program]
    at = calls.index("set_answer(countries.CountryName)")
    script = [*calls[:at], "set_answer(countries.Name)", *calls[at:]]  # no column Name there
    for guidelines in (True, None):
        result = run(ScriptedLLM(replies(script)), db, item.question, guidelines=guidelines,
                     profile="spider")
        wrong = result.steps[at]
        assert not wrong.accepted and "countries.Name" not in str(result.program)
        if guidelines:
            assert [s.hint for s in result.steps] == [None] * at + ["DB101"] + [None] * (
                len(calls) - at)
            # the hint gives the closest names, and asks for the step again
            assert "The closest columns are: [" in wrong.observation
            assert "CountryName" in wrong.observation
            assert wrong.observation.endswith(RETRY_WORDING.format(n=at + 2))
        else:
            assert wrong.hint is None and wrong.observation.startswith("Error: ")
        rows = spider.gold_rows(spider.db_path(spider_folder, item.db_id), item.query)
        assert result.finished and spider_accuracy(result.answers, rows) == {"accuracy": 1.0}


# -- the Spider one-shot example ----------------------------------------------------------------


def test_spider_example_is_a_real_dev_item_replayed(spider_folder: Path,
                                                    spider_dbs: SpiderDBs) -> None:
    """Question, schema and every observation of the example are what the dev item's database,
    SqlSession and the renderer give; the example's query is the item's gold answer."""
    example = get_prompt_profile("spider").example
    question = re.search(r"^Question : (.*)$", example, re.MULTILINE).group(1)
    dev = json.loads((spider_folder / "dev.json").read_text(encoding="utf-8"))
    item = next(d for d in dev if d["question"] == question)
    db = spider_dbs(item["db_id"])
    schema_block = example.split("Database Schema :\n", 1)[1].split("\n\n", 1)[0]
    assert schema_block == format_schema(db.schema())
    session = SqlSession(db)
    actions = re.findall(r"^Action (\d+) : (.*)$", example, re.MULTILINE)
    observations = dict(re.findall(r"^Observation (\d+) : (.*)$", example, re.MULTILINE))
    for number, action in actions:
        obs = session.run(action)
        assert obs.ok, obs.text
        if number in observations:
            assert render_observation(obs, int(number), question=question) == (
                observations[number])
    rows = spider.gold_rows(spider.db_path(spider_folder, item["db_id"]), item["query"])
    assert spider_accuracy(obs.answers, rows) == {"accuracy": 1.0}
    names = {parts[1] for parts in actions}
    assert {"get_column(continents.Continent)", "add_having(*, COUNT, >=, 3)"} <= names
