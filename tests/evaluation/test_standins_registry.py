"""Stand-ins are the evaluation's, found by strategy name in one registry (``pyql.standins``):
a third-party strategy without one is refused before the run, one that registers its own runs
with it, a second claim on a name is the plugin loader's conflict, and the runner reads a noisy
stand-in's records from the stand-in it holds (issue 21 item 4).

Third-party distributions are written to a temporary directory put on ``sys.path`` (their
entry points are read from their ``entry_points.txt``); the shared virtualenv is untouched.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyql.agent import strategy
from pyql.agent.evaluation import standins
from pyql.agent.evaluation.caches import CachedLLM, LLMCache
from pyql.agent.evaluation.records import EvalItem, RunConfig
from pyql.agent.evaluation.runner import EvalAbort, evaluate, read_results
from pyql.agent.evaluation.specs import StandInProvider, build_provider
from pyql.agent.evaluation.standins import NoStandInError, get_stand_in
from pyql.plugins import PluginConflictError

TERSE = '''
from pyql.agent.strategies.queryagent.strategy import QueryAgent
from pyql.agent.evaluation.standins.queryagent import QueryAgentStandIn


class Terse(QueryAgent):
    """The QueryAgent under another name (a third-party strategy)."""

    name = "terse"


class TerseStandIn(QueryAgentStandIn):
    """QueryAgent's stand-ins, registered for terse."""
'''

Install = Callable[[str], str]


@pytest.fixture()
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Installs ``pyql_terse`` with the given ``entry_points.txt`` lines (one distribution per
    call); the entry-point caches are cleared before and after."""
    count = [0]

    def make(entry_points: str) -> str:
        count[0] += 1
        site = tmp_path / f"site{count[0]}"
        info = site / f"pyql_terse{count[0]}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: pyql_terse{count[0]}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(entry_points)
        (site / "pyql_terse.py").write_text(TERSE)
        monkeypatch.syspath_prepend(str(site))
        # another test of the process may have imported its own pyql_terse
        monkeypatch.delitem(sys.modules, "pyql_terse", raising=False)
        strategy._clear_cache()
        standins._clear_cache()
        return "terse"

    yield make
    strategy._clear_cache()
    standins._clear_cache()


STRATEGY = "[pyql.strategies]\nterse = pyql_terse:Terse\n"
STAND_IN = "[pyql.standins]\nterse = pyql_terse:TerseStandIn\n"


def test_a_strategy_without_a_stand_in_is_refused_before_the_run(
        tmp_path: Path, mini_metaqa: Path, install: Install) -> None:
    # before, a subclass of QueryAgent silently inherited its stand_in classmethod
    name = install(STRATEGY)
    config = RunConfig(dataset="metaqa-1hop", llm="gold", strategy=name,
                       data_dir=str(mini_metaqa), limit=2)
    with pytest.raises(EvalAbort, match="has no stand-in") as info:
        evaluate(config, tmp_path / "run", progress=False)
    cause = info.value.__cause__
    assert isinstance(cause, NoStandInError)
    assert (cause.strategy, cause.spec, cause.parameter) == ("terse", "gold", "kind")
    assert "queryagent" in cause.available and "terse" not in cause.available
    assert not (tmp_path / "run" / "config.json").exists()


def test_a_third_party_stand_in_is_found_by_the_strategy_name(
        tmp_path: Path, mini_metaqa: Path, install: Install) -> None:
    name = install(STRATEGY + STAND_IN)
    config = RunConfig(dataset="metaqa-1hop", llm="noisy-gold:0.5", strategy=name,
                       data_dir=str(mini_metaqa), limit=6)
    metrics = evaluate(config, tmp_path / "run", progress=False)
    assert metrics["errors"] == 0 and metrics["stand_in"]["strategy"] == "terse"
    # the runner holds the stand-in it built and reads its records from it
    records = [r.meta.get("injections") for r in read_results(tmp_path / "run")]
    assert all(isinstance(found, list) for found in records)
    assert any(found for found in records)
    assert {"type", "step", "outcome"} <= set(next(f for f in records if f)[0])


def test_a_second_claim_on_a_name_is_the_loaders_conflict(install: Install) -> None:
    install("[pyql.standins]\nreadi = pyql_terse:TerseStandIn\n")
    with pytest.raises(PluginConflictError) as info:
        get_stand_in("readi")
    assert info.value.group == "pyql.standins" and len(info.value.plugins) == 2
    with pytest.raises(PluginConflictError):
        build_provider("gold", strategy="readi")
    assert get_stand_in("srp") is get_stand_in("srp")  # the other names stay usable


def test_a_model_needs_no_stand_in(install: Install) -> None:
    name = install(STRATEGY)
    assert standins.stand_in_assumptions("openai:gpt-4o-mini", name) is None
    with pytest.raises(NoStandInError):
        standins.stand_in_assumptions("noisy-gold:0.2", name)


def test_the_records_come_from_the_stand_in_behind_the_llm_cache(tmp_path: Path,
                                                                 mini_metaqa: Path) -> None:
    # the strategy gets the stand-in wrapped by the cache; the runner reads the records from
    # the stand-in it built, not by looking behind the wrapper
    config = RunConfig(dataset="metaqa-1hop", llm="noisy-gold:0.5", data_dir=str(mini_metaqa),
                       limit=6, llm_cache=str(tmp_path / "llm.sqlite"))
    evaluate(config, tmp_path / "run", progress=False)
    provider = build_provider("noisy-gold:0.5", llm_cache=LLMCache(tmp_path / "other.sqlite"))
    assert isinstance(provider, StandInProvider)
    results = read_results(tmp_path / "run")
    made = provider.stand_in_for(EvalItem(id=results[0].id, question="q", program="execute()"))
    assert isinstance(made.llm, CachedLLM) and made.llm.llm is made.stand_in
    assert sum(len(r.meta["injections"]) for r in results) > 0
