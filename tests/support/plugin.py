"""Install an example plugin (``examples/<name>``) for a subprocess, never into the shared venv.

pip builds a wheel from a copy of the sources (cached in pytest's cache by content, so later runs
skip the build) and installs it with ``--target`` into a temporary directory that goes first on
the subprocess's ``PYTHONPATH``. Without ``wheel`` in the venv and without an index to fetch the
build dependencies from, the calling test is skipped.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"


def _can_build_without_isolation() -> bool:
    if importlib.util.find_spec("wheel") is not None:
        return True
    try:
        import setuptools

        major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
        return (major, minor) >= (70, 1)  # bdist_wheel ships with setuptools since 70.1
    except Exception:
        return False


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          timeout=180)


def _digest(plugin: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(plugin.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path):
            h.update(str(path.relative_to(plugin)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _wheel(plugin: Path, source: Path, cache: Path) -> Path:
    """The plugin's wheel, built with pip from a copy of the sources (cached by content)."""
    out = cache / _digest(plugin)
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
        done = pip(*args)
        built = sorted(out.glob("*.whl"))
        if done.returncode == 0 and built:
            return built[0]
        errors.append(done.stderr[-2000:])
    pytest.skip(f"cannot build the example {plugin.name} here: " + " | ".join(errors))


@dataclass(frozen=True)
class Installed:
    """An example plugin installed into ``site``; ``run`` executes a script that sees it."""

    site: Path
    env: dict[str, str]
    cwd: Path

    def run(self, script: str, *args: str, timeout: float = 180) -> dict[str, Any]:
        """Run ``python -c script *args``; the JSON object on its last stdout line."""
        done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                              text=True, env=self.env, cwd=self.cwd, timeout=timeout)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])


def install_example(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Installed:
    """Build (or reuse) the wheel of ``examples/<name>`` and install it under ``tmp_path``."""
    plugin = EXAMPLES / name
    source = tmp_path / name
    shutil.copytree(plugin, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                  "__pycache__"))
    store = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    cache = store.mkdir(f"pyql-{name.replace('_', '-')}") if store is not None else (
        tmp_path / "wheels")
    wheel = _wheel(plugin, source, Path(cache))
    site = tmp_path / "site"
    done = pip("install", "--quiet", "--no-deps", "--no-index", "--target", str(site), str(wheel))
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return Installed(site=site, env=env, cwd=tmp_path)
