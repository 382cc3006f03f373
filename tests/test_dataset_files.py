"""Malformed dataset files are one ``file:line`` error (issue 24, item 9): a
:class:`~pyql.errors.DatasetFileError` with the path, the line and the problem from the loaders,
and one ``error:`` line from ``pyql eval`` before any question runs; extra tab columns are
refused, not kept in the gold answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.cli import app
from pyql.datasets import metaqa, spider, wikisql
from pyql.errors import DatasetFileError

GOOD_QA = "what movies did [Temuera Morrison] act in\tOnce Were Warriors|Tracker\n"
GOOD_TYPE = "actor_to_movie\n"


def metaqa_files(tmp_path: Path, qa: bytes, qtype: bytes) -> tuple[Path, Path]:
    hop = tmp_path / "metaqa" / "1-hop"
    hop.mkdir(parents=True, exist_ok=True)
    (hop / "qa_dev.txt").write_bytes(qa)
    (hop / "qa_dev_qtype.txt").write_bytes(qtype)
    return hop / "qa_dev.txt", hop / "qa_dev_qtype.txt"


CASES = {
    "missing tab": (GOOD_QA + "what does [Tom Cullen] act in Weekend\n", GOOD_TYPE * 2,
                    "qa", 2, "found no tab"),
    "extra column": (GOOD_QA + "what does [Tom Cullen] act in\tWeekend\tjunk\n", GOOD_TYPE * 2,
                     "qa", 2, "found 2 tabs"),
    "unclosed bracket": ("what does [Tom Cullen act in\tWeekend\n", GOOD_TYPE, "qa", 1,
                         "expected one [topic]"),
    "two topics": ("does [Tom] act with [Ann]\tWeekend\n", GOOD_TYPE, "qa", 1,
                   "expected one [topic]"),
    "fewer types": (GOOD_QA * 3, GOOD_TYPE * 2, "qa", 3, "qa_dev_qtype.txt has only 2 lines"),
    "fewer questions": (GOOD_QA, GOOD_TYPE * 2, "qtype", 2, "qa_dev.txt has only 1 lines"),
    "not a type": (GOOD_QA * 2, GOOD_TYPE + "actor_to_nowhere\n", "qtype", 2,
                   "not a MetaQA question type"),
}


@pytest.mark.parametrize("case", CASES)
def test_malformed_metaqa_questions_name_the_file_and_line(tmp_path: Path, case: str) -> None:
    qa_text, type_text, culprit, line, says = CASES[case]
    qa, qtype = metaqa_files(tmp_path, qa_text.encode(), type_text.encode())
    with pytest.raises(DatasetFileError) as caught:
        list(metaqa.load_questions(qa, qtype))
    error = caught.value
    assert (error.path, error.line) == (str(qa if culprit == "qa" else qtype), line)
    assert says in error.problem and str(error).startswith(f"{error.path}:{line}: ")


def test_non_utf8_lines_are_named(tmp_path: Path) -> None:
    qa, qtype = metaqa_files(tmp_path, GOOD_QA.encode() + b"caf\xe9 [x]\ty\n",
                             GOOD_TYPE.encode() * 2)
    with pytest.raises(DatasetFileError) as caught:
        list(metaqa.load_questions(qa, qtype))
    assert (caught.value.path, caught.value.line) == (str(qa), 2)
    assert "not UTF-8 (byte 0xe9" in caught.value.problem
    kb = tmp_path / "kb.txt"
    kb.write_bytes(b"Kismet|directed_by|William Dieterle\nKismet|has_tags\n")
    with pytest.raises(DatasetFileError, match=r"kb\.txt:2: expected subject\|relation\|object"):
        metaqa.read_triples(kb)
    kb.write_bytes(b"Kismet|directed_by|William\xff\n")
    with pytest.raises(DatasetFileError, match=r"kb\.txt:1: not UTF-8"):
        metaqa.read_triples(kb)


def test_the_answers_are_the_second_column_only(tmp_path: Path) -> None:
    qa, qtype = metaqa_files(tmp_path, GOOD_QA.encode(), GOOD_TYPE.encode())
    [item] = metaqa.load_questions(qa, qtype)
    assert item.answers == ("Once Were Warriors", "Tracker") and item.topic == "Temuera Morrison"


def test_eval_reports_a_malformed_file_on_one_line(tmp_path: Path) -> None:
    qa, _ = metaqa_files(tmp_path, (GOOD_QA + "no tab here [Kismet]\n").encode(),
                         GOOD_TYPE.encode() * 2)
    (tmp_path / "metaqa" / "kb.txt").write_text("Kismet|directed_by|William Dieterle\n",
                                                encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--dataset", "metaqa-1hop", "--data-dir",
                                      str(tmp_path), "--llm", "gold", "--out", str(out),
                                      "--no-progress"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line == f"error: {qa}:2: expected 'question with [topic]<TAB>answer|answer|...', " \
                   "found no tab"
    assert not out.exists()


def test_malformed_wikisql_and_spider_files(tmp_path: Path) -> None:
    tables = tmp_path / "dev.tables.jsonl"
    tables.write_text('{"id": "1-1", "header": ["a"], "types": ["text"], "rows": [["x"]]}\n'
                      '{"id": "1-2", "header": ["a"]}\n', encoding="utf-8")
    with pytest.raises(DatasetFileError, match=r"dev\.tables\.jsonl:2: not a WikiSQL table: no "
                                               "'types' field"):
        wikisql.load_tables(tables)
    tables.write_text('{"id": "1-1", "header": ["a"], "types": ["text"], "rows": [["x"]]}\n',
                      encoding="utf-8")
    questions = tmp_path / "dev.jsonl"
    questions.write_text('\n{"table_id": "1-1", "question": "q", "sql": {"sel": 0, "agg": 0, '
                         '"conds": []}}\n{"table_id": "1-1", "question": \n', encoding="utf-8")
    with pytest.raises(DatasetFileError) as caught:
        list(wikisql.load_questions(questions, tables))
    assert (caught.value.path, caught.value.line) == (str(questions), 3)
    assert caught.value.problem.startswith("not JSON")
    dev = tmp_path / "dev.json"
    dev.write_text('[{"db_id": "a", "question": "q", "query": "SELECT 1"},\n{"db_id": }]',
                   encoding="utf-8")
    with pytest.raises(DatasetFileError, match=r"dev\.json:2: not JSON"):
        list(spider.load_items(dev))
    dev.write_text('[{"db_id": "a", "query": "SELECT 1"}]', encoding="utf-8")
    with pytest.raises(DatasetFileError, match="question 0 has no 'question' field"):
        list(spider.load_items(dev))
