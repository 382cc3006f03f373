"""Bounded dataset reading (issue 36, item 4) and a dataset file's BOM (item 17)."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

from pyql.datasets import metaqa, wikisql
from pyql.datasets.files import MAX_LINE_BYTES, MAX_QUESTION_CHARS, json_lines
from pyql.errors import DatasetFileError


def _metaqa(tmp_path: Path, questions: list[bytes]) -> tuple[Path, Path]:
    root = tmp_path / "metaqa" / "1-hop"
    root.mkdir(parents=True)
    qa, qtype = root / "qa_dev.txt", root / "qa_dev_qtype.txt"
    qa.write_bytes(b"".join(questions))
    qtype.write_bytes(b"movie_to_director\n" * len(questions))
    return qa, qtype


def test_a_huge_metaqa_line_is_a_one_line_error_read_no_further(tmp_path: Path) -> None:
    huge = b"what is [Kismet] " + b"x" * (32 * MAX_LINE_BYTES) + b"\tA\n"  # a 32 MiB line
    qa, qtype = _metaqa(tmp_path, [b"who directed [Kismet]\tWilliam Dieterle\n", huge])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(DatasetFileError) as caught:
        list(metaqa.load_questions(qa, qtype))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert (caught.value.path, caught.value.line) == (str(qa), 2)
    assert "longer than" in caught.value.problem and len(str(caught.value).splitlines()) == 1
    assert grown_mb < 16, grown_mb  # the 32 MiB line was never read whole


def test_a_too_long_question_is_an_error_at_its_line(tmp_path: Path) -> None:
    long = b"who [Kismet] " + b"y" * MAX_QUESTION_CHARS + b"\tA\n"
    qa, qtype = _metaqa(tmp_path, [b"who directed [Kismet]\tWilliam Dieterle\n", long])
    with pytest.raises(DatasetFileError) as caught:
        list(metaqa.load_questions(qa, qtype))
    assert caught.value.line == 2 and "at most 10,000" in caught.value.problem


def test_json_lines_bound_each_line(tmp_path: Path) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": "' + b"z" * (MAX_LINE_BYTES + 10) + b'"}\n')
    with pytest.raises(DatasetFileError) as caught:
        list(json_lines(path))
    assert caught.value.line == 2


def test_wikisql_question_too_long(tmp_path: Path) -> None:
    tables = tmp_path / "dev.tables.jsonl"
    tables.write_text(json.dumps({"id": "1-1", "header": ["Player"], "types": ["text"],
                                  "rows": [["A"]]}) + "\n")
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"table_id": "1-1", "question": "q" * (MAX_QUESTION_CHARS + 1),
                               "sql": {"sel": 0, "agg": 0, "conds": []}}) + "\n")
    with pytest.raises(DatasetFileError) as caught:
        list(wikisql.load_questions(dev, tables))
    assert caught.value.line == 1 and "characters" in caught.value.problem


def test_a_bom_is_not_part_of_question_0(tmp_path: Path) -> None:
    from pyql.agent.evaluation.datasets import MetaQA1Hop

    _metaqa(tmp_path, [b"\xef\xbb\xbfwho directed [Kismet]\tWilliam Dieterle\n"])
    item = next(metaqa.load_questions(*metaqa.paths(tmp_path, 1, "dev")))
    assert item.question == "who directed Kismet" and item.topic == "Kismet"
    evaluated = MetaQA1Hop(tmp_path).items("dev")[0]
    assert evaluated.question == "who directed [Kismet]"


def test_trajectory_lines_are_read_bounded(tmp_path: Path) -> None:
    from pyql.agent.jsonl import json_lines as run_lines

    path = tmp_path / "trajectories.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "' + b"x" * 5000 + b'"}\n{"c": 3}\n')
    bad: list[tuple[int, str]] = []
    rows = list(run_lines(path, malformed=lambda n, why: bad.append((n, why)), max_line=1000))
    assert rows == [(1, {"a": 1}), (3, {"c": 3})]
    assert bad[0][0] == 2 and "longer than 1,000 bytes" in bad[0][1]
    with pytest.raises(ValueError, match=":2: a line longer"):
        list(run_lines(path, max_line=1000))
