"""One question's records, shared by every strategy: accounted (and constrained) LLM calls, timed
backend work, typed steps, and the callbacks that fire once per step.

A strategy asks the model through :meth:`Recorder.llm` and records what happened with
:meth:`Recorder.add`; the recorder keeps the :class:`~pyql.agent.llm.accounting.Usage` (calls, tokens
as the server reported them or estimated, cost, cached tokens, constrained calls, parse failures,
KB/DB queries, guideline triggers) and calls the step callbacks — the caller's live view
(``on_step``) and a stand-in LLM's ``observe`` hook — in one place, so a strategy, built-in or
third-party, gets correct accounting by using it and never sees a stand-in.

::

    rec = Recorder(llm, question, counter=counter, price_table=prices, constrain="auto")
    call = rec.llm(messages, format=answers_format())      # AccountedCall: reply, tokens, cost
    answers, seconds, queries = rec.env(lambda: program.execute(kb), backend=kb)
    rec.add(Step(n=rec.next_n, kind="answer", ..., **call.step_fields()))
    rec.usage, rec.steps

Choose mode scores candidates instead: ``scored = rec.score(messages, candidates)`` (an
:class:`~pyql.agent.llm.clients.AccountedScore`: the scores, their tokens, the best index), counted as an
LLM call and a ``scoring_calls`` one; ``Step(..., **scored.step_fields())`` keeps the candidates
and scores in ``data["scored"]``, which a replay returns.

With constraints on (:func:`~pyql.agent.llm.structured.constrain_level`), a call with a
:class:`~pyql.agent.llm.structured.ReplyFormat` sends its schema and reads the JSON reply back as the
text (or tool call) the strategy parses; the model's raw JSON is kept in ``call.raw_text``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pyql.agent.errors import ScoringUnsupportedError
from pyql.agent.llm.accounting import PriceTable, TokenCounter, TokenUsage, Usage, UsageTally
from pyql.agent.llm.clients import (
    LLM,
    AccountedCall,
    AccountedScore,
    LLMReply,
    Message,
    Scores,
    ToolCall,
    prompt_fingerprint,
    sampling_kwargs,
    scored_record,
)
from pyql.agent.llm.structured import (
    ConstrainLevel,
    ConstrainRefusedError,
    ReplyFormat,
    constrain_level,
)
from pyql.agent.trajectory import Step

__all__ = ["Choice", "Recorder", "StepCallback"]

StepCallback = Callable[[Step], None]
#: the most a constrained call's ``max_tokens`` is raised to, to hold its schema's longest reply
#: (:meth:`~pyql.agent.llm.structured.ReplyFormat.token_bound`)
BOUND_CEILING = 4096
_T = TypeVar("_T")


@dataclass(frozen=True)
class Choice:
    """What a choose-mode call picked: ``index`` and ``text`` of the best candidate, every
    candidate with its model score and combined score, and the accounted call (its reply is
    the chosen text)."""

    index: int
    text: str
    candidates: tuple[str, ...]
    scores: tuple[float, ...]
    combined: tuple[float, ...]
    call: AccountedCall

    def step_data(self) -> dict[str, Any]:
        """The step's ``data`` for the choice: ``choose`` (what was picked, the ten best with
        their scores) and ``scored`` (every candidate's score: what a replay returns)."""
        return {"choose": self.data(), "scored": scored_record(self.candidates, self.scores)}

    def data(self) -> dict[str, Any]:
        """The step's record of the choice (kept short: the ten best)."""
        order = sorted(range(len(self.candidates)), key=lambda i: -self.combined[i])[:10]
        return {"chosen": self.text, "candidates": len(self.candidates),
                "best": [[self.candidates[i], round(self.scores[i], 4),
                          round(self.combined[i], 4)] for i in order]}


class Recorder:
    """The records of one question (see the module docstring).

    ``counter`` estimates the tokens of a client that reports no usage (a counter made with
    ``estimates=False`` does not: they count 0, e.g. in a stand-in run whose token figures are
    not wanted);
    ``price_table`` prices calls whose client reports no cost; ``constrain`` is
    ``off``/``format``/``grounded``/``auto`` (``on``: ``format``), a resolved
    :class:`~pyql.agent.llm.structured.ConstrainLevel`, or a bool; ``on_step`` is the caller's live
    view. A stand-in LLM (``--llm gold``) that
    reads each step's record declares ``observe(step)``: it is called as one more callback.
    ``fingerprint`` records each prompt's hash for replays (off for stand-ins whose prompts do
    not matter).
    """

    def __init__(
        self,
        llm: LLM,
        question: str = "",
        *,
        counter: TokenCounter,
        price_table: PriceTable,
        constrain: str | bool | ConstrainLevel = "auto",
        on_step: StepCallback | None = None,
    ) -> None:
        self.model = llm
        self.question = question
        #: the counter that estimates unreported usage, None when it does not estimate
        self.counter: TokenCounter | None = counter if counter.estimates else None
        self.price_table = price_table
        #: the ``--constrain`` level in force (:class:`~pyql.agent.llm.structured.ConstrainLevel`)
        self.level = (constrain_level(constrain, llm) if not isinstance(constrain, bool)
                      else ConstrainLevel("format" if constrain else "off"))
        self.constrained = bool(self.level)
        self.fingerprint = bool(getattr(llm, "prompts_matter", True))
        self.callbacks: list[StepCallback] = [
            cb for cb in (getattr(llm, "observe", None), on_step) if cb is not None]
        self.started = time.perf_counter()
        self._tally = UsageTally()
        self._usage: Usage | None = None
        self.steps: list[Step] = []

    @property
    def usage(self) -> Usage:
        """What the question used so far (a frozen value, made when asked for: the recorder
        sums in place, a pydantic copy per call and step costs more than the step's own
        bookkeeping)."""
        if self._usage is None:
            self._usage = self._tally.usage()
        return self._usage

    @property
    def next_n(self) -> int:
        """The number of the next step (1-based)."""
        return len(self.steps) + 1

    # -- the model --------------------------------------------------------------------------------
    def llm(self, messages: Sequence[Message], *, stop: Sequence[str] | None = None,
            tools: Sequence[Mapping[str, Any]] | None = None, format: ReplyFormat | None = None,
            prompt_tokens: Callable[[Sequence[Message]], int] | None = None,
            max_tokens: int | None = None, temperature: float | None = None,
            client: LLM | None = None) -> AccountedCall:
        """One accounted call. With constraints on and a ``format``, the schema is sent and the
        reply read back; its usage is the server's, else estimated (``prompt_tokens`` counts a
        growing prompt incrementally). ``max_tokens`` and ``temperature`` are sent with this
        request (over the client's own settings) to a client whose ``complete`` takes them.
        ``client``: another model for this call (a strategy whose modules use different LLMs,
        e.g. Readi's ``edit_model``); the question's model else."""
        model_client = client if client is not None else self.model
        # a module's own client is constrained only if it, too, takes schemas
        constrained = (self.constrained and format is not None
                       and (client is None or bool(getattr(client, "structured_output", False))))
        # stop sequences stay when constrained: a JSON string has no raw newline to stop at, and
        # a server that ignores the schema still stops where the strategy expects
        extra = sampling_kwargs(model_client, max_tokens=max_tokens, temperature=temperature)
        if constrained:
            assert format is not None
            extra["response_format"] = format.response_format()
            # the reply cap holds the longest reply the schema admits: the JSON closes (up to
            # BOUND_CEILING tokens: SRP's judge, whose bound is larger, keeps its cap)
            cap = max_tokens if max_tokens is not None else getattr(model_client, "max_tokens",
                                                                    None)
            bound = format.token_bound()
            if isinstance(cap, int) and cap < bound <= BOUND_CEILING:
                extra.update(sampling_kwargs(model_client, max_tokens=bound))
        reply = model_client.complete(messages, stop=stop, tools=tools,  # type: ignore[call-arg]
                                      **extra)
        if constrained and self.level.required and not getattr(model_client,
                                                               "structured_output", True):
            model = str(getattr(model_client, "model", ""))
            raise ConstrainRefusedError(
                f"--constrain {self.level.level}: {model or 'the server'} refused "
                "response_format (JSON schema); use --constrain auto to run unconstrained",
                mode=self.level.level, model=model)
        raw = reply.text
        if constrained:
            assert format is not None
            reply = _read_back(reply, format)
        tokens = reply.usage
        counter = self.counter
        if tokens is None and counter is None:
            tokens = _NOT_COUNTED
        elif tokens is None:
            assert counter is not None
            out = raw + "".join(c.name + c.arguments for c in reply.tool_calls)
            counted = (prompt_tokens(messages) if prompt_tokens is not None
                       else counter.count_messages(messages, tools))
            tokens = TokenUsage(prompt_tokens=counted, completion_tokens=counter.count(out),
                                estimated=True)
        model = reply.model or getattr(model_client, "model", "")
        cost = reply.cost
        if cost is None:
            cost = self.price_table.cost(model, tokens.prompt_tokens, tokens.completion_tokens,
                                         tokens.cached_tokens)
        self._tally.add_call(tokens, cost=cost, seconds=reply.latency, constrained=constrained)
        self._usage = None
        fingerprint = prompt_fingerprint(messages, tools) if self.fingerprint else ""
        return AccountedCall(reply, tokens, cost, fingerprint, model, constrained=constrained,
                             raw_text=raw)

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None, client: LLM | None = None) -> AccountedScore:
        """One accounted scoring call (choose mode): ``llm.score(messages, candidates)``, its
        tokens the server's (a client that reports none, such as the no-model ``ranker``,
        counts 0 tokens: it read no prompt), counted as one LLM call and one scoring call. A
        client that cannot score raises :class:`~pyql.agent.errors.ScoringUnsupportedError`."""
        model_client = client if client is not None else self.model
        scorer = getattr(model_client, "score", None)
        model = getattr(model_client, "model", "")
        if scorer is None or not getattr(model_client, "scores_candidates", False):
            raise ScoringUnsupportedError(f"{model or 'the model'} cannot score candidates",
                                          model=model, reason="the client has no score()")
        start = time.perf_counter()
        raw = scorer(messages, list(candidates), max_tokens=max_tokens)
        scores = raw if isinstance(raw, Scores) else Scores(
            raw, model=model, latency=time.perf_counter() - start)
        tokens = scores.usage if scores.usage is not None else _NOT_COUNTED
        model = scores.model or model
        cost = scores.cost
        if cost is None:
            cost = (self.price_table.cost(model, tokens.prompt_tokens, tokens.completion_tokens,
                                          tokens.cached_tokens) if tokens.total_tokens else 0.0)
        self._tally.add_call(tokens, cost=cost, seconds=scores.latency, scoring=True)
        self._usage = None
        fingerprint = prompt_fingerprint(messages) if self.fingerprint else ""
        return AccountedScore(tuple(candidates), scores, tokens, cost, fingerprint, model)

    def choose(self, messages: Sequence[Message], candidates: Sequence[str], *,
               prior: Sequence[float] | None = None, prior_weight: float = 0.0,
               max_tokens: int | None = None) -> Choice:
        """Choose mode: one accounted scoring call (:meth:`score`: the total log-likelihood of
        each candidate as the whole reply) and the best candidate by the rule of
        :func:`pyql.agent.grounding.candidates.combine` (``prior``: the ranker's scores, weighted by
        ``prior_weight``; ties go to the earlier candidate). The choice's ``call`` is the
        scoring call as a reply of the chosen text; :meth:`Choice.step_data` keeps the scores
        where a replay reads them."""
        from pyql.agent.grounding.candidates import combine

        scored = self.score(messages, candidates, max_tokens=max_tokens)
        scores = [float(s) for s in scored.scores]
        if len(scores) != len(candidates):
            raise ValueError(f"score() returned {len(scores)} scores for {len(candidates)} "
                             "candidates")
        combined = combine(scores, prior, prior_weight)
        best = max(range(len(combined)), key=lambda i: (combined[i], -i))
        reply = LLMReply(text=candidates[best], model=scored.model,
                         latency=scored.scores.latency, finish_reason="stop")
        call = AccountedCall(reply, scored.tokens, scored.cost, scored.prompt_hash, scored.model)
        return Choice(best, candidates[best], tuple(candidates), tuple(scores),
                      tuple(combined), call)

    # -- the environment --------------------------------------------------------------------------
    def env(self, work: Callable[[], _T], *, backend: Any = None) -> tuple[_T, float, int]:
        """``work()`` timed, with the queries it sent to ``backend`` (its ``query_count``):
        (result, seconds, queries). The queries are added to the step that records them."""
        before = _count(backend)
        start = time.perf_counter()
        value = work()
        seconds = time.perf_counter() - start
        after = _count(backend)
        return value, seconds, (after - before if after is not None and before is not None else 0)

    # -- steps ------------------------------------------------------------------------------------
    def add(self, step: Step) -> Step:
        """Record ``step``: its KB/DB queries, the guideline that fired and a reply that did not
        parse (``format_issue``) go into the usage; every callback sees it, once."""
        self.steps.append(step)
        tally = self._tally
        tally.kb_queries += step.kb_queries
        if step.format_issue:
            tally.parse_failures += 1
        if step.hint:
            tally.add_trigger(step.hint)
        self._usage = None
        for callback in self.callbacks:
            callback(step)
        return step

    def add_queries(self, queries: int) -> None:
        """KB/DB queries outside any step (a final execute, label lookups)."""
        self._tally.kb_queries += queries
        self._usage = None

    def finish_usage(self, **update: Any) -> Usage:
        """The question's usage with its wall-clock seconds (and ``update``)."""
        usage = self._tally.usage(seconds=time.perf_counter() - self.started, **update)
        self._usage = usage
        return usage


#: the tokens of a call whose client reports none, when the recorder estimates none
_NOT_COUNTED = TokenUsage()


def _count(backend: Any) -> int | None:
    count = getattr(backend, "query_count", None)
    return count if isinstance(count, int) else None


def _read_back(reply: LLMReply, format: ReplyFormat) -> LLMReply:
    """A constrained reply as the strategy's parser reads it (itself when it does not conform)."""
    if format.tool_call:
        action = format.read_action(reply.text)
        if action is None:
            return reply
        thought, name, arguments = action
        return reply.model_copy(update={
            "text": thought, "tool_calls": (ToolCall(id="", name=name, arguments=arguments),)})
    text = format.read_text(reply.text)
    return reply if text is None else reply.model_copy(update={"text": text})
