"""Child processes that die with their parent.

A worker process (an evaluation worker, a forked query) must not outlive the process that
started it: after a ``kill -9`` of the parent nobody would ever collect its result, and it would
keep its memory and CPU, re-parented to PID 1. :func:`die_with_parent` asks the kernel to send
the calling process ``SIGKILL`` when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``); where
that does not exist it starts a daemon thread that polls the parent's pid and exits when the
process has been re-parented.

``tests/test_bounded_kb.py`` kills a process in the middle of a timed query and sees its query
process go.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["die_with_parent", "prepare"]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (None off Linux). Looked up once: a forking parent calls it before the
    fork, so that the child does not search for libc (``find_library`` runs ``ldconfig``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # no libc loaded, or no prctl in it
        return None


def prepare() -> None:
    """Look up what :func:`die_with_parent` needs, in the parent, before forking."""
    _prctl()


def _prctl_pdeathsig(sig: int) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)``; False where there is no such call."""
    prctl = _prctl()
    return prctl is not None and prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0


def die_with_parent(parent: int | None = None, *, poll: float = 0.5,
                    watch_only: bool = False) -> str:
    """End this process when ``parent`` (default: the current parent) dies; returns how:
    ``"prctl"`` (the kernel kills it) or ``"poll"`` (a thread checks every ``poll`` seconds).

    Call it first thing in the child. If the parent is already gone when it is called (it died
    between the fork and here), the process exits at once. The kernel's death signal follows
    the *thread* that started the child: a child started by a thread that may end before the
    process (a pool's worker, started by whichever thread submitted first) asks for
    ``watch_only=True``, the poll alone.
    """
    parent = os.getppid() if parent is None else parent
    how = "prctl" if not watch_only and _prctl_pdeathsig(signal.SIGKILL) else "poll"
    if os.getppid() != parent:  # died before the death signal was armed
        os._exit(1)
    if how == "poll":
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(poll)
            os._exit(1)

        threading.Thread(target=watch, name="pyql-parent-watch", daemon=True).start()
    return how
