"""One plugin loader (:mod:`pyql.plugins`) for the four entry-point groups, one conflict policy,
and one typed error for an unknown name (:class:`pyql.registry.UnknownNameError`).

The rival plugins are a real installed distribution (a ``*.dist-info`` on ``sys.path``), found
by ``importlib.metadata`` like any other; it claims a built-in name in every group."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pyql.agent import strategy
from pyql.agent.evaluation import datasets
from pyql.cli import app, plugin_commands
from pyql.guidelines.registry import load_entry_points
from pyql.plugins import Plugin, PluginConflictError, PluginLoadError, plugins
from pyql.registry import UnknownNameError

#: group -> (a built-in name the rival claims, the rival's target)
RIVALS = {
    "pyql.strategies": ("readi", "pyql_rival:Readi"),
    "pyql.eval_datasets": ("grailqa", "pyql_rival:GrailQA"),
    "pyql.guidelines": ("kb", "pyql_rival:GUIDELINES"),
    "pyql.commands": ("eval", "pyql_rival:register"),
}


@pytest.fixture()
def rival(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / "site"
    info = site / "pyql_rival-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyql-rival\nVersion: 0.1\n")
    groups = {g: [f"{name} = {target}"] for g, (name, target) in RIVALS.items()}
    groups["pyql.eval_datasets"].append("metaqa-1hop = pyql_rival:MetaQA")  # a built-in class
    (info / "entry_points.txt").write_text("".join(
        f"[{g}]\n" + "\n".join(lines) + "\n" for g, lines in groups.items()))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(datasets, "DATASETS", dict(datasets.DATASETS))
    monkeypatch.setattr(datasets, "_unusable", {})
    monkeypatch.setattr(datasets, "_loaded_entry_points", False)
    strategy._clear_cache()
    yield
    strategy._clear_cache()


def _strategy(name: str) -> Any:
    return strategy.get_strategy(name)


def _dataset(name: str) -> Any:
    return datasets.get_dataset(name, Path(__file__).parent)


def _guidelines(name: str) -> Any:
    return load_entry_points("pyql.guidelines")


def _command(name: str) -> Any:
    _, failures = plugin_commands()
    for failure in failures:
        if isinstance(failure, PluginConflictError):
            raise failure
    return None


USE: dict[str, Callable[[str], Any]] = {
    "pyql.strategies": _strategy, "pyql.eval_datasets": _dataset,
    "pyql.guidelines": _guidelines, "pyql.commands": _command,
}


@pytest.mark.parametrize("group", list(RIVALS))
def test_a_name_claimed_twice_is_the_same_error_in_every_group(rival: None, group: str) -> None:
    """Before: a third-party ``readi`` silently replaced the built-in (or was replaced), a
    dataset raised ValueError for every dataset, a command warned, guidelines loaded both."""
    name, target = RIVALS[group]
    with pytest.raises(PluginConflictError) as caught:
        USE[group](name)
    error = caught.value
    assert (error.group, error.name) == (group, name)
    values = [p.value for p in error.plugins]
    assert target in values and len(values) == 2
    assert next(p for p in error.plugins if p.value == target).dist == "pyql-rival"


def test_the_rest_of_a_group_stays_usable(rival: None) -> None:
    assert strategy.get_strategy("queryagent").name == "queryagent"
    assert "readi" in strategy.available_strategies()
    assert {"grailqa", "metaqa-1hop", "metaqa-2hop"} <= set(datasets.dataset_names())
    with pytest.raises(PluginConflictError):  # a built-in class in code is claimed like one
        _dataset("metaqa-1hop")
    assert _dataset("metaqa-2hop").name == "metaqa-2hop"


def test_a_command_in_conflict_is_unavailable_and_says_why(rival: None) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    line = next(x for x in listed.stdout.splitlines() if " eval " in x)
    assert "unavailable: claimed by" in line
    result = runner.invoke(app, ["eval", "--dataset", "metaqa-1hop"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: pyql.commands: the name 'eval' is claimed by 2")
    assert runner.invoke(app, ["report", "--help"]).exit_code == 0


def test_the_same_entry_point_seen_twice_is_one_plugin() -> None:
    from importlib.metadata import EntryPoint

    twice = [EntryPoint("x", "json:dumps", "pyql.strategies")] * 2
    found = plugins("pyql.strategies", entry_points=twice)
    assert found["x"] == Plugin("pyql.strategies", "x", "json:dumps")
    assert found.load("x").__name__ == "dumps" and found.conflicts() == ()


def test_a_plugin_that_fails_to_import_names_itself() -> None:
    from importlib.metadata import EntryPoint

    found = plugins("pyql.strategies",
                    entry_points=[EntryPoint("gone", "pyql_no_such_module:X", "pyql.strategies")])
    with pytest.raises(PluginLoadError) as caught:
        found.load("gone")
    assert caught.value.plugin.name == "gone" and caught.value.error_type == "ModuleNotFoundError"


def _unknown_cases() -> list[tuple[str, Callable[[], Any]]]:
    from pyql.agent.evaluation.metrics import score_item
    from pyql.agent.llm.accounting import _load_encoding
    from pyql.agent.strategies.queryagent.presets import get_preset
    from pyql.agent.strategies.queryagent.prompts import get_prompt_profile
    from pyql.agent.strategies.readi.prompts import prompt_text
    from pyql.datasets.freebase import load_questions
    from pyql.datasets.sparql_fidelity import load_gold_queries
    from pyql.profiles import get_profile, get_relation_filter
    from pyql.program import _toolset as toolset

    return [
        ("strategy", lambda: strategy.get_strategy("nope")),
        ("dataset", lambda: datasets.get_dataset("nope")),
        ("preset", lambda: get_preset("nope", "metaqa")),
        ("KB profile", lambda: get_profile("nope")),
        ("relation filter", lambda: get_relation_filter("nope")),
        ("toolset", lambda: toolset("nope")),
        ("prompt profile", lambda: get_prompt_profile("nope")),
        ("Readi prompt profile", lambda: prompt_text("plan", "nope")),
        ("encoding", lambda: _load_encoding("nope", "/nonexistent")),
        ("metric kind", lambda: score_item("nope", None, [])),  # type: ignore[arg-type]
        ("Freebase dataset", lambda: load_questions("nope", "/nonexistent")),
        ("dataset", lambda: load_gold_queries("nope", Path("/nonexistent"))),
    ]


@pytest.mark.parametrize("index", range(12))
def test_every_unknown_name_is_one_typed_error(index: int) -> None:
    what, call = _unknown_cases()[index]
    with pytest.raises(UnknownNameError) as caught:
        call()
    error = caught.value
    assert (error.what, error.name) == (what, "nope") and error.known
    assert str(error) == f"unknown {what} 'nope'; known: {', '.join(error.known)}"


def test_the_layers_keep_their_own_error_families() -> None:
    from pyql.agent.strategies.queryagent.presets import PresetError, get_preset
    from pyql.errors import ProfileError
    from pyql.profiles import get_profile

    with pytest.raises(PresetError):
        get_preset("nope", "metaqa")
    with pytest.raises(ProfileError):
        get_profile("nope")
    with pytest.raises(datasets.DatasetError):
        datasets.get_dataset("nope")
    with pytest.raises(strategy.UnknownStrategyError) as caught:
        strategy.get_strategy("nope")
    assert "queryagent" in caught.value.available
