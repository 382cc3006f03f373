"""The HTML report of a real run: a question's steps come from the run's trajectories.jsonl (the
results hold the outcome only)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from markupsafe import escape

from pyql.agent.evaluation.records import RESULTS, RunConfig
from pyql.agent.evaluation.report import write_report
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import evaluate
from tests.evaluation_report.support import Page


def test_the_report_of_a_run_shows_each_questions_steps(tmp_path: Path, mini_metaqa: Path) -> None:
    out = tmp_path / "run"
    config = RunConfig(dataset="metaqa-1hop", llm="noisy-gold:0.5", seed=1,
                       data_dir=str(mini_metaqa), limit=8)
    evaluate(config, out, progress=False)
    assert all("steps" not in json.loads(line)
               for line in (out / RESULTS).read_text().splitlines())
    recorded = RunDir(out).trajectories()
    text = write_report(out).read_text(encoding="utf-8")
    page = Page(text)
    assert len(page.find("li", cls="step")) == sum(len(t.steps) for t in recorded.values())
    hinted = 0
    for chunk in text.split('<details id="q-')[1:]:
        qid = re.search(r'<span class="qid">([^<]*)</span>', chunk).group(1)
        steps = recorded[qid].steps
        assert re.findall(r'data-step="(\d+)"', chunk) == [str(s.n) for s in steps]
        for step in steps:
            assert str(escape(step.action)) in chunk
        hints = Counter(s.hint for s in steps if s.hint)
        assert f'data-hints="{sum(hints.values())}"' in chunk
        hinted += bool(hints)
    assert hinted  # the noisy stand-in's mistakes fired guidelines, shown as hint steps
    assert len(page.find("li", cls="k-hint")) == sum(
        1 for t in recorded.values() for s in t.steps if s.hint)
