"""Where the shared datasets live.

Library code takes dataset paths as arguments; when a caller gives none, it uses
:func:`default_data_dir`: ``$PYQL_DATA`` if set, else the first existing of ``./shared/data`` and
``../shared/data`` (relative to the current directory). Data is never copied into the package.

What commands build from the data (parsed stores, embeddings) goes under :func:`cache_dir`:
``$PYQL_CACHE``, else ``~/.cache/pyql``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_data_dir", "cache_dir", "ENV_VAR", "CACHE_ENV"]

#: the environment variable naming the data directory
ENV_VAR = "PYQL_DATA"

#: the environment variable naming the cache directory
CACHE_ENV = "PYQL_CACHE"

_CANDIDATES = (Path("shared") / "data", Path("..") / "shared" / "data")


def default_data_dir() -> Path:
    """The shared data directory: ``$PYQL_DATA``, else ``./shared/data``, else ``../shared/data``.

    Raises :class:`FileNotFoundError` (saying what was tried) when none exists.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"${ENV_VAR} is set to {env!r}, which is not a directory; point it at the shared "
                "datasets (the folder holding wikisql/, spider/, metaqa/ ...)"
            )
        return path
    for candidate in _CANDIDATES:
        if candidate.is_dir():
            return candidate.resolve()
    tried = ", ".join(str(Path.cwd() / c) for c in _CANDIDATES)
    raise FileNotFoundError(
        f"no dataset directory found (tried {tried}); set ${ENV_VAR} to the folder holding "
        "the shared datasets, or pass paths explicitly"
    )


def cache_dir() -> Path:
    """Where commands keep what they build from the data: ``$PYQL_CACHE``, else
    ``~/.cache/pyql`` (not created here)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pyql"
