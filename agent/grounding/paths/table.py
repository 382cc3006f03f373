"""The table variant of reasoning paths (Readi appendix A): from the table to some columns, then
to the rows that meet conditions; instantiated on a SQL database through a
:class:`~pyql.sql.session.SqlSession`, the result is a PyQL-SQL program.

The text format is JSON after a ``Path:`` label::

    Path: {"columns": ["Nationality", "Player"], "rows": [["Player", "=", "Terrence Ross"]], "answer": "Nationality"}

``answer`` is a column, or an aggregation of one (``COUNT(Player)``, ``MAX(Points)``); without
it the first column is the answer. A path is *stuck* on an ``unknown_column`` (the candidates are
the table's columns, ranked against the question) or on a row condition that matches
``no_matching_row`` (the candidates are values of that column under the earlier conditions).

>>> p = parse_table_path('Path: {"columns": ["Nationality", "Player"], '
...                      '"rows": [["Player", "=", "Terrence Ross"]], "answer": "Nationality"}')
>>> p.rows[0].value, p.answer_column, p.aggregation
('Terrence Ross', 'Nationality', None)
>>> parse_table_path(str(p)) == p
True
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pyql.agent.grounding.paths.binding import RelationBinder
from pyql.agent.grounding.paths.instantiate import checked as _ok
from pyql.agent.grounding.paths.path import PathFormatError, error_block
from pyql.program import Call, Program
from pyql.syntax import Atom, AtomKind

if TYPE_CHECKING:
    from pyql.environment import Environment

__all__ = [
    "AGGREGATIONS",
    "RowCondition",
    "TableInstantiation",
    "TableInstantiator",
    "TablePath",
    "TableStuck",
    "parse_table_path",
    "table_path_from_program",
]

AGGREGATIONS = ("COUNT", "SUM", "AVG", "MAX", "MIN")
_OPS = ("=", "!=", ">", "<", ">=", "<=", "LIKE", "NOT LIKE", "contains")
_AGG = re.compile(r"\s*(COUNT|SUM|AVG|MAX|MIN)\s*\((.*)\)\s*", re.IGNORECASE | re.DOTALL)

TableStuckReason = Literal["unknown_column", "no_matching_row", "empty_path"]


@dataclass(frozen=True)
class RowCondition:
    column: str
    op: str
    value: str | int | float

    def as_list(self) -> list[Any]:
        return [self.column, self.op, self.value]


@dataclass(frozen=True)
class TablePath:
    """Columns, then row conditions, then the answer (a column, maybe aggregated)."""

    columns: tuple[str, ...]
    rows: tuple[RowCondition, ...] = ()
    answer_column: str | None = None
    aggregation: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "rows", tuple(self.rows))
        if self.answer_column is None and self.columns:
            object.__setattr__(self, "answer_column", self.columns[0])
        if self.aggregation is not None:
            agg = self.aggregation.upper()
            object.__setattr__(self, "aggregation", None if agg == "NONE" else agg)

    @property
    def answer(self) -> str:
        col = self.answer_column or ""
        return f"{self.aggregation}({col})" if self.aggregation else col

    @property
    def length(self) -> int:
        return len(self.columns) + len(self.rows)

    def as_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "rows": [r.as_list() for r in self.rows],
                "answer": self.answer}

    def __str__(self) -> str:
        return "Path: " + json.dumps(self.as_dict(), ensure_ascii=False)


def parse_table_path(text: str) -> TablePath:
    """The first JSON object after ``Path:`` (else the first one) as a :class:`TablePath`."""
    label = re.search(r"(?:Final\s+)?Path\s*:", text, re.IGNORECASE)
    start = text.find("{", label.end() if label else 0)
    if start < 0:
        raise PathFormatError("no_path", "no table path ({\"columns\": [...], ...}) found", text,
                              label.end() if label else 0)
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise PathFormatError("bad_list", f"the table path is not JSON: {exc.msg}", text,
                              exc.pos) from None
    if not isinstance(value, dict):
        raise PathFormatError("bad_list", "the table path is not a JSON object", text, start)
    columns = value.get("columns", [])
    rows = value.get("rows", [])
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise PathFormatError("bad_list", "'columns' must be a list of column names", text, start)
    if not isinstance(rows, list):
        raise PathFormatError("bad_list", "'rows' must be a list of [column, op, value]", text,
                              start)
    conditions = []
    for row in rows:
        if (not isinstance(row, list) or len(row) != 3 or not isinstance(row[0], str)
                or not isinstance(row[1], str) or isinstance(row[2], (list, dict, bool))
                or row[2] is None):
            raise PathFormatError("bad_list", f"a row condition is [column, op, value], not {row!r}",
                                  text, start)
        op = row[1].strip()
        if op.upper() in ("LIKE", "NOT LIKE"):
            op = op.upper()
        if op not in _OPS:
            raise PathFormatError("bad_list", f"unknown operator {row[1]!r} (use {', '.join(_OPS)})",
                                  text, start)
        conditions.append(RowCondition(row[0], op, row[2]))
    answer = value.get("answer")
    column, aggregation = None, None
    if answer is not None:
        if not isinstance(answer, str):
            raise PathFormatError("bad_list", "'answer' is a column or AGG(column)", text, start)
        m = _AGG.fullmatch(answer)
        column, aggregation = (m.group(2).strip(), m.group(1).upper()) if m else (answer, None)
    if not columns and column is None:
        raise PathFormatError("empty_relation", "the table path names no column", text, start)
    return TablePath(tuple(columns), tuple(conditions), column, aggregation)


@dataclass(frozen=True)
class TableStuck:
    """Why a table path could not be instantiated (the table counterpart of ``PathStuck``)."""

    reason: TableStuckReason
    path: TablePath
    #: the unknown column, or the condition that matched no row
    column: str
    condition: RowCondition | None
    #: the conditions instantiated before the stuck one
    instantiated: tuple[RowCondition, ...]
    candidates: tuple[str, ...]

    def messages(self) -> list[str]:
        if self.reason == "empty_path":
            return ["empty reasoning path."]
        if self.reason == "unknown_column":
            return [f'column "{self.column}" is not in the table.']
        cond = self.condition
        assert cond is not None
        return [f'no row where "{cond.column}" {cond.op} {json.dumps(cond.value)}.']

    def render(self) -> str:
        """The error block of the edit prompt (as :class:`~pyql.agent.grounding.paths.PathStuck`'s)."""
        done = [c.as_list() for c in self.instantiated]
        what = "Candidate Columns" if self.reason != "no_matching_row" else (
            f'Values of column "{self.column}"')
        return error_block(f"Initial Path: {self.path}", self.messages(),
                           [f"Instantiated Rows: {json.dumps(done, ensure_ascii=False)}",
                            what, json.dumps(list(self.candidates), ensure_ascii=False)])

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "column": self.column,
                "condition": self.condition.as_list() if self.condition else None,
                "instantiated": [c.as_list() for c in self.instantiated],
                "candidates": list(self.candidates), "path": self.path.as_dict()}


@dataclass(frozen=True)
class TableInstantiation:
    path: TablePath
    program: Program
    query: str = ""
    answers: tuple[Any, ...] = ()
    #: rows of the path's columns under the instantiated conditions (the retrieved knowledge)
    rows: tuple[tuple[Any, ...], ...] = ()
    columns: tuple[str, ...] = ()
    stuck: TableStuck | None = None
    kb_queries: int = 0
    #: row conditions that matched no row and were dropped (``row_errors=False``: the paper's
    #: Appendix A returns every row of the columns instead of an error)
    dropped: tuple[RowCondition, ...] = ()

    @property
    def complete(self) -> bool:
        return self.stuck is None

    @property
    def instances(self) -> tuple[str, ...]:
        """The retrieved cells and the program's answers (for answer coverage)."""
        return tuple(sorted({str(v) for r in self.rows for v in r}
                            | {str(a) for a in self.answers}))

    def to_dict(self) -> dict[str, Any]:
        instances = self.instances
        return {"path": str(self.path), "complete": self.complete,
                "instances": list(instances[:500]), "instance_count": len(instances),
                "stuck": self.stuck.to_dict() if self.stuck else None,
                "program": str(self.program), "query": self.query,
                "answers": [str(a) for a in self.answers[:50]], "answer_count": len(self.answers),
                "rows": len(self.rows), "kb_queries": self.kb_queries,
                # what a reader is shown (the answer prompt's rows), for stand-ins and metrics
                "columns": list(self.columns),
                "shown_rows": [[_cell(v) for v in r] for r in self.rows],
                "dropped": [c.as_list() for c in self.dropped]}


def _cell(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, float, str)) else str(value)


def _column_atom(name: str) -> Atom:
    return Atom(AtomKind.STRING, name)


def _value_atom(value: str | int | float) -> Atom:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Atom(AtomKind.NUMBER, repr(value) if isinstance(value, float) else str(value))
    return Atom(AtomKind.STRING, str(value))


class TableInstantiator:
    """Instantiates table paths with an environment from ``new_session`` (a
    :class:`~pyql.sql.session.SqlSession`, reset between uses); ``binder`` ranks candidates against the
    question; ``max_rows`` bounds the retrieved rows, ``max_candidates`` the candidates listed.
    ``row_errors``: a row condition that matches no row is an error (pyql's program route);
    off, only unknown columns are errors and such a condition retrieves every row of the
    path's columns instead (the paper's Appendix A: "we just consider wrong columns as error. If
    a selected row ... cannot be instantiated, we return all rows in the columns")."""

    def __init__(self, new_session: Callable[[], Environment], binder: RelationBinder, *,
                 max_rows: int = 50, max_candidates: int = 35, row_errors: bool = True) -> None:
        self.new_session = new_session
        self._session: Environment | None = None
        self.binder = binder
        self.max_rows = max_rows
        self.max_candidates = max_candidates
        self.row_errors = row_errors

    def _fresh(self) -> Environment:
        """A session with no query: one made by ``new_session``, reset between uses (a new
        SqlSession reads the schema again)."""
        if self._session is None:
            self._session = self.new_session()
        else:
            self._session.reset()
        return self._session

    def columns(self, session: Environment | None = None) -> tuple[str, ...]:
        """The columns of the table (the memory of a fresh session lists them)."""
        return (session or self._fresh()).memory.columns

    def example_row(self, columns: Sequence[str], rng: random.Random | None = None
                    ) -> tuple[Any, ...]:
        """One row of the table for the generation prompt: the first in the order of the first
        column, or with ``rng`` a randomly sampled one (the paper's Appendix A)."""
        if not columns:
            return ()
        calls = [Call.of("set_answer", _column_atom(c)) for c in columns]
        if rng is None:
            calls.append(Call.of("add_order", _column_atom(columns[0]),
                                 Atom(AtomKind.NAME, "asc"), Atom(AtomKind.NUMBER, "1")))
        calls.append(Call.of("execute"))
        session = self._fresh()
        last = [_ok(o) for o in session.run_program(Program(calls=tuple(calls), tools="sql"))][-1]
        rows = list(last.answers or ())
        if not rows:
            return ()
        row = rng.choice(rows) if rng is not None else rows[0]
        return row if isinstance(row, tuple) else (row,)

    def instantiate(self, path: TablePath, question: str = "", *,
                    allow_empty: bool = False) -> TableInstantiation:
        """Instantiate ``path``; ``allow_empty`` accepts conditions that match no row (the model
        insisted on them after a ``no_matching_row`` error: an empty result, or a count of 0, can
        be the answer)."""
        session = self._fresh()
        queries = (session, session.backend.query_count)
        known = self.columns(session)
        by_fold = {c.casefold(): c for c in known}
        wanted = [*path.columns, *(r.column for r in path.rows),
                  *([path.answer_column] if path.answer_column else [])]
        if not wanted:
            stuck = TableStuck("empty_path", path, "", None, (),
                               tuple(self.binder.rank(question, list(known),
                                                      limit=self.max_candidates)))
            return self._finish(path, [], stuck, by_fold, queries)
        for column in dict.fromkeys(wanted):
            if column.casefold() not in by_fold:
                stuck = TableStuck("unknown_column", path, column, None, (),
                                   tuple(self.binder.rank(question or column, list(known),
                                                          limit=self.max_candidates)))
                return self._finish(path, [], stuck, by_fold, queries)
        accepted: list[RowCondition] = []
        for cond in path.rows:
            real = RowCondition(by_fold[cond.column.casefold()], cond.op, cond.value)
            obs = _ok(session.run(Call.of("add_condition", _column_atom(real.column),
                                          Atom(AtomKind.NAME, real.op), _value_atom(real.value))))
            if obs.status == "empty" and not allow_empty and not self.row_errors:
                return self._finish(path, [], None, by_fold, queries, dropped=path.rows)
            if obs.status == "empty" and not allow_empty:
                values = self._values(accepted, real.column)
                stuck = TableStuck("no_matching_row", path, real.column, cond, tuple(accepted),
                                   tuple(self.binder.rank(question or str(cond.value), values,
                                                          limit=self.max_candidates)))
                return self._finish(path, accepted, stuck, by_fold, queries)
            accepted.append(real)
        return self._finish(path, accepted, None, by_fold, queries)

    def program(self, path: TablePath, conditions: Sequence[RowCondition],
                answer_columns: Sequence[str], aggregation: str | None) -> Program:
        calls = [Call.of("add_condition", _column_atom(c.column), Atom(AtomKind.NAME, c.op),
                         _value_atom(c.value)) for c in conditions]
        for column in answer_columns:
            args = [_column_atom(column)]
            if aggregation:
                args.append(Atom(AtomKind.NAME, aggregation))
            calls.append(Call.of("set_answer", *args))
        calls.append(Call.of("execute"))
        return Program(calls=tuple(calls), tools="sql")

    def _values(self, conditions: Sequence[RowCondition], column: str) -> list[str]:
        session = self._fresh()
        for c in conditions:
            _ok(session.run(Call.of("add_condition", _column_atom(c.column),
                                    Atom(AtomKind.NAME, c.op), _value_atom(c.value))))
        obs = _ok(session.run(Call.of("get_column", _column_atom(column))))
        values = obs.values
        return list(next(iter(values.values())).values) if values else []

    def _finish(self, path: TablePath, accepted: Sequence[RowCondition], stuck: TableStuck | None,
                by_fold: dict[str, str], queries: tuple[Environment, int],
                dropped: Sequence[RowCondition] = ()) -> TableInstantiation:
        columns = tuple(dict.fromkeys(by_fold[c.casefold()] for c in path.columns
                                      if c.casefold() in by_fold))
        answer = (by_fold.get(path.answer_column.casefold()) if path.answer_column else None)
        program = self.program(path, accepted, [answer] if answer else [], path.aggregation)
        answers: tuple[Any, ...] = ()
        query = ""
        if answer is not None:
            session = self._fresh()
            last = [_ok(o) for o in session.run_program(program)][-1]
            answers, query = tuple(last.answers or ()), session.to_query()
        rows: tuple[tuple[Any, ...], ...] = ()
        if columns:
            view = self.program(path, accepted, columns, None)
            session = self._fresh()
            last = [_ok(o) for o in session.run_program(view)][-1]
            got = list(last.answers or ())[: self.max_rows]
            rows = tuple(r if isinstance(r, tuple) else (r,) for r in got)
        return TableInstantiation(path=path, program=program, query=query, answers=answers,
                                  rows=rows, columns=columns, stuck=stuck,
                                  kb_queries=queries[0].backend.query_count - queries[1],
                                  dropped=tuple(dropped))


def table_path_from_program(program: Program | str) -> TablePath:
    """The table path a PyQL-SQL program follows (its conditions and answer): what a gold
    stand-in answers. Calls other than ``add_condition``/``set_answer``/``execute`` are
    :class:`PathFormatError` ``bad_list`` (not expressible as a table path)."""
    prog = Program.parse(program, "sql") if isinstance(program, str) else program
    rows: list[RowCondition] = []
    answer: str | None = None
    aggregation: str | None = None
    for call in prog:
        args = [a.value for a in call.args]
        if call.name == "add_condition" and len(call.args) == 3:
            value: str | int | float = args[2]
            if call.args[2].kind is AtomKind.NUMBER:
                number = float(args[2])
                value = int(number) if number.is_integer() and "." not in args[2] else number
            rows.append(RowCondition(args[0], args[1], value))
        elif call.name == "set_answer" and answer is None:
            answer = args[0]
            aggregation = args[1] if len(args) > 1 else None
        elif call.name != "execute":
            raise PathFormatError("bad_list", f"{call} is not part of a table path", str(prog), 0)
    if answer is None:
        raise PathFormatError("empty_relation", "the program sets no answer", str(prog), 0)
    columns = tuple(dict.fromkeys([answer, *(r.column for r in rows)]))
    return TablePath(columns, tuple(rows), answer, aggregation)
