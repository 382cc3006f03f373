"""``pyql references build|show`` on a small MetaQA-shaped data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.commands.references import references_app
from pyql.agent.strategies.srp.labelled import id_part
from pyql.agent.strategies.srp.references import ReferenceBase

QUESTIONS = [
    ("what movies did [{}] act in", "actor_to_movie"),
    ("who directed [{}]", "movie_to_director"),
    ("when was [{}] released", "movie_to_year"),
]
NAMES = ["Kismet", "Heat", "Cake", "Tracker", "River Queen", "Weekend", "Alice Adams", "Jaws"]


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data" / "metaqa" / "1-hop"
    folder.mkdir(parents=True)
    lines, types = [], []
    for text, qtype in QUESTIONS:
        for name in NAMES:
            lines.append(f"{text.format(name)}\tanswer of {name}")
            types.append(qtype)
    (folder / "qa_dev.txt").write_text("\n".join(lines) + "\n")
    (folder / "qa_dev_qtype.txt").write_text("\n".join(types) + "\n")
    return tmp_path / "data"


def _build(data: Path, out: Path, *extra: str):
    return CliRunner().invoke(references_app, [
        "build", "--dataset", "metaqa-1hop", "--split", "dev", "--data-dir", str(data),
        "--out", str(out), "--embedding", "bm25", "--size", "6", "--clusters", "3", *extra])


def test_build_writes_a_base_from_the_reference_part_and_show_retrieves(data: Path,
                                                                        tmp_path: Path) -> None:
    out = tmp_path / "refs"
    result = _build(data, out, "--fraction", "0.5", "--json")
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.output)
    ids = [f"1hop-dev-{i}" for i in range(len(QUESTIONS) * len(NAMES))]
    in_part = [i for i in ids if id_part(i, 0.5)]
    assert manifest["datasets"] == ["metaqa-1hop"] and manifest["split"] == "dev"
    assert manifest["fraction"] == 0.5 and manifest["source_size"] == len(in_part)
    base = ReferenceBase.open(out)
    assert base.source_ids == set(in_part)
    assert {r.id for r in base} <= set(in_part)
    shown = CliRunner().invoke(references_app, ["show", str(out), "--question",
                                                "who directed [The Sting]", "--entity",
                                                "The Sting", "--k", "1"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.strip().endswith("-> directed_by")


def test_the_command_is_a_pyql_command_plugin(data: Path, tmp_path: Path) -> None:
    from pyql.cli import app

    result = CliRunner().invoke(app, [
        "references", "build", "--dataset", "metaqa-1hop", "--data-dir", str(data), "--out",
        str(tmp_path / "refs"), "--embedding", "bm25", "--size", "3", "--clusters", "3"])
    assert result.exit_code == 0, result.output
    assert "3 references (3 clusters x 1)" in result.output


def test_build_refuses_to_overwrite_and_reports_bad_input_in_one_line(data: Path,
                                                                      tmp_path: Path) -> None:
    out = tmp_path / "refs"
    assert _build(data, out).exit_code == 0
    again = _build(data, out)
    assert again.exit_code == 1
    assert "already holds a reference base" in again.output and "--overwrite" in again.output
    assert _build(data, out, "--overwrite").exit_code == 0
    assert _build(data, out, "--overwrite", "--fraction", "0").exit_code == 2  # bad usage
    missing = _build(data, tmp_path / "other", "--split", "test")
    assert missing.exit_code == 1 and "error:" in missing.output
