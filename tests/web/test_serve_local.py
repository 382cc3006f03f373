"""The Ask page's ``--llm local``: SmolLM2-135M in llama.cpp, in-process, answers a question on
the movie KB over real HTTP; its steps stream as the model makes them and the run is saved.
Skipped only where the ``local`` extra or the model package is not installed."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.evaluation.specs import build_provider
from tests.web.support import movies_workspace, post, results, serve

pytestmark = pytest.mark.llm


def test_the_local_model_answers_on_the_ask_page(tmp_path: Path) -> None:
    try:
        build_provider("local")  # starts the server --llm local uses: one per test worker
    except LLMSpecError as exc:  # the local extra or the model package is not installed
        pytest.skip(str(exc))
    with serve(movies_workspace(), tmp_path / "out") as served:
        status, created, _ = post(served, "/api/ask", {
            "question": "Which films did Christopher Nolan direct?", "llm": "local",
            "entities": "Christopher Nolan=ex:Christopher_Nolan", "max_steps": "1"})
        assert status == 200, created
        events = []
        with urllib.request.urlopen(served.url + created["events"], timeout=300) as response:
            for raw in response:
                if raw.startswith(b"data:"):
                    events.append(json.loads(raw[5:]))
    kinds = [e["type"] for e in events]
    assert kinds == ["start", "ready", "step", "done"], kinds
    assert events[1]["model"].startswith("SmolLM2")
    step = events[2]["step"]
    assert step["n"] == 1 and step["status"] and events[2]["usage"]["tokens"] > 0
    assert events[-1]["stop_reason"] in ("max_steps", "execute")
    [record] = results(tmp_path / "out" / events[-1]["run_dir"])
    assert record["usage"]["llm_calls"] == 1 and record["status"] == "ok"
