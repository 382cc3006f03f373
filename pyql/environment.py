"""The environment contract: what an agent (or a person) acts on, one DSL call at a time.

An :class:`Environment` binds a backend (a KB or a database) for one question and keeps the
query under construction, the :class:`~pyql.program.Program` of accepted calls, a read-only
:class:`~pyql.memory.Memory` and the :class:`Observation` of every step. Its members:

- ``run(action) -> Observation`` (text or :class:`~pyql.program.Call`; never raises for bad
  input or a failing backend), ``run_program(program)``, ``reset()``;
- ``program``, ``query`` (the query tree), ``to_query()`` (its text: SPARQL or SQL),
  ``observations``, ``tools`` (``"sparql"`` / ``"sql"``), ``toolset``, ``memory``, ``step``.

Every step follows one template, :meth:`Environment.run`:

1. **parse** the action against the environment's toolset (a :class:`~pyql.program.Call`);
2. **resolve** its arguments (:meth:`Environment._resolve`: terms for a KB) and **apply** it
   (:meth:`Environment._apply`: build the new query, execute what needs executing) -> an
   :class:`Outcome`; both are the backend's hooks;
3. **feedback**: one :class:`~pyql.feedback.Feedback` from the Python side, the backend and the
   memory;
4. **guideline judgement** (ERASER, :class:`HintPolicy`);
5. **commit** (:meth:`Environment._commit`) when the step was accepted, else **roll back**: the
   query, program and memory stay as they were.

:class:`pyql.session.KBSession` (SPARQL over a KB) and :class:`pyql.sql.session.SqlSession`
(SQL over a database) fill in the hooks; ``pyql.Session(backend, ...)`` picks one.

**Observations** have one shape for both (:class:`Observation`) and one renderer
(:func:`render_observation`). ``answers`` (after ``execute()``) is typed per backend: a KB gives
the answers as the model writes them (short ids such as ``m.0x`` / ``ex:Inception``, labels for
label-id profiles, literal lexical forms: ``tuple[str, ...]``); a database gives Python values
(one per row for a one-column answer, a tuple per row otherwise; duplicates and order kept).
"""

from __future__ import annotations

import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pyql.echo import clip_echoes, echoed_inputs
from pyql.errors import (
    ArityError,
    BackendError,
    BackendQueryError,
    BackendTimeoutError,
    InputError,
    ParseError,
    ProgramTooLongError,
    QueryError,
    ReadOnlyError,
    SchemaError,
    TermError,
    UnknownFunctionError,
)
from pyql.feedback import DBFeedback, Feedback, Hint, KBFeedback, PythonFeedback
from pyql.memory import Memory, Relations, VariableValues
from pyql.program import MAX_PROGRAM_CALLS, TOOLSETS, Alias, Call, Program, Toolset, parse_call

if TYPE_CHECKING:
    from pyql.db.base import DB
    from pyql.kb.base import KB

__all__ = [
    "Environment",
    "Observation",
    "Outcome",
    "GuidelineChecker",
    "HintPolicy",
    "python_feedback_for",
    "render_observation",
    "render_values",
    "resolve_guidelines",
    "guess_function",
]

log = logging.getLogger(__name__)

#: how each toolset names its backend in error observations
_BACKEND_NOUN = {"sparql": "KB", "sql": "database"}


class GuidelineChecker(Protocol):
    """What an environment needs from ERASER: a verdict per step (see :mod:`pyql.guidelines`)."""

    def evaluate(self, feedback: Feedback) -> Hint | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """The typed outcome of one step, with one text rendering (``.text``).

    ``summary`` is the result text the environment wrote for the step (what ``text`` shows when
    no hint fired and nothing failed). ``answers`` is typed per backend (module docs).
    """

    step: int
    action: str
    feedback: Feedback
    hint: Hint | None = None
    elapsed: float = 0.0
    #: the query text after the step (unchanged when the step failed or was rolled back)
    query: str = ""
    summary: str = ""

    @property
    def call(self) -> Call | None:
        return self.feedback.call

    @property
    def tools(self) -> str:
        return self.feedback.tools

    @property
    def ok(self) -> bool:
        """The step was accepted (no error, no hint)."""
        return self.hint is None and self.error is None

    @property
    def status(self) -> str:
        """``hint`` | ``error`` | the backend status (``ok``, ``empty``, ``backend_error``,
        ``timeout``)."""
        if self.hint is not None:
            return "hint"
        if self.feedback.python.status != "ok":
            return "error"
        status = self.feedback.backend.status
        return status if status != "not_run" else "ok"

    @property
    def error(self) -> str | None:
        """The raw error message (Python side or backend), if any."""
        if self.feedback.python.status != "ok":
            return self.feedback.python.message
        if self.feedback.backend.status in ("backend_error", "timeout"):
            return self.feedback.backend.message
        return None

    @property
    def relations(self) -> Relations | None:
        """The relations a KB listed (None on a database)."""
        backend = self.feedback.backend
        return backend.relations if isinstance(backend, KBFeedback) else None

    @property
    def values(self) -> dict[str, VariableValues]:
        return self.feedback.backend.values

    @property
    def answers(self) -> tuple[Any, ...] | None:
        return self.feedback.backend.answers

    @property
    def text(self) -> str:
        return render_observation(self)

    def __str__(self) -> str:
        return self.text


def render_observation(obs: Observation) -> str:
    """The one text rendering of an observation: the hint, an error, or the step's summary."""
    if obs.hint is not None:
        return obs.hint.text
    fb = obs.feedback
    if fb.python.status != "ok":  # the message may quote the arguments: long ones in part
        inputs = echoed_inputs(fb.action_text, fb.call.args if fb.call else ())
        return f"Error: {clip_echoes(fb.python.message, inputs)}"
    backend = fb.backend
    if backend.status == "timeout":
        return f"Error: the query timed out: {backend.message}"
    if backend.status == "backend_error" and backend.rejected:
        return f"Error: {backend.message}"  # the engine rejected the query: its own words
    if backend.status == "backend_error":
        return f"Error: the {_BACKEND_NOUN.get(fb.tools, 'backend')} failed: {backend.message}"
    return obs.summary or "Done."


def render_values(values: Mapping[str, VariableValues], *, max_shown: int | None = None) -> str:
    """``The value of variable ?x is ['a', 'b'] (12 in total)`` for each variable."""
    parts = []
    for var, vv in values.items():
        shown = list(vv.values if max_shown is None else vv.values[:max_shown])
        more = f" ({vv.total} in total)" if vv.total > len(shown) else ""
        parts.append(f"The value of variable {var} is {shown}{more}")
    return ". ".join(parts)


class HintPolicy:
    """Asks the guidelines about a step, once per result-based hint.

    A hint about what the environment *returned* (codes ``KB...``/``DB...``: an empty result, an
    unnamed answer) is given once: when the very next action repeats the hinted action, the model
    has read the hint and insists, and the step is accepted — an empty result can be the right
    answer. Hints about the action itself (``PY...``, ``RM...``) are given every time.
    """

    RESULT_PREFIXES = ("KB", "DB")

    def __init__(self, guidelines: GuidelineChecker | None) -> None:
        self.guidelines = guidelines
        self._last: tuple[Call | str, str] | None = None  # (the action, hint code)

    def judge(self, feedback: Feedback) -> Hint | None:
        if self.guidelines is None:
            return None
        # calls compare as values: the same call however it was written
        action = feedback.call if feedback.call is not None else feedback.action_text
        last, self._last = self._last, None
        if last is not None and last[0] == action and last[1].startswith(self.RESULT_PREFIXES):
            log.info("accepting %s repeated after hint %s", action, last[1])
            return None
        hint = self.guidelines.evaluate(feedback)
        if hint is not None:
            self._last = (action, hint.code)
        return hint


def python_feedback_for(exc: Exception, *, function: str | None = None) -> PythonFeedback:
    """Structured Python-side feedback for an input error (read from the error's fields)."""
    kind = type(exc).__name__
    if isinstance(exc, UnknownFunctionError):
        return PythonFeedback(status="unknown_function", message=str(exc), function=exc.function,
                              suggestions=exc.available, error_type=kind)
    if isinstance(exc, ArityError):
        lo_hi = exc.expected if isinstance(exc.expected, tuple) else (exc.expected, exc.expected)
        return PythonFeedback(status="arity", message=str(exc), function=exc.function,
                              expected_arity=lo_hi, got_arity=exc.got, error_type=kind)
    if isinstance(exc, TermError):
        return PythonFeedback(status="bad_term", message=str(exc), function=function,
                              arg_index=exc.index, arg_text=exc.text, expected=exc.expected,
                              error_type=kind)
    if isinstance(exc, SchemaError):
        return PythonFeedback(status="schema_error", message=str(exc), function=function,
                              arg_text=exc.name, expected=exc.kind, suggestions=exc.suggestions,
                              error_type=kind)
    if isinstance(exc, QueryError):
        return PythonFeedback(status="query_error", message=str(exc), function=function,
                              error_code=exc.code or None, suggestions=exc.suggestions,
                              error_type=kind)
    if isinstance(exc, ParseError):
        status = "parse_error" if exc.kind == "syntax" else exc.kind
        return PythonFeedback(status=status, message=str(exc), function=function,  # type: ignore[arg-type]
                              error_type=kind)
    return PythonFeedback(status="parse_error", message=str(exc), function=function, error_type=kind)


_FUNCTION = re.compile(r"([A-Za-z_]\w*)\s*\(")


def guess_function(text: str) -> str | None:
    """The function an unparseable action seems to call (``add_fact`` in ``add_fact(x``)."""
    m = _FUNCTION.search(text)
    return m.group(1) if m else None


def resolve_guidelines(guidelines: GuidelineChecker | bool | None) -> GuidelineChecker | None:
    """``True``: every installed guideline (loaded once); ``None``/``False``: ERASER off."""
    if guidelines is None or guidelines is False:
        return None
    if guidelines is True:
        return default_checker()
    return guidelines


#: the entry-point group whose ``default`` entry builds what ``guidelines=True`` means: ERASER's
#: registry of every installed guideline (``pyql.guidelines:default_registry``). The core names
#: no layer above it; the layer above plugs itself in here.
CHECKERS_GROUP = "pyql.checkers"


def default_checker() -> GuidelineChecker:
    """The installed guidelines, as ``guidelines=True`` means them (loaded once, by their
    registry); :class:`~pyql.plugins.UnknownPluginError` when no distribution provides them."""
    from pyql.plugins import plugins

    factory = plugins(CHECKERS_GROUP).load("default")
    return factory()  # type: ignore[no-any-return]


@dataclass
class Outcome:
    """What applying one call produced, before the environment decides whether to keep it.

    Backends subclass it to carry their new state (the new query, ...) to :meth:`_commit`.
    """

    #: what executing the step returned (the environment's :attr:`Environment.feedback_type`)
    backend: KBFeedback | DBFeedback = field(default_factory=KBFeedback)
    #: the memory after the step (None: unchanged); ``calls`` is extended on commit
    memory: Memory | None = None
    #: resolved arguments, for the guidelines
    args: tuple[Any, ...] = ()
    notes: list[str] = field(default_factory=list)
    #: the result text of the step (see Observation.summary)
    summary: str = ""


class Environment(ABC):
    """The contract every environment implements, and the one step template (module docs).

    Subclasses set ``tools`` and implement :meth:`_reset_state`, :meth:`_initial_memory`,
    :meth:`_apply`, :meth:`_commit`, :meth:`to_query` and the ``query`` attribute/property.
    """

    #: the toolset name (a key of :data:`pyql.program.TOOLSETS`)
    tools: ClassVar[str] = ""
    #: what executing a step on this environment's backend returns
    feedback_type: ClassVar[type[KBFeedback] | type[DBFeedback]] = KBFeedback

    guidelines: GuidelineChecker | None
    program: Program
    memory: Memory
    step: int
    observations: list[Observation]
    #: the functions the agent was offered (``Feedback.functions``; empty: the toolset's)
    functions: tuple[str, ...] = ()

    @property
    def toolset(self) -> Toolset:
        return TOOLSETS[self.tools]

    @property
    @abstractmethod
    def backend(self) -> KB | DB:
        """The KB or database this environment queries: what a strategy counts queries on
        (``backend.query_count``)."""

    # -- state ----------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the query, program, memory and observations (same backend and settings)."""
        self._reset_state()
        self.program = Program(tools=self.tools)
        self.memory = self._initial_memory()
        self._policy = HintPolicy(self.guidelines)
        self.step = 0
        self.observations = []

    @abstractmethod
    def _reset_state(self) -> None:
        """Set the backend's own state (the empty query) as after construction."""

    @abstractmethod
    def _initial_memory(self) -> Memory:
        """The memory of a fresh environment."""

    @abstractmethod
    def to_query(self) -> str:
        """The current query as text in the backend's language (SPARQL or SQL)."""

    # -- one step -------------------------------------------------------------------------------
    def parse(self, action: str | Call) -> Call:
        """The action as a call of this environment's toolset (raises an InputError).

        An alias spelling (:class:`~pyql.program.Alias`) becomes the canonical call it stands
        for; contextual aliases are expanded by :meth:`_expand_alias` from this environment's
        state, so the program records (and replays) canonical calls only.
        """
        if isinstance(action, str):
            action = parse_call(action, self.toolset, contextual=True)
        alias = self.toolset.alias(action.name, len(action.args))
        if alias is not None and alias.contextual:
            action = self._expand_alias(alias, action)
        elif alias is not None:
            assert alias.expand is not None
            action = alias.expand(action.args)
        action.validate_against(self.toolset)
        return action

    def _expand_alias(self, alias: Alias, call: Call) -> Call:
        """The canonical call a contextual alias stands for here (InputError if none)."""
        raise UnknownFunctionError(call.name, list(self.toolset))

    #: the most steps one question may take (:data:`~pyql.program.MAX_PROGRAM_CALLS`); the
    #: step past it is a :class:`~pyql.errors.ProgramTooLongError`
    max_calls: int = MAX_PROGRAM_CALLS

    def run(self, action: str | Call) -> Observation:
        """Run one action; never raises for bad input or backend failure (see Observation).

        Raises :class:`~pyql.errors.ProgramTooLongError` when the session has already run
        :attr:`max_calls` steps (call :meth:`reset` to start again)."""
        if self.step >= self.max_calls:
            raise ProgramTooLongError(self.step + 1, self.max_calls)
        start = time.perf_counter()
        self.step += 1
        text = action if isinstance(action, str) else str(action)
        call: Call | None = None
        python = _PYTHON_OK
        outcome: Outcome | None = None
        failed: KBFeedback | DBFeedback | None = None
        resolved: tuple[Any, ...] = ()
        notes: list[str] = []
        try:
            call = self.parse(action)
            resolved, notes = self._resolve(call)
            outcome = self._apply(call, resolved)
        except InputError as exc:
            python = python_feedback_for(exc, function=call.name if call else guess_function(text))
        except BackendTimeoutError as exc:
            failed = self.feedback_type(status="timeout", message=str(exc),
                                        error_type=type(exc).__name__)
        except (BackendError, ReadOnlyError) as exc:
            failed = self.feedback_type(status="backend_error", message=str(exc),
                                        rejected=isinstance(exc, BackendQueryError),
                                        error_type=type(exc).__name__)
        if outcome is None:
            outcome = Outcome(backend=failed or self.feedback_type())
        if not outcome.args:
            outcome.args = resolved
        if notes:
            outcome.notes = [*notes, *outcome.notes]
        return self._conclude(start, text, call, python, outcome)

    def reject(self, text: str, error: InputError) -> Observation:
        """Record an action that never reached :meth:`run` (e.g. a malformed native tool call)
        as a step with its Python feedback, judged by the guidelines like any other step."""
        start = time.perf_counter()
        self.step += 1
        function = getattr(error, "function", None) or guess_function(text)
        python = python_feedback_for(error, function=function)
        return self._conclude(start, text, None, python,
                              Outcome(backend=self.feedback_type()))

    def _conclude(self, start: float, text: str, call: Call | None, python: PythonFeedback,
                  outcome: Outcome) -> Observation:
        backend = outcome.backend
        feedback = Feedback(
            step=self.step, action_text=text, call=call, tools=self.tools,
            functions=self.functions, python=python, backend=backend,
            memory=self.memory, args=tuple(outcome.args), notes=tuple(outcome.notes),
        )
        hint = self._policy.judge(feedback)
        if hint is not None:
            hint = self._label_hint(hint, feedback)
        accepted = (hint is None and python.status == "ok"
                    and backend.status not in ("backend_error", "timeout"))
        if accepted and call is not None:
            self._commit(call, outcome)
            kept = getattr(outcome, "recorded", None) or call  # what replays the step
            self.program = self.program.append(kept)
            memory = outcome.memory or self.memory
            self.memory = memory.with_(calls=self.memory.calls.append(kept))
        summary = self._summary(feedback, outcome) if python.status == "ok" else ""
        obs = Observation(
            step=self.step, action=text, feedback=feedback, hint=hint,
            elapsed=time.perf_counter() - start, query=self._query_text(), summary=summary,
        )
        self.observations.append(obs)
        return obs

    def _resolve(self, call: Call) -> tuple[tuple[Any, ...], list[str]]:
        """The call's arguments with their meaning (terms, values) and notes on how they were
        read; kept in the feedback even when applying the call fails. Raises InputError."""
        return (), []

    def _label_hint(self, hint: Hint, feedback: Feedback) -> Hint:
        """``hint`` with the labels of the opaque ids the step wrote (a KB whose ids are opaque
        overrides it); as it is here."""
        return hint

    @abstractmethod
    def _apply(self, call: Call, resolved: tuple[Any, ...]) -> Outcome:
        """Apply and observe ``call`` without changing the environment's state."""

    @abstractmethod
    def _commit(self, call: Call, outcome: Outcome) -> None:
        """Keep what an accepted step produced (the new query, ...)."""

    def _summary(self, feedback: Feedback, outcome: Outcome) -> str:
        """The result text of a step (an environment may derive it from the feedback)."""
        return outcome.summary

    def _query_text(self) -> str:
        """The query text an observation records ("" while the query is empty)."""
        return self.to_query()

    def run_program(self, program: Program | str) -> list[Observation]:
        """Run every call of a program (text is parsed with this toolset); the observations."""
        prog = Program.parse(program, self.tools) if isinstance(program, str) else program
        return [self.run(call) for call in prog]


_PYTHON_OK = PythonFeedback()
