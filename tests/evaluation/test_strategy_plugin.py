"""A third-party strategy (``examples/strategy_plugin``), installed with pip from a temporary
copy and discovered through the ``pyql.strategies`` entry points, runs in :func:`evaluate` with
its own gold stand-in (registered in ``pyql.standins`` under its name), exactly like the
built-in QueryAgent — through the API and ``pyql eval --strategy onefact``.

The plugin is installed for a subprocess only (``tests.support.plugin``): the shared virtualenv
is never modified. Without a way to build the wheel offline the test is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.runner import EvalAbort, evaluate
from pyql.agent.strategy import UnknownStrategyError
from tests.support.plugin import install_example

SCRIPT = """
import json, sys
from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import evaluate, read_results
from pyql.agent.strategy import available_strategies

config = RunConfig(dataset="metaqa-1hop", llm="gold", strategy="onefact", data_dir=sys.argv[1],
                   limit=12)
metrics = evaluate(config, sys.argv[2], progress=False)
results = read_results(sys.argv[2])
trajectories = RunDir(sys.argv[2]).trajectories()
from typer.testing import CliRunner
from pyql.cli import app
cli = CliRunner().invoke(app, ["eval", "--dataset", "metaqa-1hop", "--data-dir", sys.argv[1],
                               "--llm", "gold", "--strategy", "onefact", "--limit", "4",
                               "--out", sys.argv[2] + "-cli", "--json", "--no-progress"])
assert cli.exit_code == 0, cli.output
cli_metrics = json.loads(cli.stdout)
print(json.dumps({"cli": [cli_metrics["run"]["strategy"], cli_metrics["hit@1"]],"strategies": list(available_strategies()), "n": metrics["n"],
                  "hit@1": metrics["hit@1"], "errors": metrics["errors"],
                  "strategy": metrics["run"]["strategy"],
                  "steps": [len(trajectories[r.id].steps) for r in results],
                  "counted": [r.usage["steps"] for r in results],
                  "trajectory": open(sys.argv[2] + "/trajectories.jsonl").readline()}))
"""


def test_an_installed_strategy_runs_in_the_evaluation(tmp_path: Path, mini_metaqa: Path,
                                                      request: pytest.FixtureRequest) -> None:
    plugin = install_example("strategy_plugin", tmp_path, request)
    out = plugin.run(SCRIPT, str(mini_metaqa), str(tmp_path / "run"))
    assert {"queryagent", "onefact"} <= set(out["strategies"])
    assert out["strategy"] == "onefact" and out["n"] == 12 and out["errors"] == 0
    assert out["hit@1"] == 1.0  # the gold fact answers every 1-hop question
    assert set(out["steps"]) == {3}  # add_fact, set_answer, execute: its own steps
    assert out["counted"] == out["steps"]
    assert json.loads(out["trajectory"])["strategy"] == "onefact"
    assert out["cli"] == ["onefact", 1.0]  # pyql eval --strategy onefact


def test_an_unknown_strategy_stops_the_run_with_the_installed_names(tmp_path: Path,
                                                                  mini_metaqa: Path) -> None:
    config = RunConfig(dataset="metaqa-1hop", llm="gold", strategy="nope",
                       data_dir=str(mini_metaqa), limit=2)
    with pytest.raises(EvalAbort, match="unknown strategy 'nope'; known: .*queryagent"):
        evaluate(config, tmp_path / "run", progress=False)
    assert issubclass(UnknownStrategyError, LookupError)
