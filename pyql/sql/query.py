"""An immutable SQL query tree, built step by step and compiled with sqlglot.

:class:`Sql` is the SQL counterpart of :class:`pyql.sparql.Sparql`: a frozen value whose builder
methods (the PyQL SQL tool set: ``add_condition``, ``set_answer``, ``add_join``, ...) each return
a *new* query, so a rejected step is rolled back by keeping the previous value.

The tree holds declarative records (:class:`ColumnRef`, :class:`Condition`, :class:`Answer`,
...), never SQL text. :meth:`Sql.to_expression` turns it into a sqlglot expression and
:meth:`Sql.to_sql` into text for any sqlglot dialect. Identifiers are always quoted and values are
always sqlglot literals, so no column name or value can break out of its position.

>>> q = Sql("players").add_condition("Player", "=", "Terrence Ross").set_answer("Nationality")
>>> q.to_sql()
'SELECT "Nationality" FROM "players" WHERE "Player" = \\'Terrence Ross\\''
>>> q.to_sql("tsql")
"SELECT [Nationality] FROM [players] WHERE [Player] = 'Terrence Ross'"

Choices worth knowing:

- ``NUL`` characters (``\\x00``) are refused with :class:`~pyql.errors.QueryError` (code
  ``"nul_character"``) in values and names: most engines cannot store them in text and some
  drivers truncate at them, so they can only be a mistake or an attack.
- ``LIKE`` and ``contains`` match letters case-insensitively in every dialect, as SQLite (the
  embedded default) does: ``ILIKE`` where the engine has it (PostgreSQL, DuckDB, Snowflake),
  ``LOWER(col) LIKE LOWER('pattern')`` where it has not (Trino, BigQuery, Spark, ...), plain ``LIKE``
  where it already is (SQLite, MySQL, T-SQL).
- ``add_condition(col, "contains", text)`` is ``col LIKE '%text%' ESCAPE '\\'`` with ``%``, ``_``
  and ``\\`` in ``text`` escaped, and ``[`` too for T-SQL (its LIKE has character classes).
  BigQuery has no ``ESCAPE`` clause; there ``\\`` is the default escape and the clause is left
  out.
- ORDER BY keeps SQLite's NULL ordering (NULLs sort first ascending, last descending) in every
  dialect: sqlglot adds ``NULLS FIRST``/``NULLS LAST`` where the engine's default differs.
- Values are rendered with the Python type they have: ``"5"`` is a string literal, ``5`` a number.
  Numeric coercion of text (WikiSQL stores numbers as text) is the DB layer's job.
- A query without answers selects ``*``.
- What an engine would refuse is refused at the step that makes it so, with the fix in the
  message: ``add_having`` without ``add_group_by`` (code ``having_without_group_by``),
  ``add_order`` by an aggregate on a query that neither groups nor returns an aggregate
  (``aggregate_order_without_group_by``), and set
  operations whose sides select different numbers of columns (``bad_set_operation``, naming both
  column lists), checked whenever either side changes. Every program the builder accepts compiles
  to SQL that SQLite, PostgreSQL and DuckDB parse and bind (``tests/test_fuzz_sql.py``); what
  remains to the engine is data-dependent (types, which columns a GROUP BY determines).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlglot.expressions as exp
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.dialects.dialect import Dialect, DialectType
from sqlglot.dialects.tsql import TSQL

from pyql.errors import QueryError, SchemaError
from pyql.sql.schema import ColumnInfo, Schema, TableInfo, close_matches
from pyql.sql.sqlglot_log import sqlglot_warnings_logged

__all__ = [
    "Sql",
    "ColumnRef",
    "Condition",
    "Answer",
    "OrderKey",
    "Join",
    "SetOperation",
    "Value",
    "Operand",
    "OPERATORS",
    "AGGREGATIONS",
    "LIKE_ESCAPE",
    "STAR",
    "normalise_operator",
    "normalise_aggregation",
    "escape_like",
]

Value = str | int | float | Decimal | None

#: operators accepted by :meth:`Sql.add_condition` (case-insensitive; ``<>`` and ``==`` too)
OPERATORS: tuple[str, ...] = (
    "=",
    "!=",
    ">",
    "<",
    ">=",
    "<=",
    "LIKE",
    "NOT LIKE",
    "CONTAINS",
    "NOT CONTAINS",
    "IN",
    "NOT IN",
)
_COMPARISONS = ("=", "!=", ">", "<", ">=", "<=")
#: aggregation functions (``None`` means no aggregation)
AGGREGATIONS: tuple[str, ...] = ("MAX", "MIN", "COUNT", "SUM", "AVG")
#: the escape character of ``contains`` patterns
LIKE_ESCAPE = "\\"

_OP_ALIASES = {
    "<>": "!=",
    "==": "=",
    "NOT_LIKE": "NOT LIKE",
    "NOT_IN": "NOT IN",
    "NOT_CONTAINS": "NOT CONTAINS",
}
_AGG_FUNCS: dict[str, type[exp.Func]] = {
    "MAX": exp.Max,
    "MIN": exp.Min,
    "COUNT": exp.Count,
    "SUM": exp.Sum,
    "AVG": exp.Avg,
}
_COMPARE_NODES: dict[str, type[exp.Binary]] = {
    "=": exp.EQ,
    "!=": exp.NEQ,
    ">": exp.GT,
    "<": exp.LT,
    ">=": exp.GTE,
    "<=": exp.LTE,
}
_IDENT_DOT_IDENT = re.compile(r"([^\W\d]\w*)\.([^\W\d]\w*)")
_AGG_TEXT = re.compile(
    r"\s*(MAX|MIN|COUNT|SUM|AVG)\s*\(\s*(DISTINCT\s+)?(.*?)\s*\)\s*", re.I | re.S
)


@dataclass(frozen=True)
class ColumnRef:
    """A resolved column: its ``name`` and, when known, its ``table``. ``*`` is :data:`STAR`."""

    name: str
    table: str | None = None

    @property
    def is_star(self) -> bool:
        return self.name == "*" and self.table is None

    def __str__(self) -> str:
        return f"{self.table}.{self.name}" if self.table else self.name


#: the ``*`` of ``COUNT(*)`` / ``SELECT *``
STAR = ColumnRef("*")


@dataclass(frozen=True)
class Condition:
    """``[aggregation(]column[)] op value``: a WHERE (no aggregation) or HAVING condition.

    ``op`` is canonical: one of :data:`OPERATORS`. ``value`` is a literal value, ``None``
    (IS [NOT] NULL), a tuple of values (IN lists), a sub-query (:class:`Sql`) or another column
    (:class:`ColumnRef`); for ``CONTAINS`` it is the plain text, escaped when compiled.
    """

    column: ColumnRef
    op: str
    value: Operand
    aggregation: str | None = None
    distinct: bool = False


@dataclass(frozen=True)
class Answer:
    """One answer (SELECT) column, optionally aggregated (``COUNT(DISTINCT x)`` with distinct)."""

    column: ColumnRef
    aggregation: str | None = None
    distinct: bool = False


@dataclass(frozen=True)
class OrderKey:
    """One ORDER BY key: a column or an aggregate of it, ``ASC`` or ``DESC``."""

    column: ColumnRef
    direction: str = "ASC"
    aggregation: str | None = None
    distinct: bool = False


@dataclass(frozen=True)
class Join:
    """An inner join of ``table`` on ``left = right`` (``right`` is a column of ``table``)."""

    table: str
    left: ColumnRef
    right: ColumnRef


@dataclass(frozen=True)
class SetOperation:
    """``<this query> UNION|INTERSECT|EXCEPT [ALL] <query>``."""

    kind: str
    query: Sql
    all: bool = False


def normalise_operator(op: str) -> str:
    """The canonical spelling of a condition operator; QueryError if unknown.

    >>> normalise_operator(" not  like "), normalise_operator("<>"), normalise_operator("Contains")
    ('NOT LIKE', '!=', 'CONTAINS')
    """
    if not isinstance(op, str):
        raise QueryError(
            f"operator must be a string, got {op!r}", code="bad_operator", suggestions=OPERATORS
        )
    text = " ".join(op.split()).upper()
    text = _OP_ALIASES.get(text, text)
    if text not in OPERATORS:
        raise QueryError(
            f"unknown operator {op!r}; use one of {', '.join(OPERATORS)}",
            code="bad_operator",
            suggestions=OPERATORS,
        )
    return text


def normalise_aggregation(aggregation: str | None) -> tuple[str | None, bool]:
    """``(function or None, distinct)`` for an aggregation as written; QueryError if unknown.

    >>> normalise_aggregation("count"), normalise_aggregation("None"), normalise_aggregation(None)
    (('COUNT', False), (None, False), (None, False))
    >>> normalise_aggregation("COUNT DISTINCT")
    ('COUNT', True)
    """
    if aggregation is None:
        return None, False
    if not isinstance(aggregation, str):
        raise QueryError(
            f"aggregation must be a string, got {aggregation!r}",
            code="bad_aggregation",
            suggestions=("None", *AGGREGATIONS),
        )
    text = " ".join(aggregation.replace("_", " ").split()).upper()
    if text in ("", "NONE", "NULL"):
        return None, False
    distinct = False
    if text.endswith(" DISTINCT"):
        text, distinct = text[: -len(" DISTINCT")], True
    if text not in AGGREGATIONS:
        raise QueryError(
            f"unknown aggregation {aggregation!r}; use one of None, {', '.join(AGGREGATIONS)}",
            code="bad_aggregation",
            suggestions=("None", *AGGREGATIONS),
        )
    return text, distinct


def escape_like(text: str, escape: str = LIKE_ESCAPE, *, brackets: bool = False) -> str:
    r"""``text`` with the LIKE wildcards ``%``, ``_`` and ``escape`` escaped (and ``[`` if
    ``brackets``: T-SQL's character classes).

    >>> print(escape_like("50%_off[1]\\x"), escape_like("[1]", brackets=True))
    50\%\_off[1]\\x \[1]
    """
    special = ("%", "_", escape, "[") if brackets else ("%", "_", escape)
    out = []
    for ch in text:
        if ch in special:
            out.append(escape)
        out.append(ch)
    return "".join(out)


def _check_text(text: Any, what: str) -> str:
    if not isinstance(text, str):
        raise QueryError(f"{what} must be a string, got {text!r}", code="bad_name")
    if not text.strip():
        raise QueryError(f"{what} is empty", code="bad_name")
    if "\x00" in text:
        raise QueryError(f"NUL character in {what} {text!r}", code="nul_character")
    return text


def _check_value(value: Any) -> Value:
    if value is None:
        return None
    if isinstance(value, bool):
        raise QueryError(f"boolean values are not supported, got {value!r}", code="bad_value")
    if isinstance(value, str):
        if "\x00" in value:
            raise QueryError(f"NUL character in value {value!r}", code="nul_character")
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QueryError(f"value must be a finite number, got {value!r}", code="bad_value")
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise QueryError(f"value must be a finite number, got {value!r}", code="bad_value")
        return value
    raise QueryError(
        f"value must be a string, a number or None, got {type(value).__name__} {value!r}",
        code="bad_value",
    )


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _literal(value: Value) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, Decimal):
        text = format(value, "f")
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    if text.startswith("-"):
        return exp.Neg(this=exp.Literal.number(text[1:]))
    return exp.Literal.number(text)


class _Joins:
    """Union-find over join equalities: which columns are equal by a join condition."""

    def __init__(self, joins: Iterable[Join]) -> None:
        self.parent: dict[ColumnRef, ColumnRef] = {}
        for j in joins:
            a, b = self.find(j.left), self.find(j.right)
            if a != b:
                self.parent[a] = b

    def find(self, c: ColumnRef) -> ColumnRef:
        while c in self.parent:
            c = self.parent[c]
        return c


@dataclass(frozen=True, init=False, repr=False)
class Sql:
    """An immutable SQL query: base table, joins, conditions, answers, grouping, order, limit.

    ``Sql(table)`` starts a query on ``table``; ``Sql(tables=[a, b, ...])`` starts on ``a`` and
    joins each next table along a declared foreign key (needs ``schema``). With a ``schema``,
    table and column names are checked and resolved (exact, else case-insensitive), and the base
    table may be left out: the first column used picks it.

    >>> Sql("t").set_answer("x").add_condition("y", ">", 3).to_sql()
    'SELECT "x" FROM "t" WHERE "y" > 3'
    >>> q = Sql("t")
    >>> q2 = q.set_answer("x")
    >>> q.answers, len(q2.answers)
    ((), 1)
    """

    schema: Schema | None
    table: str | None
    joins: tuple[Join, ...]
    conditions: tuple[Condition, ...]
    answers: tuple[Answer, ...]
    group_by: tuple[ColumnRef, ...]
    having: tuple[Condition, ...]
    order_by: tuple[OrderKey, ...]
    limit: int | None
    distinct: bool
    set_operations: tuple[SetOperation, ...]

    def __init__(
        self,
        table: str | None = None,
        *,
        tables: Sequence[str] | None = None,
        schema: Schema | None = None,
    ) -> None:
        if schema is not None and not isinstance(schema, Schema):
            raise TypeError(f"schema must be a pyql.sql.Schema, got {type(schema).__name__}")
        names: list[str] = []
        if table is not None:
            names.append(table)
        if tables is not None:
            if isinstance(tables, str):
                raise TypeError("tables must be a sequence of table names, not a string")
            names.extend(tables)
        base: str | None = None
        if names:
            base = self._table_name(names[0], schema)
        self._init(schema=schema, table=base)
        query = self
        for name in names[1:]:
            query = query.add_join(name)
        if query is not self:
            for f in self.__dataclass_fields__:
                object.__setattr__(self, f, getattr(query, f))

    def _init(self, **fields: Any) -> None:
        defaults: dict[str, Any] = {
            "schema": None,
            "table": None,
            "joins": (),
            "conditions": (),
            "answers": (),
            "group_by": (),
            "having": (),
            "order_by": (),
            "limit": None,
            "distinct": False,
            "set_operations": (),
        }
        defaults.update(fields)
        for name, value in defaults.items():
            object.__setattr__(self, name, value)

    def _evolve(self, **changes: Any) -> Sql:
        new = object.__new__(Sql)
        fields = {f: getattr(self, f) for f in self.__dataclass_fields__}
        fields.update(changes)
        new._init(**fields)
        if new.set_operations and changes.keys() & {"answers", "joins", "table", "set_operations"}:
            new._check_set_widths()
        return new

    def select_list(self) -> tuple[str, ...] | None:
        """What this query selects, one text per result column (``*`` expanded with a schema);
        None when it selects ``*`` and no schema says what that is.

        >>> Sql("t").set_answer("a").set_answer("*", "COUNT").select_list()
        ('a', 'COUNT(*)')
        >>> Sql("t").select_list() is None
        True
        """
        out: list[str] = []
        for a in self.answers or (Answer(STAR),):
            if a.column.is_star and a.aggregation is None:
                if self.schema is None or self.table is None:
                    return None
                out += [f"{t}.{c.name}" if len(self.tables) > 1 else c.name
                        for t in self.tables for c in self._cols(t)]
                continue
            name = self._label(a.column)
            if a.aggregation is not None:
                name = f"{a.aggregation}({'DISTINCT ' if a.distinct else ''}{name})"
            out.append(name)
        return tuple(out)

    def _check_set_widths(self) -> None:
        """Both sides of every set operation select the same number of columns (engines refuse
        ``SELECT a, b ... UNION SELECT c ...``); QueryError ``bad_set_operation`` naming both."""
        mine = self.select_list()
        if mine is None:
            return
        for op in self.set_operations:
            theirs = op.query.select_list()
            if theirs is not None and len(theirs) != len(mine):
                raise QueryError(
                    f"{op.kind} needs the same number of columns on both sides: this query "
                    f"selects {len(mine)} ({', '.join(mine)}), the other {len(theirs)} "
                    f"({', '.join(theirs)}); make both select the same number of columns",
                    code="bad_set_operation",
                    suggestions=(*mine, *theirs),
                )

    def __repr__(self) -> str:
        try:
            return f"Sql({self.to_sql()!r})"
        except QueryError:
            return (
                f"Sql(<no table>, answers={len(self.answers)}, conditions={len(self.conditions)})"
            )

    # ------------------------------------------------------------------ names and resolution

    @staticmethod
    def _table_name(name: str, schema: Schema | None) -> str:
        _check_text(name, "table name")
        if schema is None:
            return name
        return schema.table(name).name

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables in the query: the base table, then the joined ones."""
        if self.table is None:
            return ()
        return (self.table, *(j.table for j in self.joins))

    def _table_in_query(self, name: str) -> str | None:
        tables = self.tables
        if name in tables:
            return name
        hits = [t for t in tables if t.casefold() == name.casefold()]
        return hits[0] if len(hits) == 1 else None

    def _info(self, table: str) -> TableInfo:
        assert self.schema is not None
        return self.schema.table(table)

    def resolve_column(self, column: str) -> ColumnRef:
        """The column ``column`` names in this query (``*`` is :data:`STAR`).

        With a schema: the whole text is matched against the columns of the query's tables first
        (WikiSQL headers contain dots), then ``table.column`` is tried. Without a schema the text
        is one column name unless it is ``ident.ident`` with a table of the query.

        >>> Sql("t").resolve_column("No.")
        ColumnRef(name='No.', table=None)
        >>> Sql("t").resolve_column("t.x")
        ColumnRef(name='x', table='t')
        """
        return self._resolve(column, allow_star=True)[0]

    def column_info(self, column: str) -> ColumnInfo | None:
        """The schema entry of ``column`` (None without a schema, for ``*`` or unknown table).

        The DB layer uses it to coerce values to the column's type category.

        >>> from pyql.sql.schema import Schema
        >>> Sql("t", schema=Schema.from_mapping({"t": {"Year": "INTEGER"}})).column_info("year").type
        'integer'
        """
        ref = self.resolve_column(column)
        if self.schema is None or ref.table is None or ref.is_star:
            return None
        info = self.schema.find_table(ref.table)
        return info.find_column(ref.name) if info is not None else None

    def _resolve(
        self, column: str, *, allow_star: bool = False, what: str = "column"
    ) -> tuple[ColumnRef, Sql]:
        """The resolved column and the query (whose base table may have been inferred)."""
        if isinstance(column, ColumnRef):
            column = str(column)
        _check_text(column, what)
        if column.strip() == "*":
            if not allow_star:
                raise QueryError(f"'*' is not a {what} here", code="bad_star")
            return STAR, self
        if self.schema is None:
            m = _IDENT_DOT_IDENT.fullmatch(column)
            if m:
                table = self._table_in_query(m.group(1))
                if table is not None:
                    return ColumnRef(m.group(2), table), self
            return ColumnRef(column, None), self
        return self._resolve_with_schema(column, what)

    def _resolve_with_schema(self, column: str, what: str) -> tuple[ColumnRef, Sql]:
        schema = self.schema
        assert schema is not None
        in_query = self.tables
        scope = in_query or schema.table_names

        # 1. the whole text is a column name (exact match first, then case-insensitive)
        for text in dict.fromkeys((column, column.strip())):
            exact = [ColumnRef(c.name, t) for t in scope for c in self._cols(t) if c.name == text]
            hits = exact or [
                ColumnRef(c.name, t)
                for t in scope
                for c in self._cols(t)
                if c.name.casefold() == text.casefold()
            ]
            if hits:
                return self._pick(column, hits, what)

        # 2. table.column, trying every dot (table names may contain dots too)
        for i, ch in enumerate(column):
            if ch != ".":
                continue
            info = schema.find_table(column[:i].strip())
            col = info.find_column(column[i + 1 :].strip()) if info is not None else None
            if info is None or col is None:
                continue
            ref = ColumnRef(col.name, info.name)
            if info.name in in_query:
                return ref, self
            if not in_query:
                return ref, self._evolve(table=info.name)
            raise SchemaError(
                f"table {info.name!r} is not in the query (tables: {', '.join(in_query)}); "
                f"join it first with add_join({info.name})",
                name=column,
                suggestions=[str(ref)],
            )

        # 3. a column of a table that is not joined yet
        elsewhere = [
            f"{t.name}.{c.name}"
            for t in schema
            if t.name not in in_query
            for c in t.columns
            if c.name.casefold() == column.strip().casefold()
        ]
        if in_query and elsewhere:
            raise SchemaError(
                f"no column {column!r} in {', '.join(in_query)}; it is in "
                f"{', '.join(elsewhere)} (join the table first with add_join)",
                name=column,
                suggestions=elsewhere,
            )
        candidates = [c.name for t in scope for c in self._cols(t)]
        candidates += [f"{t}.{c.name}" for t in scope for c in self._cols(t)]
        suggestions = close_matches(column, candidates)
        hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else ""
        where = f" in {', '.join(in_query)}" if in_query else ""
        raise SchemaError(
            f"unknown {what} {column!r}{where}{hint}", name=column, suggestions=suggestions
        )

    def _cols(self, table: str) -> tuple[ColumnInfo, ...]:
        return self._info(table).columns

    def _pick(self, column: str, hits: list[ColumnRef], what: str) -> tuple[ColumnRef, Sql]:
        hits = list(dict.fromkeys(hits))
        if len(hits) == 1:
            ref = hits[0]
            if not self.tables:
                return ref, self._evolve(table=ref.table)
            return ref, self
        if self.tables:
            joined = _Joins(self.joins)
            if len({joined.find(h) for h in hits}) == 1:  # equal by the join conditions
                return hits[0], self
        options = [str(h) for h in hits]
        raise QueryError(
            f"{what} {column!r} is ambiguous; write one of {', '.join(options)}",
            code="ambiguous_column",
            suggestions=options,
        )

    # ------------------------------------------------------------------ builder methods

    def add_condition(self, column: str, op: str, value: Operand | Sequence[Value]) -> Sql:
        """Keep rows where ``column op value`` holds; calling it again ANDs the conditions.

        ``op``: ``= != > < >= <=``, ``LIKE``/``NOT LIKE`` (``value`` is a pattern),
        ``contains``/``not contains`` (``value`` is plain text, wildcards escaped), ``IN``/``NOT
        IN`` (``value`` is a sequence of values or a one-column :class:`Sql`). ``value`` may be a
        string, a number, ``None`` (``IS NULL``/``IS NOT NULL`` with ``=``/``!=``), a one-column
        :class:`Sql` (scalar sub-query) or a :class:`ColumnRef` (compare two columns).

        >>> Sql("t").add_condition("Lyrics theme/style", "=", "Romance").to_sql()
        'SELECT * FROM "t" WHERE "Lyrics theme/style" = \\'Romance\\''
        >>> Sql("t").add_condition("name", "contains", "50%").to_sql()
        'SELECT * FROM "t" WHERE "name" LIKE \\'%50\\\\%%\\' ESCAPE \\'\\\\\\''
        >>> Sql("t").add_condition("x", "!=", None).add_condition("y", "<", 2.5).to_sql()
        'SELECT * FROM "t" WHERE NOT "x" IS NULL AND "y" < 2.5'
        """
        canonical = normalise_operator(op)
        ref, query = self._resolve(column)
        cond = query._condition(ref, canonical, value, aggregation=None)
        return query._evolve(conditions=(*query.conditions, cond))

    def _condition(
        self,
        ref: ColumnRef,
        op: str,
        value: Any,
        *,
        aggregation: str | None,
        distinct: bool = False,
    ) -> Condition:
        if op in ("LIKE", "NOT LIKE", "CONTAINS", "NOT CONTAINS"):
            value = self._pattern_text(value, op)
        elif op in ("IN", "NOT IN"):
            value = self._in_operand(value)
        elif isinstance(value, Sql):
            self._check_subquery(value, scalar=True)
        elif isinstance(value, ColumnRef):
            value = self._resolve(str(value))[0]
        else:
            value = _check_value(value)
            if value is None and op not in ("=", "!="):
                raise QueryError(
                    f"None (NULL) can only be compared with = or !=, not {op}", code="bad_value"
                )
        return Condition(ref, op, value, aggregation, distinct)

    @staticmethod
    def _pattern_text(value: Any, op: str) -> str:
        if isinstance(value, (Sql, ColumnRef, tuple, list)) or value is None:
            raise QueryError(f"{op} needs a text value, got {value!r}", code="bad_value")
        value = _check_value(value)
        return value if isinstance(value, str) else _literal(value).sql()

    def _in_operand(self, value: Any) -> Sql | tuple[Value, ...]:
        if isinstance(value, Sql):
            self._check_subquery(value, scalar=False)
            return value
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise QueryError(
                f"IN needs a list of values or a sub-query, got {value!r}", code="bad_value"
            )
        values = tuple(_check_value(v) for v in value)
        if not values:
            raise QueryError("IN needs at least one value", code="bad_value")
        if any(v is None for v in values):
            raise QueryError("IN lists cannot hold None (NULL)", code="bad_value")
        return values

    @staticmethod
    def _check_subquery(sub: Sql, *, scalar: bool) -> None:
        if sub.table is None:
            raise QueryError("the sub-query has no table", code="bad_subquery")
        width = len(sub.answers)
        if width != 1 or (sub.answers[0].column.is_star and sub.answers[0].aggregation is None):
            kind = "a scalar sub-query" if scalar else "an IN sub-query"
            raise QueryError(
                f"{kind} must return exactly one column (use set_answer once), got {width}",
                code="bad_subquery",
            )

    def set_answer(
        self, column: str, aggregation: str | None = None, *, distinct: bool = False
    ) -> Sql:
        """Return ``column``, optionally aggregated; call again for more answer columns.

        ``aggregation`` is None/"None", MAX, MIN, COUNT, SUM or AVG (any case; "COUNT DISTINCT"
        counts distinct values). ``column`` may be ``*`` (``COUNT(*)``, or ``SELECT *``). Adding
        an answer that is already there changes nothing.

        >>> Sql("t").set_answer("*", "count").to_sql()
        'SELECT COUNT(*) FROM "t"'
        >>> Sql("t").set_answer("a").set_answer("b", "MAX").to_sql("mysql")
        'SELECT `a`, MAX(`b`) FROM `t`'
        """
        agg, agg_distinct = normalise_aggregation(aggregation)
        ref, query = self._resolve(column, allow_star=True)
        distinct = distinct or agg_distinct
        if ref.is_star and agg not in (None, "COUNT"):
            raise QueryError(f"{agg}(*) is not valid; name a column", code="bad_star")
        if ref.is_star and distinct:
            raise QueryError("COUNT(DISTINCT *) is not valid; name a column", code="bad_star")
        if distinct and agg is None:
            raise QueryError(
                "distinct needs an aggregation (use set_distinct() for rows)",
                code="bad_aggregation",
            )
        answer = Answer(ref, agg, distinct)
        if answer in query.answers:
            return query
        return query._evolve(answers=(*query.answers, answer))

    def add_join(
        self, table: str, left_column: str | None = None, right_column: str | None = None
    ) -> Sql:
        """Inner-join ``table`` on ``left_column = right_column``, or along a foreign key.

        Without columns, the single declared foreign key (either direction) between a table of the
        query and ``table`` is used. With only ``left_column``, the new table's column of the same
        name is the right side. On a query without a table, ``add_join(table)`` sets the base table.

        >>> Sql("singer").add_join("singer_in_concert", "singer.Singer_ID", "Singer_ID").to_sql()
        'SELECT * FROM "singer" JOIN "singer_in_concert" ON "singer"."Singer_ID" = "singer_in_concert"."Singer_ID"'
        """
        if self.table is None:
            if left_column is None and right_column is None:
                return self._evolve(table=self._table_name(table, self.schema))
            raise QueryError("add_join needs a base table first", code="no_table")
        name = self._table_name(table, self.schema)
        if self._table_in_query(name) is not None:
            raise QueryError(
                f"table {name!r} is already in the query (self-joins are not supported)",
                code="table_already_joined",
            )
        if left_column is None and right_column is None:
            return self._join_on_foreign_key(name)
        if left_column is None:
            raise QueryError("add_join: give left_column too (or no columns)", code="bad_join")
        joined = self._evolve(joins=(*self.joins, Join(name, STAR, STAR)))  # scope with new table
        left = self._join_column(left_column, self, joined)
        if right_column is None:
            if self.schema is None:
                right = ColumnRef(left.name, name)
            else:
                right = ColumnRef(self._info(name).column(left.name).name, name)
        else:
            only_new = self._evolve(table=name, joins=())
            right = self._join_column(right_column, only_new, joined)
        left, right = self._orient(left, right, name, left_column, right_column)
        return self._evolve(joins=(*self.joins, Join(name, left, right)))

    def _join_column(self, text: str, prefer: Sql, fallback: Sql) -> ColumnRef:
        """A join column resolved in ``prefer``'s tables, else in all tables of the join."""
        if self.schema is None:
            return fallback._resolve(text, what="join column")[0]
        try:
            return prefer._resolve(text, what="join column")[0]
        except SchemaError:
            return fallback._resolve(text, what="join column")[0]

    def _orient(
        self,
        left: ColumnRef,
        right: ColumnRef,
        new: str,
        left_text: str,
        right_text: str | None,
    ) -> tuple[ColumnRef, ColumnRef]:
        old = self.tables
        if left.table == new and right.table != new:
            left, right = right, left
        if right.table is None:
            right = ColumnRef(right.name, new)
        if left.table is None and len(old) == 1:
            left = ColumnRef(left.name, old[0])
        if right.table != new or left.table == new:
            raise QueryError(
                f"join columns must link {new!r} to a table already in the query "
                f"({', '.join(old)}); got {left_text!r} and {right_text!r}",
                code="bad_join",
            )
        return left, right

    def _join_on_foreign_key(self, name: str) -> Sql:
        if self.schema is None:
            raise QueryError(
                f"no schema to find a foreign key to {name!r}; "
                f"give the columns: add_join({name}, left_column, right_column)",
                code="no_foreign_key",
            )
        links = [link for t in self.tables for link in self.schema.foreign_keys_between(t, name)]
        if not links:
            raise QueryError(
                f"no declared foreign key between {', '.join(self.tables)} and {name!r}; "
                f"give the columns: add_join({name}, left_column, right_column)",
                code="no_foreign_key",
            )
        options = [f"add_join({name}, {t}.{c}, {o}.{oc})" for t, c, o, oc in links]
        if len(links) > 1:
            raise QueryError(
                f"several foreign keys link {name!r} to the query; choose one: "
                + "; ".join(options),
                code="ambiguous_join",
                suggestions=options,
            )
        t, c, o, oc = links[0]
        left = ColumnRef(self._info(t).column(c).name, t)
        right = ColumnRef(self._info(o).column(oc).name, o)
        return self._evolve(joins=(*self.joins, Join(name, left, right)))

    def add_group_by(self, column: str) -> Sql:
        """Group the rows by ``column`` (call again for more keys).

        >>> Sql("singer").set_answer("country").set_answer("*", "COUNT").add_group_by("country").to_sql()
        'SELECT "country", COUNT(*) FROM "singer" GROUP BY "country"'
        """
        ref, query = self._resolve(column)
        if ref in query.group_by:
            return query
        return query._evolve(group_by=(*query.group_by, ref))

    def add_having(self, column: str, aggregation: str, op: str, value: Any) -> Sql:
        """Keep groups where ``aggregation(column) op value`` holds (``*`` for ``COUNT(*)``).

        >>> Sql("t").add_group_by("a").add_having("*", "COUNT", ">=", 2).set_answer("a").to_sql()
        'SELECT "a" FROM "t" GROUP BY "a" HAVING COUNT(*) >= 2'
        """
        agg, distinct = normalise_aggregation(aggregation)
        if agg is None:
            raise QueryError(
                "add_having needs an aggregation (MAX, MIN, COUNT, SUM, AVG)",
                code="bad_aggregation",
                suggestions=AGGREGATIONS,
            )
        canonical = normalise_operator(op)
        ref, query = self._resolve(column, allow_star=True)
        if ref.is_star and (agg != "COUNT" or distinct):
            raise QueryError(f"{agg}(*) is not valid; name a column", code="bad_star")
        if not query.group_by:
            # SQLite refuses HAVING on a query without GROUP BY ("HAVING clause on a
            # non-aggregate query"): say so here, with the fix, not at the engine
            plain = [query._label(a.column) for a in query.answers
                     if a.aggregation is None and not a.column.is_star]
            fixes = tuple(f"add_group_by({c})" for c in plain) or ("add_group_by(column)",)
            raise QueryError(
                "add_having filters groups, and the query has none: call add_group_by(column) "
                f"first (e.g. {fixes[0]}), or use add_condition to filter rows",
                code="having_without_group_by",
                suggestions=fixes,
            )
        cond = query._condition(ref, canonical, value, aggregation=agg, distinct=distinct)
        return query._evolve(having=(*query.having, cond))

    def add_order(
        self,
        column: str,
        direction: str = "asc",
        limit: int | None = None,
        *,
        aggregation: str | None = None,
    ) -> Sql:
        """Order by ``column`` (or ``aggregation(column)``), ``asc``/``desc``; keep ``limit`` rows.

        Calling it again adds a further key; the last ``limit`` given wins. ``column`` may also be
        written as an aggregate, ``COUNT(*)`` or ``max(age)``, unless that text is a column of the
        schema.

        >>> Sql("t").set_answer("name").add_order("age", "desc", 1).to_sql()
        'SELECT "name" FROM "t" ORDER BY "age" DESC LIMIT 1'
        >>> Sql("t").set_answer("g").add_group_by("g").add_order("COUNT(*)", "DESC", 1).to_sql("tsql")
        'SELECT TOP 1 [g] FROM [t] GROUP BY [g] ORDER BY COUNT(*) DESC'
        """
        agg, distinct = normalise_aggregation(aggregation)
        if agg is None and isinstance(column, str):
            m = _AGG_TEXT.fullmatch(column)
            if m and not self._is_schema_column(column):
                agg, distinct, column = m.group(1).upper(), bool(m.group(2)), m.group(3)
        if not isinstance(direction, str) or direction.strip().upper() not in (
            "ASC",
            "DESC",
            "ASCENDING",
            "DESCENDING",
        ):
            raise QueryError(
                f"direction must be asc or desc, got {direction!r}",
                code="bad_direction",
                suggestions=("asc", "desc"),
            )
        dir_ = "DESC" if direction.strip().upper().startswith("DESC") else "ASC"
        limit = self._check_limit(limit)
        ref, query = self._resolve(column, allow_star=agg == "COUNT" and not distinct)
        if agg is not None and not query._is_aggregate():
            # SQLite: "misuse of aggregate" on an aggregate that only ORDER BY has
            raise QueryError(
                f"add_order by {agg}({query._label(ref)}) needs groups: call "
                "add_group_by(column) first (or return an aggregate with set_answer), else there "
                "is one row to order",
                code="aggregate_order_without_group_by",
                suggestions=tuple(f"add_group_by({query._label(a.column)})" for a in query.answers
                                  if a.aggregation is None and not a.column.is_star),
            )
        key = OrderKey(ref, dir_, agg, distinct)
        order = query.order_by if key in query.order_by else (*query.order_by, key)
        return query._evolve(order_by=order, limit=query.limit if limit is None else limit)

    def _label(self, ref: ColumnRef) -> str:
        """How messages name a column: ``table.column`` only when the query has several tables."""
        return str(ref) if len(self.tables) > 1 else ref.name

    def _is_aggregate(self) -> bool:
        """Grouped, or returning an aggregate: aggregates may appear in HAVING/ORDER BY."""
        return bool(self.group_by) or any(a.aggregation is not None for a in self.answers)

    def _is_schema_column(self, text: str) -> bool:
        if self.schema is None:
            return False
        try:
            self._resolve(text)
        except (SchemaError, QueryError):
            return False
        return True

    @staticmethod
    def _check_limit(limit: Any) -> int | None:
        if limit is None:
            return None
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise QueryError(
                f"limit must be a non-negative integer, got {limit!r}", code="bad_limit"
            )
        return limit

    def set_limit(self, limit: int | None) -> Sql:
        """Keep at most ``limit`` rows (None: no limit).

        >>> Sql("t").set_limit(5).to_sql("tsql")
        'SELECT TOP 5 * FROM [t]'
        """
        return self._evolve(limit=self._check_limit(limit))

    def set_distinct(self, distinct: bool = True) -> Sql:
        """Return distinct rows only.

        >>> Sql("singer").set_answer("country").set_distinct().to_sql()
        'SELECT DISTINCT "country" FROM "singer"'
        """
        return self._evolve(distinct=bool(distinct))

    def _set_op(self, kind: str, other: Sql, all_: bool) -> Sql:
        if not isinstance(other, Sql):
            raise TypeError(f"{kind.lower()} needs an Sql query, got {type(other).__name__}")
        if other.table is None:
            raise QueryError(f"the right side of {kind} has no table", code="bad_subquery")
        if self.table is None:
            raise QueryError(
                f"{kind} needs a table on this side first (name a column or add_join(table))",
                code="no_table",
            )
        return self._evolve(set_operations=(*self.set_operations, SetOperation(kind, other, all_)))

    def union(self, other: Sql, *, all: bool = False) -> Sql:  # noqa: A002 - SQL's word
        """``this UNION [ALL] other``.

        >>> a = Sql("Owners").set_answer("state")
        >>> a.union(Sql("Professionals").set_answer("state")).to_sql()
        'SELECT "state" FROM "Owners" UNION SELECT "state" FROM "Professionals"'
        """
        return self._set_op("UNION", other, all)

    def intersect(self, other: Sql, *, all: bool = False) -> Sql:  # noqa: A002
        """``this INTERSECT [ALL] other``.

        >>> a = Sql("Owners").set_answer("state")
        >>> a.intersect(Sql("Professionals").set_answer("state")).to_sql()
        'SELECT "state" FROM "Owners" INTERSECT SELECT "state" FROM "Professionals"'
        """
        return self._set_op("INTERSECT", other, all)

    def except_(self, other: Sql, *, all: bool = False) -> Sql:  # noqa: A002
        """``this EXCEPT [ALL] other``.

        >>> a = Sql("Owners").set_answer("state")
        >>> a.except_(Sql("Professionals").set_answer("state")).to_sql()
        'SELECT "state" FROM "Owners" EXCEPT SELECT "state" FROM "Professionals"'
        """
        return self._set_op("EXCEPT", other, all)

    # ------------------------------------------------------------------ get_column helper

    def value_counts(self, column: str, *, limit: int | None = 20) -> Sql:
        """The query behind ``get_column``: distinct values of ``column`` with their counts.

        Keeps the tables, joins and WHERE conditions; the most frequent values come first.

        >>> q = Sql("t").add_condition("a", "=", 1).set_answer("b")
        >>> q.value_counts("c", limit=5).to_sql()
        'SELECT "c", COUNT(*) FROM "t" WHERE "a" = 1 GROUP BY "c" ORDER BY COUNT(*) DESC, "c" LIMIT 5'
        """
        ref, query = self._resolve(column)
        return query._evolve(
            answers=(Answer(ref), Answer(STAR, "COUNT")),
            group_by=(ref,),
            having=(),
            order_by=(OrderKey(STAR, "DESC", "COUNT"), OrderKey(ref, "ASC")),
            limit=self._check_limit(limit),
            distinct=False,
            set_operations=(),
        )

    def to_sql_count_values(
        self,
        column: str,
        dialect: str = "sqlite",
        *,
        limit: int | None = 20,
        pretty: bool = False,
    ) -> str:
        """SQL text of :meth:`value_counts` (what ``get_column(column)`` runs)."""
        return self.value_counts(column, limit=limit).to_sql(dialect, pretty=pretty)

    # ------------------------------------------------------------------ compilation

    def to_expression(self, dialect: DialectType = None) -> exp.Expression:
        """A fresh sqlglot expression for this query (a Select, or a set operation).

        ``dialect`` only matters for ``contains`` patterns (T-SQL escapes ``[``; BigQuery has no
        ``ESCAPE`` clause).
        """
        target = _Target.of(dialect)
        select = self._select(target)
        if not self.set_operations:
            return select
        result: exp.Expression = self._operand(select, self, position=0)
        for i, op in enumerate(self.set_operations, start=1):
            right = self._operand(op.query.to_expression(dialect), op.query, position=i)
            builder = {"UNION": exp.union, "INTERSECT": exp.intersect, "EXCEPT": exp.except_}
            result = builder[op.kind](result, right, distinct=not op.all, copy=False)
        return result

    @staticmethod
    def _operand(expression: exp.Expression, query: Sql, *, position: int) -> exp.Expression:
        """A set-operation operand; ones with LIMIT or their own set operations are wrapped."""
        if query.limit is not None or (position > 0 and query.set_operations):
            alias = exp.TableAlias(this=_ident(f"_q{position}"))
            return exp.select(exp.Star()).from_(
                exp.Subquery(this=expression, alias=alias), copy=False
            )
        if isinstance(expression, exp.Select) and expression.args.get("order"):
            expression.set("order", None)  # order without limit means nothing in a set operation
        return expression

    def to_sql(self, dialect: str = "sqlite", *, pretty: bool = False) -> str:
        """SQL text in a sqlglot ``dialect`` (sqlite, postgres, duckdb, mysql, tsql, ...).

        Identifiers are always quoted. Raises :class:`~pyql.errors.QueryError` (code
        ``"no_table"``) before a table is known, ``ValueError`` for a dialect sqlglot lacks.

        >>> Sql("t").set_answer("a b/c 'd'").set_limit(3).to_sql("postgres")
        'SELECT "a b/c \\'d\\'" FROM "t" LIMIT 3'
        """
        expression = self.to_expression(dialect)
        with sqlglot_warnings_logged():  # a feature the dialect lacks: pyql's log, not stderr
            return expression.sql(dialect=dialect, pretty=pretty, identify=True, copy=False)

    def _select(self, target: _Target) -> exp.Select:
        if self.table is None:
            raise QueryError(
                "the query has no table yet; start with Sql(table) or name a column",
                code="no_table",
            )
        qualify = len(self.tables) > 1
        col = lambda ref: self._column_expr(ref, qualify)  # noqa: E731
        select = exp.Select()
        if self.answers:
            projections = [
                self._aggregate(col(a.column), a.aggregation, a.distinct) for a in self.answers
            ]
        else:
            projections = [exp.Star()]
        select.select(*projections, copy=False)
        select.from_(exp.Table(this=_ident(self.table)), copy=False)
        for j in self.joins:
            select.join(
                exp.Table(this=_ident(j.table)),
                on=exp.EQ(this=col(j.left), expression=col(j.right)),
                copy=False,
            )
        if self.conditions:
            select.where(
                *(self._predicate(c, qualify, target) for c in self.conditions), copy=False
            )
        if self.group_by:
            select.group_by(*(col(g) for g in self.group_by), copy=False)
        if self.having:
            select.having(*(self._predicate(c, qualify, target) for c in self.having), copy=False)
        if self.order_by:
            select.order_by(
                *(
                    exp.Ordered(
                        this=self._aggregate(col(k.column), k.aggregation, k.distinct),
                        desc=True if k.direction == "DESC" else None,
                        nulls_first=k.direction == "ASC",
                    )
                    for k in self.order_by
                ),
                copy=False,
            )
        if self.limit is not None:
            select.limit(exp.Literal.number(self.limit), copy=False)  # an int would be parsed
        if self.distinct:
            select.distinct(copy=False)
        return select

    @staticmethod
    def _column_expr(ref: ColumnRef, qualify: bool) -> exp.Expression:
        if ref.is_star:
            return exp.Star()
        table = _ident(ref.table) if qualify and ref.table else None
        return exp.Column(this=_ident(ref.name), table=table)

    @staticmethod
    def _aggregate(expr: exp.Expression, aggregation: str | None, distinct: bool) -> exp.Expression:
        if aggregation is None:
            return expr
        inner = exp.Distinct(expressions=[expr]) if distinct else expr
        return _AGG_FUNCS[aggregation](this=inner)

    def _predicate(self, cond: Condition, qualify: bool, target: _Target) -> exp.Expression:
        left = self._aggregate(
            self._column_expr(cond.column, qualify), cond.aggregation, cond.distinct
        )
        value = cond.value
        if cond.op in ("IN", "NOT IN"):
            if isinstance(value, Sql):
                node = exp.In(
                    this=left, query=exp.Subquery(this=value.to_expression(target.dialect))
                )
            else:
                assert isinstance(value, tuple)
                node = exp.In(this=left, expressions=[_literal(v) for v in value])
            return exp.Not(this=node) if cond.op == "NOT IN" else node
        if cond.op in ("LIKE", "NOT LIKE", "CONTAINS", "NOT CONTAINS"):
            assert isinstance(value, str)
            if cond.op in ("LIKE", "NOT LIKE"):
                pattern = value
            else:
                pattern = f"%{escape_like(value, brackets=target.brackets)}%"
            node = target.like(left, pattern)
            if cond.op in ("CONTAINS", "NOT CONTAINS") and target.escape_clause:
                node = exp.Escape(this=node, expression=exp.Literal.string(LIKE_ESCAPE))
            return exp.Not(this=node) if cond.op.startswith("NOT ") else node
        if value is None:
            node = exp.Is(this=left, expression=exp.Null())
            return exp.Not(this=node) if cond.op == "!=" else node
        if isinstance(value, Sql):
            right: exp.Expression = exp.Subquery(this=value.to_expression(target.dialect))
        elif isinstance(value, ColumnRef):
            right = self._column_expr(value, qualify)
        else:
            assert not isinstance(value, tuple)
            right = _literal(value)
        return _COMPARE_NODES[cond.op](this=left, expression=right)


Operand = Value | Sql | ColumnRef | tuple[Value, ...]


@dataclass(frozen=True)
class _Target:
    """What compilation needs to know about the target dialect."""

    dialect: DialectType
    brackets: bool  # LIKE has [...] character classes (T-SQL)
    escape_clause: bool  # LIKE ... ESCAPE is supported (not BigQuery: backslash is the default)
    #: how LIKE is made case-insensitive, as SQLite's (the embedded default) is: "like" (it
    #: already is: SQLite, MySQL, T-SQL default collations), "ilike", or "lower"
    case_insensitive: str = "like"

    @classmethod
    def of(cls, dialect: DialectType) -> _Target:
        if dialect is None:
            return cls(None, False, True)
        d = Dialect.get_or_raise(dialect)
        name = type(d).__name__.lower()
        if name in _ILIKE_DIALECTS:
            mode = "ilike"
        elif name in _CASE_INSENSITIVE_LIKE_DIALECTS:
            mode = "like"
        else:
            mode = "lower"
        return cls(dialect, isinstance(d, TSQL), not isinstance(d, BigQuery), mode)

    def like(self, left: exp.Expression, pattern: str) -> exp.Expression:
        """``left LIKE pattern``, matching letters case-insensitively in every dialect."""
        if self.case_insensitive == "ilike":
            return exp.ILike(this=left, expression=exp.Literal.string(pattern))
        if self.case_insensitive == "lower":
            return exp.Like(this=exp.Lower(this=left),
                            expression=exp.Lower(this=exp.Literal.string(pattern)))
        return exp.Like(this=left, expression=exp.Literal.string(pattern))


#: dialects whose LIKE is case-sensitive and which have ILIKE
_ILIKE_DIALECTS = {"postgres", "duckdb", "snowflake", "redshift", "materialize", "risingwave"}
#: dialects whose LIKE is case-insensitive already (SQLite for ASCII; MySQL and T-SQL by their
#: default collations)
_CASE_INSENSITIVE_LIKE_DIALECTS = {"sqlite", "mysql", "tsql", "doris", "starrocks", "dialect"}
