"""``benchmarks/local_llm.py`` without a model: the no-model baseline's rows (``--settings
ranker``) end to end on a few MetaQA questions, and its options checked before anything runs.
(Its model rows are the benchmark's to measure: ``benchmarks/README.md``.)"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, require_data

_spec = importlib.util.spec_from_file_location("local_llm_bench",
                                              REPO / "benchmarks" / "local_llm.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("local_llm_bench", bench)
_spec.loader.exec_module(bench)


def test_the_ranker_rows_run_and_keep_their_metrics(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    data = require_data()
    out = tmp_path / "runs.json"
    assert bench.main(["--n", "3", "--seed", "37", "--datasets", "metaqa-1hop,metaqa-2hop",
                       "--strategies", "queryagent,readi", "--settings", "ranker",
                       "--max-steps", "8", "--data-dir", str(data), "--json", str(out)]) == 0
    runs = json.loads(out.read_text())
    assert [(r["dataset"], r["strategy"], r["setting"]) for r in runs] == [
        ("metaqa-1hop", "queryagent", "ranker"), ("metaqa-1hop", "readi", "ranker"),
        ("metaqa-2hop", "queryagent", "ranker"), ("metaqa-2hop", "readi", "ranker")]
    for run in runs:
        metrics = run["metrics"]
        assert metrics["n"] == 3 and len(metrics["question_ids"]) == 3
        assert metrics["prompt_tokens"] == 0 and metrics["scoring_calls"] > 0
        assert metrics["off_vocab_hints"] == {} and metrics["parse_failures_total"] == 0
    printed = capsys.readouterr().out
    assert printed.count("| ranker |") == 4


@pytest.mark.parametrize(("argv", "message"), [
    (["--settings", "grounded,best"], "unknown setting"),
    (["--threads", "0"], "--threads must be at least 1"),
])
def test_bad_options_stop_before_a_run(argv: list[str], message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err
