"""The original QueryAgent environment's WikiSQL checks (``ag_src/wikisql_src/wikienv_wikisql.py``
lines 139-152), for the paper's SQL tool set: ``add_condition`` with ``=``, ``<``, ``>`` only,
after ``get_column`` of its column, and ``=`` at most once per column. Opt-in (see
:mod:`pyql.guidelines.packs.original`): WikiSQL's gold programs never call get_column, and
Spider's use every operator.
"""

from __future__ import annotations

from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import Guideline, on
from pyql.guidelines.derive import arg_text
from pyql.program import Call

__all__ = ["ConditionOperator", "ConditionBeforeGetColumn", "ConditionSameColumnTwice"]

SQL = frozenset({"sql"})
_PAPER_OPERATORS = ("=", "<", ">")


def _calls_on(feedback: Feedback, function: str, column: str) -> list[Call]:
    """The accepted calls of ``function`` on ``column`` (compared as the original does: case and
    surrounding spaces aside)."""
    return [c for c in feedback.memory.calls if c.name == function and c.args
            and c.args[0].value.strip().casefold() == column.strip().casefold()]


class _OriginalSql(Guideline):
    """What the original SQL guidelines share: the SQL toolset and WikiSQL's original."""

    toolsets = SQL
    groups = ("sql", "original", "wikisql")


class ConditionOperator(_OriginalSql):
    """add_condition with an operator outside the paper's ``=``, ``<``, ``>``.

    ``ag_src/wikisql_src/wikienv_wikisql.py`` lines 140-142.

    Bad:
        add_condition(Player, LIKE, Terrence%)

    Fixed:
        add_condition(Player, =, Terrence Ross)
    """

    code = "DB401"
    name = "original.condition_operator"
    needs = frozenset({"python"})
    triggers_on = on("add_condition")

    def check(self, feedback: Feedback) -> Hint | None:
        op = (arg_text(feedback, 1) or "").strip()
        if op in _PAPER_OPERATORS:
            return None
        return self.hint(f"The second parameter of add_condition must be one of =, <, >. "
                         f"However, you used {op}.")


class ConditionBeforeGetColumn(_OriginalSql):
    """add_condition on a column whose values were never looked at with get_column.

    ``ag_src/wikisql_src/wikienv_wikisql.py`` lines 143-147.

    Bad:
        add_condition(Player, =, Terence Ross)

    Fixed:
        get_column(Player)
    """

    code = "DB402"
    name = "original.condition_before_get_column"
    needs = frozenset({"memory"})
    triggers_on = on("add_condition", python=("ok", "query_error", "schema_error"))

    def check(self, feedback: Feedback) -> Hint | None:
        column = arg_text(feedback, 0)
        if column is None:
            return None
        if _calls_on(feedback, "get_column", column):
            return None
        value = arg_text(feedback, 2) or ""
        return self.hint(
            f"You use add_condition on {column} before get_column({column}). First see what is "
            f"in this column with get_column({column}); otherwise the value you wrote ({value}) "
            "may not exist in the table, since you do not know how the column stores it.",
            [f"get_column({column})"],
        )


class ConditionSameColumnTwice(_OriginalSql):
    """A second ``=`` condition on the same column: ``col = A AND col = B`` is empty.

    ``ag_src/wikisql_src/wikienv_wikisql.py`` lines 148-152.

    Bad:
        add_condition(Position, =, Guard)
        add_condition(Position, =, Forward)

    Fixed:
        add_condition(Position, =, Guard)
    """

    code = "DB403"
    name = "original.condition_same_column_twice"
    needs = frozenset({"memory"})
    triggers_on = on("add_condition")

    def check(self, feedback: Feedback) -> Hint | None:
        column, op = arg_text(feedback, 0), (arg_text(feedback, 1) or "").strip()
        if column is None or op != "=":
            return None
        if not any(len(c.args) == 3 and c.args[1].value.strip() == "="
                   for c in _calls_on(feedback, "add_condition", column)):
            return None
        return self.hint(
            f"You already used add_condition(..., =, ...) on the column {column}. Do not add an "
            "= condition on the same column twice: if you restrict col = A and then col = B, you "
            "get an empty result.")
