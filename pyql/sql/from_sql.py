"""Gold SQL -> PyQL-SQL: rewrite a SQL query (Spider's gold, say) as the calls an agent would make.

:func:`to_program` parses a query with sqlglot and, where the PyQL-SQL tool set
(:data:`pyql.program.SQL_TOOLS`) can express it, returns the :class:`~pyql.program.Program` that
builds the same query step by step: ``add_join(base)`` to start from the ``FROM`` table, one
``add_join(table, left, right)`` per joined table, ``add_condition`` per ``WHERE`` conjunct,
``add_group_by`` per key (before the answers, so every intermediate query is valid SQL on
engines that check grouping), ``set_answer`` per selected column or aggregate, ``add_having``,
``add_order`` (the ``LIMIT`` rides on the last key), ``set_distinct`` and ``execute()``.
A sub-query (in ``IN``/``NOT IN``, a comparison or ``HAVING``) is built in a
``begin_subquery(?qN)`` ... ``end_subquery()`` block just before the call that uses it as
``?qN``; the right side of ``UNION``/``INTERSECT``/``EXCEPT`` likewise, before
``add_union``/``add_intersect``/``add_except``; ``IN`` lists become ``a|b|c`` values (quoted when
the values are text). Blocks nest for sub-queries of sub-queries; names count up from ``q1``.
Otherwise it returns an :class:`Unsupported` value naming the constructs in the way (the
tool set's gaps all at once; a construct that stops the parse, alone), each a stable code from
:data:`CONSTRUCTS`.

:func:`to_query` does the same one level down: it builds the :class:`~pyql.sql.Sql` tree
directly, which also holds what the tool set has no call for (column-to-column comparisons,
``LIMIT`` without ``ORDER BY``, ``UNION ALL``, ``IN`` lists whose values a ``a|b|c`` value
cannot spell). The difference between the two is exactly the DSL's gap.

How SQL constructs map:

- ``FROM a AS T1 JOIN b AS T2 ON T1.x = T2.y`` (aliases resolved, any order of ``ON`` keys, also
  ``a JOIN b JOIN c ON ... AND ...`` and comma joins with the keys in ``WHERE``): a spanning tree
  of the equalities becomes the joins; equalities left over are column comparisons;
- ``BETWEEN lo AND hi``: two conditions (``>=`` and ``<=``); ``x = 1 OR x = 2`` on one column:
  ``IN (1, 2)``; ``IS [NOT] NULL``: ``= NULL`` / ``!= NULL``;
- ``"text"`` in double quotes that names no column is a string, as SQLite reads it;
- ``ORDER BY`` an alias of a selected aggregate: that aggregate.

>>> from pyql.sql.schema import Schema
>>> schema = Schema.from_mapping({"singer": {"Singer_ID": "INT", "Name": "TEXT", "Age": "INT"}})
>>> print(to_program("SELECT name FROM singer WHERE age > 30 ORDER BY age DESC LIMIT 1", schema))
add_join(singer)
add_condition(Age, >, 30)
set_answer(Name)
add_order(Age, desc, 1)
execute()
>>> print(to_program("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", schema))
add_join(singer)
begin_subquery(?q1)
add_join(singer)
set_answer(Age, AVG)
end_subquery()
add_condition(Age, >, ?q1)
set_answer(Name)
execute()
>>> to_program("SELECT name FROM singer LIMIT 3", schema)
Unsupported(constructs=('limit_without_order',), detail='the limit is the third argument of add_order')
>>> to_query("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", schema).to_sql()
'SELECT "Name" FROM "singer" WHERE "Age" > (SELECT AVG("Age") FROM "singer")'
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlglot
import sqlglot.expressions as exp
from sqlglot.errors import SqlglotError

from pyql.errors import PyqlError
from pyql.program import Call, Program
from pyql.sql.apply import SqlBuild
from pyql.sql.query import ColumnRef, Sql
from pyql.sql.schema import Schema, TableInfo
from pyql.sql.sqlglot_log import sqlglot_warnings_logged
from pyql.syntax import Atom, AtomKind, lex_atom

__all__ = ["to_program", "to_query", "Unsupported", "CONSTRUCTS"]

#: the constructs that can stand in the way, by stable code
CONSTRUCTS: dict[str, str] = {
    "unparseable": "SQL that sqlglot cannot parse, or more than one statement",
    "not_select": "a statement that is not a SELECT query",
    "unknown_table": "a table the schema does not have",
    "unknown_column": "a column that none of the query's tables has",
    "subquery_from": "a sub-query in FROM",
    "outer_join": "an outer (LEFT/RIGHT/FULL) or NATURAL join, or USING",
    "self_join": "the same table twice in one query",
    "cross_join": "a table joined without an equality to the others",
    "join_multi_key": "a join on more than one column pair (or a cycle of joins)",
    "column_comparison": "a condition comparing two columns",
    "in_subquery": "IN / NOT IN with a sub-query",
    "scalar_subquery": "a comparison with a sub-query",
    "in_list": "IN / NOT IN with a list of values (or an OR of equalities on one column)",
    "set_operation": "UNION / INTERSECT / EXCEPT",
    "set_operation_order": "ORDER BY or LIMIT applied to a whole UNION/INTERSECT/EXCEPT",
    "or": "OR between conditions (other than equalities on one column)",
    "not": "NOT around a condition other than IN, LIKE or IS NULL",
    "expression": "arithmetic, a function call or a literal where a column is expected",
    "aggregate_in_where": "an aggregate outside SELECT/HAVING/ORDER BY",
    "having_without_aggregate": "a HAVING condition on a plain column",
    "limit_without_order": "LIMIT without ORDER BY",
    "offset": "LIMIT with OFFSET",
    "star_of_table": "table.* in SELECT",
    "duplicate_answer": "the same column or aggregate selected twice",
    "correlated_subquery": "a sub-query that refers to the outer query",
    "builder": "the Sql builder refused the converted query",
}

_AGGS: dict[type[exp.Expression], str] = {
    exp.Count: "COUNT",
    exp.Max: "MAX",
    exp.Min: "MIN",
    exp.Sum: "SUM",
    exp.Avg: "AVG",
}
_COMPARISONS: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.LT: "<",
    exp.GTE: ">=",
    exp.LTE: "<=",
}
_FLIPPED = {"=": "=", "!=": "!=", ">": "<", "<": ">", ">=": "<=", "<=": ">="}
_BARE = re.compile(r"[^\W\d][\w.]*")


@dataclass(frozen=True)
class Unsupported:
    """Why a query cannot be converted: the constructs in the way (codes of
    :data:`CONSTRUCTS`, sorted, no repeats) and a sentence on the first one."""

    constructs: tuple[str, ...]
    detail: str = ""

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"unsupported: {', '.join(self.constructs)}" + (
            f" ({self.detail})" if self.detail else ""
        )


class _Refusal(Exception):
    def __init__(self, code: str, detail: str = "") -> None:
        self.code = code
        self.detail = detail or CONSTRUCTS[code]
        super().__init__(self.detail)


# ------------------------------------------------------------------ the intermediate form

STAR = ColumnRef("*")


@dataclass(frozen=True)
class _Target:
    """``aggregation(DISTINCT column)`` or a plain column (aggregation None)."""

    column: ColumnRef
    aggregation: str | None = None
    distinct: bool = False


@dataclass
class _Cond:
    target: _Target
    op: str
    #: a value, None (NULL), a tuple (IN list), a _Select (sub-query) or a ColumnRef
    value: Any


@dataclass
class _Select:
    base: str = ""
    joins: list[tuple[str, ColumnRef, ColumnRef]] = field(default_factory=list)
    conditions: list[_Cond] = field(default_factory=list)
    answers: list[_Target] = field(default_factory=list)
    group: list[ColumnRef] = field(default_factory=list)
    having: list[_Cond] = field(default_factory=list)
    order: list[tuple[_Target, str]] = field(default_factory=list)
    limit: int | None = None
    distinct: bool = False
    set_ops: list[tuple[str, _Select, bool]] = field(default_factory=list)

    @property
    def tables(self) -> list[str]:
        return [self.base, *(t for t, _, _ in self.joins)]

    def walk(self) -> Iterator[_Select]:
        """This select, its sub-queries and set-operation operands."""
        yield self
        for cond in [*self.conditions, *self.having]:
            if isinstance(cond.value, _Select):
                yield from cond.value.walk()
        for _, other, _ in self.set_ops:
            yield from other.walk()


# ------------------------------------------------------------------ parsing


class _Scope:
    """The tables of one SELECT: alias/name -> schema table."""

    def __init__(self, schema: Schema, nested: bool = False) -> None:
        self.schema = schema
        self.nested = nested
        self.by_alias: dict[str, TableInfo] = {}
        self.tables: list[TableInfo] = []
        self.aliases: dict[str, exp.Expression] = {}  # SELECT aliases

    def add(self, table: exp.Table) -> TableInfo:
        if not isinstance(table, exp.Table) or table.args.get("db") or not table.name:
            raise _Refusal("subquery_from")
        info = self.schema.find_table(table.name)
        if info is None:
            raise _Refusal("unknown_table", f"unknown table {table.name!r}")
        if any(t.name == info.name for t in self.tables):
            raise _Refusal("self_join", f"table {info.name!r} appears twice")
        self.tables.append(info)
        self.by_alias[info.name.casefold()] = info
        if table.alias:
            self.by_alias[table.alias.casefold()] = info
        return info

    def column(self, node: exp.Column) -> ColumnRef | None:
        """The column ``node`` names, or None if no table of the scope has it."""
        name = node.name
        if node.table:
            info = self.by_alias.get(node.table.casefold())
            if info is None:
                if self.nested:  # most likely an alias of the outer query
                    raise _Refusal("correlated_subquery", f"unknown alias {node.table!r}")
                raise _Refusal("unknown_table", f"unknown table or alias {node.table!r}")
            col = info.find_column(name)
            if col is None:
                raise _Refusal("unknown_column", f"no column {name!r} in {info.name!r}")
            return ColumnRef(col.name, info.name)
        hits = [(t, t.find_column(name)) for t in self.tables]
        hits = [(t, c) for t, c in hits if c is not None]
        if not hits:
            return None
        t, c = hits[0]
        assert c is not None
        return ColumnRef(c.name, t.name)


def _parse(sql: str, dialect: str) -> exp.Expression:
    try:
        with sqlglot_warnings_logged():
            trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except SqlglotError as exc:
        raise _Refusal("unparseable", str(exc).splitlines()[0]) from None
    if len(trees) != 1:
        raise _Refusal("unparseable", f"{len(trees)} statements")
    return trees[0]


def _convert(tree: exp.Expression, schema: Schema, nested: bool = False) -> _Select:
    if isinstance(tree, exp.Subquery):
        tree = tree.this
    if isinstance(tree, exp.SetOperation):
        if tree.args.get("order") or tree.args.get("limit") or tree.args.get("offset"):
            raise _Refusal("set_operation_order")
        left = _convert(tree.this, schema, nested)
        right = _convert(tree.expression, schema, nested)
        kind = {exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}[type(tree)]
        left.set_ops.append((kind, right, not tree.args.get("distinct", True)))
        return left
    if not isinstance(tree, exp.Select):
        raise _Refusal("not_select", f"a {type(tree).__name__} statement")
    return _SelectConverter(tree, schema, nested).convert()


class _SelectConverter:
    def __init__(self, tree: exp.Select, schema: Schema, nested: bool) -> None:
        self.tree = tree
        self.schema = schema
        self.scope = _Scope(schema, nested)
        self.out = _Select()

    def convert(self) -> _Select:
        tree = self.tree
        if tree.args.get("with") or tree.args.get("windows") or tree.args.get("qualify"):
            raise _Refusal("expression", "WITH, windows or QUALIFY")
        from_ = tree.args.get("from_") or tree.args.get("from")
        if from_ is None:
            raise _Refusal("expression", "SELECT without FROM")
        base = self.scope.add(from_.this)
        self.out.base = base.name
        equalities: list[tuple[ColumnRef, ColumnRef]] = []
        pending: list[exp.Expression] = []
        for join in tree.args.get("joins") or []:
            if (join.args.get("side") or join.args.get("using") or join.args.get("method")
                    or (join.args.get("kind") or "").upper() not in ("", "INNER", "CROSS")):
                raise _Refusal("outer_join")
            self.scope.add(join.this)
            on = join.args.get("on")
            if on is not None:  # sqlglot reads a JOIN without ON as ON TRUE
                pending.extend(c for c in _conjuncts(on) if not _is_true(c))
        where = tree.args.get("where")
        where_parts = _conjuncts(where.this) if where is not None else []
        # select aliases, for ORDER BY / HAVING references
        for projection in tree.expressions:
            if isinstance(projection, exp.Alias):
                self.scope.aliases[projection.alias.casefold()] = projection.this
        conditions: list[exp.Expression] = []
        for part in [*pending, *where_parts]:
            pair = self._column_equality(part)
            if pair is not None:
                equalities.append(pair)
            else:
                conditions.append(part)
        self._joins(equalities)
        for part in conditions:
            self.out.conditions.extend(self._condition(part, having=False))
        for projection in tree.expressions:
            answer = self._answer(projection)
            if answer in self.out.answers:
                raise _Refusal("duplicate_answer", f"{projection.sql()} is selected twice")
            self.out.answers.append(answer)
        group = tree.args.get("group")
        if group is not None:
            for g in group.expressions:
                target = self._target(g, allow_aggregate=False)
                self.out.group.append(target.column)
        having = tree.args.get("having")
        if having is not None:
            for part in _conjuncts(having.this):
                self.out.having.extend(self._condition(part, having=True))
        order = tree.args.get("order")
        if order is not None:
            for ordered in order.expressions:
                target = self._target(self._unalias(ordered.this), allow_aggregate=True)
                self.out.order.append((target, "DESC" if ordered.args.get("desc") else "ASC"))
        limit = tree.args.get("limit")
        if limit is not None:
            if tree.args.get("offset") or limit.args.get("offset"):
                raise _Refusal("offset")
            self.out.limit = _int_literal(limit.expression)
        elif tree.args.get("offset"):
            raise _Refusal("offset")
        self.out.distinct = bool(tree.args.get("distinct"))
        return self.out

    # joins -----------------------------------------------------------------------------------
    def _column_equality(self, part: exp.Expression) -> tuple[ColumnRef, ColumnRef] | None:
        if not isinstance(part, exp.EQ):
            return None
        left, right = _unparen(part.this), _unparen(part.expression)
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
            return None
        a, b = self.scope.column(left), self.scope.column(right)
        if a is None or b is None:
            return None  # a double-quoted string: a value, handled as a condition
        return a, b

    def _joins(self, equalities: list[tuple[ColumnRef, ColumnRef]]) -> None:
        joined = {self.out.base}
        names = [t.name for t in self.scope.tables]
        left_over = list(equalities)
        progress = True
        while progress and len(joined) < len(names):
            progress = False
            for i, (a, b) in enumerate(left_over):
                if a.table in joined and b.table not in joined:
                    old, new = a, b
                elif b.table in joined and a.table not in joined:
                    old, new = b, a
                else:
                    continue
                assert new.table is not None
                self.out.joins.append((new.table, old, new))
                joined.add(new.table)
                del left_over[i]
                progress = True
                break
        missing = [n for n in names if n not in joined]
        if missing:
            raise _Refusal("cross_join", f"no join condition links {', '.join(missing)}")
        # keep the FROM order of the tables where the joins allow it
        for a, b in left_over:
            self.out.conditions.append(_Cond(_Target(a), "=", b))

    # conditions -------------------------------------------------------------------------------
    def _condition(self, part: exp.Expression, *, having: bool) -> list[_Cond]:
        part = _unparen(part)
        negate = False
        if isinstance(part, exp.Not):
            negate, part = True, _unparen(part.this)
            if not isinstance(part, (exp.In, exp.Like, exp.Is)):
                raise _Refusal("not")
        if isinstance(part, exp.Or):
            return [self._or_as_in(part, having)]
        if isinstance(part, exp.Between):
            target = self._condition_target(part.this, having)
            low, high = self._value(part.args["low"], target), self._value(
                part.args["high"], target
            )
            return [_Cond(target, ">=", low), _Cond(target, "<=", high)]
        if isinstance(part, exp.In):
            target = self._condition_target(part.this, having)
            op = "NOT IN" if negate else "IN"
            if part.args.get("query") is not None:
                return [_Cond(target, op, _convert_sub(part.args["query"], self.schema))]
            values = tuple(self._value(v, target) for v in part.expressions)
            if any(v is None or isinstance(v, (ColumnRef, _Select)) for v in values):
                raise _Refusal("expression", "IN list with something other than values")
            return [_Cond(target, op, values)]
        if isinstance(part, exp.Like):
            target = self._condition_target(part.this, having)
            pattern = self._value(part.expression, target)
            if not isinstance(pattern, str):
                raise _Refusal("expression", "LIKE with a pattern that is not text")
            return [_Cond(target, "NOT LIKE" if negate else "LIKE", pattern)]
        if isinstance(part, exp.Escape):
            raise _Refusal("expression", "LIKE ... ESCAPE")
        if isinstance(part, exp.Is):
            if not isinstance(part.expression, exp.Null):
                raise _Refusal("expression", "IS with something other than NULL")
            target = self._condition_target(part.this, having)
            return [_Cond(target, "!=" if negate else "=", None)]
        op = _COMPARISONS.get(type(part))
        if op is None:
            raise _Refusal("expression", f"a {type(part).__name__} condition")
        left, right = _unparen(part.this), _unparen(part.expression)
        if self._is_value(left) and not self._is_value(right):
            left, right, op = right, left, _FLIPPED[op]
        target = self._condition_target(left, having)
        return [_Cond(target, op, self._value(right, target))]

    def _or_as_in(self, part: exp.Or, having: bool) -> _Cond:
        disjuncts = list(_disjuncts(part))
        target: _Target | None = None
        values = []
        for d in disjuncts:
            d = _unparen(d)
            if not isinstance(d, exp.EQ):
                raise _Refusal("or")
            left, right = _unparen(d.this), _unparen(d.expression)
            if self._is_value(left) and not self._is_value(right):
                left, right = right, left
            t = self._condition_target(left, having)
            if target is not None and t != target:
                raise _Refusal("or")
            target = t
            value = self._value(right, t)
            if value is None or isinstance(value, (ColumnRef, _Select, tuple)):
                raise _Refusal("or")
            values.append(value)
        assert target is not None
        return _Cond(target, "IN", tuple(values))

    def _condition_target(self, node: exp.Expression, having: bool) -> _Target:
        target = self._target(self._unalias(node), allow_aggregate=having)
        if having and target.aggregation is None:
            raise _Refusal("having_without_aggregate")
        return target

    def _is_value(self, node: exp.Expression) -> bool:
        node = _unparen(node)
        if isinstance(node, (exp.Literal, exp.Null, exp.Neg, exp.Subquery, exp.Select)):
            return True
        return isinstance(node, exp.Column) and self._as_string(node) is not None

    def _as_string(self, node: exp.Column) -> str | None:
        """A double-quoted name that is no column: SQLite reads it as a string."""
        if node.table or not node.this.args.get("quoted"):
            return None
        return node.name if self.scope.column(node) is None else None

    def _value(self, node: exp.Expression, target: _Target) -> Any:
        node = _unparen(node)
        if isinstance(node, (exp.Subquery, exp.Select)):
            return _convert_sub(node, self.schema)
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Literal):
            return _literal(node)
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            value = _literal(node.this)
            return -value if isinstance(value, (int, float)) else value
        if isinstance(node, exp.Column):
            text = self._as_string(node)
            if text is not None:
                return text
            ref = self.scope.column(node)
            if ref is None:
                raise _Refusal("unknown_column", f"unknown column {node.sql()!r}")
            return ref
        raise _Refusal("expression", f"{node.sql()!r} as a value")

    # columns and aggregates --------------------------------------------------------------------
    def _unalias(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table:
            if self.scope.column(node) is None and node.name.casefold() in self.scope.aliases:
                return self.scope.aliases[node.name.casefold()]
        return node

    def _answer(self, node: exp.Expression) -> _Target:
        if isinstance(node, exp.Alias):
            node = node.this
        if isinstance(node, exp.Star):
            return _Target(STAR)
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            raise _Refusal("star_of_table")
        return self._target(node, allow_aggregate=True)

    def _target(self, node: exp.Expression, *, allow_aggregate: bool) -> _Target:
        node = _unparen(node)
        func = _AGGS.get(type(node))
        if func is not None:
            if not allow_aggregate:
                raise _Refusal("aggregate_in_where")
            inner = node.this
            distinct = False
            if isinstance(inner, exp.Distinct):
                if len(inner.expressions) != 1:
                    raise _Refusal("expression", "an aggregate of several columns")
                inner, distinct = inner.expressions[0], True
            inner = _unparen(inner)
            if isinstance(inner, exp.Star):
                if func != "COUNT" or distinct:
                    raise _Refusal("expression", f"{func}(*)")
                return _Target(STAR, func)
            return _Target(self._plain_column(inner), func, distinct)
        return _Target(self._plain_column(node))

    def _plain_column(self, node: exp.Expression) -> ColumnRef:
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            if isinstance(node, exp.Column):
                raise _Refusal("star_of_table")
            raise _Refusal("expression", f"{node.sql()!r} where a column is expected")
        ref = self.scope.column(node)
        if ref is None:
            raise _Refusal("unknown_column", f"unknown column {node.sql()!r}")
        return ref


def _convert_sub(node: exp.Expression, schema: Schema) -> _Select:
    inner = node.this if isinstance(node, exp.Subquery) else node
    return _convert(inner, schema, nested=True)


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = _unparen(node)
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    return [node]


def _disjuncts(node: exp.Expression) -> Iterator[exp.Expression]:
    node = _unparen(node)
    if isinstance(node, exp.Or):
        yield from _disjuncts(node.this)
        yield from _disjuncts(node.expression)
    else:
        yield node


def _is_true(node: exp.Expression) -> bool:
    return isinstance(node, exp.Boolean) and node.this is True


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _literal(node: exp.Literal) -> str | int | float:
    text = node.this
    if node.is_string:
        return str(text)
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    return float(text)


def _int_literal(node: exp.Expression) -> int:
    if isinstance(node, exp.Literal) and not node.is_string and re.fullmatch(r"\d+", node.this):
        return int(node.this)
    raise _Refusal("expression", f"LIMIT {node.sql()}")


# ------------------------------------------------------------------ the two outputs


def _column_text(ref: ColumnRef, qualify: bool) -> str:
    if ref.is_star:
        return "*"
    return f"{ref.table}.{ref.name}" if qualify and ref.table else ref.name


def _agg_text(target: _Target) -> str:
    assert target.aggregation is not None
    return f"{target.aggregation} DISTINCT" if target.distinct else target.aggregation


def _build(select: _Select, schema: Schema) -> Sql:
    """The Sql tree of a converted select (raises the builder's errors)."""
    query = Sql(select.base, schema=schema)
    for table, left, right in select.joins:
        query = query.add_join(table, str(left), str(right))
    for cond in select.conditions:
        query = query.add_condition(str(cond.target.column), cond.op, _tree_value(cond.value, schema))
    for target in select.answers:
        agg = _agg_text(target) if target.aggregation else None
        query = query.set_answer(_column_text(target.column, True), agg)
    for ref in select.group:
        query = query.add_group_by(str(ref))
    for cond in select.having:
        query = query.add_having(
            _column_text(cond.target.column, True), _agg_text(cond.target), cond.op,
            _tree_value(cond.value, schema),
        )
    for target, direction in select.order:
        agg = _agg_text(target) if target.aggregation else None
        query = query.add_order(_column_text(target.column, True), direction, aggregation=agg)
    if select.limit is not None:
        query = query.set_limit(select.limit)
    if select.distinct:
        query = query.set_distinct()
    for kind, other, all_ in select.set_ops:
        right = _build(other, schema)
        method = {"UNION": query.union, "INTERSECT": query.intersect, "EXCEPT": query.except_}
        query = method[kind](right, all=all_)
    return query


def _tree_value(value: Any, schema: Schema) -> Any:
    if isinstance(value, _Select):
        return _build(value, schema)
    return value


def _program_gaps(select: _Select) -> list[tuple[str, str]]:
    """What the tool set cannot say about ``select``: (code, detail) pairs."""
    gaps: list[tuple[str, str]] = []
    for sel in select.walk():
        if any(all_ for _, _, all_ in sel.set_ops):
            gaps.append(("set_operation", "add_union/add_intersect/add_except have no ALL"))
        for cond in sel.having:
            if cond.op in ("IN", "NOT IN"):
                code = "in_subquery" if isinstance(cond.value, _Select) else "in_list"
                gaps.append((code, "add_having compares with =, !=, >, <, >= or <= only"))
        for cond in sel.conditions:
            value = cond.value
            if isinstance(value, ColumnRef):
                joins_tables = cond.op == "=" and value.table != cond.target.column.table
                code = "join_multi_key" if joins_tables else "column_comparison"
                gaps.append((code, "add_condition compares a column with a value, not a column"))
            elif isinstance(value, tuple) and _list_atom(value) is None:
                gaps.append(("in_list", "the values of this IN list cannot be written a|b|c"))
        if sel.limit is not None and not sel.order:
            gaps.append(("limit_without_order", "the limit is the third argument of add_order"))
    return gaps


def _value_atom(value: Any) -> Atom:
    if value is None:
        return Atom(AtomKind.NAME, "NULL")
    if isinstance(value, bool):  # pragma: no cover - SQL literals are never bool here
        return Atom(AtomKind.STRING, str(value))
    if isinstance(value, int):
        return Atom(AtomKind.NUMBER, str(value))
    if isinstance(value, float):
        return Atom(AtomKind.NUMBER, repr(value))
    return Atom(AtomKind.STRING, str(value))


def _name_atom(text: str) -> Atom:
    """A column/table argument: bare when it reads back as itself, else a quoted string."""
    if _BARE.fullmatch(text) or text == "*":
        atom = Atom(AtomKind.NAME, text)
        try:
            if lex_atom(text) == atom:
                return atom
        except PyqlError:
            pass
    return Atom(AtomKind.STRING, text)


def _name(text: str) -> Atom:
    return Atom(AtomKind.NAME, text)


def _list_atom(values: tuple[Any, ...]) -> Atom | None:
    """An IN list as one ``a|b|c`` argument that reads back as ``values``, or None."""
    if all(isinstance(v, str) for v in values):
        if any("|" in v or v != v.strip() or not v for v in values):
            return None
        return Atom(AtomKind.STRING, "|".join(values))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        if len(values) == 1:
            return _value_atom(values[0])
        return Atom(AtomKind.NAME, "|".join(_value_atom(v).value for v in values))
    return None


class _Names:
    """Numbers the stored queries of one program: q1, q2, ..."""

    def __init__(self) -> None:
        self.count = 0

    def block(self, select: _Select) -> tuple[list[Call], Atom]:
        self.count += 1
        ref = _name(f"?q{self.count}")
        body = _calls(select, self, final=False)
        return [Call(name="begin_subquery", args=(ref,)), *body, Call(name="end_subquery")], ref


def _calls(select: _Select, names: _Names | None = None, *, final: bool = True) -> list[Call]:
    names = names if names is not None else _Names()
    qualify = len(select.tables) > 1
    col = lambda ref: _name_atom(_column_text(ref, qualify))  # noqa: E731

    def value(v: Any) -> Atom:
        if isinstance(v, _Select):
            block, ref = names.block(v)
            calls.extend(block)
            return ref
        if isinstance(v, tuple):
            atom = _list_atom(v)
            assert atom is not None  # _program_gaps refused the others
            return atom
        return _value_atom(v)

    calls = [Call(name="add_join", args=(_name_atom(select.base),))]
    for table, left, right in select.joins:
        calls.append(Call(name="add_join", args=(_name_atom(table), col(left), col(right))))
    for cond in select.conditions:
        atom = value(cond.value)
        calls.append(Call(name="add_condition", args=(
            col(cond.target.column), _name(cond.op), atom)))
    for ref in select.group:
        calls.append(Call(name="add_group_by", args=(col(ref),)))
    for target in select.answers:
        args = [col(target.column)]
        if target.aggregation:
            args.append(_name(_agg_text(target)))
        calls.append(Call(name="set_answer", args=tuple(args)))
    for cond in select.having:
        atom = value(cond.value)
        calls.append(Call(name="add_having", args=(
            col(cond.target.column), _name(_agg_text(cond.target)), _name(cond.op), atom)))
    for i, (target, direction) in enumerate(select.order):
        text = _column_text(target.column, qualify)
        if target.aggregation:
            inner = f"DISTINCT {text}" if target.distinct else text
            text = f"{target.aggregation}({inner})"
        args = [_name_atom(text) if not target.aggregation else _name(text), _name(direction.lower())]
        if i == len(select.order) - 1 and select.limit is not None:
            args.append(Atom(AtomKind.NUMBER, str(select.limit)))
        calls.append(Call(name="add_order", args=tuple(args)))
    if select.distinct:
        calls.append(Call(name="set_distinct"))
    for kind, other, _ in select.set_ops:
        block, ref = names.block(other)
        calls.extend(block)
        calls.append(Call(name=f"add_{kind.lower()}", args=(ref,)))
    if final:
        calls.append(Call(name="execute"))
    return calls


def _converted(sql: str, schema: Schema, dialect: str) -> _Select | Unsupported:
    try:
        return _convert(_parse(sql, dialect), schema)
    except _Refusal as exc:
        return Unsupported((exc.code,), exc.detail)


def to_query(sql: str, schema: Schema, dialect: str = "sqlite") -> Sql | Unsupported:
    """The :class:`~pyql.sql.Sql` tree of ``sql`` (read in ``dialect``) over ``schema``, or why
    not (:class:`Unsupported`)."""
    select = _converted(sql, schema, dialect)
    if isinstance(select, Unsupported):
        return select
    try:
        return _build(select, schema)
    except PyqlError as exc:
        return Unsupported(("builder",), f"{type(exc).__name__}: {exc}")


def to_program(sql: str, schema: Schema, dialect: str = "sqlite") -> Program | Unsupported:
    """The PyQL-SQL program that builds ``sql`` (read in ``dialect``) over ``schema``, or why not.

    The program starts with ``add_join(<FROM table>)`` (which sets the base table of an empty
    query) and ends with ``execute()``; column names are qualified (``table.column``) when the
    query has more than one table. It is checked by replaying it onto an empty
    :class:`~pyql.sql.Sql` over ``schema``.
    """
    select = _converted(sql, schema, dialect)
    if isinstance(select, Unsupported):
        return select
    gaps = _program_gaps(select)
    if gaps:
        codes = tuple(sorted({code for code, _ in gaps}))
        return Unsupported(codes, gaps[0][1])
    program = Program(calls=tuple(_calls(select)), tools="sql")
    build = SqlBuild(Sql(schema=schema))
    try:
        for call in program.calls:
            build = build.apply(call)
    except PyqlError as exc:
        return Unsupported(("builder",), f"{type(exc).__name__}: {exc}")
    return program
