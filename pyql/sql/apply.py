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
  :class:`~pyql.errors.TermError` located at the argument;
- ``IN``/``NOT IN`` with a literal: a list of values separated by ``|`` (``add_condition(Country,
  IN, France|Spain)``, ``add_condition(Age, IN, 20|30)``): in a quoted string every part is text
  (``"1|2"`` is ``('1', '2')``), unquoted each part is read as a value (numbers are numbers,
  ``NULL`` is refused); spaces around ``|`` are dropped. A single value is a one-value list.

**Sub-queries and set operations.** ``begin_subquery(?name)`` opens a block: the calls up to
``end_subquery()`` build a separate query (its own table, conditions, answer), which is then
stored under ``name``. A stored query is written ``?name`` (always with the ``?``) wherever it is
used: as the value of ``add_condition`` (``IN``/``NOT IN`` take a one-column query; ``=``,
``>``, ... a one-value, scalar one) and ``add_having``, and as the argument of ``add_union``,
``add_intersect`` and ``add_except``, which combine the query under construction with it.
Blocks nest (a block may build and use its own sub-queries); names are global to the program and
cannot be reused. An unquoted value ``?name`` (outside ``LIKE``/``contains`` patterns) always
refers to a stored query: one that names none is a :class:`~pyql.errors.QueryError` (code
``unknown_subquery``, the stored names in ``suggestions``), never the text ``'?name'``; quote the
value if it is text. Because of this state, programs with blocks replay through
:class:`SqlBuild` (:func:`apply_call` alone takes ``stored`` queries but refuses the block
calls).

>>> from pyql.program import Program
>>> p = Program.parse("add_condition(Player, =, Terrence Ross)\\nset_answer(Nationality, None)", "sql")
>>> program_to_sql(p, table="players")
'SELECT "Nationality" FROM "players" WHERE "Player" = \\'Terrence Ross\\''
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pyql.errors import PyqlError, QueryError, TermError
from pyql.program import SQL_TOOLS, Call, Program
from pyql.sql.query import Sql, Value, normalise_aggregation, normalise_operator
from pyql.sql.schema import Schema
from pyql.syntax import Atom, AtomKind, lex_atom

__all__ = [
    "apply_call", "program_to_query", "program_to_sql", "atom_value", "SqlBuild", "query_name",
    "in_values",
]

_INT = re.compile(r"[+-]?(0|[1-9]\d*)")
_QUERY_NAME = re.compile(r"\?([A-Za-z_]\w*)")
#: the calls that need a :class:`SqlBuild` (state beyond one query)
BLOCK_CALLS = frozenset({"begin_subquery", "end_subquery"})
_SET_CALLS = {"add_union": "union", "add_intersect": "intersect", "add_except": "except_"}
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


def query_name(atom: Atom) -> str | None:
    """The stored-query name ``atom`` refers to (``?q1`` -> ``'q1'``), else None.

    >>> from pyql.syntax import lex_atom
    >>> [query_name(lex_atom(t)) for t in ("?q1", '"?q1"', "q1")]
    ['q1', None, None]
    """
    if atom.kind is AtomKind.VAR:
        return atom.value if _QUERY_NAME.fullmatch(f"?{atom.value}") else None
    if atom.kind is AtomKind.NAME:
        m = _QUERY_NAME.fullmatch(atom.value.strip())
        return m.group(1) if m else None
    return None


def in_values(atom: Atom) -> tuple[Value, ...]:
    """The values of an ``IN`` list argument (module docs); TermError if a part is empty/NULL.

    >>> from pyql.syntax import lex_atom
    >>> in_values(lex_atom("France | Spain")), in_values(lex_atom("1|2.5")), in_values(lex_atom('"1|2"'))
    (('France', 'Spain'), (1, 2.5), ('1', '2'))
    """
    if atom.kind not in (AtomKind.STRING, AtomKind.NUMBER, AtomKind.NAME):
        raise TermError(
            f"expected a list of values a|b|c, got {atom}", text=str(atom),
            expected="a list of values",
        )
    parts = [part.strip() for part in atom.value.split("|")]
    if any(not part for part in parts):
        raise TermError(
            f"empty value in the list {atom.value!r}", text=str(atom), expected="a list of values"
        )
    if atom.kind is AtomKind.STRING:
        return tuple(parts)
    values = []
    for part in parts:
        try:
            value = atom_value(lex_atom(part))
        except PyqlError:
            value = part
        if value is None:
            raise TermError(
                "IN lists cannot hold NULL", text=str(atom), expected="a list of values"
            )
        values.append(value)
    return tuple(values)


def _stored(atom: Atom, index: int, function: str, stored: Mapping[str, Sql]) -> Sql:
    name = query_name(atom)
    if name is None:
        raise TermError(
            f"expected a stored query ?name, got {atom}", text=str(atom),
            expected="a stored query ?name",
        ).at(index, function)
    return _lookup(name, stored, index, function)


def _lookup(name: str, stored: Mapping[str, Sql], index: int, function: str) -> Sql:
    if name not in stored:
        known = ", ".join(f"?{n}" for n in stored) or "none yet: build one with begin_subquery"
        raise QueryError(
            f"argument {index + 1} of {function}(): no stored query ?{name} (stored: {known}); "
            "quote the value if it is text",
            code="unknown_subquery",
            suggestions=[f"?{n}" for n in stored],
        )
    return stored[name]


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


def apply_call(query: Sql, call: Call, stored: Mapping[str, Sql] | None = None) -> Sql:
    """The query after one SQL-toolset call (a new value; ``query`` is untouched).

    ``stored`` maps names to the stored queries that ``?name`` values and set operations refer
    to; ``begin_subquery``/``end_subquery`` need a :class:`SqlBuild` (QueryError here).

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
    stored = stored if stored is not None else {}
    if name == "execute":
        return query
    if name in BLOCK_CALLS:
        raise QueryError(
            f"{name}() needs the program's state: replay it with SqlBuild", code="needs_state"
        )
    if name in _SET_CALLS:
        other = _stored(args[0], 0, name, stored)
        return getattr(query, _SET_CALLS[name])(other)  # type: ignore[no-any-return]
    if name == "get_column":
        query.value_counts(_text(args[0], 0, name, "a column"))  # validates the column
        return query
    if name == "add_condition":
        column = _text(args[0], 0, name, "a column")
        op = _op(args[1], 1, name)
        canonical = normalise_operator(op)
        ref = query_name(args[2]) if canonical not in _LIKE_OPS else None
        value: Any
        if ref is not None:
            value = _lookup(ref, stored, 2, name)
        elif canonical in ("IN", "NOT IN"):
            try:
                value = in_values(args[2])
            except TermError as exc:
                raise exc.at(2, name) from None
        else:
            value = _value(args[2], 2, name, like=canonical in _LIKE_OPS)
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
        ref = query_name(args[3])
        having: Any = _lookup(ref, stored, 3, name) if ref is not None else _value(args[3], 3, name)
        return query.add_having(column, agg, op, having)
    if name == "add_order":
        column = _text(args[0], 0, name, "a column")
        direction = _direction(args[1], 1, name) if len(args) > 1 else "asc"
        limit = _limit(args[2], 2, name) if len(args) > 2 else None
        return query.add_order(column, direction, limit)
    if name == "set_distinct":
        return query.set_distinct()
    raise QueryError(f"{name}() has no SQL builder", code="unsupported_call")  # pragma: no cover


@dataclass(frozen=True)
class SqlBuild:
    """The whole state of an SQL program being replayed: the main ``query``, the open
    sub-query blocks (innermost last) and the stored queries. Immutable: :meth:`apply` returns a
    new state. ``start`` is the table a new block starts from (None: the first column or
    ``add_join`` picks it).

    >>> from pyql.program import Program
    >>> b = SqlBuild(Sql(None, schema=None), start="t")
    >>> for c in Program.parse("begin_subquery(?q1)\\nset_answer(a, MAX)\\nend_subquery()\\n"
    ...                        "add_join(t)\\nadd_condition(a, =, ?q1)\\nset_answer(b)", "sql"):
    ...     b = b.apply(c)
    >>> b.query.to_sql()
    'SELECT "b" FROM "t" WHERE "a" = (SELECT MAX("a") FROM "t")'
    """

    query: Sql
    blocks: tuple[tuple[str, Sql], ...] = ()
    stored: tuple[tuple[str, Sql], ...] = ()
    start: str | None = None

    @property
    def current(self) -> Sql:
        """The query the next call builds: the innermost open block's, else the main one."""
        return self.blocks[-1][1] if self.blocks else self.query

    @property
    def stored_queries(self) -> dict[str, Sql]:
        return dict(self.stored)

    @property
    def in_block(self) -> bool:
        return bool(self.blocks)

    def with_current(self, query: Sql) -> SqlBuild:
        """This state with the query under construction replaced."""
        if self.blocks:
            name, _ = self.blocks[-1]
            return replace(self, blocks=(*self.blocks[:-1], (name, query)))
        return replace(self, query=query)

    def apply(self, call: Call) -> SqlBuild:
        """The state after one call (see :func:`apply_call` and the module docs)."""
        call.validate_against(SQL_TOOLS)
        if call.name == "begin_subquery":
            name = query_name(call.args[0])
            if name is None:
                raise TermError(
                    f"expected a new query name written ?name (?q1), got {call.args[0]}",
                    text=str(call.args[0]), expected="a query name ?name",
                ).at(0, call.name)
            taken = {n for n, _ in self.stored} | {n for n, _ in self.blocks}
            if name in taken:
                raise QueryError(
                    f"the name ?{name} is already used; pick another one",
                    code="duplicate_subquery",
                )
            fresh = Sql(self.start, schema=self.current.schema)
            return replace(self, blocks=(*self.blocks, (name, fresh)))
        if call.name == "end_subquery":
            if not self.blocks:
                raise QueryError(
                    "end_subquery: no sub-query is open (call begin_subquery(?name) first)",
                    code="no_subquery",
                )
            name, sub = self.blocks[-1]
            if sub.table is None or not sub.answers:
                raise QueryError(
                    f"end_subquery: the sub-query ?{name} has no answer yet; call set_answer",
                    code="bad_subquery",
                    suggestions=["set_answer(column)"],
                )
            return replace(self, blocks=self.blocks[:-1], stored=(*self.stored, (name, sub)))
        if call.name == "execute" and self.blocks:
            raise QueryError(
                f"execute: the sub-query ?{self.blocks[-1][0]} is still open; call end_subquery() "
                "first",
                code="open_subquery",
                suggestions=["end_subquery()"],
            )
        return self.with_current(apply_call(self.current, call, self.stored_queries))


def program_to_query(
    program: Program | str, table: str | None = None, schema: Schema | None = None
) -> Sql:
    """Replay an SQL program (or its text) onto ``Sql(table, schema=schema)``; QueryError if a
    sub-query block is left open."""
    if isinstance(program, str):
        program = Program.parse(program, "sql")
    if program.tools != "sql":
        raise QueryError(f"not an SQL program (tools={program.tools!r})", code="wrong_toolset")
    build = SqlBuild(Sql(table, schema=schema), start=table)
    for call in program.calls:
        build = build.apply(call)
    if build.blocks:
        raise QueryError(
            f"the sub-query ?{build.blocks[-1][0]} is never closed (end_subquery())",
            code="open_subquery",
        )
    return build.query


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
