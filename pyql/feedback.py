"""What the environment says about one step: the data ERASER's guidelines read.

The Session builds one :class:`Feedback` per step from three sources (the paper's Table 8):

- ``python``: how the action parsed and validated (:class:`PythonFeedback`);
- ``kb`` (KB or DB): what executing it returned (:class:`KBFeedback`);
- ``memory``: the read-only history before this step (:class:`~pyql.memory.Memory`).

A guideline that fires returns a :class:`Hint` (data: code, message, suggestions). Hints never
carry prompt mechanics ("re-generate Thought N+1"): the agent's renderer adds those.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from pyql.memory import Memory, Relations, VariableValues
from pyql.program import Call

__all__ = [
    "PythonStatus",
    "KBStatus",
    "PythonFeedback",
    "Relations",
    "VariableValues",
    "KBFeedback",
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

KBStatus = Literal["ok", "empty", "backend_error", "timeout", "not_run"]


class PythonFeedback(BaseModel):
    """Parse/validation outcome of the action."""

    model_config = ConfigDict(frozen=True)

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


class KBFeedback(BaseModel):
    """What executing the step returned from the KB or DB."""

    model_config = ConfigDict(frozen=True)

    status: KBStatus = "not_run"
    message: str = ""
    row_count: int = 0
    values: dict[str, VariableValues] = Field(default_factory=dict)
    relations: Relations | None = None
    #: the node whose relations were listed (get_relation), short form
    node: str | None = None
    answers: tuple[Any, ...] | None = None
    #: variables of the query that no triple pattern constrains
    unconstrained: tuple[str, ...] = ()
    #: SQL: normalised type category (``pyql.sql.schema.TYPE_CATEGORIES``) of the columns the
    #: step involves, by column name
    column_types: dict[str, str] = Field(default_factory=dict)
    #: SQL: distinct values (as text, possibly a sample) of the columns the step involves
    column_values: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: SQL add_condition: whether the condition's value occurs in its column at all (None: unknown)
    value_found: bool | None = None
    #: backend_error/timeout: the error's class name. ``BackendQueryError`` means the engine
    #: rejected the query the step built (a query error, the engine's words in ``message``);
    #: ``BackendUnavailableError`` and the others, that the server failed
    error_type: str | None = None


class Feedback(BaseModel):
    """Everything a guideline may look at for one step."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    step: int
    action_text: str
    call: Call | None = None
    #: the toolset of the session ("sparql" or "sql")
    tools: str = "sparql"
    #: the functions the agent was offered (its prompt profile's tool set); empty: the toolset's
    functions: tuple[str, ...] = ()
    python: PythonFeedback = PythonFeedback()
    kb: KBFeedback = KBFeedback()
    memory: InstanceOf[Memory]
    #: resolved arguments (terms, or plain text for operators) when they resolved
    args: tuple[Any, ...] = ()
    #: short notes the Session made while resolving (e.g. a label auto-resolved to an id)
    notes: tuple[str, ...] = ()

    @property
    def function(self) -> str | None:
        return self.call.name if self.call is not None else self.python.function


class Hint(BaseModel):
    """A guideline's verdict: replaces the observation and rolls the step back."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    suggestions: tuple[str, ...] = ()
    name: str = ""

    def __str__(self) -> str:
        return self.message
