"""The SQL Session: the database environment an agent acts on, one PyQL-SQL call at a time.

:class:`SqlSession` is the SQL counterpart of :class:`pyql.session.Session`, with the same
contract: ``run(text | Call) -> Observation``; it keeps the query (an immutable
:class:`~pyql.sql.Sql`), the program of accepted calls and a read-only
:class:`~pyql.memory.Memory`; every step produces one :class:`~pyql.feedback.Feedback`
(``tools="sql"``) for the ERASER guidelines, and a step that fails or that a guideline rejects is
rolled back (query, program, memory and schema stay as they were).

What each call observes (the paper's Table 10: environment calls ask the DB and add nothing,
build calls add a clause):

- ``get_column(column)``: the distinct values of the column *under the current conditions* (joins
  and WHERE kept, answers/grouping ignored), most frequent first, with their counts. Nothing is
  added to the query.
- a build call (``add_condition``, ``set_answer``, ``add_join``, ``add_group_by``,
  ``add_having``, ``add_order``, ``set_distinct``): the new query is executed and the current
  result is shown, bounded: the distinct values of the answer column once ``set_answer`` was
  called (the rows, with several answer columns), else the matching rows (``SELECT *``), or the
  groups and their sizes once the query is grouped. At most ``row_cap`` rows are fetched
  (``db.row_count`` is still exact), ``max_rows`` rows and ``max_values`` values per column are
  shown. ``db.values`` maps each shown column to its distinct values; for the guidelines,
  ``db.column_types``, ``db.column_values`` (after an empty ``add_condition``, or ``SUM``/``AVG``
  of a non-numeric column) and ``db.value_found`` (``add_condition`` with ``=``/``LIKE``) describe
  the column the call names.
- ``begin_subquery(?name)`` ... ``end_subquery()`` (see :mod:`pyql.sql.apply`): the calls in
  between build the sub-query, and what they observe (``get_column`` included) is the
  sub-query's rows; ``end_subquery()`` shows the stored sub-query's result. ``add_union``,
  ``add_intersect`` and ``add_except`` show the combined rows. ``execute()`` inside an open block
  is a :class:`~pyql.errors.QueryError` (code ``open_subquery``). ``query`` and :meth:`to_sql`
  are the main query; ``build`` holds the whole state (open blocks and stored queries), rolled
  back with the rest when a step is rejected.
- ``execute()``: the answer rows. ``db.answers`` holds Python values: one value per row for a
  one-column answer, else one tuple per row (duplicates and order kept: SQL semantics; use
  ``set_distinct()`` for distinct rows). Before ``set_answer`` it is a
  :class:`~pyql.errors.QueryError` with code ``no_answer``.

Statuses are the KB Session's: ``ok``, ``empty`` (no rows, or only NULLs such as ``MAX`` over no
rows), ``backend_error`` and ``timeout`` (the database failed: never shown as an empty result).
Unknown tables/columns are :class:`~pyql.errors.SchemaError` with close matches (Python status
``schema_error``).

**Numeric coercion.** A condition value is compared with the column's type in mind, using the
schema the session loaded (:meth:`~pyql.sql.Sql.column_info`):

- a *text* value on a numeric column (``integer``, ``real``, ``numeric``) becomes a number, read
  as WikiSQL does (babel's ``parse_decimal``, English): group commas dropped (``"18,000"`` ->
  ``18000``), else the first number in the text (``"3 goals"`` -> ``3``); text without a number
  stays text. So ``add_condition(Crowd, >, "3")`` on a ``REAL`` column is ``"Crowd" > 3``;
- a *number* on a text column becomes its text as SQLite writes it (``21`` -> ``'21'``, ``2.0``
  -> ``'2.0'``), which is what SQLite's affinity rules do anyway, and keeps PostgreSQL and
  DuckDB (which refuse ``text = integer``) in agreement with it;
- ``add_having`` values follow the aggregate: ``COUNT``/``SUM``/``AVG`` are numeric, ``MAX``/``MIN``
  take the column's type. ``LIKE`` patterns, ``NULL`` and date/other columns are left alone.

The program keeps the call as written; the coercion is reported in ``feedback.notes``.

**Tables in scope.** ``table`` is the table the query starts from; ``tables`` names the tables the
question may use (their schema is loaded, and ``memory.columns`` lists their columns). Without
``tables`` the scope is ``table`` alone when given, else every table of the database (name the
tables on a large database: WikiSQL's has thousands). ``add_join`` of a database table outside the
scope widens it.

>>> from pyql.db import SqlDB
>>> db = SqlDB.sqlite_memory(lambda c: c.executescript(
...     "CREATE TABLE players(Player TEXT, Nationality TEXT, Points REAL);"
...     "INSERT INTO players VALUES ('Terrence Ross', 'United States', 10),"
...     " ('Jose Calderon', 'Spain', 8), ('Jonas Valanciunas', 'Lithuania', 12);"))
>>> s = SqlSession(db, table="players")
>>> print(s.run('add_condition(Points, >, "9")').text)
2 rows match. Columns: Player, Nationality, Points. Rows: ('Terrence Ross', 'United States', 10.0); ('Jonas Valanciunas', 'Lithuania', 12.0)
>>> print(s.run("set_answer(Nationality)").text)
Nationality: ['United States', 'Lithuania']
>>> s.run("execute()").answers
('United States', 'Lithuania')
>>> s.to_sql()
'SELECT "Nationality" FROM "players" WHERE "Points" > 9'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import sqlglot.expressions as exp

from pyql.environment import GuidelineChecker, Observation, Outcome, resolve_guidelines
from pyql.errors import PyqlError, QueryError, SchemaError
from pyql.feedback import DBFeedback, VariableValues
from pyql.memory import Memory
from pyql.program import Call
from pyql.session import Session
from pyql.sql.apply import BLOCK_CALLS, SqlBuild, apply_call, atom_value, in_values, query_name
from pyql.sql.query import Answer, Sql, normalise_aggregation
from pyql.sql.schema import ColumnInfo, Schema, close_matches
from pyql.syntax import Atom, AtomKind

if TYPE_CHECKING:
    from pyql.db.base import DB
    from pyql.results import ResultSet

__all__ = [
    "SqlSession",
    "SqlObservation",
    "coerce_value",
    "parse_number",
    "NUMERIC_TYPES",
]

log = logging.getLogger(__name__)

#: the schema type categories whose columns compare numerically
NUMERIC_TYPES = frozenset({"integer", "real", "numeric"})

#: how many distinct values of a column ``column_values`` holds after an empty add_condition
_SAMPLE = 100
_COLUMN_CALLS = frozenset({"add_condition", "set_answer", "add_group_by", "add_having", "add_order"})
_FIRST_NUMBER = re.compile(r"[-+]?\d*\.\d+|\d+")  # WikiSQL's lib/query.py num_re
_LIKE_OPS = frozenset({"LIKE", "NOT LIKE", "CONTAINS", "NOT CONTAINS"})


# ------------------------------------------------------------------ values


def parse_number(text: str) -> int | float | None:
    """The number in ``text`` as WikiSQL reads condition values of real columns, else None.

    Group commas are dropped and the rest read as a decimal (babel's ``parse_decimal``); failing
    that, the first number in the text counts. Integers stay ``int``.

    >>> [parse_number(t) for t in ("18,000", " 3 ", "-2.5", "1e3", "3 goals", "n/a", "NaN")]
    [18000, 3, -2.5, 1000.0, 3, None, None]
    """
    stripped = text.strip()
    try:
        number = Decimal(stripped.replace(",", ""))
    except InvalidOperation:
        number = None
    if number is not None and number.is_finite():
        if re.fullmatch(r"[+-]?[\d,]+", stripped):
            return int(number)
        return float(number)
    found = _FIRST_NUMBER.findall(text)
    if not found:
        return None
    first = found[0]
    return int(first) if "." not in first else float(first)


def sqlite_text(value: int | float | Decimal) -> str:
    """A number as SQLite renders it as text (``3`` -> ``'3'``, ``3.0`` -> ``'3.0'``)."""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    text = f"{value:.15g}"
    if re.fullmatch(r"-?\d+", text):
        return text + ".0"
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        return f"{mantissa}.0e{exponent}"
    return text


def coerce_value(value: Any, category: str | None) -> tuple[Any, str | None]:
    """``(value to compare with, why it changed or None)`` for a column of type ``category``.

    See the module docs. ``category`` is a :data:`~pyql.sql.schema.TYPE_CATEGORIES` entry (None:
    unknown, nothing changes).

    >>> coerce_value("18,000", "real"), coerce_value(21, "text"), coerce_value("x", "real")
    ((18000, 'read as the number 18000'), ('21', 'read as the text 21'), ('x', None))
    """
    if value is None or category is None or isinstance(value, bool):
        return value, None
    if category in NUMERIC_TYPES and isinstance(value, str):
        number = parse_number(value)
        if number is None:
            return value, None
        return number, f"read as the number {number}"
    if category == "text" and isinstance(value, (int, float, Decimal)):
        text = sqlite_text(value)
        return text, f"read as the text {text}"
    return value, None


def _value_atom(value: Any) -> Atom:
    if isinstance(value, str):
        return Atom(AtomKind.STRING, value)
    if isinstance(value, float):
        return Atom(AtomKind.NUMBER, repr(value))
    return Atom(AtomKind.NUMBER, str(value))


def _display(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    return str(value)


def _cell(value: Any) -> Any:
    """A cell as shown inside a row tuple (Decimal as a plain number)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _is_empty(rs: ResultSet) -> bool:
    return rs.is_empty or all(all(c is None for c in row) for row in rs.rows)


# ------------------------------------------------------------------ observations


#: the SQL session's observations are :class:`~pyql.environment.Observation` (one shape for
#: every environment); the name stays for code written against it
SqlObservation = Observation


@dataclass
class _Step(Outcome):
    """What one SQL call produced, before the Session decides whether to keep it."""

    backend: DBFeedback = field(default_factory=DBFeedback)
    query: Sql | None = None
    build: SqlBuild | None = None
    schema: Schema | None = None
    result: ResultSet | None = None


# ------------------------------------------------------------------ the session


class SqlSession(Session):
    """A database environment for one question. See the module docstring.

    ``entities`` (mention -> value) is kept in the memory, as a KB session keeps its linked
    entities; the SQL toolset reads values as written.
    """

    tools = "sql"
    feedback_type = DBFeedback

    @property
    def backend(self) -> DB:
        return self.db

    def __init__(
        self,
        db: DB,
        entities: Mapping[str, str] | None = None,
        *,
        table: str | None = None,
        tables: Sequence[str] | None = None,
        guidelines: GuidelineChecker | bool | None = None,
        max_values: int = 10,
        max_rows: int = 5,
        row_cap: int = 1000,
        functions: Sequence[str] | None = None,
    ) -> None:
        if isinstance(tables, str):
            raise TypeError("tables must be a sequence of table names, not a string")
        if max_values < 1:
            raise ValueError("max_values must be at least 1")
        self.db = db
        self.entities = dict(entities or {})
        self.guidelines = resolve_guidelines(guidelines)
        self.max_values = max_values
        self.max_rows = max_rows
        self.row_cap = max(row_cap, max_values)
        self.functions = tuple(functions or ())
        self.dialect: str = getattr(db, "dialect", "") or "sqlite"
        scope = list(dict.fromkeys([*([table] if table else []), *(tables or [])]))
        self._initial_schema = db.schema(scope) if scope else db.schema()
        self._start = (
            self._initial_schema.find_table(table).name  # type: ignore[union-attr]
            if table is not None
            else None
        )
        self.reset()

    # -- state ----------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self.schema: Schema = self._initial_schema
        #: the whole build state: main query, open sub-query blocks, stored sub-queries
        self.build = SqlBuild(Sql(self._start, schema=self.schema), start=self._start)
        #: the rows of the last successful ``execute()``
        self.last_result: ResultSet | None = None

    def _initial_memory(self) -> Memory:
        return Memory(columns=self.schema.column_labels, entities=dict(self.entities))

    @property
    def query(self) -> Sql:
        """The main query (a sub-query under construction is ``build.current``)."""
        return self.build.query

    @property
    def table(self) -> str | None:
        """The base table of the query (None until a column or ``add_join`` picks it)."""
        return self.query.table

    def to_sql(self, dialect: str | None = None, *, pretty: bool = False) -> str:
        """The current query as SQL text (the database's dialect by default)."""
        return self.query.to_sql(dialect or self.dialect, pretty=pretty)

    def to_query(self) -> str:
        """The current query as SQL text in the database's dialect."""
        return self.to_sql()

    # -- the step hooks -------------------------------------------------------------------------
    def _commit(self, call: Call, outcome: Outcome) -> None:
        assert isinstance(outcome, _Step)
        if outcome.build is not None:
            self.build = outcome.build
        if outcome.schema is not None:
            self.schema = outcome.schema
        if call.name == "execute":
            self.last_result = outcome.result

    def _query_text(self) -> str:
        query = self.build.current
        if query.table is None:
            return ""
        try:
            return query.to_sql(self.dialect)
        except PyqlError:  # pragma: no cover - a query the builder accepted always compiles
            log.exception("cannot compile the current query")
            return ""

    def _apply(self, call: Call, resolved: tuple[Any, ...] = ()) -> _Step:
        name = call.name
        if name == "get_column":
            apply_call(self.build.current, call)  # validates the argument and the column
            return self._get_column(call.args[0].value)
        if name == "execute":
            self.build.apply(call)  # refuses an open sub-query block
            step = self._execute()
            step.build = self.build
            if step.backend.status == "ok":
                step.memory = self.memory.with_(last_values=step.backend.values)
            return step
        if name in BLOCK_CALLS:
            return self._block(call)
        schema = self._schema_for(call)
        base = self.build if schema is None else self._replay(schema)
        effective, notes = self._coerce(base.current, call)
        build = base.apply(effective)
        query = build.current
        step = self._observe(query)
        step.build = build
        step.backend = self._column_facts(query, effective, step.backend)
        step.schema = schema
        step.notes = notes + step.notes
        step.args = _args(effective)
        answers = [self._label(query, a) for a in query.answers]
        step.memory = self.memory.with_(
            columns=(schema or self.schema).column_labels,
            answer=", ".join(answers) if answers else None,
            last_values=step.backend.values if step.backend.status == "ok" else self.memory.last_values,
        )
        return step

    # schema scope -------------------------------------------------------------------------------
    def _schema_for(self, call: Call) -> Schema | None:
        """A wider schema when ``add_join`` names a database table outside the scope."""
        if call.name != "add_join" or call.args[0].kind not in (AtomKind.NAME, AtomKind.STRING):
            return None
        wanted = call.args[0].value.strip()
        if self.schema.find_table(wanted) is not None:
            return None
        known = self.db.table_names()
        if wanted not in known and not any(k.casefold() == wanted.casefold() for k in known):
            suggestions = close_matches(wanted, known)
            hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else ""
            raise SchemaError(f"unknown table {wanted!r}{hint}", name=wanted,
                              suggestions=suggestions, kind="table")
        return self.db.schema([*self.schema.table_names, wanted])

    def _block(self, call: Call) -> _Step:
        """``begin_subquery`` / ``end_subquery``."""
        build = self.build.apply(call)
        if call.name == "begin_subquery":
            name = build.blocks[-1][0]
            step = _Step(query=build.current, backend=DBFeedback(status="not_run"), build=build,
                         summary=f"Building the sub-query ?{name}: the next calls build it (its "
                                 "own table, conditions and answer), up to end_subquery().")
        else:
            name, sub = build.stored[-1]
            step = self._observe(sub)
            step.build = build
            step.summary = f"Stored the sub-query ?{name}. Its result: {step.summary}"
        answers = [self._label(build.current, a) for a in build.current.answers]
        step.memory = self.memory.with_(answer=", ".join(answers) if answers else None)
        return step

    def _replay(self, schema: Schema) -> SqlBuild:
        """The current build state rebuilt on ``schema`` (same accepted calls)."""
        build = SqlBuild(Sql(self._start, schema=schema), start=self._start)
        for call in self.program.calls:
            if call.name in ("get_column", "execute"):
                continue
            build = build.apply(self._coerce(build.current, call)[0])
        return build

    # coercion -----------------------------------------------------------------------------------
    def _coerce(self, query: Sql, call: Call) -> tuple[Call, list[str]]:
        """The call with its value compared as the column's type demands (module docs)."""
        if call.name == "add_condition":
            column_at, value_at, op_at, agg = 0, 2, 1, None
        elif call.name == "add_having":
            column_at, value_at, op_at = 0, 3, 2
            agg = call.args[1].value
        else:
            return call, []
        args = call.args
        op = args[op_at].value.strip().upper()
        if op in _LIKE_OPS or query_name(args[value_at]) is not None:
            return call, []
        if op in ("IN", "NOT IN"):
            return self._coerce_list(query, call)
        try:
            value = atom_value(args[value_at])
            category = self._category(query, args[column_at].value, agg)
        except PyqlError:
            return call, []  # apply_call reports the bad argument
        coerced, why = coerce_value(value, category)
        if why is None:
            return call, []
        new_args = list(args)
        new_args[value_at] = _value_atom(coerced)
        note = f"{args[value_at]} {why} (column {args[column_at].value} is {category})"
        return Call(name=call.name, args=tuple(new_args)), [note]

    def _coerce_list(self, query: Sql, call: Call) -> tuple[Call, list[str]]:
        """An ``IN`` list with each value coerced as :meth:`_coerce` does one."""
        args = call.args
        try:
            values = in_values(args[2])
            category = self._category(query, args[0].value, None)
        except PyqlError:
            return call, []
        pairs = [coerce_value(v, category) for v in values]
        if all(why is None for _, why in pairs):
            return call, []
        coerced = [v for v, _ in pairs]
        if all(isinstance(v, str) for v in coerced) and not any("|" in v for v in coerced):
            atom = Atom(AtomKind.STRING, "|".join(coerced))
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in coerced):
            atom = Atom(AtomKind.NAME, "|".join(repr(v) if isinstance(v, float) else str(v)
                                                for v in coerced))
        else:
            return call, []
        note = f"{args[2]} read as {atom} (column {args[0].value} is {category})"
        return Call(name=call.name, args=(*args[:2], atom)), [note]

    @staticmethod
    def _category(query: Sql, column: str, aggregation: str | None) -> str | None:
        agg = normalise_aggregation(aggregation)[0] if aggregation is not None else None
        if agg in ("COUNT", "SUM", "AVG"):
            return "real" if agg != "COUNT" else "integer"
        if column.strip() == "*":
            return None
        info: ColumnInfo | None = query.column_info(column)
        return info.type if info is not None else None

    # observing ----------------------------------------------------------------------------------
    def _observe(self, query: Sql) -> _Step:
        """Execute the query under construction and summarise what it returns (bounded)."""
        if query.table is None:
            return _Step(query=query, backend=DBFeedback(status="not_run"),
                         summary="Done (no table yet).")
        built = query
        if not query.answers and (query.group_by or query.having):
            # grouped rows have no "*": show the groups and their sizes (valid on every engine)
            for ref in query.group_by:
                query = query.set_answer(str(ref))
            query = query.set_answer("*", "COUNT")
        rs = self.db.execute(self._bounded(query, self.row_cap + 1))
        labels = self._labels(query, rs)
        if _is_empty(rs):
            fb = DBFeedback(status="empty", row_count=len(rs.rows))
            return _Step(query=built, backend=fb, summary="The query result is empty: no rows match.")
        rows = rs.rows[: self.row_cap]
        truncated = rs.truncated or len(rs.rows) > self.row_cap
        row_count = self._count(query) if truncated else len(rows)
        values = self._values(labels, rows)
        if truncated and len(labels) == 1:
            total = self._count(query, distinct=True)
            values = {k: replace(v, total=total) for k, v in values.items()}
        fb = DBFeedback(status="ok", row_count=row_count, values=values, cells_cut=rs.cells_cut)
        if len(query.answers) == 1:
            summary = _render_values(values, self.max_values)
        else:
            summary = _render_rows(labels, rows, row_count, self.max_rows,
                                   "group" if built is not query else "row")
        summary += fb.bound_note
        return _Step(query=built, backend=fb, summary=summary, result=rs)

    def _bounded(self, query: Sql, limit: int) -> str:
        """SQL text of ``query`` returning at most ``limit`` rows."""
        if not query.set_operations:
            if query.limit is None or query.limit > limit:
                query = query.set_limit(limit)
            return query.to_sql(self.dialect)
        wrapped = self._wrap(query).limit(exp.Literal.number(limit), copy=False)
        return wrapped.sql(dialect=self.dialect, copy=False)

    def _wrap(self, query: Sql) -> exp.Select:
        inner = exp.Subquery(
            this=query.to_expression(self.dialect),
            alias=exp.TableAlias(this=exp.to_identifier("pyql_rows")),
        )
        return exp.select(exp.Star()).from_(inner)

    def _count(self, query: Sql, *, distinct: bool = False) -> int:
        """How many rows (distinct rows) ``query`` returns."""
        inner = self._wrap(query)
        if distinct:
            inner = inner.distinct()
        count = exp.select(exp.Count(this=exp.Star())).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("pyql_n")))
        )
        rs = self.db.execute(count.sql(dialect=self.dialect))
        return int(rs.rows[0][0])

    def _values(
        self, labels: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> dict[str, VariableValues]:
        values: dict[str, VariableValues] = {}
        for i, label in enumerate(labels):
            distinct = list(dict.fromkeys(row[i] for row in rows))
            shown = tuple(_display(v) for v in distinct[: self.max_values])
            values[label] = VariableValues(values=shown, total=len(distinct))
        return values

    def _labels(self, query: Sql, rs: ResultSet) -> list[str]:
        """Unique display names of the result columns."""
        if query.answers:
            labels = [self._label(query, a) for a in query.answers]
        else:
            qualify = len(query.tables) > 1
            labels = []
            for t in query.tables:
                info = query.schema.find_table(t) if query.schema is not None else None
                if info is None:
                    labels = []
                    break
                labels += [f"{info.name}.{c.name}" if qualify else c.name for c in info.columns]
        if len(labels) != len(rs.columns):
            labels = list(rs.columns)
        seen: dict[str, int] = {}
        unique = []
        for label in labels:
            seen[label] = seen.get(label, 0) + 1
            unique.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
        return unique

    @staticmethod
    def _label(query: Sql, answer: Answer) -> str:
        ref = answer.column
        name = "*" if ref.is_star else (str(ref) if len(query.tables) > 1 else ref.name)
        if answer.aggregation is None:
            return name
        inner = f"DISTINCT {name}" if answer.distinct else name
        return f"{answer.aggregation}({inner})"

    # facts for the guidelines ------------------------------------------------------------------
    def _column_facts(self, query: Sql, call: Call, fb: DBFeedback) -> DBFeedback:
        """``fb`` with the SQL fields the guidelines read (``column_types``, ``column_values``,
        ``value_found``) filled for the column the call names (see the module docs)."""
        if call.name not in _COLUMN_CALLS or call.args[0].value.strip() == "*":
            return fb
        if call.name in ("add_condition", "add_having") and query_name(call.args[-1]) is not None:
            return fb  # compared with a sub-query: an empty result says nothing of the value
        try:
            ref = query.resolve_column(call.args[0].value)
            info = query.column_info(call.args[0].value)
        except PyqlError:
            return fb
        if info is None or ref.table is None:
            return fb
        label = str(ref) if len(query.tables) > 1 else ref.name
        update: dict[str, Any] = {"column_types": {label: info.type}}
        column = Sql(ref.table, schema=query.schema)
        if call.name == "add_condition":
            op = call.args[1].value.strip().upper()
            if fb.status == "ok" and op in ("=", "LIKE"):
                update["value_found"] = True
            elif fb.status == "empty" and fb.row_count == 0 and _condition_alone(query):
                # the step's own query was this condition on its table alone: its empty result
                # already says that no row matches (no second query)
                update["value_found"] = False
                update["column_values"] = {label: self._sample(column, ref.name, _SAMPLE)}
            elif fb.status == "empty":
                # Does this condition alone match a row of its table? If it does, the empty
                # result comes from the conditions together, which can be the right answer.
                literal = op in ("LIKE", "NOT LIKE", "CONTAINS", "NOT CONTAINS")
                try:
                    if literal:
                        value: Any = call.args[2].value
                    elif op in ("IN", "NOT IN"):
                        value = in_values(call.args[2])
                    else:
                        value = atom_value(call.args[2])
                    probe = column.add_condition(ref.name, op, value).set_answer(ref.name)
                    found = self.db.execute(probe.set_limit(1).to_sql(self.dialect))
                    update["value_found"] = not found.is_empty
                except PyqlError:
                    pass
                update["column_values"] = {label: self._sample(column, ref.name, _SAMPLE)}
        elif call.name == "set_answer" and len(call.args) > 1:
            agg = normalise_aggregation(call.args[1].value)[0]
            if agg in ("SUM", "AVG") and info.type not in NUMERIC_TYPES:
                update["column_values"] = {label: self._sample(column, ref.name, 20)}
        return replace(fb, **update)

    def _sample(self, query: Sql, column: str, limit: int) -> tuple[str, ...]:
        rs = self.db.execute(query.value_counts(column, limit=limit).to_sql(self.dialect))
        return tuple(_display(v) for v, _ in rs.rows if v is not None)

    # environment calls --------------------------------------------------------------------------
    def _get_column(self, column: str) -> _Step:
        query = self.build.current
        counts = query.value_counts(column, limit=self.max_values + 1)
        rs = self.db.execute(counts.to_sql(self.dialect))
        rows = list(rs.rows)
        ref = query.resolve_column(column)
        label = str(ref) if len(counts.tables) > 1 else ref.name
        if len(rows) > self.max_values:
            total = self._count(query.value_counts(column, limit=None))
            rows = rows[: self.max_values]
        else:
            total = len(rows)
        shown = tuple(_display(v) for v, _ in rows)
        values = {label: VariableValues(values=shown, total=total)} if rows else {}
        info = query.column_info(column)
        fb = DBFeedback(
            status="ok" if rows else "empty", row_count=total, values=values,
            column_types={label: info.type} if info is not None else {},
            column_values={label: shown},
        )
        if not rows:
            summary = f"Column {label} has no values under the current conditions."
        else:
            listed = ", ".join(f"{_display(v)!r} ({n})" for v, n in rows)
            more = f", ... ({total} distinct values in total)" if total > len(rows) else ""
            where = " under the current conditions" if query.conditions or query.joins else ""
            summary = f"Column {label} values (with row counts){where}: {listed}{more}"
        return _Step(query=query, backend=fb, summary=summary, args=(str(ref),), build=self.build)

    def _execute(self) -> _Step:
        query = self.query
        if query.table is None:
            raise QueryError(
                "execute: the query is empty; add a condition or set an answer first",
                code="empty_query",
                suggestions=[f"set_answer({c})" for c in self.memory.columns[:5]],
            )
        if not query.answers:
            columns = [str(c.column) for c in query.conditions if not c.column.is_star]
            columns += [c for c in self.memory.columns if c not in columns]
            raise QueryError(
                "execute: no answer column; call set_answer(column, aggregation) first",
                code="no_answer",
                suggestions=[f"set_answer({c})" for c in columns[:5]],
            )
        rs = self.db.execute(query.to_sql(self.dialect))
        labels = self._labels(query, rs)
        width = len(rs.columns)
        answers: tuple[Any, ...] = (
            tuple(row[0] for row in rs.rows) if width == 1 else tuple(tuple(r) for r in rs.rows)
        )
        values = self._values(labels, rs.rows) if rs.rows else {}
        status = "empty" if _is_empty(rs) else "ok"
        fb = DBFeedback(status=status, row_count=len(rs.rows), values=values, answers=answers,
                        truncated=rs.truncated, cells_cut=rs.cells_cut)
        if status == "empty" and not rs.rows:
            summary = "The query result is empty."
        elif width == 1:
            shown = [_cell(a) for a in answers[: self.max_values]]
            more = f" ({len(answers)} rows in total)" if len(answers) > len(shown) else ""
            summary = f"The answer is {shown}{more}"
        else:
            shown = [tuple(_cell(c) for c in row) for row in answers[: self.max_values]]
            more = f" ({len(answers)} rows in total)" if len(answers) > len(shown) else ""
            summary = f"The answer ({', '.join(labels)}) is {shown}{more}"
        summary += fb.bound_note
        return _Step(query=query, backend=fb, summary=summary, result=rs)


# ------------------------------------------------------------------ helpers


def _args(call: Call) -> tuple[Any, ...]:
    out: list[Any] = []
    for atom in call.args:
        if atom.kind in (AtomKind.NUMBER, AtomKind.STRING) or (
            atom.kind is AtomKind.NAME and atom.value.upper() == "NULL"
        ):
            try:
                out.append(atom_value(atom))
                continue
            except PyqlError:  # pragma: no cover - numbers and strings always have a value
                pass
        out.append(atom.value)
    return tuple(out)


def _condition_alone(query: Sql) -> bool:
    """Is ``query`` one table with one condition (nothing joined, grouped, cut or combined)?"""
    return (len(query.conditions) == 1 and not query.joins and not query.group_by
            and not query.having and not query.set_operations and query.limit is None
            and len(query.tables) == 1)


def _render_values(values: Mapping[str, VariableValues], max_shown: int) -> str:
    parts = []
    for label, vv in values.items():
        shown = list(vv.values[:max_shown])
        more = f" ({vv.total} distinct values in total)" if vv.total > len(shown) else ""
        parts.append(f"{label}: {shown}{more}")
    return ". ".join(parts)


def _render_rows(
    labels: Sequence[str], rows: Sequence[Sequence[Any]], total: int, max_rows: int,
    noun: str = "row",
) -> str:
    shown = "; ".join(repr(tuple(_cell(c) for c in row)) for row in rows[:max_rows])
    if noun == "row":
        head = "1 row matches" if total == 1 else f"{total} rows match"
    else:
        head = f"{total} {noun}{'s' if total != 1 else ''}"
    more = f"; ... ({total - max_rows} more)" if total > max_rows else ""
    return f"{head}. Columns: {', '.join(labels)}. Rows: {shown}{more}"
