"""The built-in SQL pack: ERASER's guidelines for the SQL toolset (``DB`` codes).

They read the same :class:`~pyql.feedback.Feedback` as the SPARQL pack, with ``tools="sql"``.
Facts only the database knows come in ``feedback.db`` (:class:`~pyql.feedback.DBFeedback`),
which the SQL Session fills for the columns a step involves:

- ``column_types``: column -> normalised type category (``text``, ``integer``, ``real``, ...);
- ``column_values``: column -> distinct values as text (possibly a sample);
- ``value_found``: for ``add_condition``, whether the value occurs in its column at all.

When a field is missing the guideline that needs it stays silent (conservatism).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import ANY, Guideline, on
from pyql.guidelines.derive import arg_text, closest, fmt_list
from pyql.guidelines.packs.kb.backend import BackendError, BackendTimeout, QueryRejected

__all__ = [
    "UnknownSchemaName",
    "ValueNotInColumn",
    "EmptyAfterCondition",
    "AggregationType",
    "ExecuteBeforeAnswer",
    "DBBackendError",
    "DBBackendTimeout",
    "DBQueryRejected",
    "GUIDELINES",
]

SQL = frozenset({"sql"})
_NUMERIC_TYPES = {"integer", "real", "numeric"}
_NUMBER = re.compile(r"[+-]?(\d[\d,]*\.?\d*|\.\d+)([eE][+-]?\d+)?")
_T = TypeVar("_T")


def _lookup(mapping: Mapping[str, _T], column: str) -> _T | None:
    """``mapping[column]``, else a case-insensitive or ``table.column`` match."""
    if column in mapping:
        return mapping[column]
    folded = column.casefold()
    for key, value in mapping.items():
        k = key.casefold()
        if k == folded or k.rsplit(".", 1)[-1] == folded or folded.rsplit(".", 1)[-1] == k:
            return value
    return None


def _same_value(a: str, b: str) -> bool:
    a, b = a.strip(), b.strip()
    if a.casefold() == b.casefold():
        return True
    try:
        return float(a.replace(",", "")) == float(b.replace(",", ""))
    except ValueError:
        return False


def _plain_names(names: tuple[str, ...]) -> list[str]:
    """Suggestions without ``table.column`` duplicates of a plain ``column`` also listed."""
    plain = set(names)
    return [n for n in dict.fromkeys(names)
            if not ("." in n and n.split(".", 1)[1] in plain)]


class _SqlGuideline(Guideline):
    """What the SQL pack's guidelines share: the SQL toolset."""

    toolsets = SQL


class UnknownSchemaName(_SqlGuideline):
    """A table or column that does not exist; the hint gives the closest names.

    Bad:
        add_condition(Nationalty, =, Canada)

    Fixed:
        add_condition(Nationality, =, Canada)
    """

    code = "DB101"
    name = "sql.unknown_name"
    needs = frozenset({"python", "memory"})
    triggers_on = on(python="schema_error")
    groups = ("sql", "schema")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        name = py.arg_text or "?"
        is_table = (py.expected == "table"
                    or (feedback.function == "add_join" and arg_text(feedback, 0) == name))
        kind = "table" if is_table else "column"
        near = _plain_names(py.suggestions) or (
            closest(name, feedback.memory.columns, cutoff=0.5) if kind == "column" else [])
        message = f"There is no {kind} called {name}."
        if near:
            message += f" The closest {kind}s are: {fmt_list(near)}."
        elif kind == "column" and feedback.memory.columns:
            message += f" The columns are: {fmt_list(feedback.memory.columns)}."
        return self.hint(message + f" Use the {kind} name exactly as the schema spells it.", near)


class ValueNotInColumn(_SqlGuideline):
    """A condition value that does not occur in its column: the hint gives the closest values.

    Values must be written as they are stored (spelling, case, units). Fires on an empty result
    when the Session reports ``value_found=False`` or the column's values (``column_values``)
    do not contain it. Gold programs whose gold answer is itself empty can get it (WikiSQL dev:
    14 hints on the 919 of 8,421 programs with an empty answer, none on the others; see
    ``tests/guidelines/test_conservatism_sql.py``): no environment signal tells a right empty
    answer from a misspelt value, and repeating the action after the hint is accepted.

    Bad:
        add_condition(Player, =, Terrence Rose)

    Fixed:
        add_condition(Player, =, Terrence Ross)
    """

    code = "DB102"
    name = "sql.value_not_in_column"
    needs = frozenset({"kb"})
    triggers_on = on("add_condition", kb="empty")
    groups = ("sql", "condition", "empty")

    def check(self, feedback: Feedback) -> Hint | None:
        column, op, value = (arg_text(feedback, i) for i in range(3))
        if column is None or value is None or (op or "").strip().upper() not in ("=", "LIKE"):
            return None
        db = feedback.db
        values = _lookup(db.column_values, column) or ()
        if db.value_found is None:
            if not values or any(_same_value(value, v) for v in values):
                return None
        elif db.value_found:
            return None
        near = closest(value, values, n=5, cutoff=0.4)
        message = f"The value {value} does not occur in the column {column}."
        if near:
            message += f" The closest values are: {fmt_list(near)}."
        message += f" Use get_column({column}) to see the values it stores."
        return self.hint(message, [*(f"add_condition({column}, {op}, {v})" for v in near),
                                   f"get_column({column})"])


class EmptyAfterCondition(_SqlGuideline):
    """add_condition yields an empty result and the condition alone matches no row.

    Bad:
        add_condition(Position, =, Guard)
        add_condition(School/Club Team, =, Toronto)

    Fixed:
        add_condition(Position, =, Guard)
        get_column(School/Club Team)
    """

    code = "DB103"
    name = "sql.empty_after_condition"
    needs = frozenset({"kb", "memory"})
    triggers_on = on("add_condition", kb="empty")
    groups = ("sql", "condition", "empty")

    def check(self, feedback: Feedback) -> Hint | None:
        if feedback.db.value_found is not False:
            # the condition matches rows by itself: an empty result of the conditions together
            # can be the right answer ("which player wore 42 in 1996?" - none), so stay silent
            return None
        column = arg_text(feedback, 0) or "the column"
        earlier = [str(c) for c in feedback.memory.calls if c.name == "add_condition"]
        message = ("You choose add_condition as the action in this step. However, we get an "
                   "empty result. Check the column, the operator and the value: the value must be "
                   f"written as it is stored (see get_column({column})).")
        if earlier:
            message += (f" The conditions already added are {fmt_list(earlier)}: check whether "
                        "all of them are needed together.")
        return self.hint(message, [f"get_column({column})"])


_LEADING_NUMBER = re.compile(r"\s*[+-]?(\d|\.\d)")


class AggregationType(_SqlGuideline):
    """An aggregation that is not valid for the column's type (SUM/AVG of text).

    Columns typed as text that store numbers (as WikiSQL's do), and dates, are accepted when their
    values start with a number.

    Bad:
        set_answer(Player, SUM)

    Fixed:
        set_answer(Player, COUNT)
    """

    code = "DB104"
    name = "sql.aggregation_type"
    needs = frozenset({"kb"})
    triggers_on = on("set_answer", kb=ANY)
    groups = ("sql", "aggregate")

    def check(self, feedback: Feedback) -> Hint | None:
        column, agg = arg_text(feedback, 0), (arg_text(feedback, 1) or "").strip().upper()
        if column is None or agg not in ("SUM", "AVG"):
            return None
        kind = _lookup(feedback.db.column_types, column)
        if kind is None or kind in _NUMERIC_TYPES:
            return None
        values = _lookup(feedback.db.column_values, column) or ()
        if not values:
            return None  # cannot tell: stay silent
        # numbers stored as text, and dates (engines average them by their leading number, and
        # Spider's gold SQL does so) are not flagged: only text that is not a number at all
        numeric = sum(1 for v in values if _LEADING_NUMBER.match(v))
        if numeric * 2 >= len(values):
            return None
        sample = f" (values like {fmt_list(values[:3])})" if values else ""
        return self.hint(
            f"{agg} is not valid for the column {column}: its type is {kind}{sample}. {agg} needs "
            "a numeric column. Use COUNT, MAX, MIN or None, or choose a numeric column.",
            [f"set_answer({column}, {a})" for a in ("COUNT", "None")],
        )


class ExecuteBeforeAnswer(_SqlGuideline):
    """execute() before set_answer: the query does not say what to return.

    Bad:
        add_condition(Player, =, Terrence Ross)
        execute()

    Fixed:
        add_condition(Player, =, Terrence Ross)
        set_answer(Nationality, None)
        execute()
    """

    code = "DB105"
    name = "sql.execute_before_answer"
    needs = frozenset({"memory"})
    triggers_on = on("execute", python=ANY)
    groups = ("sql", "answer")

    def check(self, feedback: Feedback) -> Hint | None:
        if feedback.memory.called("set_answer"):
            return None
        return self.hint("You must specify the answer with set_answer(column, aggregation) before "
                         "execute(): which column does the question ask for, and does it need an "
                         "aggregation (None, MAX, MIN, COUNT, SUM, AVG)?")


class _OnTheDatabase:
    """Makes a KB backend guideline (KB301-KB303) the SQL toolset's, about the database."""

    toolsets = SQL
    groups = ("sql", "backend")
    backend = "database"


class DBBackendError(_OnTheDatabase, BackendError):
    """The database failed to run the step: not an empty result.

    Bad:
        add_condition(Player, =, Terrence Ross)   # database unreachable

    Fixed:
        add_condition(Player, =, Terrence Ross)   # same action, repeated
    """

    code = "DB301"
    name = "sql.backend_error"


class DBQueryRejected(_OnTheDatabase, QueryRejected):
    """The database engine rejected the query the step built: a query error, not a server fault.

    The engine's own message is in the hint; repeating the action would fail the same way.

    Bad:
        add_condition(height_cm, =, (SELECT ...))   # the engine refuses the query

    Fixed:
        get_column(height_cm)   # a different action, not the same one repeated
    """

    code = "DB303"
    name = "sql.query_rejected"


class DBBackendTimeout(_OnTheDatabase, BackendTimeout):
    """The database timed out on the step: not an empty result.

    Bad:
        add_join(games)   # a join without keys: too many rows, times out

    Fixed:
        add_join(games, team_id, id)
    """

    code = "DB302"
    name = "sql.backend_timeout"


GUIDELINES: list[type[Guideline]] = [
    UnknownSchemaName,
    ValueNotInColumn,
    EmptyAfterCondition,
    AggregationType,
    ExecuteBeforeAnswer,
    DBBackendError,
    DBBackendTimeout,
    DBQueryRejected,
]
