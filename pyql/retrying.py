"""Bounded retries for pyql's network clients, on tenacity: one policy, one loop.

The SPARQL endpoint (:mod:`pyql.kb.endpoint`), the LLM clients (:mod:`pyql.agent.llm.clients`) and the
evaluation's rate gate (:class:`pyql.agent.evaluation.specs.GatedLLM`) all retry through
:func:`retry_call`. A call signals a failure worth another try by raising :class:`Transient`
around the typed error to raise once the tries are used up; anything else propagates at once.

The delay before retry ``n`` (0-based) is the server's ``Retry-After`` when it gave one, else
``min(backoff_max, backoff * 2**n)``, with "equal jitter" (half fixed, half random) unless
``jitter=False``. The loop gives up — raising the last typed error — when ``retries`` retries
were made, when the server asks to wait longer than ``max_retry_after``, or when the wait would
run past the :class:`~pyql.deadline.Deadline` of the call.

>>> attempts = []
>>> def flaky():
...     attempts.append(1)
...     if len(attempts) < 3:
...         raise Transient(ConnectionError("reset"))
...     return "ok"
>>> retry_call(flaky, RetryPolicy(retries=2, backoff=0.01), sleep=lambda s: None)
('ok', 2)
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from pyql.deadline import Deadline

__all__ = ["Transient", "RetryPolicy", "Retrying", "retry_call"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Transient(Exception):
    """Raised by an attempt that may succeed if tried again.

    ``error`` is the typed error to raise when the retries are used up; ``retry_after`` the
    server's advice in seconds (``Retry-After``), if any.
    """

    def __init__(self, error: BaseException, *, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry (see the module docstring)."""

    retries: int = 2
    backoff: float = 0.5
    backoff_max: float = 30.0
    jitter: bool = True
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff < 0 or self.backoff_max < 0:
            raise ValueError("retries and backoff must not be negative")

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """The backoff before retry ``retry`` (0-based), without server advice.

        >>> RetryPolicy(backoff=1.0, jitter=False).delay(3)
        8.0
        """
        delay = min(self.backoff_max, self.backoff * 2**retry)
        if not self.jitter:
            return delay
        return delay / 2 + (rng or random).uniform(0, delay / 2)


class Retrying:
    """A client that retries under one :class:`RetryPolicy`, ``retry_policy`` (where its retry
    knobs are read back), with its own random source ``_rng``."""

    retry_policy: RetryPolicy
    _rng: random.Random

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with "equal jitter": half fixed, half random."""
        return self.retry_policy.delay(attempt, self._rng)


def _about(name: str, error: BaseException) -> str:
    """``name: error``, once: an error that starts with the name (an endpoint's URL) says it
    already."""
    text = str(error)
    return text if not name or text.startswith(name) else f"{name}: {text}"


def retry_call(
    fn: Callable[[], _T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    deadline: Deadline | None = None,
    pause: Callable[[float, BaseException], None] | None = None,
    give_up: Callable[[BaseException, int], BaseException] | None = None,
    name: str = "",
) -> tuple[_T, int]:
    """``(fn(), retries used)``, retrying while ``fn`` raises :class:`Transient`.

    ``sleep`` waits between attempts; ``pause(seconds, error)`` replaces it when the wait
    depends on the error (the rate gate closes for every worker on a 429). ``give_up(error,
    attempts)`` may turn the final error into another one (to add the attempt count);
    by default the last :attr:`Transient.error` is raised, chained to its cause.
    """
    last: list[Transient] = []

    def wait(state: tenacity.RetryCallState) -> float:
        transient = _transient(state)
        if transient.retry_after is not None:
            return transient.retry_after
        return policy.delay(state.attempt_number - 1, rng)

    def stop(state: tenacity.RetryCallState) -> bool:
        transient = _transient(state)
        if state.attempt_number > policy.retries:
            return True
        advised = transient.retry_after
        if advised is not None and advised > policy.max_retry_after:
            log.warning("%s: the server asks to wait %.0fs (more than %.0fs): giving up",
                        name, advised, policy.max_retry_after)
            return True
        if deadline is not None and state.upcoming_sleep >= deadline.remaining():
            log.warning("%s; no time left for a retry (deadline %gs)",
                        _about(name, transient.error), deadline.seconds)
            return True
        return False

    def before_sleep(state: tenacity.RetryCallState) -> None:
        transient = _transient(state)
        last[:] = [transient]
        log.warning("%s; retry %d/%d in %.2fs", _about(name, transient.error),
                    state.attempt_number, policy.retries, state.upcoming_sleep)

    def wait_between(seconds: float) -> None:
        if pause is not None and last:
            pause(seconds, last[0].error)
        else:
            sleep(seconds)

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(Transient),
        wait=wait,
        stop=stop,
        sleep=wait_between,
        before_sleep=before_sleep,
        reraise=True,
    )
    attempts = 0

    def attempt() -> _T:
        nonlocal attempts
        attempts += 1
        return fn()

    try:
        return retrying(attempt), attempts - 1
    except Transient as transient:
        error = transient.error if give_up is None else give_up(transient.error, attempts)
        raise error from transient.__cause__


def _transient(state: tenacity.RetryCallState) -> Transient:
    error = state.outcome.exception() if state.outcome is not None else None
    assert isinstance(error, Transient)  # only Transient is retried
    return error
