"""A run answers its questions with the objects that outlive it left out of the garbage
collector's passes (``gc.freeze``), and leaves the collector as it found it, even when the run
fails."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from pyql.agent.evaluation import runner
from pyql.agent.evaluation.records import EvalItem, RunConfig


def _spy_on_answers(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[int]:
    """The collector's frozen-object count seen by each question answered (``fail``: the
    first question raises a KeyboardInterrupt, as a Ctrl-C does)."""
    seen: list[int] = []
    answer = runner._Session.answer

    def counted(self: runner._Session, item: EvalItem) -> object:
        seen.append(gc.get_freeze_count())
        if fail:
            raise KeyboardInterrupt
        return answer(self, item)

    monkeypatch.setattr(runner._Session, "answer", counted)
    return seen


@pytest.mark.parametrize("concurrency", [1, 2])
def test_questions_are_answered_on_a_frozen_heap_and_it_is_thawed_after(
        tmp_path: Path, mini_metaqa: Path, monkeypatch: pytest.MonkeyPatch,
        concurrency: int) -> None:
    assert gc.get_freeze_count() == 0
    seen = _spy_on_answers(monkeypatch)
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=4,
                       concurrency=concurrency)
    metrics = runner.evaluate(config, tmp_path / "run", progress=False)
    assert metrics["n"] == 4 and metrics["hit@1"] == 1.0
    # the dataset's items, the store's handle and the strategy were made before the run
    assert len(seen) == 4 and min(seen) > 1000
    assert gc.get_freeze_count() == 0


def test_a_failed_run_thaws_the_heap(tmp_path: Path, mini_metaqa: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy_on_answers(monkeypatch, fail=True)
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa), limit=4)
    with pytest.raises(KeyboardInterrupt):
        runner.evaluate(config, tmp_path / "run", progress=False)
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0


def test_a_heap_the_caller_froze_stays_frozen(tmp_path: Path, mini_metaqa: Path) -> None:
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(mini_metaqa),
                           limit=2)
        runner.evaluate(config, tmp_path / "run", progress=False)
        assert gc.get_freeze_count() >= before
    finally:
        gc.unfreeze()
