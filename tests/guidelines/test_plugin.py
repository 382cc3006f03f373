"""The example third-party plugin (``examples/guideline_plugin``): installed with pip from a temp
copy, discovered through the ``pyql.guidelines`` entry points, firing in
``Session(..., guidelines=True)``.

pip builds a wheel from a copy of the sources (cached in pytest's cache by content, so later runs
skip the build) and installs it with ``--target`` into a temporary directory put on
``PYTHONPATH`` of a subprocess: the shared virtualenv is never modified (other test runs see no
extra guideline). Without ``wheel`` in the venv and without an index to fetch the build
dependencies from, the test is skipped.
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

from tests.guidelines.support import FIXTURES, REPO_ROOT

PLUGIN = REPO_ROOT / "examples" / "guideline_plugin"

SCRIPT = """
import json, sys
from pyql import Session
from pyql.kb import OxigraphKB
from pyql.guidelines import default_registry

kb = OxigraphKB.from_file(sys.argv[1], profile="freebase")
s = Session(kb, {"florida panthers": "m.0j8js"}, guidelines=True)
first = s.run("add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)")
again = s.run("add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)")
source = default_registry().source("RM901")
print(json.dumps({"first": first.hint.code if first.hint else None,
                  "again": again.hint.code if again.hint else None,
                  "message": again.hint.message if again.hint else "",
                  "plugin": source.name, "dist": source.dist,
                  "codes": list(default_registry().codes)}))
"""


def _can_build_without_isolation() -> bool:
    if importlib.util.find_spec("wheel") is not None:
        return True
    try:
        import setuptools

        major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
        return (major, minor) >= (70, 1)  # bdist_wheel ships with setuptools since 70.1
    except Exception:
        return False


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
    """The plugin's wheel, built with pip from a copy of the sources (cached by content)."""
    out = cache / _digest()
    built = sorted(out.glob("*.whl"))
    if built:
        return built[0]
    out.mkdir(parents=True, exist_ok=True)
    base = ["wheel", "--quiet", "--no-deps", "--wheel-dir", str(out)]
    attempts = ([[*base, "--no-build-isolation", str(source)]]
                if _can_build_without_isolation() else [])
    attempts.append([*base, str(source)])  # build isolation: setuptools/wheel from an index
    errors = []
    for args in attempts:
        done = _pip(*args)
        built = sorted(out.glob("*.whl"))
        if done.returncode == 0 and built:
            return built[0]
        errors.append(done.stderr[-2000:])
    pytest.skip("cannot build the example plugin here: " + " | ".join(errors))


def test_example_plugin_fires_through_session_guidelines_true(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    source = tmp_path / "guideline_plugin"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                  "__pycache__"))
    cache = (request.config.cache.mkdir("pyql-guideline-plugin")
             if request.config.cache is not None else tmp_path / "wheels")
    wheel = _wheel(source, Path(cache))
    site = tmp_path / "site"
    done = _pip("install", "--quiet", "--no-deps", "--no-index", "--target", str(site),
                str(wheel))
    assert done.returncode == 0, done.stderr
    assert any(p.name.startswith("pyql_guideline_example") and p.suffix == ".dist-info"
               for p in site.iterdir())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(FIXTURES / "figure7.ttl")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["first"] is None
    assert out["again"] == "RM901"
    assert "already in the query" in out["message"]
    assert (out["plugin"], out["dist"]) == ("example", "pyql-guideline-example")
    assert {"KB201", "PY101", "DB101", "RM901"} <= set(out["codes"])


def test_example_plugin_is_a_valid_pack() -> None:
    """The plugin's module validates like any pack (without installing it)."""
    sys.path.insert(0, str(PLUGIN))
    try:
        from pyql.guidelines import Registry

        module = importlib.import_module("pyql_guideline_example")
        reg = Registry.from_classes(module.GUIDELINES, source="example")
        assert reg.codes == ("RM901",)
    finally:
        sys.path.remove(str(PLUGIN))
        sys.modules.pop("pyql_guideline_example", None)
