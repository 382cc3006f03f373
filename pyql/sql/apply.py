"""Replay SQL-toolset calls (:data:`pyql.program.SQL_TOOLS`) onto an :class:`~pyql.sql.Sql`.

:func:`apply_call` is pure: it maps one parsed :class:`~pyql.program.Call` onto the builder and
returns the new query (``get_column`` and ``execute`` ask the DB and return the query unchanged).

How arguments are read:

- columns and tables: the atom's text (``add_condition(Lyrics theme/style, =, Romance)`` works
  unquoted; quote names that contain commas or parentheses);
- values: a quoted STRING is a string, a NUMBER an ``int`` (canonical integer text) or a
  ``float`` — except numbers with leading zeros (``007``), kept as strings; a bare NAME is a
  string (LLMs write ``add_condition(Player, =, Terrence Ross)``), except ``NULL`` which is
  ``None``. A bare ``2005`` is a NUMBER, hence an ``int``: comparing it with a text column
  (WikiSQL stores numbers as text) is coerced by the DB layer, not here;
- with ``LIKE``/``NOT LIKE``/``contains``, the value is always the text as written;
- operators, aggregations, directions: the atom's text, checked here so that the error is a
  :class:`~pyql.errors.TermError` located at the argument.

>>> from pyql.program import Program
>>> p = Program.parse("add_condition(Player, =, Terrence Ross)\\nset_answer(Nationality, None)", "sql")
>>> program_to_sql(p, table="players")
'SELECT "Nationality" FROM "players" WHERE "Player" = \\'Terrence Ross\\''
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from pyql.errors import QueryError, TermError
from pyql.program import SQL_TOOLS, Call, Program
from pyql.sql.query import Sql, Value, normalise_aggregation, normalise_operator
from pyql.sql.schema import Schema
from pyql.syntax import Atom, AtomKind

__all__ = ["apply_call", "program_to_query", "program_to_sql", "atom_value"]

_INT = re.compile(r"[+-]?(0|[1-9]\d*)")
_LIKE_OPS = ("LIKE", "NOT LIKE", "CONTAINS", "NOT CONTAINS")


def _text(atom: Atom, index: int, function: str, what: str) -> str:
    if atom.kind in (AtomKind.VAR, AtomKind.IRI):
        raise TermError(
            f"expected {what}, got {atom} (quote it if it is text)", text=str(atom), expected=what
        ).at(index, function)
    return atom.value


def atom_value(atom: Atom) -> Value:
    """The SQL value an argument atom stands for (see the module docs).

    >>> from pyql.syntax import lex_atom
    >>> [atom_value(lex_atom(t)) for t in ("12", "-1.5", "007", '"12"', "Terrence Ross", "NULL")]
    [12, -1.5, '007', '12', 'Terrence Ross', None]
    """
    if atom.kind is AtomKind.STRING:
        return atom.value
    if atom.kind is AtomKind.NUMBER:
        text = atom.value
        if _INT.fullmatch(text):
            return int(text)
        if re.fullmatch(r"[+-]?0\d+", text):
            return text
        number = float(text)
        return number if math.isfinite(number) else text
    if atom.kind is AtomKind.NAME:
        return None if atom.value.upper() == "NULL" else atom.value
    raise TermError(
        f"expected a string or a number, got {atom} (quote it if it is text)",
        text=str(atom),
        expected="a string or a number",
    )


def _value(atom: Atom, index: int, function: str, *, like: bool = False) -> Value:
    if like and atom.kind in (AtomKind.STRING, AtomKind.NUMBER, AtomKind.NAME):
        return atom.value
    try:
        return atom_value(atom)
    except TermError as exc:
        raise exc.at(index, function) from None


def _checked(atom: Atom, index: int, function: str, what: str, check: Callable[[str], Any]) -> str:
    text = _text(atom, index, function, what)
    try:
        check(text)
    except QueryError as exc:
        raise TermError(str(exc), text=text, expected=what).at(index, function) from None
    return text


def _op(atom: Atom, index: int, function: str, comparisons_only: bool = False) -> str:
    text = _checked(atom, index, function, "an operator", normalise_operator)
    if comparisons_only and normalise_operator(text) not in ("=", "!=", ">", "<", ">=", "<="):
        raise TermError(
            f"expected one of =, !=, >, <, >=, <=, got {text}",
            text=text,
            expected="a comparison operator",
        ).at(index, function)
    return text


def _agg(atom: Atom, index: int, function: str) -> str:
    return _checked(atom, index, function, "an aggregation", normalise_aggregation)


def _direction(atom: Atom, index: int, function: str) -> str:
    text = _text(atom, index, function, "asc or desc")
    if text.strip().lower() in ("none", ""):
        return "asc"
    if text.strip().lower() not in ("asc", "desc", "ascending", "descending"):
        raise TermError(f"expected asc or desc, got {text}", text=text, expected="asc or desc").at(
            index, function
        )
    return text


def _limit(atom: Atom, index: int, function: str) -> int | None:
    if atom.kind is AtomKind.NAME and atom.value.lower() == "none":
        return None
    if atom.kind in (AtomKind.NUMBER, AtomKind.STRING) and re.fullmatch(r"\+?\d+", atom.value):
        return int(atom.value)
    raise TermError(
        f"expected a non-negative integer, got {atom}",
        text=str(atom),
        expected="a non-negative integer",
    ).at(index, function)


def apply_call(query: Sql, call: Call) -> Sql:
    """The query after one SQL-toolset call (a new value; ``query`` is untouched).

    Raises :class:`~pyql.errors.UnknownFunctionError`/:class:`~pyql.errors.ArityError` for calls
    outside :data:`~pyql.program.SQL_TOOLS`, :class:`~pyql.errors.TermError` (with ``index``) for
    a bad operator, aggregation, direction, limit or value, and the builder's
    :class:`~pyql.errors.SchemaError`/:class:`~pyql.errors.QueryError` otherwise.

    >>> q = apply_call(Sql("t"), Call.parse("add_condition(No., >, 5)", "sql"))
    >>> q.to_sql()
    'SELECT * FROM "t" WHERE "No." > 5'
    >>> apply_call(q, Call.parse("add_order(No., sideways)", "sql"))
    Traceback (most recent call last):
    ...
    pyql.errors.TermError: argument 2 of add_order(): expected asc or desc, got sideways
    """
    call.validate_against(SQL_TOOLS)
    name, args = call.name, call.args
    if name == "execute":
        return query
    if name == "get_column":
        query.value_counts(_text(args[0], 0, name, "a column"))  # validates the column
        return query
    if name == "add_condition":
        column = _text(args[0], 0, name, "a column")
        op = _op(args[1], 1, name)
        value = _value(args[2], 2, name, like=normalise_operator(op) in _LIKE_OPS)
        return query.add_condition(column, op, value)
    if name == "set_answer":
        column = _text(args[0], 0, name, "a column")
        agg = _agg(args[1], 1, name) if len(args) > 1 else None
        return query.set_answer(column, agg)
    if name == "add_join":
        table = _text(args[0], 0, name, "a table")
        left = _text(args[1], 1, name, "a column") if len(args) > 1 else None
        right = _text(args[2], 2, name, "a column") if len(args) > 2 else None
        return query.add_join(table, left, right)
    if name == "add_group_by":
        return query.add_group_by(_text(args[0], 0, name, "a column"))
    if name == "add_having":
        column = _text(args[0], 0, name, "a column")
        agg = _agg(args[1], 1, name)
        if normalise_aggregation(agg)[0] is None:
            raise TermError(
                "expected MAX, MIN, COUNT, SUM or AVG", text=agg, expected="an aggregation"
            ).at(1, name)
        op = _op(args[2], 2, name, comparisons_only=True)
        return query.add_having(column, agg, op, _value(args[3], 3, name))
    if name == "add_order":
        column = _text(args[0], 0, name, "a column")
        direction = _direction(args[1], 1, name) if len(args) > 1 else "asc"
        limit = _limit(args[2], 2, name) if len(args) > 2 else None
        return query.add_order(column, direction, limit)
    if name == "set_distinct":
        return query.set_distinct()
    raise QueryError(f"{name}() has no SQL builder", code="unsupported_call")  # pragma: no cover


def program_to_query(
    program: Program | str, table: str | None = None, schema: Schema | None = None
) -> Sql:
    """Replay an SQL program (or its text) onto ``Sql(table, schema=schema)``."""
    if isinstance(program, str):
        program = Program.parse(program, "sql")
    if program.tools != "sql":
        raise QueryError(f"not an SQL program (tools={program.tools!r})", code="wrong_toolset")
    query = Sql(table, schema=schema)
    for call in program.calls:
        query = apply_call(query, call)
    return query


def program_to_sql(
    program: Program | str,
    dialect: str = "sqlite",
    table: str | None = None,
    schema: Schema | None = None,
    *,
    pretty: bool = False,
) -> str:
    """Replay an SQL program onto an empty :class:`Sql` and compile it for ``dialect``.

    >>> program_to_sql("add_condition(Year, >=, 2005)\\nset_answer(*, COUNT)", "tsql", table="t")
    'SELECT COUNT(*) FROM [t] WHERE [Year] >= 2005'
    """
    return program_to_query(program, table, schema).to_sql(dialect, pretty=pretty)
