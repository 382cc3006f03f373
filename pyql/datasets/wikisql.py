"""WikiSQL: tables as a read-only SQLite database, questions with gold PyQL programs, and
WikiSQL's own execution semantics.

Data (see ``wikisql/SOURCE.md`` and ``SOURCE_tables.md`` in the shared data directory):
``dev.jsonl`` holds 8,421 questions, each ``{"table_id", "question", "sql": {"sel", "agg",
"conds"}}``; ``sel`` and each condition column index into the table header, ``agg`` indexes
:data:`AGG_OPS` and each condition is ``[column, op index into COND_OPS, value]``. The tables file
``dev.tables.jsonl.gz`` is *rebuilt* data: headers and rows come from a third-party CSV dump of the
original ``dev.tables.jsonl``, and the column ``types`` are **inferred** (``real`` when every cell
is a plain decimal number, else ``text``; ``real`` cells are JSON numbers). The original
``page_title``/``caption`` fields are not available.

Database (:func:`load_db`): one table per WikiSQL table, named :func:`table_name` (``table_`` +
id with ``-`` as ``_``), with the real headers as (quoted) column names, REAL/TEXT column types
from the inferred types, and the cells as given (original case), inserted with bound parameters.
TEXT columns are declared ``COLLATE NOCASE`` (``nocase=True``): comparisons ignore ASCII case as
WikiSQL's engine does by lower-casing, while cells keep their case. Nine dev tables (none used by
a dev question) have an empty header cell; those columns are named ``col<i>`` (WikiSQL's own
naming), and :func:`column_names` makes names unique case-insensitively (``Name``, ``Name_2``) —
the dev data has no duplicate headers, exact or case-folded, but other splits may.

Gold programs (:func:`gold_program`): ``add_condition(column, op, value)`` per condition, then
``set_answer(column, None|MAX|MIN|COUNT|SUM|AVG)`` and ``execute()``. Columns are bare when they
are plain identifiers, else quoted. Two repairs keep them faithful on a typed, case-preserving
database: about half the dev annotations carry lower-cased values (``"michigan state"``), so an
``=`` value that is not a cell but matches exactly one cell up to case takes the cell's spelling
(4,489 values); a string value on a ``real`` column becomes the number WikiSQL reads from it
(``"24,637"`` -> ``24637``; 329 values). With these, all 8,421 dev gold programs, compiled by
:mod:`pyql.sql` and run on :func:`load_db`, give the answers of :func:`wikisql_execute`
(compared case-insensitively).

Execution semantics (:func:`wikisql_execute`), our reading of WikiSQL's ``lib/dbengine.py``,
which runs ``SELECT agg(col_sel) AS result FROM table WHERE col op :col ...`` on SQLite with
``col<i>`` columns typed ``text``/``real``:

- The official database stores text lower-cased (the engine lower-cases condition values, which
  only matches if the cells are lower case too; ``SOURCE_tables.md`` verified the dev gold answers
  the same way). So text cells are compared and *returned* lower-cased.
- Condition values that are strings are lower-cased (``lower=True``, the official default).
- For a ``real`` column, a string condition value becomes a number as babel's ``parse_decimal``
  (en locale) reads it: group commas dropped (``'18,000'`` -> 18000.0); if that fails, the first
  number in the text (``[-+]?\\d*\\.\\d+|\\d+``). JSON numbers are used as they are.
- Comparisons follow SQLite: numbers compare numerically; text compares by code point (BINARY
  collation); a number against a TEXT column is compared as its text form; in any column numbers
  sort before text. ``=``, ``>``, ``<`` only (``OP`` is not supported, as in the original).
- Conditions bind parameters named after the column, so when two conditions use the same column
  the *last* value is used for both — a quirk of the original that we keep (no dev item has it).
- ``real`` cells are stored with REAL affinity, so they come back as floats (``3`` -> ``3.0``).
- Aggregates as SQLite computes them: ``COUNT`` counts non-NULL values; ``MAX``/``MIN`` use
  SQLite ordering; ``SUM`` adds left to right (an int if every input is an integer, else a float;
  text cells count as their numeric prefix, else 0); ``AVG`` is a float; over no rows all but
  ``COUNT`` give ``None``. The result is a list: the selected values in table order, or
  ``[aggregate]``.
- Checked: on all 8,421 dev questions this gives exactly what ``lib/dbengine.py``'s query gives
  on SQLite over a lower-cased ``col<i>`` database, and 7,748 non-NULL answers, the count
  ``SOURCE_tables.md`` reports.

Because our column types are inferred, results can differ from the original for columns the
original typed differently (e.g. comma numbers such as ``'18,000'`` are ``text`` here, so
``crowd > '18,000'`` compares strings).

>>> t = WikiSQLTable(id="1-1", header=("Player", "No."), types=("text", "real"),
...                  rows=(("Antonio Lang", 21), ("Voshon Lenard", 2)))
>>> wikisql_execute(t, sel=0, agg=0, conds=[[1, 1, "10"]])
['antonio lang']
>>> print(gold_program(t, {"sel": 0, "agg": 3, "conds": [[1, 0, 2]]}))
add_condition("No.", =, 2)
set_answer(Player, COUNT)
execute()
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlglot import exp

from pyql.datasets.files import field, json_lines, question
from pyql.db import SqlDB
from pyql.errors import DatasetFileError
from pyql.program import Call, Program
from pyql.sql.session import sqlite_text
from pyql.syntax import Atom, AtomKind, lex_atom

__all__ = [
    "AGG_OPS",
    "COND_OPS",
    "AGG_NAMES",
    "WikiSQLTable",
    "WikiSQLItem",
    "table_name",
    "column_names",
    "load_tables",
    "load_db",
    "load_questions",
    "gold_program",
    "wikisql_execute",
]

log = logging.getLogger("pyql.datasets.wikisql")

#: WikiSQL's aggregation operators, indexed by ``sql.agg``
AGG_OPS: tuple[str, ...] = ("", "MAX", "MIN", "COUNT", "SUM", "AVG")
#: WikiSQL's condition operators, indexed by ``sql.conds[i][1]`` ("OP" is never used)
COND_OPS: tuple[str, ...] = ("=", ">", "<", "OP")
#: the aggregation argument of ``set_answer`` for each ``sql.agg``
AGG_NAMES: tuple[str, ...] = ("None", "MAX", "MIN", "COUNT", "SUM", "AVG")

# bump when the layout of the built database changes (invalidates cached builds)
_BUILD_VERSION = 1


class WikiSQLTable(BaseModel):
    """One WikiSQL table: id, header, (inferred) column types and rows."""

    model_config = ConfigDict(frozen=True)

    id: str
    header: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...] = ()

    @property
    def name(self) -> str:
        """The table's name in the database (``table_1_10015132_11``)."""
        return table_name(self.id)

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names in the database (headers made non-empty and unique)."""
        return tuple(column_names(self.header))


class WikiSQLItem(BaseModel):
    """One WikiSQL question with its table and gold program.

    ``sql`` is the raw annotation (``sel``, ``agg``, ``conds``); ``program`` is the same query as a
    PyQL SQL program over :attr:`columns` of :attr:`table`.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    table_id: str
    #: the table name in the database built by :func:`load_db`
    table: str
    #: the original header
    header: tuple[str, ...]
    #: the column names in the database
    columns: tuple[str, ...]
    types: tuple[str, ...]
    sql: dict[str, Any]
    program: Program
    phase: int | None = None


def table_name(table_id: str) -> str:
    """The database table of a WikiSQL table id.

    >>> table_name("1-10015132-11")
    'table_1_10015132_11'
    """
    return "table_" + table_id.replace("-", "_")


def column_names(header: Sequence[str]) -> list[str]:
    """Column names for a header: empty cells become ``col<i>``, repeats (case-insensitive, as
    SQLite compares names) get ``_2``, ``_3``...

    >>> column_names(["", "Name", "name", "Name_2"])
    ['col0', 'Name', 'name_2', 'Name_2_2']
    """
    names: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(header):
        base = raw.strip() or f"col{i}"
        name, k = base, 2
        while name.casefold() in seen:
            name = f"{base}_{k}"
            k += 1
        seen.add(name.casefold())
        names.append(name)
    return names


# ------------------------------------------------------------------ loading


def _read_tables(path: Path) -> Iterator[WikiSQLTable]:
    for number, raw in json_lines(path):
        try:
            # trusted JSON: skip validating every cell (a third of the load time otherwise)
            table = WikiSQLTable.model_construct(
                id=raw["id"],
                header=tuple(raw["header"]),
                types=tuple(raw["types"]),
                rows=tuple(tuple(r) for r in raw["rows"]),
            )
        except (KeyError, TypeError) as exc:
            raise DatasetFileError(path, number, f"not a WikiSQL table: {_problem(exc)}"
                                   ) from None
        yield table


def _problem(exc: Exception) -> str:
    return f"no {exc.args[0]!r} field" if isinstance(exc, KeyError) else str(exc)


def load_tables(tables_path: str | Path) -> dict[str, WikiSQLTable]:
    """All tables of a WikiSQL tables file (``.jsonl`` or gzip), by id."""
    return {t.id: t for t in _read_tables(Path(tables_path))}


def _tables(tables: str | Path | Mapping[str, WikiSQLTable]) -> Mapping[str, WikiSQLTable]:
    return tables if isinstance(tables, Mapping) else load_tables(tables)


_REAL = exp.DataType.build("REAL")
_TEXT = exp.DataType.build("TEXT")


def _column_def(name: str, wikisql_type: str, nocase: bool) -> exp.ColumnDef:
    constraints = []
    if nocase and wikisql_type != "real":
        constraints.append(
            exp.ColumnConstraint(kind=exp.CollateColumnConstraint(this=exp.var("NOCASE")))
        )
    return exp.ColumnDef(
        this=exp.to_identifier(name, quoted=True),
        kind=(_REAL if wikisql_type == "real" else _TEXT).copy(),
        constraints=constraints,
    )


def _build(tables: Iterable[WikiSQLTable], target: Path, *, nocase: bool = True) -> int:
    """Write the tables into a new SQLite file at ``target``; return the number of tables."""
    conn = sqlite3.connect(target, isolation_level=None)
    count = 0
    try:
        # a scratch file renamed into place when complete: no journal, no fsync, one transaction
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        for table in tables:
            create = exp.Create(
                this=exp.Schema(
                    this=exp.Table(this=exp.to_identifier(table.name, quoted=True)),
                    expressions=[
                        _column_def(c, t, nocase)
                        for c, t in zip(table.columns, table.types, strict=True)
                    ],
                ),
                kind="TABLE",
            )
            conn.execute(create.sql(dialect="sqlite", copy=False))
            insert = exp.insert(
                exp.values([exp.Tuple(expressions=[exp.Placeholder() for _ in table.columns])]),
                exp.Table(this=exp.to_identifier(table.name, quoted=True)),
            )
            conn.executemany(insert.sql(dialect="sqlite", copy=False), table.rows)
            count += 1
        conn.execute("COMMIT")
    finally:
        conn.close()
    return count


def load_db(
    tables_path: str | Path,
    *,
    path: str | Path | None = None,
    cache_dir: str | Path | None = None,
    nocase: bool = True,
    **options: Any,
) -> SqlDB:
    """Build a SQLite database of all tables in ``tables_path`` and open it read-only.

    Where the file goes: ``path`` if given (rebuilt every time); else, with ``cache_dir``, a
    build reused while the tables file keeps its size and modification time; else a temporary
    file removed when the returned :class:`~pyql.db.SqlDB` is garbage-collected.

    ``nocase`` (default) declares TEXT columns ``COLLATE NOCASE``: cells keep their case, but
    comparisons ignore (ASCII) case, as WikiSQL's engine does by lower-casing — many dev
    annotations carry lower-cased values (``"michigan state"`` for the cell ``Michigan State``).
    ``options`` go to :class:`~pyql.db.SqlDB` (``statement_timeout``, ``max_rows``,
    ``sample_values``).
    """
    source = Path(tables_path)
    if path is not None:
        target = Path(path)
        _build_atomically(source, target, nocase)
        return SqlDB.sqlite(target, **options)
    if cache_dir is not None:
        stat = source.stat()
        stem = source.name.split(".")[0]
        flavour = "nocase" if nocase else "binary"
        target = Path(cache_dir) / (
            f"wikisql-{stem}-{stat.st_size}-{stat.st_mtime_ns}-{flavour}-v{_BUILD_VERSION}.sqlite"
        )
        if target.is_file():
            log.info("reusing the WikiSQL database %s", target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            _build_atomically(source, target, nocase)
        return SqlDB.sqlite(target, **options)
    fd, name = tempfile.mkstemp(prefix="pyql-wikisql-", suffix=".sqlite")
    os.close(fd)
    target = Path(name)
    try:
        target.unlink()
        _build_atomically(source, target, nocase)
        db = SqlDB.sqlite(target, **options)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    db.add_finalizer(lambda: target.unlink(missing_ok=True))
    return db


def _build_atomically(source: Path, target: Path, nocase: bool) -> None:
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        count = _build(_read_tables(source), partial, nocase=nocase)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    log.info("built the WikiSQL database %s (%d tables) from %s", target, count, source)


def load_questions(
    jsonl_path: str | Path, tables_path: str | Path | Mapping[str, WikiSQLTable]
) -> Iterator[WikiSQLItem]:
    """The questions of a WikiSQL split, with gold programs.

    ``tables_path`` is the tables file or the mapping :func:`load_tables` returned. Item ids are
    ``<split>-<line index>`` (``dev-0``, ``dev-1`` ...; the split is the file name up to the first
    dot).
    """
    source = Path(jsonl_path)
    tables = _tables(tables_path)
    split = source.name.split(".")[0]
    for index, (number, raw) in enumerate(json_lines(source)):
        table_id = field(raw, "table_id", source, number)
        table = tables.get(table_id)
        if table is None:
            raise DatasetFileError(source, number,
                                   f"table {table_id!r} is not in the tables file")
        try:
            item = WikiSQLItem(
                id=f"{split}-{index}",
                question=question(raw["question"], source, number),
                table_id=table.id,
                table=table.name,
                header=table.header,
                columns=table.columns,
                types=table.types,
                sql=raw["sql"],
                program=gold_program(table, raw["sql"]),
                phase=raw.get("phase"),
            )
        except (KeyError, TypeError, IndexError, ValidationError) as exc:
            raise DatasetFileError(source, number, f"not a WikiSQL question: {_problem(exc)}"
                                   ) from None
        yield item


# ------------------------------------------------------------------ gold programs

_BARE_COLUMN = re.compile(r"[^\W\d]\w*")


def _column_atom(name: str) -> Atom:
    """A column argument: bare when it is a plain identifier, else a quoted string."""
    if _BARE_COLUMN.fullmatch(name):
        atom = Atom(AtomKind.NAME, name)
        if lex_atom(str(atom)) == atom:
            return atom
    return Atom(AtomKind.STRING, name)


def _value_atom(value: Any) -> Atom:
    if isinstance(value, Atom):
        return value
    if isinstance(value, bool):
        return Atom(AtomKind.STRING, str(value))
    if isinstance(value, int):
        return Atom(AtomKind.NUMBER, str(value))
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return Atom(AtomKind.NUMBER, repr(value))
    return Atom(AtomKind.STRING, str(value))


def _number_text(text: str) -> str | None:
    """The number WikiSQL's engine reads from a condition value on a ``real`` column, as text."""
    try:
        number = Decimal(text.replace(",", ""))
    except (InvalidOperation, ValueError):
        found = _NUM_RE.findall(text)
        return found[0] if found else None
    if not number.is_finite():
        return None
    return str(number)


def _cell_spelling(table: WikiSQLTable, column: int, value: str) -> str:
    """The unique cell of ``column`` equal to ``value`` up to case, else ``value`` itself."""
    cells = {row[column] for row in table.rows if isinstance(row[column], str)}
    if value in cells:
        return value
    folded = value.lower()
    matches = sorted(c for c in cells if c.lower() == folded)
    return matches[0] if len(matches) == 1 else value


def gold_program(table: WikiSQLTable, sql: Mapping[str, Any]) -> Program:
    """The PyQL SQL program of a WikiSQL annotation: conditions, the answer, ``execute()``.

    Condition values are written as annotated, with two repairs so that the program means on a
    typed, case-preserving database what the annotation means to WikiSQL's engine:

    - a string value on a ``real`` column becomes the number the engine reads from it
      (``"24,637"`` -> ``24637``);
    - an ``=`` value on a text column that is not a cell but equals exactly one distinct cell
      when both are lower-cased takes that cell's spelling (many dev annotations are
      lower-cased: ``"michigan state"`` -> ``"Michigan State"``).
    """
    columns = table.columns
    calls: list[Call] = []
    for col, op, value in sql["conds"]:
        if COND_OPS[op] == "OP":
            raise ValueError(f"condition operator 'OP' is not supported (table {table.id})")
        if table.types[col] == "real" and isinstance(value, str):
            number = _number_text(value)
            if number is not None:
                value = Atom(AtomKind.NUMBER, number)
        elif COND_OPS[op] == "=" and isinstance(value, str):
            value = _cell_spelling(table, col, value)
        calls.append(
            Call(
                name="add_condition",
                args=(
                    _column_atom(columns[col]),
                    Atom(AtomKind.NAME, COND_OPS[op]),
                    _value_atom(value),
                ),
            )
        )
    calls.append(
        Call(
            name="set_answer",
            args=(_column_atom(columns[sql["sel"]]), Atom(AtomKind.NAME, AGG_NAMES[sql["agg"]])),
        )
    )
    calls.append(Call(name="execute"))
    return Program(calls=tuple(calls), tools="sql")


# ------------------------------------------------------------------ WikiSQL's execution

_NUM_RE = re.compile(r"[-+]?\d*\.\d+|\d+")
_INT_TEXT = re.compile(r"\s*[-+]?\d+\s*")
_NUM_PREFIX = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_INT64 = (-(2**63), 2**63 - 1)


def _parse_decimal(text: str) -> float:
    """``float(babel.numbers.parse_decimal(text))`` (en locale), else the first number in it."""
    try:
        return float(Decimal(text.replace(",", "")))
    except (InvalidOperation, ValueError):
        found = _NUM_RE.findall(text)
        if not found:
            raise ValueError(f"no number in condition value {text!r} for a real column") from None
        return float(found[0])


def _real_cell(value: Any) -> Any:
    """A cell as a REAL-affinity column stores it."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value)
    stripped = text.strip()
    if _NUM_PREFIX.fullmatch(stripped):
        return float(stripped)
    return text


def _text_cell(value: Any) -> Any:
    """A cell as a TEXT-affinity column of the (lower-cased) official database stores it."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return sqlite_text(value)
    return str(value).lower()


def _rank(value: Any) -> int:
    # SQLite's storage class order: NULL < INTEGER/REAL < TEXT < BLOB
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return 1
    if isinstance(value, str):
        return 2
    return 3


def _compare(a: Any, b: Any) -> int | None:
    """SQLite comparison of two stored values: -1/0/1, or None if either is NULL."""
    if a is None or b is None:
        return None
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return -1 if ra < rb else 1
    return (a > b) - (a < b)


def _numeric_text(value: str) -> tuple[int | float, bool]:
    """How SUM/AVG read a text value: (number, is_integer)."""
    if _INT_TEXT.fullmatch(value):
        number = int(value)
        if _INT64[0] <= number <= _INT64[1]:
            return number, True
        return float(number), False
    match = _NUM_PREFIX.match(value)
    if match:
        return float(match.group(0)), False
    return 0.0, False


def _sum(values: list[Any]) -> int | float | None:
    if not values:
        return None
    total: int | float = 0
    all_int = True
    for value in values:
        if isinstance(value, str):
            number, is_int = _numeric_text(value)
        elif isinstance(value, bool):
            number, is_int = int(value), True
        elif isinstance(value, int):
            number, is_int = value, True
        else:
            number, is_int = float(value), False
        all_int = all_int and is_int
        total = total + number
    return total if all_int else float(total)


def _table_parts(
    table: WikiSQLTable | Mapping[str, Any],
) -> tuple[Sequence[str], Sequence[Sequence[Any]]]:
    if isinstance(table, WikiSQLTable):
        return table.types, table.rows
    return table["types"], table["rows"]


def wikisql_execute(
    table: WikiSQLTable | Mapping[str, Any],
    sel: int,
    agg: int,
    conds: Sequence[Sequence[Any]],
    *,
    lower: bool = True,
) -> list[Any]:
    """Run a WikiSQL query the way WikiSQL's ``lib/dbengine.py`` does, in pure Python.

    ``table`` is a :class:`WikiSQLTable` (or a mapping with ``types`` and ``rows``); ``sel``,
    ``agg`` and ``conds`` are the fields of the ``sql`` annotation (so ``wikisql_execute(table,
    **item.sql)`` works). Returns the selected values, or a one-element list with the aggregate.
    The semantics are described in the module docstring.
    """
    types, rows = _table_parts(table)

    def stored(value: Any, column: int) -> Any:
        return _real_cell(value) if types[column] == "real" else _text_cell(value)

    # Parameters are named after their column: a later condition on a column overwrites the value.
    bound: dict[int, Any] = {}
    for col, op, value in conds:
        if not 0 <= op < len(COND_OPS) or COND_OPS[op] == "OP":
            raise ValueError(f"unsupported condition operator index {op!r}")
        if lower and isinstance(value, str):
            value = value.lower()
        if types[col] == "real" and not isinstance(value, (int, float)):
            value = _parse_decimal(str(value))
        elif (
            types[col] != "real" and isinstance(value, (int, float)) and not isinstance(value, bool)
        ):
            value = sqlite_text(value)  # TEXT affinity applies to the bound number
        bound[col] = value
    tests = [(col, COND_OPS[op]) for col, op, _ in conds]

    selected: list[Any] = []
    for row in rows:
        keep = True
        for col, op in tests:
            c = _compare(stored(row[col], col), bound[col])
            if c is None or not (
                (op == "=" and c == 0) or (op == ">" and c > 0) or (op == "<" and c < 0)
            ):
                keep = False
                break
        if keep:
            selected.append(stored(row[sel], sel))

    name = AGG_OPS[agg]
    if not name:
        return selected
    present = [v for v in selected if v is not None]
    if name == "COUNT":
        return [len(present)]
    if not present:
        return [None]
    if name in ("MAX", "MIN"):
        best = present[0]
        for value in present[1:]:
            c = _compare(value, best)
            if (name == "MAX" and c > 0) or (name == "MIN" and c < 0):
                best = value
        return [best]
    total = _sum(present)
    if name == "SUM":
        return [total]
    return [float(total) / len(present)]  # AVG
