"""``benchmarks/mcp_latency.py --db``: the SQL workload on the bundled demo database, end to end
(``pyql mcp --db`` and the SDK floor as stdio subprocesses, a few questions)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("mcp")

_spec = importlib.util.spec_from_file_location("mcp_latency", REPO / "benchmarks" / "mcp_latency.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("mcp_latency", bench)  # its dataclass looks its module up
_spec.loader.exec_module(bench)


def test_tour_programs_start_with_their_table_and_all_run_on_demo() -> None:
    from pyql.db import open_db

    questions = bench.tour_questions(7, seed=0)
    tours = json.loads(bench.SQL_TOURS.read_text())["tours"]
    assert len(questions) == 7
    assert {q.start["question"] for q in questions} == {t["question"] for t in tours}
    for q in questions:
        tour = next(t for t in tours if t["question"] == q.start["question"])
        assert [str(c) for c in q.calls[:1]] == [f"add_join({tour['table']})"]
        assert len(q.calls) == len(tour["steps"]) + 1
    face = bench.PyqlMcp(open_db(str(bench.DEMO_DB)))
    assert face.profile.name == "spider"
    assert bench.runnable(face, questions) == questions


def test_db_demo_times_every_step_on_every_side(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert bench.main(["--db", "demo", "--n", "11", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    steps = sum(len(q.calls) for q in bench.tour_questions(11, seed=0))
    assert report["questions"] == 11 and report["dropped"] == 0
    assert report["programs"] == "SQL tour programs"
    assert report["backend"] == str(bench.DEMO_DB)
    for side in ("direct", "in_process", "mcp", "floor"):
        assert report[side]["steps"] == steps
        assert report[side]["p50_ms"] > 0
    # a round trip through a subprocess costs more than the same step in this process
    assert report["mcp"]["p50_ms"] > report["direct"]["p50_ms"]


@pytest.mark.parametrize("argv", [["--kb", "kb.txt", "--db", "demo"],
                                  ["--programs", "tours"],
                                  ["--db", "demo", "--programs", "metaqa"]])
def test_contradictory_options_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2
