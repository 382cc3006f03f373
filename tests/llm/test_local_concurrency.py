"""``--concurrency 4`` with ``--llm local`` (issue 37, item 6): the run's four worker threads send
their calls to one llama.cpp server with four parallel slots (continuous batching), in this
process, and the answers are the ones of ``--concurrency 1`` (greedy decoding, and every slot
keeps the context window of one); the first call's prompt cache is copied into every slot. The throughput figure is ``benchmarks/local_llm.py
--throughput``'s; this test holds the answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import evaluate
from pyql.agent.llm.local import LocalServer, LocalSettings, local_server
from tests.conftest import require_data

pytestmark = pytest.mark.llm

QUESTIONS = 3


def _outline(run: Path) -> dict[str, Any]:
    steps = RunDir(run).trajectories()
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()
            if line.strip()]
    return {r["id"]: (sorted(map(str, r["predicted"])), r["stop_reason"],
                      [s.action for s in steps[r["id"]].steps]) for r in rows}


def test_four_slots_answer_as_one(server: LocalServer, small_kb: Path, tmp_path: Path) -> None:
    def run(k: int) -> tuple[dict[str, Any], dict[str, Any]]:
        config = RunConfig(dataset="metaqa-1hop", data_dir=str(require_data()), llm="local",
                           strategy="queryagent", kb=str(small_kb), limit=QUESTIONS,
                           max_steps=2, question_deadline=150.0, max_outages=0, concurrency=k)
        metrics = evaluate(config, tmp_path / f"c{k}", progress=False)
        return metrics, _outline(tmp_path / f"c{k}")

    one_metrics, one = run(1)
    four_metrics, four = run(4)
    assert len(one) == QUESTIONS and four == one
    assert four_metrics["llm_calls"] == one_metrics["llm_calls"]
    # the run at 4 used a server with 4 slots, each with the window of the server at 1
    slots = local_server(settings=LocalSettings(parallel=4))
    assert slots is not server
    import httpx2

    listed = httpx2.get(f"{slots.root}/slots", timeout=10,
                        headers={"Authorization": f"Bearer {slots.api_key}"}).json()
    assert len(listed) == 4
    assert {s["n_ctx"] for s in listed} == {LocalSettings().ctx}
    # the first call's prompt cache was copied into the 3 other slots, so the static prompt is
    # processed once, as with one slot
    assert slots.primed_slots == 3
    # the target: the prefix cache serves >= 80 % of the prompt tokens at 4 slots. Not
    # compared with the run at 1: in the suite that server is warm from the tests before this
    # one (0.97), while the 4-slot server starts cold here (0.81 on 3 questions; 0.93 on 12)
    assert four_metrics["cached_share"] >= 0.80, (four_metrics["cached_share"],
                                                  one_metrics["cached_share"])


def test_a_first_scoring_call_primes_the_slots(server: LocalServer) -> None:
    """In choose mode a run's first call is a scoring call: it runs alone in slot 0, whose
    prompt cache is then copied into the other slot, as a first reply's is."""
    from pyql.agent.llm.local import LocalChat

    two = local_server(settings=LocalSettings(parallel=2, ctx=2048))
    client = LocalChat(two, max_tokens=16)
    messages = [{"role": "system", "content": "Answer with one word."},
                {"role": "user", "content": "What colour is the sky on a clear day?"}]
    scores = client.score(messages, ["Blue", "Green"])
    assert len(scores) == 2 and all(s < 0 for s in scores)
    assert two.primed_slots == 1
    assert client.score(messages, ["Blue", "Green"]) == scores  # the second is not pinned
