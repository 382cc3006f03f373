"""A third-party strategy (``examples/strategy_plugin``), installed with pip from a temporary
copy and discovered through the ``pyql.strategies`` entry points, runs in :func:`evaluate` with
its own gold stand-in (``stand_in``), exactly like the built-in QueryAgent.

pip builds a wheel from a copy of the sources (cached in pytest's cache by content) and installs
it with ``--target`` into a temporary directory put on ``PYTHONPATH`` of a subprocess: the shared
virtualenv is never modified. Without a way to build the wheel offline the test is skipped.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.runner import EvalAbort, evaluate
from pyql.agent.strategy import UnknownStrategyError

REPO_ROOT = Path(__file__).resolve().parents[2]
PLUGIN = REPO_ROOT / "examples" / "strategy_plugin"

pytestmark = pytest.mark.usefixtures("eval_cache")

SCRIPT = """
import json, sys
from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.runner import evaluate, read_results
from pyql.agent.strategy import available_strategies

config = RunConfig(dataset="metaqa-1hop", llm="gold", strategy="onefact", data_dir=sys.argv[1],
                   limit=12)
metrics = evaluate(config, sys.argv[2], progress=False)
results = read_results(sys.argv[2])
print(json.dumps({"strategies": list(available_strategies()), "n": metrics["n"],
                  "hit@1": metrics["hit@1"], "errors": metrics["errors"],
                  "strategy": metrics["run"]["strategy"],
                  "steps": [len(r.steps) for r in results],
                  "trajectory": open(sys.argv[2] + "/trajectories.jsonl").readline()}))
"""


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          timeout=180)


def _digest() -> str:
    h = hashlib.sha256()
    for path in sorted(PLUGIN.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path):
            h.update(str(path.relative_to(PLUGIN)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _wheel(source: Path, cache: Path) -> Path:
    out = cache / _digest()
    built = sorted(out.glob("*.whl"))
    if built:
        return built[0]
    out.mkdir(parents=True, exist_ok=True)
    base = ["wheel", "--quiet", "--no-deps", "--wheel-dir", str(out)]
    attempts = []
    if importlib.util.find_spec("wheel") is not None or importlib.util.find_spec("setuptools"):
        attempts.append([*base, "--no-build-isolation", str(source)])
    attempts.append([*base, str(source)])
    errors = []
    for args in attempts:
        done = _pip(*args)
        built = sorted(out.glob("*.whl"))
        if done.returncode == 0 and built:
            return built[0]
        errors.append(done.stderr[-2000:])
    pytest.skip("cannot build the example strategy here: " + " | ".join(errors))


def test_an_installed_strategy_runs_in_the_evaluation(tmp_path: Path, mini_metaqa: Path,
                                                      request: pytest.FixtureRequest) -> None:
    source = tmp_path / "strategy_plugin"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                  "__pycache__"))
    store = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    cache = store.mkdir("pyql-strategy-plugin") if store is not None else tmp_path / "wheels"
    wheel = _wheel(source, Path(cache))
    site = tmp_path / "site"
    done = _pip("install", "--quiet", "--no-deps", "--no-index", "--target", str(site),
                str(wheel))
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(mini_metaqa), str(run_dir)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"queryagent", "onefact"} <= set(out["strategies"])
    assert out["strategy"] == "onefact" and out["n"] == 12 and out["errors"] == 0
    assert out["hit@1"] == 1.0  # the gold fact answers every 1-hop question
    assert set(out["steps"]) == {3}  # add_fact, set_answer, execute: its own steps
    assert json.loads(out["trajectory"])["strategy"] == "onefact"


def test_an_unknown_strategy_stops_the_run_with_the_installed_names(tmp_path: Path,
                                                                  mini_metaqa: Path) -> None:
    config = RunConfig(dataset="metaqa-1hop", llm="gold", strategy="nope",
                       data_dir=str(mini_metaqa), limit=2)
    with pytest.raises(EvalAbort, match="unknown strategy 'nope'; installed: .*queryagent"):
        evaluate(config, tmp_path / "run", progress=False)
    assert issubclass(UnknownStrategyError, LookupError)
