"""Wall-clock deadlines: a time budget for a whole piece of work, and blocking calls held to it.

A socket timeout bounds one read, not a request: a server that sends a byte every few seconds
never trips it. :func:`call_within` bounds the whole call by the clock instead — it runs the call
in a daemon worker thread and stops waiting when the time is up. The abandoned worker ends on its
own (its reads still have their socket timeout), and its result is dropped.

A :class:`Deadline` is a budget that several calls share (one question of an evaluation: every
LLM call of the question, retries and backoff included). :func:`within` makes one the deadline
of the current context, so code deep inside (an LLM client) can honour it without it being
passed through every layer; each thread has its own context.

>>> with within(30) as d:
...     current() is d, d.remaining() <= 30
(True, True)
>>> current() is None
True
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["Deadline", "DeadlineExceeded", "call_within", "current", "within"]

_T = TypeVar("_T")
Clock = Callable[[], float]

_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "pyql_deadline", default=None
)


class DeadlineExceeded(TimeoutError):
    """A call did not finish within ``seconds`` (wall clock). Callers translate it into their
    own typed error."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"not finished within {seconds:g}s")


class Deadline:
    """A wall-clock budget of ``seconds`` that starts now.

    >>> now = [0.0]
    >>> d = Deadline(10, clock=lambda: now[0])
    >>> now[0] = 4.0
    >>> d.remaining(), d.elapsed(), d.bound(30), d.bound(2), d.expired
    (6.0, 4.0, 6.0, 2.0, False)
    """

    __slots__ = ("seconds", "start", "end", "_clock")

    def __init__(self, seconds: float, *, clock: Clock = time.monotonic) -> None:
        seconds = float(seconds)
        if math.isnan(seconds) or seconds <= 0:
            raise ValueError(f"a deadline must be a positive number of seconds, got {seconds!r}")
        self.seconds = seconds
        self._clock = clock
        self.start = clock()
        self.end = self.start + seconds

    def __repr__(self) -> str:
        return f"Deadline({self.seconds:g}s, {self.remaining():.1f}s left)"

    def remaining(self) -> float:
        return max(0.0, self.end - self._clock())

    def elapsed(self) -> float:
        return self._clock() - self.start

    @property
    def expired(self) -> bool:
        return self._clock() >= self.end

    def bound(self, timeout: float | None) -> float:
        """``timeout`` cut to the time left (``None``: the time left)."""
        left = self.remaining()
        return left if timeout is None else min(float(timeout), left)


def current() -> Deadline | None:
    """The deadline of the current context (see :func:`within`), if any."""
    return _CURRENT.get()


@contextmanager
def within(deadline: Deadline | float | None) -> Iterator[Deadline | None]:
    """Make ``deadline`` (a :class:`Deadline` or seconds) the current one for the ``with`` body.

    An outer deadline that ends sooner stays in force (a scope can only shorten the budget);
    ``None`` leaves the current deadline as it is.
    """
    if deadline is None:
        yield current()
        return
    if not isinstance(deadline, Deadline):
        deadline = Deadline(deadline)
    outer = current()
    chosen = outer if outer is not None and outer.end <= deadline.end else deadline
    token = _CURRENT.set(chosen)
    try:
        yield chosen
    finally:
        _CURRENT.reset(token)


class _Outcome:
    __slots__ = ("done", "value", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None


def call_within(fn: Callable[[], _T], seconds: float, *, name: str = "pyql-call") -> _T:
    """``fn()``, or :class:`DeadlineExceeded` when it has not returned after ``seconds``.

    ``fn`` runs in a daemon thread with a copy of the caller's context; its exceptions are
    re-raised here. ``fn`` should still bound its own blocking reads (a socket timeout), so that
    an abandoned call ends soon after.
    """
    if seconds <= 0:
        raise DeadlineExceeded(max(0.0, seconds))
    outcome = _Outcome()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome.value = context.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome.error = exc
        finally:
            outcome.done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    if not outcome.done.wait(seconds):
        raise DeadlineExceeded(seconds)
    if outcome.error is not None:
        raise outcome.error
    return outcome.value  # type: ignore[return-value]
