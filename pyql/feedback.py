"""What the environment says about one step: the data ERASER's guidelines read.

The Session builds one :class:`Feedback` per step from three sources (the paper's Table 8):

- ``python``: how the action parsed and validated (:class:`PythonFeedback`);
- ``backend``: what executing it returned, from a KB (:class:`KBFeedback`, also read as
  ``feedback.kb``) or a database (:class:`DBFeedback`, ``feedback.db``); the fields they share
  (:class:`BackendFeedback`: status, message, rows, values, answers, errors) mean the same on
  both;
- ``memory``: the read-only history before this step (:class:`~pyql.memory.Memory`).

A guideline that fires returns a :class:`Hint` (data: code, message, suggestions). Hints never
carry prompt mechanics ("re-generate Thought N+1"): the agent's renderer adds those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pyql.errors import PyqlError
from pyql.memory import Memory, Relations, VariableValues, _as_tuple
from pyql.program import Call

__all__ = [
    "PythonStatus",
    "BackendStatus",
    "KBStatus",
    "PythonFeedback",
    "Relations",
    "VariableValues",
    "BackendFeedback",
    "KBFeedback",
    "DBFeedback",
    "FeedbackKindError",
    "Feedback",
    "Hint",
]

PythonStatus = Literal[
    "ok",
    "no_action",  # free text, no call found
    "multiple_actions",  # several calls (or thoughts) in one output
    "parse_error",  # the call text does not parse
    "unknown_function",
    "arity",  # wrong number of arguments
    "bad_term",  # an argument is not valid for its slot
    "query_error",  # valid call, invalid for the current query (unknown variable, bad op, ...)
    "schema_error",  # unknown table/column (SQL)
]

BackendStatus = Literal["ok", "empty", "backend_error", "timeout", "not_run"]
#: the backend's statuses under the paper's name for the environment class (Table 8: "KB")
KBStatus = BackendStatus


_PYTHON_STATUSES = frozenset(get_args(PythonStatus))
_BACKEND_STATUSES = frozenset(get_args(BackendStatus))


def _check_status(status: str, allowed: frozenset[str], owner: object) -> None:
    if status not in allowed:
        raise ValueError(f"{type(owner).__name__}.status must be one of "
                         f"{', '.join(sorted(allowed))}, not {status!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PythonFeedback:
    """Parse/validation outcome of the action."""

    status: PythonStatus = "ok"
    message: str = ""
    function: str | None = None
    #: arity: expected (min, max) and got
    expected_arity: tuple[int, int] | None = None
    got_arity: int | None = None
    #: bad_term: which argument (0-based), as written, and what the slot expects;
    #: schema_error: the unknown name (``arg_text``) and whether it is a ``table`` or ``column``
    arg_index: int | None = None
    arg_text: str | None = None
    expected: str | None = None
    #: machine-readable code of a query_error (e.g. ``unknown_variable``, ``invalid_operator``)
    error_code: str | None = None
    suggestions: tuple[str, ...] = ()
    #: the error's class name (e.g. ``UnknownEntityError``)
    error_type: str | None = None

    def __post_init__(self) -> None:
        _check_status(self.status, _PYTHON_STATUSES, self)
        _as_tuple(self.suggestions, self, "suggestions")
        if self.expected_arity is not None:
            _as_tuple(self.expected_arity, self, "expected_arity")


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendFeedback:
    """What executing the step returned, in the fields a KB and a database share (sequences are
    tuples). A backend's own facts are in :class:`KBFeedback` and :class:`DBFeedback`."""

    status: BackendStatus = "not_run"
    message: str = ""
    row_count: int = 0
    values: dict[str, VariableValues] = field(default_factory=dict)
    answers: tuple[Any, ...] | None = None
    #: backend_error/timeout: the error's class name (for reports)
    error_type: str | None = None
    #: backend_error: the engine rejected the query the step built (a query error, the engine's
    #: words in ``message``), as opposed to a server that failed
    rejected: bool = False
    #: the backend stopped at its row limit (:class:`~pyql.results.Limits`): more rows exist
    truncated: bool = False
    #: how many values the backend cut to its cell limit (:class:`~pyql.results.Limits`)
    cells_cut: int = 0

    def __post_init__(self) -> None:
        _check_status(self.status, _BACKEND_STATUSES, self)

    @property
    def bound_note(self) -> str:
        """The sentence that states a result the backend bounded ("" when it did not)."""
        parts = []
        if self.truncated:
            parts.append(f"only the first {self.row_count} rows were fetched")
        if self.cells_cut:
            parts.append(f"{self.cells_cut} value(s) were cut to the backend's cell limit")
        return f" [{'; '.join(parts)}]" if parts else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class KBFeedback(BackendFeedback):
    """What executing the step returned from a KB."""

    relations: Relations | None = None
    #: the node whose relations were listed (get_relation), short form
    node: str | None = None
    #: variables of the query that no triple pattern constrains
    unconstrained: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DBFeedback(BackendFeedback):
    """What executing the step returned from a SQL database."""

    #: normalised type category (``pyql.sql.schema.TYPE_CATEGORIES``) of the columns the step
    #: involves, by column name
    column_types: dict[str, str] = field(default_factory=dict)
    #: distinct values (as text, possibly a sample) of the columns the step involves
    column_values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: add_condition: whether the condition's value occurs in its column at all (None: unknown)
    value_found: bool | None = None


class FeedbackKindError(PyqlError, TypeError):
    """A step's feedback was read as the other backend's (``feedback.db`` of a KB step):
    ``wanted`` (``"kb"``/``"db"``) and the ``tools`` of the step."""

    def __init__(self, wanted: str, tools: str) -> None:
        self.wanted = wanted
        self.tools = tools
        other = "db" if wanted == "kb" else "kb"
        super().__init__(f"the feedback of a {tools} step has no {wanted} part: read "
                         f"feedback.{other}, or feedback.backend for what both share")


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    """Everything a guideline may look at for one step (sequences are tuples)."""

    step: int
    action_text: str
    call: Call | None = None
    #: the toolset of the session ("sparql" or "sql")
    tools: str = "sparql"
    #: the functions the agent was offered (its prompt profile's tool set); empty: the toolset's
    functions: tuple[str, ...] = ()
    python: PythonFeedback = PythonFeedback()
    #: what executing the step returned (the fields both backends share; ``kb``/``db`` for all)
    backend: KBFeedback | DBFeedback = KBFeedback()
    memory: Memory
    #: resolved arguments (terms, or plain text for operators) when they resolved
    args: tuple[Any, ...] = ()
    #: short notes the Session made while resolving (e.g. a label auto-resolved to an id)
    notes: tuple[str, ...] = ()

    @property
    def function(self) -> str | None:
        return self.call.name if self.call is not None else self.python.function

    @property
    def kb(self) -> KBFeedback:
        """What the KB returned (:class:`FeedbackKindError` on a database's step)."""
        if not isinstance(self.backend, KBFeedback):
            raise FeedbackKindError("kb", self.tools)
        return self.backend

    @property
    def db(self) -> DBFeedback:
        """What the database returned (:class:`FeedbackKindError` on a KB's step)."""
        if not isinstance(self.backend, DBFeedback):
            raise FeedbackKindError("db", self.tools)
        return self.backend


@dataclass(frozen=True, slots=True, kw_only=True)
class Hint:
    """A guideline's verdict: replaces the observation and rolls the step back."""

    code: str
    message: str
    suggestions: tuple[str, ...] = ()
    name: str = ""
    #: ``(id, label)`` of the opaque ids the step wrote (Wikidata's ``P19``, ``Q42``), added by
    #: the environment so that the hint never shows a bare id (:attr:`text`)
    labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _as_tuple(self.suggestions, self, "suggestions")
        _as_tuple(self.labels, self, "labels")

    @property
    def text(self) -> str:
        """The message, and what the ids it may name are: ``... (P19: place of birth; Q42:
        Douglas Adams)``.

        >>> Hint(code="KB201", message="P19 leads to an empty result.",
        ...      labels=(("P19", "place of birth"),)).text
        'P19 leads to an empty result. (P19: place of birth)'
        """
        if not self.labels:
            return self.message
        return f"{self.message} ({'; '.join(f'{i}: {label}' for i, label in self.labels)})"

    def __str__(self) -> str:
        return self.text
