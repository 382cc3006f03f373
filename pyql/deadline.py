"""Wall-clock deadlines: a time budget for a whole piece of work, and blocking calls held to it.

A socket timeout bounds one read, not a request: a server that sends a byte every few seconds
never trips it. :func:`call_within` bounds the whole call by the clock instead — it runs the call
in a daemon worker thread and stops waiting when the time is up. The abandoned worker ends on its
own (its reads still have their socket timeout), and its result is dropped.

A :class:`Deadline` is a budget that several calls share (one question of an evaluation: every
LLM call of the question, retries and backoff included). :func:`within` makes one the deadline
of the current context, so code deep inside (an LLM client) can honour it without it being
passed through every layer; each thread has its own context. A :class:`Budget` is a deadline
whose clock runs only while work is charged to it (:func:`charged`): the LLM time of a question
(``--deadline``), which the time before, between and after its LLM calls does not use up.

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

__all__ = ["Budget", "Deadline", "DeadlineExceeded", "call_within", "charged", "current",
           "earliest", "within"]

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

    __slots__ = ("seconds", "start", "_end", "_clock")

    def __init__(self, seconds: float, *, clock: Clock = time.monotonic) -> None:
        seconds = float(seconds)
        if math.isnan(seconds) or seconds <= 0:
            raise ValueError(f"a deadline must be a positive number of seconds, got {seconds!r}")
        self.seconds = seconds
        self._clock = clock
        self.start = clock()
        self._end = self.start + seconds

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.seconds:g}s, {self.remaining():.1f}s left)"

    @property
    def end(self) -> float:
        """The clock reading at which the time is up."""
        return self._end

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


class Budget(Deadline):
    """``seconds`` of wall clock that are used up only while work is charged to the budget
    (:meth:`charging`, or :func:`charged` for the current context's): an evaluation question's
    LLM time, which the time spent before, between and after its LLM calls (linking, KB
    queries, prompt building) does not use up. Charges that overlap (a client inside another,
    calls in parallel threads) count once. Elsewhere it is a :class:`Deadline`: ``elapsed`` is
    the time charged, ``end`` when the time is up if the work going on now goes on.

    >>> now = [0.0]
    >>> b = Budget(10, clock=lambda: now[0])
    >>> now[0] = 5.0                      # not charged
    >>> with b.charging():
    ...     now[0] = 8.0
    ...     with b.charging():            # nested: counted once
    ...         now[0] = 9.0
    >>> b.elapsed(), b.remaining(), b.expired
    (4.0, 6.0, False)
    """

    __slots__ = ("_spent", "_depth", "_since", "_lock")

    def __init__(self, seconds: float, *, clock: Clock = time.monotonic) -> None:
        super().__init__(seconds, clock=clock)
        self._spent = 0.0
        self._depth = 0
        self._since = 0.0
        self._lock = threading.Lock()

    @contextmanager
    def charging(self) -> Iterator[Budget]:
        """Charge the wall-clock time of the ``with`` body to the budget."""
        with self._lock:
            if self._depth == 0:
                self._since = self._clock()
            self._depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._spent += self._clock() - self._since

    def elapsed(self) -> float:
        with self._lock:
            running = self._clock() - self._since if self._depth else 0.0
            return self._spent + running

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    @property
    def end(self) -> float:
        return self._clock() + self.remaining()

    @property
    def expired(self) -> bool:
        return self.elapsed() >= self.seconds


def earliest(*deadlines: Deadline | None) -> Deadline | None:
    """The deadline that ends first (``None`` entries ignored; ``None`` if there is none).

    >>> a, b = Deadline(5), Deadline(50)
    >>> earliest(None, b, a) is a, earliest(None) is None
    (True, True)
    """
    present = [d for d in deadlines if d is not None]
    return min(present, key=lambda d: d.end) if present else None


def current() -> Deadline | None:
    """The deadline of the current context (see :func:`within`), if any."""
    return _CURRENT.get()


@contextmanager
def charged() -> Iterator[Deadline | None]:
    """Charge the ``with`` body to the current context's deadline when it is a :class:`Budget`
    (a plain deadline runs anyway); yields the current deadline. An LLM client wraps each call
    in it, so a question's ``--deadline`` counts LLM time only."""
    deadline = current()
    if isinstance(deadline, Budget):
        with deadline.charging():
            yield deadline
    else:
        yield deadline


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
