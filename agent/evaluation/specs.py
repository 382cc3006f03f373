"""``--llm`` specs: which model answers each question of an evaluation run.

A spec names an :class:`LLMProvider`, which hands out the :class:`~pyql.agent.llm.LLM` of one
question (``for_item(item)``): a shared client for an API, a fresh stand-in per question for
replays and gold programs.

=====================  ============================================================================
spec                   the LLM of each question
=====================  ============================================================================
``openai:MODEL``       one shared :class:`~pyql.agent.llm.OpenAIChat` (``--base-url``, key from
                       ``$OPENAI_API_KEY``), behind the run's :class:`RateGate`
``replay:PATH``        a :class:`~pyql.agent.llm.ReplayLLM` of the question's recorded trajectory,
                       found by question id in a trajectories JSONL (or a run directory's
                       ``trajectories.jsonl``)
``gold``               the strategy's stand-in (``stand_in``): for QueryAgent :class:`GoldLLM`, the
                       question's gold program, one call per step, in the agent's reply format
``noisy-gold:RATE``    the strategy's noisy stand-in: for QueryAgent
                       ``pyql.agent.evaluation.noisy.NoisyGoldLLM`` (the gold program with errors
                       injected at ``RATE``), seeded per question (``item_seed``)
=====================  ============================================================================

**Rate limits.** :class:`GatedLLM` puts a :class:`RateGate` in front of a client: before every
call it waits until the gate is open; when a call fails with
:class:`~pyql.agent.errors.LLMRateLimitError` it closes the gate for the server's ``retry_after``
(else an exponential backoff) and tries again, so *every* worker of the run pauses, not only the
one that was refused. Server errors and timeouts are retried with a backoff of that worker alone.
A quota error (``insufficient_quota``) is not retried. The OpenAI client's own retries are turned
off (``max_retries=0``) so that 429s reach the gate.

**Test hook.** ``$PYQL_EVAL_TEST_DELAY`` (seconds, for tests only) makes :class:`GoldLLM` sleep
that long before each reply, so a run lasts long enough to be killed half-way.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pyql.agent.errors import (
    LLMRateLimitError,
    LLMScriptExhaustedError,
    LLMServerError,
    LLMTimeoutError,
)
from pyql.agent.evaluation.records import EvalItem, item_seed
from pyql.agent.llm import LLM, LLMReply, Message, ToolCall
from pyql.errors import PyqlError
from pyql.program import TOOLSETS, Call, Program

__all__ = [
    "LLMSpecError",
    "RateGate",
    "GatedLLM",
    "GoldLLM",
    "LLMProvider",
    "SharedLLMProvider",
    "StandInProvider",
    "DeadlineLLM",
    "ReplayProvider",
    "parse_llm_spec",
    "build_provider",
    "no_program_reason",
    "noisy_rate",
    "TEST_DELAY_ENV",
]

log = logging.getLogger(__name__)

#: test-only: seconds GoldLLM sleeps before each reply
TEST_DELAY_ENV = "PYQL_EVAL_TEST_DELAY"

Clock = Callable[[], float]
Sleep = Callable[[float], None]


class LLMSpecError(PyqlError):
    """An ``--llm`` spec that cannot be used (unknown form, missing module, unreadable file)."""


# -- the rate gate ------------------------------------------------------------------------------


class RateGate:
    """A shared pause: :meth:`trip` closes the gate until ``now + seconds``; :meth:`wait` blocks
    until it is open. ``clock`` and ``sleep`` are injectable (tests use a fake clock).

    >>> now = [0.0]
    >>> gate = RateGate(clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    >>> gate.trip(30)
    >>> gate.wait(), now[0]
    (30.0, 30.0)
    """

    def __init__(self, *, clock: Clock = time.monotonic, sleep: Sleep = time.sleep) -> None:
        self.clock = clock
        self.sleep = sleep
        self._deadline = float("-inf")
        self._lock = threading.Lock()
        #: how many times the gate was closed, and the seconds workers spent waiting in total
        self.trips = 0
        self.waited = 0.0

    @property
    def deadline(self) -> float:
        return self._deadline

    def trip(self, seconds: float) -> None:
        """Close the gate for ``seconds`` from now (a later deadline wins)."""
        with self._lock:
            self._deadline = max(self._deadline, self.clock() + max(0.0, seconds))
            self.trips += 1

    def remaining(self) -> float:
        with self._lock:
            return max(0.0, self._deadline - self.clock())

    def wait(self) -> float:
        """Block until the gate is open; return the seconds waited."""
        waited = 0.0
        while True:
            left = self.remaining()
            if left <= 0:
                break
            self.sleep(left)
            waited += left
        if waited:
            with self._lock:
                self.waited += waited
        return waited

    def stats(self) -> dict[str, float]:
        return {"rate_limit_pauses": self.trips, "rate_limit_wait_seconds": round(self.waited, 3)}


class GatedLLM:
    """An LLM behind a :class:`RateGate` (see the module docstring).

    ``max_retries`` bounds the retries of one call (rate limits and server errors together);
    a ``retry_after`` longer than ``max_retry_after`` is not waited for (the error is raised).
    """

    def __init__(
        self,
        llm: LLM,
        gate: RateGate,
        *,
        max_retries: int = 8,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        max_retry_after: float = 600.0,
        rng: random.Random | None = None,
    ) -> None:
        self.llm = llm
        self.gate = gate
        self.model = getattr(llm, "model", "")
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"GatedLLM({self.llm!r})"

    def backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max, self.backoff_base * 2**attempt)
        return delay / 2 + self._rng.uniform(0, delay / 2)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> LLMReply:
        start = self.gate.clock()
        attempt = 0
        while True:
            self.gate.wait()
            try:
                reply = self.llm.complete(messages, stop=stop, tools=tools)
            except LLMRateLimitError as exc:
                if exc.code == "insufficient_quota" or attempt >= self.max_retries:
                    raise
                delay = exc.retry_after if exc.retry_after is not None else self.backoff(attempt)
                if delay > self.max_retry_after:
                    log.warning("%s: the server asks to wait %.0fs (more than %.0fs): giving up",
                                self.model, delay, self.max_retry_after)
                    raise
                log.warning("%s: rate limited; every worker pauses %.1fs (retry %d/%d)",
                            self.model, delay, attempt + 1, self.max_retries)
                self.gate.trip(delay)
            except (LLMServerError, LLMTimeoutError) as exc:
                if attempt >= self.max_retries:
                    raise
                delay = self.backoff(attempt)
                log.warning("%s: %s; retry %d/%d in %.1fs", self.model, type(exc).__name__,
                            attempt + 1, self.max_retries, delay)
                self.gate.sleep(delay)
            else:
                if attempt == 0:
                    return reply
                elapsed = self.gate.clock() - start
                return reply.model_copy(update={"retries": reply.retries + attempt,
                                                "latency": max(reply.latency, elapsed)})
            attempt += 1


# -- the gold stand-in --------------------------------------------------------------------------


def _test_delay() -> float:
    raw = os.environ.get(TEST_DELAY_ENV, "")
    if not raw:
        return 0.0
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise LLMSpecError(f"${TEST_DELAY_ENV} must be a number of seconds, not {raw!r}") from None


class GoldLLM:
    """Replays a gold program in the agent's reply format: one call per LLM call.

    The ``i``-th request gets the program's ``i``-th call, as ``Thought n : ...`` /
    ``Action n : call`` text (``mode="text"``) or as one tool call (``mode="tools"``; the default,
    ``None``, answers with a tool call when the request offers tools), where
    ``n`` is the step the agent is at. A call that gets a guideline hint is repeated once (a
    result-based hint is accepted when the action is repeated, see
    :class:`pyql.session.HintPolicy`); if the repeat is refused too, the next request gets the
    next call. A program that does not end with ``execute()`` gets one. When the program is
    exhausted (or there is none) the request raises
    :class:`~pyql.agent.errors.LLMScriptExhaustedError`. Replies carry no token usage (the agent
    counts the prompt) and cost 0. Whether the last step got a hint is read from its record
    (:meth:`observe`, called by the agent after every step), never from the prompt's wording.

    >>> llm = GoldLLM("add_fact(Kismet, directed_by, ?d)\\nset_answer(?d)")
    >>> print(llm.complete([{"role": "user", "content": "q"}]).text)
    Thought 1 : Step 1 of 3 of the gold program.
    Action 1 : add_fact(Kismet, directed_by, ?d)
    """

    def __init__(
        self,
        program: str | Program | None,
        *,
        tools: str = "sparql",
        mode: str | None = None,
        delay: float | None = None,
        sleep: Sleep = time.sleep,
        model: str = "gold",
        reason: str = "",
    ) -> None:
        self.model = model
        self.tools = tools
        self.mode = mode
        self.reason = reason
        #: the program's calls as the agent writes them (text mode needs no parse: a gold
        #: program prints one call per line); parsed on the first tool-call reply
        self._text: list[str] = []
        self._calls: list[Call] | None = None
        if isinstance(program, Program) or (program is not None and mode == "tools"):
            parsed = program if isinstance(program, Program) else Program.parse(program, tools)
            self._set_calls(list(parsed))
        elif program is not None:
            self._text = [line.strip() for line in program.splitlines() if line.strip()]
            if not self._text or not self._text[-1].startswith("execute("):
                self._text.append("execute()")
        self.delay = _test_delay() if delay is None else delay
        self._sleep = sleep
        self._next = 0
        self._insisted = -1
        self._hinted = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GoldLLM({len(self._text)} calls, mode={self.mode!r})"

    def _set_calls(self, calls: list[Call]) -> None:
        if not calls or calls[-1].name != "execute":
            calls.append(Call(name="execute"))
        self._calls = calls
        self._text = [str(c) for c in calls]

    @property
    def calls(self) -> list[Call]:
        """The program's calls (``execute()`` added when it has none at the end)."""
        if self._calls is None:
            self._calls = [Program.parse(line, self.tools).calls[0] for line in self._text]
        return self._calls

    @property
    def remaining(self) -> int:
        return len(self._text) - self._next

    def observe(self, step: Any) -> None:
        """Read the record of the step just taken (:class:`~pyql.agent.trajectory.Step`)."""
        self._hinted = step.hint is not None

    def complete(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> LLMReply:
        if self.delay:
            self._sleep(self.delay)
        with self._lock:
            index = self._next
            if index > 0 and index - 1 != self._insisted and self._hinted:
                # the previous call got a hint: insist once, as a model sure of its step would
                # (a result-based hint is given once: pyql.session.HintPolicy)
                self._insisted = index - 1
                index -= 1
            elif index >= len(self._text):
                if self._text:
                    what = f"the gold program has {len(self._text)} calls"
                else:
                    what = self.reason or "there is no gold program"
                raise LLMScriptExhaustedError(f"{what}; call {index + 1} was asked",
                                              model=self.model)
            else:
                self._next += 1
        n = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        thought = f"Step {index + 1} of {len(self._text)} of the gold program."
        if tools and self.mode != "text":
            return LLMReply(text=f"Thought {n} : {thought}",
                            tool_calls=(self._tool_call(self.calls[index], n),),
                            model=self.model, finish_reason="tool_calls", cost=0.0)
        text = f"Thought {n} : {thought}\nAction {n} : {self._text[index]}"
        return LLMReply(text=text, model=self.model, finish_reason="stop", cost=0.0)

    def _tool_call(self, call: Call, n: int) -> ToolCall:
        toolset = TOOLSETS[self.tools]
        params = toolset[call.name].params if call.name in toolset else ()
        names = [p.name for p in params]
        names += [f"arg{i}" for i in range(len(names), len(call.args))]
        arguments = {name: str(arg) for name, arg in zip(names, call.args, strict=False)}
        return ToolCall(id=f"call_{n}", name=call.name,
                        arguments=json.dumps(arguments, ensure_ascii=False))


# -- providers ----------------------------------------------------------------------------------


@runtime_checkable
class LLMProvider(Protocol):
    """Hands out the LLM of each question."""

    #: the spec it was made from (for logs and config)
    spec: str

    def for_item(self, item: EvalItem) -> LLM: ...


class _Wrapping:
    """Applies the run's gate and LLM cache to the LLMs a provider makes."""

    def __init__(self, gate: RateGate | None, llm_cache: Any, *,
                 max_retries: int | None = None) -> None:
        self.gate = gate
        self.llm_cache = llm_cache
        self.max_retries = max_retries

    def wrap(self, llm: LLM, *, gated: bool) -> LLM:
        if gated and self.gate is not None:
            if self.max_retries is None:
                llm = GatedLLM(llm, self.gate)
            else:
                llm = GatedLLM(llm, self.gate, max_retries=self.max_retries)
        if self.llm_cache is not None:
            from pyql.agent.evaluation.caches import CachedLLM

            llm = CachedLLM(llm, self.llm_cache)
        return llm


class SharedLLMProvider:
    """One LLM for every question (an API client is thread-safe)."""

    def __init__(self, llm: LLM, *, spec: str = "", gate: RateGate | None = None,
                 llm_cache: Any = None, max_retries: int | None = None) -> None:
        self.spec = spec or getattr(llm, "model", "shared")
        self.base = llm
        #: the rate gate in front of the client (the run reports its pauses)
        self.gate = gate
        self.llm = _Wrapping(gate, llm_cache, max_retries=max_retries).wrap(llm, gated=True)

    def for_item(self, item: EvalItem) -> LLM:
        return self.llm


class StandInProvider:
    """A fresh stand-in LLM per question (``--llm gold``, ``--llm noisy-gold:RATE``), made by
    the strategy's own ``stand_in(spec, item, *, seed)`` classmethod: each strategy asks its LLM
    different questions, so each knows how to play its own gold model. ``seed`` is the run's
    seed; each question gets :func:`~pyql.agent.evaluation.records.item_seed` of it."""

    def __init__(self, spec: str, *, strategy: str = "queryagent", seed: int = 0,
                 llm_cache: Any = None) -> None:
        from pyql.agent.strategy import get_strategy

        self.spec = spec
        self.strategy = strategy
        self.seed = seed
        kind = get_strategy(strategy)
        stand_in = getattr(kind, "stand_in", None)
        if not callable(stand_in):
            raise LLMSpecError(f"strategy {strategy!r} has no stand-in LLM for --llm {spec}: "
                               "use a model (openai:MODEL) or a replay")
        self._stand_in: Callable[..., LLM] = stand_in
        self._wrap = _Wrapping(None, llm_cache)

    def for_item(self, item: EvalItem) -> LLM:
        llm = self._stand_in(self.spec, item, seed=item_seed(self.seed, item.id))
        return self._wrap.wrap(llm, gated=False)


def no_program_reason(item: EvalItem) -> str:
    """Why a stand-in has nothing to replay for ``item`` (its dataset's ``unsupported``)."""
    why = item.meta.get("unsupported")
    if isinstance(why, (list, tuple)):
        why = ", ".join(map(str, why))
    return "no gold program" + (f" (unsupported: {why})" if why else "")


def noisy_rate(arg: str) -> float:
    """The ``RATE`` of ``noisy-gold:RATE``: a number between 0 and 1, else :class:`LLMSpecError`.
    """
    try:
        rate = float(arg)
    except ValueError:
        raise LLMSpecError(f"noisy-gold:RATE needs a number, not {arg!r}") from None
    if not 0.0 <= rate <= 1.0:
        raise LLMSpecError(f"noisy-gold:RATE needs a rate between 0 and 1, not {rate}")
    return rate


class ReplayProvider:
    """A :class:`~pyql.agent.llm.ReplayLLM` per question from recorded trajectories.

    ``path`` is a trajectories JSONL file (or a run directory holding ``trajectories.jsonl``);
    trajectories are matched by ``meta["id"]`` (or ``meta["qid"]``). When a question was
    recorded more than once, the last complete recording counts. A question without one gets an
    LLM that fails (recorded as the question's error).
    """

    def __init__(self, path: str | os.PathLike[str], *, spec: str = "", check_prompts: bool = False,
                 llm_cache: Any = None) -> None:
        from pyql.agent.trajectory import iter_trajectories

        source = Path(path)
        if source.is_dir():
            source = source / "trajectories.jsonl"
        if not source.is_file():
            raise LLMSpecError(f"replay: no trajectories file at {source}")
        self.path = source
        self.spec = spec or f"replay:{path}"
        self.check_prompts = check_prompts
        self._wrap = _Wrapping(None, llm_cache)
        self.trajectories: dict[str, Any] = {}
        try:
            for trajectory in iter_trajectories(source):
                key = trajectory.meta.get("id", trajectory.meta.get("qid"))
                if key is None:
                    continue
                complete = bool(trajectory.stop_reason)
                if complete or str(key) not in self.trajectories:
                    self.trajectories[str(key)] = trajectory
        except ValueError as exc:
            raise LLMSpecError(f"replay: {exc}") from exc
        if not self.trajectories:
            raise LLMSpecError(f"replay: {source} has no trajectory with a question id "
                               "(meta.id)")

    def for_item(self, item: EvalItem) -> LLM:
        from pyql.agent.llm import ReplayLLM

        trajectory = self.trajectories.get(item.id)
        if trajectory is None:
            return GoldLLM(None, model="replay", reason=f"no recorded trajectory for {item.id}")
        return self._wrap.wrap(ReplayLLM(trajectory, check_prompts=self.check_prompts),
                               gated=False)


# -- parsing ------------------------------------------------------------------------------------

_FORMS = "openai:MODEL, replay:PATH, gold, noisy-gold:RATE"


def parse_llm_spec(spec: str) -> tuple[str, str]:
    """``(kind, argument)`` of a spec; raises :class:`LLMSpecError` for an unknown form.

    >>> parse_llm_spec("openai:gpt-4o-mini"), parse_llm_spec("gold")
    (('openai', 'gpt-4o-mini'), ('gold', ''))
    """
    text = spec.strip()
    kind, sep, arg = text.partition(":")
    kind = kind.strip().lower()
    if kind == "gold" and not sep:
        return "gold", ""
    if kind in ("openai", "replay", "noisy-gold") and sep and arg.strip():
        return kind, arg.strip()
    raise LLMSpecError(f"unknown --llm spec {spec!r}; expected one of: {_FORMS}")


def build_provider(
    spec: str,
    *,
    base_url: str | None = None,
    seed: int = 0,
    strategy: str = "queryagent",
    gate: RateGate | None = None,
    llm_cache: Any = None,
    openai_options: Mapping[str, Any] | None = None,
    max_retries: int | None = None,
) -> LLMProvider:
    """The provider of ``spec`` (see the module docstring). ``strategy`` makes the stand-ins
    (``gold``, ``noisy-gold:RATE``); ``replay:`` and ``openai:`` do not depend on it.
    ``llm_cache`` is an :class:`~pyql.agent.evaluation.caches.LLMCache` or None; ``gate`` applies
    to API clients; ``openai_options`` go to :class:`~pyql.agent.llm.OpenAIChat` (``timeout``:
    seconds per call); ``max_retries`` bounds the retries of one call (the gate's; default 8).
    """
    kind, arg = parse_llm_spec(spec)
    if kind in ("gold", "noisy-gold"):
        if kind == "noisy-gold":
            noisy_rate(arg)
        return StandInProvider(spec, strategy=strategy, seed=seed, llm_cache=llm_cache)
    if kind == "replay":
        return ReplayProvider(arg, spec=spec, llm_cache=llm_cache)
    from pyql.agent.llm import OpenAIChat

    options = {"max_retries": 0, **dict(openai_options or {})}
    llm = OpenAIChat(arg, base_url=base_url, **options)
    return SharedLLMProvider(llm, spec=spec, gate=gate or RateGate(), llm_cache=llm_cache,
                             max_retries=max_retries)


class DeadlineLLM:
    """An LLM with a deadline for the whole question: a call asked after ``seconds`` (from
    construction, i.e. the question's start) raises :class:`~pyql.agent.errors.LLMTimeoutError`,
    so a question against a slow or failing server ends as ``llm_timeout`` instead of running
    on. A call in flight is bounded by the client's own timeout (``--llm-timeout``).

    >>> from pyql.agent.llm import ScriptedLLM
    >>> now = [0.0]
    >>> llm = DeadlineLLM(ScriptedLLM(["a", "b"]), 10, clock=lambda: now[0])
    >>> llm.complete([]).text
    'a'
    >>> now[0] = 11.0
    >>> llm.complete([])
    Traceback (most recent call last):
    ...
    pyql.agent.errors.LLMTimeoutError: the question's deadline of 10s has passed
    """

    def __init__(self, llm: LLM, seconds: float, *, clock: Clock = time.monotonic) -> None:
        if seconds <= 0:
            raise ValueError("a question deadline must be positive")
        self.llm = llm
        self.model = getattr(llm, "model", "")
        self.seconds = seconds
        self._clock = clock
        self._deadline = clock() + seconds

    def __repr__(self) -> str:
        return f"DeadlineLLM({self.llm!r}, {self.seconds:g}s)"

    def __getattr__(self, name: str) -> Any:
        # a stand-in's step hook and records stay reachable
        if name in ("observe", "reconcile"):
            return getattr(self.llm, name)
        raise AttributeError(name)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> LLMReply:
        if self._clock() >= self._deadline:
            raise LLMTimeoutError(f"the question's deadline of {self.seconds:g}s has passed",
                                  model=self.model)
        return self.llm.complete(messages, stop=stop, tools=tools)
