"""Strategies side by side on held-out questions of a small MetaQA-shaped data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyql.agent.evaluation.compare import compare, reference_part
from pyql.agent.strategies.srp.labelled import id_part
from pyql.agent.strategies.srp.references import build_reference_base
from tests.agent.conftest import METAQA_LINES

QUESTIONS = [
    ("who directed the movies written by [{}]", "writer_to_movie_to_director",
     {"John Godey": "Jerry Paris|Walter Hill|Joseph Sargent", "Peter Stone": "Joseph Sargent",
      "Ken Friedman": "Walter Hill", "Edward Knoblock": "William Dieterle",
      "AJ Carothers": "Jerry Paris"}),
    ("when were the movies directed by [{}] released", "director_to_movie_to_year",
     {"Walter Hill": "1989", "Jerry Paris": "1968", "Joseph Sargent": "1974",
      "William Dieterle": "1944"}),
]


@pytest.fixture()
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYQL_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "data" / "metaqa"
    (root / "2-hop").mkdir(parents=True)
    (root / "kb.txt").write_text(METAQA_LINES)
    lines, types = [], []
    for text, qtype, answers in QUESTIONS:
        for name, gold in answers.items():
            lines.append(f"{text.format(name)}\t{gold}")
            types.append(qtype)
    (root / "2-hop" / "qa_dev.txt").write_text("\n".join(lines) + "\n")
    (root / "2-hop" / "qa_dev_qtype.txt").write_text("\n".join(types) + "\n")
    return tmp_path / "data"


def test_every_strategy_answers_the_same_held_out_questions(data: Path, tmp_path: Path) -> None:
    questions, ids = reference_part(["metaqa-2hop"], "dev", fraction=0.5, data_dir=data)
    base = build_reference_base(questions, datasets=["metaqa-2hop"], split="dev", fraction=0.5,
                                source_ids=ids, embedding="bm25", size=2, clusters=2)
    directory = base.save(tmp_path / "refs")
    held_out = [f"2hop-dev-{i}" for i in range(9) if not id_part(f"2hop-dev-{i}", 0.5)]
    summary = compare("metaqa-2hop", str(directory), strategies=["srp", "readi", "queryagent"],
                      llm="gold", data_dir=str(data), limit=50)
    assert summary["questions"] == len(held_out) > 0
    for name in ("srp", "readi", "queryagent"):
        assert summary["strategies"][name]["hit@1"] == 1.0
    srp = summary["strategies"]["srp"]
    assert srp["llm_calls"] == 4.0 and srp["own"]["judge_accuracy"] == 1.0
    assert srp["own"]["reference_hit_rate"] is not None
    assert summary["strategies"]["readi"]["llm_calls"] == 1.0
    off = compare("metaqa-2hop", str(directory), llm="gold", data_dir=str(data),
                  reflection=False)
    assert off["strategies"]["srp"]["llm_calls"] == 3.0
