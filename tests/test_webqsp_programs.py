"""Every WebQSP test PyQL program parses, prints back, and compiles to SPARQL pyoxigraph parses.

Data: ``freebase_questions/WebQSP_test_processed.json.gz`` (see SOURCE.md next to it): 1,639
questions; the ``PyQL`` field is the string "null" for 42 of them.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from pyql import Program
from pyql.program import SPARQL_TOOLS

FILE = "freebase_questions/WebQSP_test_processed.json.gz"


@pytest.fixture(scope="module")
def questions(pyql_data: Path) -> list[dict[str, Any]]:
    path = pyql_data / FILE
    if not path.exists():
        pytest.skip(f"{path} not found")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def programs(questions: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Program]]:
    """(question, parsed program) for every question with a program; fails on any parse error."""
    parsed, failures = [], []
    for question in questions:
        if question["PyQL"] == "null":
            continue
        try:
            parsed.append((question, Program.parse(question["PyQL"])))
        except Exception as exc:  # noqa: BLE001 - collect every failure, report them together
            failures.append(f"{question['qid']}: {type(exc).__name__}: {exc}")
    assert not failures, f"{len(failures)} programs do not parse:\n" + "\n".join(failures[:20])
    return parsed


def test_counts(questions: list[dict[str, Any]]) -> None:
    assert len(questions) == 1639
    nulls = [q for q in questions if q["PyQL"] == "null"]
    assert len(nulls) == 42
    assert len(questions) - len(nulls) == 1597


def test_all_programs_parse(programs: list[tuple[dict[str, Any], Program]]) -> None:
    assert len(programs) == 1597
    names = Counter(call.name for _, program in programs for call in program)
    assert set(names) <= set(SPARQL_TOOLS)
    assert {
        "add_fact",
        "add_filter",
        "set_answer",
        "add_time_constrain",
        "add_max",
        "add_min",
    } <= set(names)


def test_all_programs_round_trip(programs: list[tuple[dict[str, Any], Program]]) -> None:
    failures = []
    for question, program in programs:
        printed = str(program)
        again = Program.parse(printed)
        if again != program or str(again) != printed:
            failures.append(question["qid"])
    assert not failures, failures[:20]


@pytest.mark.parametrize("linked", [False, True], ids=["ids", "with_entity_links"])
def test_all_programs_compile_to_valid_sparql(
    programs: list[tuple[dict[str, Any], Program]], linked: bool
) -> None:
    store = ox.Store()
    failures = []
    for question, program in programs:
        entities = (question.get("entity_linking") or {}) if linked else {}
        try:
            text = program.to_sparql("freebase", entities=entities)
            store.query(text)
        except Exception as exc:  # noqa: BLE001 - collect every failure, report them together
            failures.append(f"{question['qid']}: {type(exc).__name__}: {exc}")
    assert not failures, f"{len(failures)} programs fail:\n" + "\n".join(failures[:20])


def test_first_question(programs: list[tuple[dict[str, Any], Program]]) -> None:
    question, program = programs[0]
    assert question["qid"] == "WebQTest-0"
    assert str(program) == (
        "add_filter(?x0, !=, m.03_r3)\n"
        "add_fact(m.03_r3, location.country.languages_spoken, ?x0)\n"
        "set_answer(?x0)"
    )
    text = program.to_sparql()
    assert "FILTER (?x0 != ns:m.03_r3)" in text
    assert "SELECT DISTINCT ?x0" in text
