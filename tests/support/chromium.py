"""The system Chromium for the browser tests (no browser is downloaded): ``$PYQL_CHROMIUM``,
else the first of :data:`CANDIDATES` on PATH."""

from __future__ import annotations

import os
import shutil

__all__ = ["CANDIDATES", "SKIP_REASON", "chromium"]

#: executable names tried on PATH, in this order
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: the skip reason of a test that needs Chromium and finds none
SKIP_REASON = "no Chromium binary (apt-get install -y chromium, or set PYQL_CHROMIUM)"


def chromium() -> str | None:
    """The system Chromium ($PYQL_CHROMIUM, else one on PATH), or None."""
    env = os.environ.get("PYQL_CHROMIUM")
    if env:
        return env
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)
