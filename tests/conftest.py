"""Shared pytest fixtures. Server fixtures (Virtuoso, PostgreSQL) live in tests/support/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Real servers started by the tests themselves (skipped only when the binaries are missing).
pytest_plugins = ("tests.support.virtuoso", "tests.support.postgres")

REPO = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """Where the shared datasets are: $PYQL_DATA, else ../shared/data next to the checkout."""
    env = os.environ.get("PYQL_DATA")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "data"


def require_data(*parts: str) -> Path:
    """A path under the shared data directory; the calling test is skipped when it is missing."""
    path = data_dir().joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found (set PYQL_DATA)")
    return path


@pytest.fixture(scope="session")
def pyql_data() -> Path:
    path = data_dir()
    if not path.exists():
        pytest.skip(f"datasets not found at {path} (set PYQL_DATA)")
    return path


@pytest.fixture(scope="session", autouse=True)
def _pyql_cache(tmp_path_factory: pytest.TempPathFactory):
    """Stores that commands cache (``pyql run --kb kb.txt``) go to a temporary directory, shared
    by the tests of one worker, never to the user's ~/.cache (tests may point $PYQL_CACHE
    elsewhere for themselves)."""
    before = os.environ.get("PYQL_CACHE")
    os.environ["PYQL_CACHE"] = str(tmp_path_factory.mktemp("pyql-cache"))
    yield
    if before is None:
        os.environ.pop("PYQL_CACHE", None)
    else:
        os.environ["PYQL_CACHE"] = before


# ------------------------------------------------------------------ exhaustive data checks

def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exhaustive",
        action="store_true",
        help="also run the exhaustive data checks (marker 'exhaustive': every item of a dataset), "
        "which the default run leaves to a seeded sample; '-m exhaustive' runs only them",
    )


def _named(item: pytest.Item, args: list[str], invocation: Path) -> bool:
    """Whether ``item`` was named on the command line (``file.py::test`` or ``...::test[id]``)."""
    for arg in args:
        path, sep, rest = arg.partition("::")
        if not sep or (invocation / path).resolve() != item.path:
            continue
        name = item.nodeid.partition("::")[2]
        if name == rest or name.startswith(rest + "["):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``exhaustive`` tests unless ``--exhaustive`` is given, ``-m`` names the
    marker, or the test is named on the command line: each has a sampled twin in the default run."""
    if config.getoption("--exhaustive") or "exhaustive" in (config.option.markexpr or ""):
        return
    invocation = config.invocation_params.dir
    args = list(config.invocation_params.args)
    keep, drop = [], []
    for item in items:
        exhaustive = item.get_closest_marker("exhaustive") and not _named(item, args, invocation)
        (drop if exhaustive else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
