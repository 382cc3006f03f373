"""LLM clients: one protocol, an OpenAI-compatible client, a scripted client and a replay client.

An :class:`LLM` answers ``complete(messages, *, stop=None, tools=None)`` with an
:class:`LLMReply`: the text, the tool calls, token usage, latency and the model. Messages are
OpenAI chat messages (``{"role": ..., "content": ...}``); ``tools`` are OpenAI function-tool
schemas (see :func:`pyql.agent.strategies.queryagent.prompts.tool_schemas`).

- :class:`OpenAIChat` talks to any OpenAI-compatible ``/v1/chat/completions`` server through the
  ``openai`` SDK (imported on first use). The SDK's own retries are off; this client retries
  429/5xx/timeouts/connection errors through :func:`pyql.retrying.retry_call`, with exponential
  backoff and jitter, honouring ``Retry-After``. Time is bounded by the wall clock: ``timeout``
  per attempt, ``deadline`` per call, and the context's deadline (:meth:`OpenAIChat.with_deadline`,
  one per question in an evaluation); running out raises :class:`LLMTimeoutError` with the
  attempts and the seconds spent. Failures become typed :mod:`pyql.agent.errors`. Every call is kept in a bounded
  :attr:`OpenAIChat.history` (no secrets: the key is never recorded).
- :class:`OpenAIEmbeddings` is the same for ``/v1/embeddings`` (relation ranking).
- :class:`ScriptedLLM` replays a fixed list of replies (like DSPy's ``DummyLM``) for tests.
- :class:`ReplayLLM` replays the replies recorded in a saved trajectory.

**Scoring candidates** (choose mode). A client that can score says so with a true
``scores_candidates`` and has ``score(messages, candidates, *, max_tokens=None)``: for each
candidate text, the total log-likelihood (natural log) of the assistant reply being exactly that
text after ``messages`` (:class:`ScoringLLM`). It returns :class:`Scores`, a ``list[float]``
that also carries the tokens and seconds the scoring took, so a
:class:`~pyql.agent.recorder.Recorder` accounts it like any call (:class:`AccountedScore`). A
client that cannot score raises :class:`~pyql.agent.errors.ScoringUnsupportedError`.
:class:`OpenAIChat` scores on a llama.cpp server (in this process, ``--llm local``, or any
``llama-server`` behind ``--base-url``), through its ``/apply-template``, ``/tokenize`` and
``/completion`` routes; see :meth:`OpenAIChat.score` and ``docs/local_llm.md``.

>>> llm = ScriptedLLM(["Thought 1: look.\\nAction 1: get_relation(m.0x)\\nObservation 1: made up"])
>>> reply = llm.complete([{"role": "user", "content": "q"}], stop=["\\nObservation"])
>>> reply.text
'Thought 1: look.\\nAction 1: get_relation(m.0x)'
"""

from __future__ import annotations

import email.utils
import hashlib
import inspect
import json
import logging
import math
import os
import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pyql.agent.calls import ToolCall
from pyql.agent.errors import (
    LLMAuthError,
    LLMBadRequestError,
    LLMContextLengthError,
    LLMError,
    LLMModelNotFoundError,
    LLMRateLimitError,
    LLMReplayMismatchError,
    LLMResponseError,
    LLMScriptExhaustedError,
    LLMServerError,
    LLMTimeoutError,
    ScoringUnsupportedError,
)
from pyql.agent.llm.accounting import PriceTable, TokenCounter, TokenUsage
from pyql.deadline import (
    Budget,
    Deadline,
    DeadlineExceeded,
    call_within,
    charged,
    earliest,
    within,
)
from pyql.deadline import current as current_deadline
from pyql.retrying import Retrying, RetryPolicy, Transient, retry_call

if TYPE_CHECKING:
    from pyql.agent.trajectory import Step, Trajectory

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_EMBEDDING_MODEL",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_DEADLINE",
    "Message",
    "ToolCall",
    "LLMReply",
    "LLM",
    "ScoringLLM",
    "Scores",
    "AccountedScore",
    "WrappedLLM",
    "OpenAIChat",
    "OpenAIEmbeddings",
    "ScriptedLLM",
    "ReplayLLM",
    "apply_stop",
    "sampling_kwargs",
    "prompt_fingerprint",
    "AccountedCall",
]

log = logging.getLogger(__name__)

#: the model used when neither ``model=`` nor ``$PYQL_MODEL`` says otherwise
DEFAULT_MODEL = "gpt-4o-mini"
#: the paper's relation-ranking embedding (appendix B.3: OpenAI embeddings, ada v2)
DEFAULT_EMBEDDING_MODEL = "text-embedding-ada-002"
#: seconds (wall clock) one attempt may take: an agent step's reply is short
DEFAULT_TIMEOUT = 30.0
#: retries of a failed or timed-out attempt (429, 5xx, timeouts, connection errors)
DEFAULT_MAX_RETRIES = 2
#: seconds one ``complete`` call may take in all, retries and backoff included
DEFAULT_DEADLINE = 60.0

Message = Mapping[str, Any]
#: the stop sequences of one call (None: the server's default)
Stop = Sequence[str] | None
#: the tool schemas offered to one call (None: text only)
Tools = Sequence[Mapping[str, Any]] | None
_T = TypeVar("_T")
#: the budget of a call that has no deadline (the attempts and their timeouts bound it)
_UNBOUNDED = 1e9


class LLMReply(BaseModel):
    """What one ``complete`` call returned."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    #: token usage (API-reported, or ``estimated``); None when the client cannot tell
    usage: TokenUsage | None = None
    #: seconds, including retries and backoff
    latency: float = 0.0
    model: str = ""
    finish_reason: str | None = None
    #: US$, when the client has a price table
    cost: float | None = None
    #: how many retries the call needed
    retries: int = 0
    #: the provider's response object (not serialised)
    raw: Any = Field(default=None, exclude=True, repr=False)


@runtime_checkable
class LLM(Protocol):
    """Anything that completes chat messages.

    A client that can constrain its output to a JSON schema (structured outputs) says so with
    a true ``structured_output`` attribute and takes ``response_format=`` (OpenAI's
    ``{"type": "json_schema", ...}``) in :meth:`complete`; the
    :class:`~pyql.agent.recorder.Recorder` passes it only to such clients.
    """

    model: str

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None
                 ) -> LLMReply: ...


@runtime_checkable
class ScoringLLM(LLM, Protocol):
    """An LLM that scores candidate replies (choose mode): ``score`` returns, for each candidate
    text, the total log-likelihood (natural log) of the assistant reply being exactly that text
    after ``messages``, the chat template applied by the server, one shared prompt prefix for
    every candidate. A candidate longer than ``max_tokens`` tokens (when given) scores
    ``-inf``: it cannot be the reply within that cap. ``scores_candidates`` is True when the
    client can; a client that cannot raises :class:`~pyql.agent.errors.ScoringUnsupportedError`.
    """

    scores_candidates: bool

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> list[float]: ...


class Scores(list[float]):
    """What ``score`` returns: one log-likelihood per candidate (a plain ``list[float]`` to
    whoever only wants the numbers), with what scoring cost: ``usage`` (prompt, cached and
    decoded tokens summed over the requests; None when the client cannot tell), ``latency``
    (seconds, retries included), ``model``, ``cost`` (US$, when the client prices its calls),
    ``requests`` (HTTP requests to the model: one per candidate scored), ``retries`` and
    ``tokens`` (each candidate's token count, as the model
    tokenised it; empty when not known).

    >>> s = Scores([-1.5, -0.25], model="m", requests=2)
    >>> s.best(), list(s), s.requests
    (1, [-1.5, -0.25], 2)
    """

    def __init__(self, values: Iterable[float] = (), *, usage: TokenUsage | None = None,
                 latency: float = 0.0, model: str = "", requests: int = 0, retries: int = 0,
                 tokens: Sequence[int] = (), cost: float | None = None) -> None:
        super().__init__(float(v) for v in values)
        self.usage = usage
        self.cost = cost
        self.latency = latency
        self.model = model
        self.requests = requests
        self.retries = retries
        self.tokens = tuple(tokens)

    def best(self) -> int | None:
        """The index of the highest score, the earliest on a tie (None: no candidates)."""
        if not self:
            return None
        return max(range(len(self)), key=lambda i: (self[i], -i))


@runtime_checkable
class WrappedLLM(LLM, Protocol):
    """An LLM that asks another one, ``llm``, for it (the evaluation's rate gate and LLM
    cache): what is copied around a client made like the wrapped one."""

    llm: LLM


def sampling_kwargs(llm: Any, *, max_tokens: int | None = None,
                    temperature: float | None = None) -> dict[str, Any]:
    """The per-request ``max_tokens`` / ``temperature`` that are set and that ``llm.complete``
    takes (the :class:`LLM` protocol does not require them: a client without them keeps its own
    settings)."""
    wanted = {k: v for k, v in (("max_tokens", max_tokens), ("temperature", temperature))
              if v is not None}
    if not wanted:
        return {}
    try:
        params = inspect.signature(llm.complete).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return wanted
    return {k: v for k, v in wanted.items() if k in params}


def apply_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` cut at the first stop sequence (servers that ignore ``stop`` get the same result)."""
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def prompt_fingerprint(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None,
                       ) -> str:
    """sha256 of the prompt (messages and tools), to check a replay sees the recorded prompt."""
    payload = json.dumps({"messages": list(messages), "tools": list(tools or [])},
                         sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class AccountedCall:
    """One LLM call with what it used: the tokens and cost the client reported, else estimated
    with a :class:`~pyql.agent.llm.accounting.TokenCounter` and priced with a price table."""

    reply: LLMReply
    tokens: TokenUsage
    cost: float
    prompt_hash: str
    #: the reply's model, else the client's
    model: str
    #: the call sent a schema (structured output) and ``reply`` is read back from its JSON
    constrained: bool = False
    #: the model's own text (the JSON of a constrained call); ``reply.text`` is what it reads as
    raw_text: str | None = None

    @property
    def text(self) -> str:
        return self.reply.text

    def step_fields(self) -> dict[str, Any]:
        """The LLM fields of the trajectory step that records this call."""
        reply, tokens = self.reply, self.tokens
        return {"reply_text": reply.text, "model": self.model,
                "prompt_tokens": tokens.prompt_tokens,
                "completion_tokens": tokens.completion_tokens,
                "estimated_tokens": tokens.estimated, "cost": self.cost,
                "llm_latency": reply.latency, "retries": reply.retries,
                "prompt_hash": self.prompt_hash, "tool_calls": reply.tool_calls,
                "raw_reply": (self.raw_text if self.raw_text is not None
                              and self.raw_text != reply.text else ""),
                "cached_tokens": tokens.cached_tokens}


@dataclass(frozen=True)
class AccountedScore:
    """One scoring call with what it used (the counterpart of :class:`AccountedCall`):
    ``candidates`` and their ``scores``, the tokens (the server's, or zero when the client
    reports none: a no-model scorer), cost, prompt fingerprint and model."""

    candidates: tuple[str, ...]
    scores: Scores
    tokens: TokenUsage
    cost: float
    prompt_hash: str
    model: str

    @property
    def best(self) -> int | None:
        return self.scores.best()

    def step_fields(self) -> dict[str, Any]:
        """The LLM fields of the trajectory step that records this call; ``data["scored"]``
        holds the candidates and their scores, which is what :class:`ReplayLLM` replays."""
        tokens = self.tokens
        return {"model": self.model, "prompt_tokens": tokens.prompt_tokens,
                "completion_tokens": tokens.completion_tokens,
                "estimated_tokens": tokens.estimated, "cost": self.cost,
                "llm_latency": self.scores.latency, "retries": self.scores.retries,
                "prompt_hash": self.prompt_hash, "cached_tokens": tokens.cached_tokens,
                "data": {"scored": scored_record(self.candidates, self.scores)}}


def scored_record(candidates: Sequence[str], scores: Sequence[float]) -> dict[str, Any]:
    """The JSON of one scoring call kept in a step's ``data["scored"]`` (``-inf`` as None:
    JSON has no infinity)."""
    return {"candidates": list(candidates),
            "scores": [None if math.isinf(v) and v < 0 else float(v) for v in scores]}


# -- OpenAI-compatible clients ------------------------------------------------------------------


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _is_context_length(code: str | None, message: str) -> bool:
    text = message.lower()
    return code == "context_length_exceeded" or "context length" in text or (
        "maximum context" in text) or "too many tokens" in text


class _OpenAIBase(Retrying):
    """Configuration, lazy SDK client, time bounds and retries shared by chat and embeddings."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        deadline: float | None,
        backoff_base: float,
        backoff_max: float,
        max_retry_after: float,
        sleep: Callable[[float], None],
        rng: random.Random | None,
        client: Any,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries!r}")
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be positive, got {deadline!r}")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if self._api_key is None and client is None:
            if self.base_url is None:
                raise LLMAuthError(f"no API key for {model}: pass api_key= or set OPENAI_API_KEY",
                                   model=model)
            self._api_key = "unused"  # local OpenAI-compatible servers often need none
        self.timeout = float(timeout)
        self.deadline = deadline
        self.retry_policy = RetryPolicy(retries=max_retries, backoff=backoff_base,
                                   backoff_max=backoff_max, max_retry_after=max_retry_after)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client = client

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.OpenAI(api_key=self._api_key, base_url=self.base_url,
                                         timeout=self.timeout, max_retries=0)
        return self._client

    def with_deadline(self, seconds: float | Deadline | None) -> AbstractContextManager[
            Deadline | None]:
        """A context in which every call (of any client, in this thread) ends by the deadline,
        retries and backoff included — an evaluation's budget for one question::

            with llm.with_deadline(120):
                agent.run(question)

        An enclosing deadline that ends sooner stays in force; ``None`` changes nothing.
        """
        return within(seconds)

    def _translate(self, exc: Exception) -> tuple[LLMError, bool, float | None]:
        """(typed error, retryable?, server-advised delay) for an SDK exception."""
        import openai

        model = self.model
        if isinstance(exc, openai.APITimeoutError):
            return (LLMTimeoutError(f"{model}: request timed out", model=model,
                                    timeout=self.timeout), True, None)
        if isinstance(exc, openai.APIConnectionError):
            return LLMServerError(f"{model}: connection failed: {exc}", model=model), True, None
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMResponseError(f"{model}: malformed response: {exc}", model=model,
                                    status=exc.status_code), False, None
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            code = exc.code
            message = f"{model}: HTTP {status}: {_error_message(exc)}"
            if isinstance(exc, openai.RateLimitError) or status == 429:
                after = _retry_after(exc.response.headers)
                retry = code != "insufficient_quota"
                return (LLMRateLimitError(message, model=model, status=status, code=code,
                                          retry_after=after), retry, after)
            if status in (401, 403):
                return LLMAuthError(message, model=model, status=status, code=code), False, None
            if status == 404:
                return (LLMModelNotFoundError(message, model=model, status=status, code=code),
                        False, None)
            if status >= 500:
                after = _retry_after(exc.response.headers)
                return LLMServerError(message, model=model, status=status, code=code), True, after
            if _is_context_length(code, _error_message(exc)):
                return (LLMContextLengthError(message, model=model, status=status, code=code),
                        False, None)
            retry = status in (408, 409)
            return LLMBadRequestError(message, model=model, status=status, code=code), retry, None
        if isinstance(exc, (json.JSONDecodeError, ValueError, TypeError, AttributeError)):
            return LLMResponseError(f"{model}: malformed response: {exc}", model=model), False, None
        raise exc

    def _call(self, fn: Callable[[float], _T]) -> tuple[_T, int]:
        """``fn(seconds)`` with bounded retries and time; returns (result, retries used).

        Each attempt gets ``timeout`` seconds of wall clock (cut to the time left), enforced
        with :func:`~pyql.deadline.call_within`, so a server that never answers or sends its
        reply a byte at a time cannot hold it longer. The whole call ends by the earlier of
        ``deadline`` (this client's budget per call) and the context's deadline
        (:meth:`with_deadline`); the call's time is charged to the context's deadline when it
        is a :class:`~pyql.deadline.Budget` (a question's LLM time, ``--deadline``).
        """
        import openai
        import pydantic

        context = current_deadline()
        budget: Deadline

        def attempt() -> _T:
            seconds = budget.bound(self.timeout)
            try:
                return call_within(lambda: fn(seconds), seconds, name="pyql-llm")
            except DeadlineExceeded:
                raise Transient(LLMTimeoutError(
                    f"{self.model}: no reply within {seconds:.3g}s", model=self.model,
                    timeout=self.timeout)) from None
            except (openai.OpenAIError, json.JSONDecodeError, pydantic.ValidationError) as exc:
                error, retryable, advised = self._translate(exc)
                if not retryable:
                    raise error from exc
                raise Transient(error, retry_after=advised) from exc

        def give_up(error: BaseException, attempts: int) -> BaseException:
            if not isinstance(error, LLMTimeoutError):
                return error
            elapsed = budget.elapsed()
            ran_out = budget.seconds < _UNBOUNDED and budget.remaining() <= 0
            if not ran_out:  # every attempt timed out: the server did not answer
                return LLMTimeoutError(
                    f"{self.model}: no reply after {attempts} attempt(s) ({self.timeout:g}s "
                    f"per attempt, {elapsed:.1f}s)", model=self.model, timeout=self.timeout,
                    attempts=attempts, elapsed=elapsed)
            # the budget ran out (perhaps before this call began): not the server's fault
            whose = "the" if budget is context else "this call's"
            used = "of LLM time used" if isinstance(budget, Budget) else "used"
            return LLMTimeoutError(
                f"{self.model}: {whose} {budget.seconds:g}s deadline ran out ({elapsed:.1f}s "
                f"{used}; {attempts} attempt(s) of this call)", model=self.model,
                timeout=self.timeout, attempts=attempts, elapsed=elapsed,
                deadline=budget.seconds)

        with charged():  # a question's --deadline (a Budget) counts the time of LLM calls only
            budget = self._budget()
            if budget.expired:
                raise give_up(LLMTimeoutError("", model=self.model), 0)
            return retry_call(attempt, self.retry_policy, sleep=self._sleep, rng=self._rng,
                              deadline=budget, give_up=give_up, name=self.model)

    def _budget(self) -> Deadline:
        """The deadline of one call: the context's, cut to this client's ``deadline``."""
        own = Deadline(self.deadline) if self.deadline is not None else None
        return earliest(current_deadline(), own) or Deadline(_UNBOUNDED)


def _timings_cached(response: Any) -> int:
    """Prompt tokens llama.cpp's server took from its cache (its response's
    ``timings.cache_n``), for a usage without ``prompt_tokens_details``."""
    timings = (getattr(response, "model_extra", None) or {}).get("timings")
    value = timings.get("cache_n") if isinstance(timings, dict) else None
    return int(value) if isinstance(value, (int, float)) and value > 0 else 0


def _refused_parameter(exc: Any, call: Mapping[str, Any]) -> str | None:
    """``stop`` or ``response_format`` when a 400 names one the request has (the server does
    not take it), else None."""
    message = _error_message(exc)
    for name in ("stop", "response_format"):
        if name in call and (getattr(exc, "param", None) == name or f"'{name}'" in message):
            return name
    return None


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(getattr(exc, "message", exc))


class OpenAIChat(_OpenAIBase):
    """A chat model behind an OpenAI-compatible API (OpenAI, Azure-compatible proxies, vLLM,
    Ollama, llama.cpp server, ...).

    ``model``, ``base_url`` and the key come from the arguments, else ``$PYQL_MODEL``,
    ``$OPENAI_BASE_URL`` and ``$OPENAI_API_KEY``. Retries: up to ``max_retries`` on 429, 5xx,
    408/409, timeouts and connection errors; the delay is the server's ``Retry-After`` when
    given (a wait longer than ``max_retry_after`` is not attempted), else exponential backoff
    with jitter. ``sleep`` and ``rng`` are injectable for tests.

    Time bounds (wall clock, so a server that never answers or drips its reply a byte at a time
    is cut off too): each attempt gets ``timeout`` seconds; one call ends after ``deadline``
    seconds in all (``None``: only the attempts bound it); and inside
    ``with llm.with_deadline(seconds):`` every call ends by that deadline. The defaults (30 s,
    2 retries, 60 s) cap a hung server at about a minute per call.

    Stop sequences are sent (at most 4, the API's limit) and also applied to the returned text;
    a server that rejects ``stop`` (some reasoning models) is retried once without it and
    remembered.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        deadline: float | None = DEFAULT_DEADLINE,
        price_table: PriceTable | Mapping[str, Any] | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        parallel_tool_calls: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        token_counter: TokenCounter | None = None,
        history_size: int = 50,
        structured_output: bool = True,
        client: Any = None,
    ) -> None:
        super().__init__(
            model or os.environ.get("PYQL_MODEL") or DEFAULT_MODEL,
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
            deadline=deadline, backoff_base=backoff_base, backoff_max=backoff_max,
            max_retry_after=max_retry_after, sleep=sleep, rng=rng, client=client,
        )
        self.price_table = PriceTable.of(price_table)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.parallel_tool_calls = parallel_tool_calls
        self.extra_body = dict(extra_body or {})
        self.token_counter = (token_counter if token_counter is not None
                              else TokenCounter(model=self.model))
        self._stop_supported = True
        #: the server takes ``response_format`` (JSON schema); False after it refused one
        self.structured_output = structured_output
        #: the last ``history_size`` calls: model, messages, reply, usage, cost, latency
        self.history: deque[dict[str, Any]] = deque(maxlen=history_size)
        #: (can score, why not), once :meth:`scoring_support` asked the server
        self._scoring: tuple[bool, str] | None = None

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        """One chat completion; ``max_tokens`` / ``temperature`` override the client's own
        settings for this request."""
        import openai

        start = time.perf_counter()
        kwargs: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        temperature = self.temperature if temperature is None else temperature
        if temperature is not None:
            kwargs["temperature"] = temperature
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if tools:
            kwargs["tools"] = [dict(t) for t in tools]
            if self.parallel_tool_calls is not None:
                kwargs["parallel_tool_calls"] = self.parallel_tool_calls
        extra = self._request_extra()
        if extra:
            kwargs["extra_body"] = extra
        if response_format is not None and self.structured_output:
            kwargs["response_format"] = dict(response_format)
        stops = [s for s in (stop or ()) if s][:4]

        def create(seconds: float) -> Any:
            call = dict(kwargs, timeout=seconds)
            if stops and self._stop_supported:
                call["stop"] = stops
            while True:
                try:
                    return self.client.chat.completions.create(**call)
                except openai.BadRequestError as exc:
                    refused = _refused_parameter(exc, call)
                    if refused is None:
                        raise
                    call.pop(refused)
                    if refused == "stop":
                        log.info("%s does not accept stop sequences; they are applied locally",
                                 self.model)
                        self._stop_supported = False
                    else:
                        log.warning("%s does not accept response_format: replies are not "
                                    "constrained", self.model)
                        self.structured_output = False

        response, retries = self._call(create)
        reply = self._reply(response, messages, tools, stops, retries,
                            time.perf_counter() - start)
        self.history.append({
            "time": time.time(), "model": reply.model, "messages": [dict(m) for m in messages],
            "tools": len(tools or ()), "text": reply.text,
            "tool_calls": [c.model_dump() for c in reply.tool_calls],
            "usage": reply.usage.model_dump() if reply.usage else None, "cost": reply.cost,
            "latency": reply.latency, "retries": retries,
        })
        log.debug("%s: %d+%d tokens, $%.6f, %.2fs, %d retries", reply.model,
                  reply.usage.prompt_tokens if reply.usage else -1,
                  reply.usage.completion_tokens if reply.usage else -1, reply.cost or 0.0,
                  reply.latency, retries)
        return reply

    def _reply(self, response: Any, messages: Sequence[Message],
               tools: Sequence[Mapping[str, Any]] | None, stops: list[str], retries: int,
               latency: float) -> LLMReply:
        try:
            choices = response.choices
            if not choices:
                raise LLMResponseError(f"{self.model}: the response has no choices", model=self.model)
            choice = choices[0]
            message = choice.message
            text = apply_stop(message.content or "", stops)
            calls = tuple(
                ToolCall(id=c.id or f"call_{i}", name=c.function.name,
                         arguments=c.function.arguments or "")
                for i, c in enumerate(message.tool_calls or ())
                if getattr(c, "function", None) is not None
            )
            model = response.model or self.model
            usage = self._usage(response.usage, messages, tools, text, calls,
                                _timings_cached(response))
        except (AttributeError, TypeError) as exc:
            raise LLMResponseError(f"{self.model}: malformed response: {exc}",
                                   model=self.model) from exc
        cost = self.price_table.cost(model, usage.prompt_tokens, usage.completion_tokens,
                                     usage.cached_tokens)
        return LLMReply(text=text, tool_calls=calls, usage=usage, latency=latency, model=model,
                        finish_reason=choice.finish_reason, cost=cost, retries=retries,
                        raw=response)

    def _usage(self, usage: Any, messages: Sequence[Message],
               tools: Sequence[Mapping[str, Any]] | None, text: str,
               calls: tuple[ToolCall, ...], timings_cached: int = 0) -> TokenUsage:
        if usage is not None and usage.prompt_tokens is not None:
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or timings_cached
            return TokenUsage(prompt_tokens=usage.prompt_tokens,
                              completion_tokens=usage.completion_tokens or 0, cached_tokens=cached)
        counter = self.token_counter
        out = text + "".join(c.name + c.arguments for c in calls)
        return TokenUsage(prompt_tokens=counter.count_messages(messages, tools),
                          completion_tokens=counter.count(out), estimated=True)

    # -- scoring candidates (choose mode) ---------------------------------------------------------
    @property
    def scores_candidates(self) -> bool:
        """Whether :meth:`score` works on this server (asked once: :meth:`scoring_support`)."""
        return self.scoring_support()[0]

    def _server_root(self) -> str | None:
        """The server's root URL (``base_url`` without its ``/v1``); None for OpenAI's API."""
        if not self.base_url:
            return None
        root = self.base_url.rstrip("/")
        return root[:-3] if root.endswith("/v1") else root

    def scoring_support(self) -> tuple[bool, str]:
        """(can score, why not): whether the server has llama.cpp's routes that
        :meth:`score` needs, asked once with an ``/apply-template`` request and remembered. A
        server that answers 404 (or 405, 501) there does not score; a server that cannot be
        reached raises the usual typed error."""
        known = self._scoring
        if known is not None:
            return known
        root = self._server_root()
        if root is None:
            known = (False, "OpenAI's API returns log-probabilities only of the tokens it "
                            "generates, not of a given reply")
        else:
            try:
                got, _ = self._native("/apply-template",
                                      {"messages": [{"role": "user", "content": "ping"}]})
            except (LLMModelNotFoundError, LLMBadRequestError) as exc:
                if exc.status not in (400, 404, 405, 501):
                    raise
                known = (False, f"the server has no llama.cpp /apply-template route (HTTP "
                                f"{exc.status}): it cannot return the log-probabilities of a "
                                "given reply")
            else:
                known = ((True, "") if isinstance(got, dict) and isinstance(got.get("prompt"), str)
                         else (False, "the server's /apply-template answer has no prompt"))
        self._scoring = known
        return known

    def _request_extra(self) -> Mapping[str, Any]:
        """The server-specific fields every request of this call carries (``extra_body``; a
        subclass may add per-call ones, such as the slot a local server decodes in)."""
        return self.extra_body

    def _native(self, path: str, body: Mapping[str, Any]) -> tuple[Any, int]:
        """One JSON request to a route of the server's root (llama.cpp's own API), with this
        client's key, retries and time bounds: (the parsed JSON answer, retries used)."""
        url = f"{self._server_root()}{path}"

        def post(seconds: float) -> Any:
            return self.client.post(url, body={"model": self.model, **body}, cast_to=object,
                                    options={"timeout": seconds})

        answer, retries = self._call(post)
        return answer, retries

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> Scores:
        """Each candidate's total log-likelihood as the whole assistant reply after
        ``messages`` (natural log; see :class:`ScoringLLM`), computed exactly by a llama.cpp
        server:

        1. ``/apply-template`` renders ``messages`` with the model's chat template, ending with
           the assistant turn's header (the prompt a chat completion would see);
        2. ``/tokenize`` gives the tokens of the prompt and of prompt + candidate: the
           candidate's tokens are the latter's after the prompt's (its tokenisation in context);
        3. one ``/completion`` per candidate sends the prompt with a grammar that allows only
           those tokens (``root ::= <[id1]> <[id2]> ...``), ``n_probs: 1`` and
           ``post_sampling_probs: false``: the server reports each forced token's
           log-probability under the model's own distribution (before the grammar), and then
           the end-of-generation token the finished grammar forces (the reply ends there). The
           score is their sum.

        Cost: the prompt is processed once (every later candidate's request takes it from the
        slot's prompt cache, all but its last token), plus ``k + 1`` decoded tokens for a
        candidate of ``k`` tokens; the usage reports exactly that (``prompt_tokens`` /
        ``cached_tokens`` / ``completion_tokens`` summed over the requests). A candidate of
        more than ``max_tokens`` tokens scores ``-inf`` without a request. A server without
        these routes raises :class:`~pyql.agent.errors.ScoringUnsupportedError`.
        """
        texts = list(candidates)
        if not texts:
            return Scores([], model=self.model)
        if any(not isinstance(t, str) or not t for t in texts):
            raise ValueError("every candidate must be a non-empty string")
        supported, reason = self.scoring_support()
        if not supported:
            raise ScoringUnsupportedError(f"{self.model} cannot score candidates: {reason}",
                                          model=self.model, reason=reason)
        start = time.perf_counter()
        retried = [0]

        def native(path: str, body: Mapping[str, Any]) -> Any:
            answer, retries = self._native(path, body)
            retried[0] += retries
            return answer

        templated = native("/apply-template", {"messages": [dict(m) for m in messages]})
        prompt = templated.get("prompt") if isinstance(templated, dict) else None
        if not isinstance(prompt, str):
            raise LLMResponseError(f"{self.model}: /apply-template returned no prompt",
                                   model=self.model)
        prefix = self._token_ids(native, prompt)
        values: list[float] = []
        lengths: list[int] = []
        prompt_tokens = cached = decoded = requests = 0
        for text in texts:
            ids = self._token_ids(native, prompt + text)
            if ids[:len(prefix)] == prefix:
                ids = ids[len(prefix):]
            else:  # the candidate's first token merged with the prompt's last: alone, then
                ids = self._token_ids(native, text)
            lengths.append(len(ids))
            if not ids or (max_tokens is not None and len(ids) > max_tokens):
                values.append(-math.inf)
                continue
            answer = native("/completion", {
                "prompt": prompt, "grammar": "root ::= " + " ".join(f"<[{i}]>" for i in ids),
                "n_probs": 1, "post_sampling_probs": False, "n_predict": len(ids) + 1,
                "temperature": 0.0, "cache_prompt": True, "stream": False,
                **self._request_extra()})
            requests += 1
            values.append(self._forced_logprob(answer, ids, text))
            timings = answer.get("timings") or {}
            prompt_tokens += int(answer.get("tokens_evaluated") or 0)
            cached += int(timings.get("cache_n") or 0)
            decoded += int(answer.get("tokens_predicted") or 0)
        usage = TokenUsage(prompt_tokens=prompt_tokens, completion_tokens=decoded,
                           cached_tokens=cached)
        latency = time.perf_counter() - start
        self.history.append({
            "time": time.time(), "model": self.model, "messages": [dict(m) for m in messages],
            "tools": 0, "text": "", "tool_calls": [], "candidates": texts, "scores": values,
            "usage": usage.model_dump(), "cost": 0.0, "latency": latency,
            "retries": retried[0]})
        cost = self.price_table.cost(self.model, usage.prompt_tokens, usage.completion_tokens,
                                     usage.cached_tokens)
        return Scores(values, usage=usage, latency=latency, model=self.model, cost=cost,
                      requests=requests, retries=retried[0], tokens=lengths)

    def _token_ids(self, native: Callable[[str, Mapping[str, Any]], Any], text: str
                   ) -> list[int]:
        answer = native("/tokenize", {"content": text, "add_special": False,
                                      "parse_special": True})
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise LLMResponseError(f"{self.model}: /tokenize returned no token ids",
                                   model=self.model)
        return tokens

    def _forced_logprob(self, answer: Any, ids: Sequence[int], text: str) -> float:
        """The sum of the log-probabilities a ``/completion`` reports for the forced tokens
        ``ids`` and the end-of-generation token after them."""
        probs = answer.get("completion_probabilities") if isinstance(answer, dict) else None
        if not isinstance(probs, list) or len(probs) != len(ids) + 1 or (
                [p.get("id") for p in probs[:len(ids)]] != list(ids)):
            got = [p.get("id") for p in probs] if isinstance(probs, list) else None
            raise LLMResponseError(
                f"{self.model}: scoring {text!r}: the server did not decode the forced tokens "
                f"{list(ids)} then an end of generation (got {got}, stop "
                f"{answer.get('stop_type') if isinstance(answer, dict) else None!r})",
                model=self.model)
        try:
            return math.fsum(float(p["logprob"]) for p in probs)
        except (KeyError, TypeError, ValueError) as exc:
            raise LLMResponseError(f"{self.model}: a token without a logprob: {exc}",
                                   model=self.model) from exc

    def inspect_history(self, n: int = 1) -> str:
        """The last ``n`` calls as readable text (messages, reply, usage)."""
        parts = []
        for record in list(self.history)[-n:]:
            lines = [f"=== {record['model']} ({record['latency']:.2f}s, "
                     f"{record['retries']} retries, ${record['cost'] or 0:.6f}) ==="]
            for m in record["messages"]:
                lines.append(f"[{m.get('role')}] {m.get('content') or ''}")
                for c in m.get("tool_calls") or ():
                    lines.append(f"  -> {c['function']['name']}({c['function']['arguments']})")
            lines.append(f"[reply] {record['text']}")
            for c in record["tool_calls"]:
                lines.append(f"  -> {c['name']}({c['arguments']})")
            lines.append(f"[usage] {record['usage']}")
            parts.append("\n".join(lines))
        return "\n\n".join(parts)


class OpenAIEmbeddings(_OpenAIBase):
    """Text embeddings from an OpenAI-compatible ``/v1/embeddings`` (same retries and errors as
    :class:`OpenAIChat`). ``embed(texts)`` returns one vector per text, batched."""

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        deadline: float | None = DEFAULT_DEADLINE,
        batch_size: int = 512,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(
            model, base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
            deadline=deadline, backoff_base=backoff_base, backoff_max=backoff_max, max_retry_after=max_retry_after,
            sleep=sleep, rng=rng, client=client,
        )
        self.batch_size = batch_size
        #: tokens reported by the API so far
        self.prompt_tokens = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = [t if t else " " for t in texts[i:i + self.batch_size]]

            def create(seconds: float, batch: list[str] = batch) -> Any:
                return self.client.embeddings.create(input=batch, model=self.model,
                                                     encoding_format="float", timeout=seconds)

            response, _ = self._call(create)
            try:
                rows = sorted(response.data, key=lambda d: d.index)
                vectors = [list(map(float, d.embedding)) for d in rows]
            except (AttributeError, TypeError, ValueError) as exc:
                raise LLMResponseError(f"{self.model}: malformed embeddings: {exc}",
                                       model=self.model) from exc
            if len(vectors) != len(batch):
                raise LLMResponseError(
                    f"{self.model}: {len(vectors)} embeddings for {len(batch)} texts",
                    model=self.model)
            usage = getattr(response, "usage", None)
            self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
            out.extend(vectors)
        return out


# -- offline clients ----------------------------------------------------------------------------

ScriptedReply = str | LLMReply | Exception | Sequence[Any] | Mapping[str, Any]


def _tool_call(value: Any, index: int) -> ToolCall:
    if isinstance(value, ToolCall):
        return value
    if isinstance(value, Mapping):
        if "function" in value:  # OpenAI wire shape
            fn = value["function"]
            return ToolCall(id=value.get("id", f"call_{index}"), name=fn["name"],
                            arguments=_arguments(fn.get("arguments", "{}")))
        return ToolCall(id=value.get("id", f"call_{index}"), name=value["name"],
                        arguments=_arguments(value.get("arguments", "{}")))
    name, arguments = value
    return ToolCall(id=f"call_{index}", name=name, arguments=_arguments(arguments))


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _Playback:
    """The cursor of a client that plays its replies in order (scripted or replayed)."""

    model: str
    _played: Sequence[Any]
    _next: int

    @property
    def remaining(self) -> int:
        return len(self._played) - self._next

    def _take(self, holder: str, kind: str) -> Any:
        """The next reply; :class:`LLMScriptExhaustedError` when ``holder`` has no more."""
        if self._next >= len(self._played):
            raise LLMScriptExhaustedError(
                f"{holder} has {len(self._played)} {kind}; reply {self._next + 1} was asked",
                model=self.model)
        reply = self._played[self._next]
        self._next += 1
        return reply


class ScriptedLLM(_Playback):
    """Returns scripted replies in order (DSPy's ``DummyLM`` idea) and records every request.

    A reply is: a string (text), a list of tool calls (``ToolCall``, ``{"name", "arguments"}``,
    or ``(name, arguments)`` with arguments a dict or raw JSON text), a dict
    ``{"text": ..., "tool_calls": [...]}``, a ready :class:`LLMReply`, or an exception to raise.
    Stop sequences are applied to text replies. Usage is left to the caller's token counter.

    ``scores``: the lists that :meth:`score` returns, in order (each as long as the candidates
    it is asked about); given, the client ``scores_candidates``, else ``score`` raises
    :class:`~pyql.agent.errors.ScoringUnsupportedError`.
    """

    def __init__(self, replies: Iterable[ScriptedReply], *, model: str = "scripted",
                 structured_output: bool = False,
                 scores: Iterable[Sequence[float]] | None = None) -> None:
        self.model = model
        self._played = list(replies)
        self._next = 0
        self._scores = None if scores is None else [list(map(float, s)) for s in scores]
        self._scored = 0
        #: score() works (a script of scores was given)
        self.scores_candidates = self._scores is not None
        #: takes ``response_format`` (the script then plays a server that honours schemas)
        self.structured_output = structured_output
        #: every request: {"messages", "stop", "tools", "response_format"}, and
        #: ``max_tokens`` / ``temperature`` when the request set them
        self.calls: list[dict[str, Any]] = []

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        call: dict[str, Any] = {"messages": [dict(m) for m in messages], "stop": list(stop or ()),
                                "tools": list(tools or ()), "response_format": response_format}
        call.update((k, v) for k, v in (("max_tokens", max_tokens), ("temperature", temperature))
                    if v is not None)
        self.calls.append(call)
        reply = self._take("the script", "replies")
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, LLMReply):
            return reply
        if isinstance(reply, str):
            return LLMReply(text=apply_stop(reply, stop), model=self.model, finish_reason="stop")
        if isinstance(reply, Mapping):
            calls = tuple(_tool_call(c, i) for i, c in enumerate(reply.get("tool_calls", ())))
            return LLMReply(text=apply_stop(reply.get("text", ""), stop), tool_calls=calls,
                            model=self.model, finish_reason="tool_calls" if calls else "stop")
        calls = tuple(_tool_call(c, i) for i, c in enumerate(reply))
        return LLMReply(tool_calls=calls, model=self.model, finish_reason="tool_calls")

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> Scores:
        """The next scripted list of scores (recorded in :attr:`calls` with ``candidates``)."""
        if self._scores is None:
            raise ScoringUnsupportedError(f"{self.model}: the script has no scores",
                                          model=self.model, reason="no scores were scripted")
        self.calls.append({"messages": [dict(m) for m in messages],
                           "candidates": list(candidates), "max_tokens": max_tokens})
        done = self._scored
        self._scored += 1
        if done >= len(self._scores):
            raise LLMScriptExhaustedError(
                f"the script has {len(self._scores)} score lists; list {done + 1} was asked",
                model=self.model)
        values = self._scores[done]
        if len(values) != len(candidates):
            raise ValueError(f"scripted score list {done + 1} has {len(values)} scores for "
                             f"{len(candidates)} candidates")
        return Scores(values, model=self.model, requests=len(values))


class ReplayLLM(_Playback):
    """Replays the LLM replies recorded in a trajectory (a JSONL path — its ``index``-th
    trajectory —, a :class:`~pyql.agent.trajectory.Trajectory`, or its steps).

    With ``check_prompts=True`` each request must have the recorded prompt fingerprint
    (:func:`prompt_fingerprint`), so a replay proves the run is reproducible; a difference
    raises :class:`LLMReplayMismatchError`. A run that ended because its prompt outgrew the
    context window replays that ending too (:class:`LLMContextLengthError` after the steps).
    """

    def __init__(self, source: str | os.PathLike[str] | Trajectory | Sequence[Step | Mapping[str, Any]],
                 *, check_prompts: bool = False, index: int = 0) -> None:
        from pyql.agent.trajectory import Step, Trajectory

        stop_reason = ""
        if isinstance(source, (str, os.PathLike)):
            source = Trajectory.load(Path(source), index)
        if isinstance(source, Trajectory):
            steps = list(source.steps)
            stop_reason = source.stop_reason
        else:
            steps = [s if isinstance(s, Step) else Step.model_validate(s) for s in source]
        # the steps that recorded an LLM call (Readi's instantiations, SRP's retrievals... made
        # none): a call has the model's name, whatever the model wrote
        self._played = []
        for s in steps:
            if s.model or s.reply_text or s.tool_calls or "scored" in s.data:
                self._played.append(s)
            again = s.data.get("regenerated")
            if isinstance(again, str):  # the original's second call within the step
                self._played.append(s.model_copy(update={
                    "reply_text": again, "tool_calls": (), "prompt_hash": "", "prompt_tokens": 0,
                    "completion_tokens": 0, "cached_tokens": 0, "cost": 0.0}))
        self._stop_reason = stop_reason
        self.model = next((s.model for s in self._played if s.model), "replay")
        self.check_prompts = check_prompts
        self._next = 0
        #: the run recorded scoring calls (choose mode): :meth:`score` replays them
        self.scores_candidates = any("scored" in s.data for s in self._played)

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        if self.remaining <= 0 and self._stop_reason == "context_length":
            raise LLMContextLengthError("the recorded run outgrew the context window here",
                                        model=self.model)
        step = self._take("the trajectory", "LLM replies")
        if "scored" in step.data:
            raise LLMReplayMismatchError(
                f"step {step.n}: the run scored candidates here; a reply was asked",
                model=self.model)
        if self.check_prompts and step.prompt_hash:
            got = prompt_fingerprint(messages, tools)
            if got != step.prompt_hash:
                raise LLMReplayMismatchError(
                    f"step {step.n}: the prompt differs from the recorded one", model=self.model)
        usage = TokenUsage(prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens,
                           cached_tokens=step.cached_tokens, estimated=step.estimated_tokens)
        return LLMReply(text=step.reply_text, tool_calls=tuple(step.tool_calls), usage=usage,
                        model=step.model or self.model, cost=step.cost, finish_reason="replay")

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> Scores:
        """The scores the run recorded at this call (a step's ``data["scored"]``), with its
        usage; the candidates must be the recorded ones, in the recorded order, else
        :class:`LLMReplayMismatchError` (a recorded ``None`` score is ``-inf``)."""
        if self.remaining <= 0 and self._stop_reason == "context_length":
            raise LLMContextLengthError("the recorded run outgrew the context window here",
                                        model=self.model)
        step = self._take("the trajectory", "LLM replies")
        scored = step.data.get("scored")
        if not isinstance(scored, Mapping):
            raise LLMReplayMismatchError(
                f"step {step.n}: the run asked for a reply here; candidates were scored",
                model=self.model)
        if list(scored.get("candidates") or ()) != list(candidates):
            raise LLMReplayMismatchError(
                f"step {step.n}: the candidates differ from the recorded ones", model=self.model)
        if self.check_prompts and step.prompt_hash:
            if prompt_fingerprint(messages) != step.prompt_hash:
                raise LLMReplayMismatchError(
                    f"step {step.n}: the prompt differs from the recorded one", model=self.model)
        usage = TokenUsage(prompt_tokens=step.prompt_tokens,
                           completion_tokens=step.completion_tokens,
                           cached_tokens=step.cached_tokens, estimated=step.estimated_tokens)
        values = [-math.inf if v is None else float(v) for v in scored.get("scores") or ()]
        return Scores(values, usage=usage, model=step.model or self.model, requests=0,
                      cost=step.cost)
