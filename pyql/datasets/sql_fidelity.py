"""Fidelity of PyQL-SQL: do gold programs, run through a :class:`~pyql.sql.session.SqlSession`,
return what the dataset's own execution returns?

- **WikiSQL**: every question's gold program (:func:`pyql.datasets.wikisql.load_questions`) runs
  call by call in a ``SqlSession`` on the WikiSQL database (:func:`~pyql.datasets.wikisql.load_db`);
  its answers must equal :func:`~pyql.datasets.wikisql.wikisql_execute` (WikiSQL's own
  semantics). Text compares case-insensitively, since WikiSQL's database stores text lower-cased
  and ours keeps the original case; numbers compare by value (``3 == 3.0``); order counts.
- **Spider**: each gold SQL becomes a program where the tool set can express it
  (:func:`pyql.sql.from_sql.to_program`), which runs in a ``SqlSession`` on the question's
  database; the answer rows must equal the gold SQL's own rows on the same SQLite file (run
  directly with ``sqlite3``, read-only), as a multiset, or as a list when the gold query has a
  top-level ``ORDER BY``. Floats compare rounded to 6 significant digits, integral floats equal
  ints. *Coverage* is the share of questions whose gold SQL became a program; the unsupported
  constructs are counted. The same is reported one level down for the
  :class:`~pyql.sql.Sql` tree (:func:`pyql.sql.from_sql.to_query`, which also holds sub-queries
  and set operations), executed through :class:`~pyql.db.SqlDB`.

Measured on the full dev sets (the commands below):

- WikiSQL dev: 8,421/8,421 programs agree with WikiSQL's semantics (100%; no residue). 673 of
  them have an empty gold result (8 match no row, 665 aggregate over no row: NULL), where a
  program that returns nothing agrees too; the report says so (``gold result empty``).
- Spider dev: 1,011 of 1,034 gold queries (97.8%) are expressible as programs (sub-queries,
  set operations and IN lists through ``begin_subquery``/``end_subquery``, ``add_union``/
  ``add_intersect``/``add_except`` and ``a|b|c`` values), and all 1,011 agree with the gold rows
  (53 of them have an empty gold result). The Sql tree holds 1,013 (98.0%), all agreeing. What
  the tool set cannot say: column-to-column conditions (2); and, as the tree cannot either, ORs
  other than equalities on one column (7), joins on an OR or none (6), self-joins (4), a column
  selected twice (2), a sub-query in FROM (2).

Command line::

    pyql fidelity sql wikisql [--sample N] [--seed S] [--json]
    pyql fidelity sql spider  [--sample N] [--seed S] [--json]

Data comes from :func:`pyql.datasets.paths.default_data_dir` unless ``--data-dir DIR`` is given.
"""

from __future__ import annotations

import logging
import math
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyql.datasets.paths import default_data_dir
from pyql.errors import PyqlError

__all__ = [
    "ItemResult",
    "FidelityReport",
    "wikisql_fidelity",
    "spider_fidelity",
    "normalise_cell",
    "same_rows",
]

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

#: rows fetched per query in the fidelity runs (Spider's largest table has 20,662 rows)
_MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class ItemResult:
    """The outcome of one question.

    ``status``: ``agree``; ``disagree`` (both ran, different results); ``unsupported`` (no
    program: ``constructs`` says why); ``failed`` (the program or the gold query failed: see
    ``detail``).
    """

    id: str
    status: str
    detail: str = ""
    constructs: tuple[str, ...] = ()
    got: Any = None
    want: Any = None


@dataclass
class FidelityReport:
    """Figures for one dataset run (see :meth:`render` and :meth:`to_dict`)."""

    dataset: str
    items: list[ItemResult] = field(default_factory=list)
    elapsed: float = 0.0
    #: Spider: the same measured on the Sql tree (to_query), as ``{status: count}``
    tree: dict[str, int] = field(default_factory=dict)
    tree_constructs: Counter[str] = field(default_factory=Counter)
    #: questions (that ran) whose gold result is empty (:func:`empty_result`: no row matched):
    #: a program that returns nothing agrees with them, so agreement there says little
    gold_empty: int = 0

    @property
    def empty_agree(self) -> int:
        """Agreeing questions whose gold result is empty (both returned nothing)."""
        return sum(1 for r in self.items if r.status == "agree" and empty_result(r.want))

    @property
    def nonempty_agreement(self) -> float:
        """Agreement on the expressible questions whose gold result is not empty."""
        rest = self.expressible - self.gold_empty
        return (self.count("agree") - self.empty_agree) / rest if rest > 0 else 0.0

    def count(self, status: str) -> int:
        return sum(1 for r in self.items if r.status == status)

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def expressible(self) -> int:
        return self.total - self.count("unsupported")

    @property
    def coverage(self) -> float:
        return self.expressible / self.total if self.total else 0.0

    @property
    def agreement(self) -> float:
        """Agreeing questions among the expressible ones."""
        return self.count("agree") / self.expressible if self.expressible else 0.0

    @property
    def constructs(self) -> Counter[str]:
        """Unsupported constructs: in how many questions each stands in the way."""
        counts: Counter[str] = Counter()
        for r in self.items:
            counts.update(r.constructs)
        return counts

    def residue(self) -> list[ItemResult]:
        return [r for r in self.items if r.status in ("disagree", "failed")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "total": self.total,
            "expressible": self.expressible,
            "coverage": round(self.coverage, 4),
            "agree": self.count("agree"),
            "disagree": self.count("disagree"),
            "failed": self.count("failed"),
            "agreement": round(self.agreement, 4),
            "gold_empty": self.gold_empty,
            "gold_empty_agree": self.empty_agree,
            "nonempty_agreement": round(self.nonempty_agreement, 4),
            "unsupported_constructs": dict(self.constructs.most_common()),
            "tree": self.tree,
            "tree_unsupported_constructs": dict(self.tree_constructs.most_common()),
            "elapsed_seconds": round(self.elapsed, 2),
            "residue": [
                {"id": r.id, "status": r.status, "detail": r.detail,
                 "got": _jsonable(r.got), "want": _jsonable(r.want)}
                for r in self.residue()
            ],
        }

    def render(self) -> str:
        from pyql.sql.from_sql import CONSTRUCTS

        lines = [
            f"{self.dataset}: {self.total} questions in {self.elapsed:.1f} s",
            f"  expressible as programs: {self.expressible}/{self.total} "
            f"({100 * self.coverage:.1f}%)",
            f"  agreement: {self.count('agree')}/{self.expressible} "
            f"({100 * self.agreement:.2f}%); disagree {self.count('disagree')}, "
            f"failed {self.count('failed')}",
        ]
        lines.append(
            f"  gold result empty: {self.gold_empty} of the {self.expressible} expressible "
            f"questions; {self.empty_agree} of them count as agreement because the program "
            f"returned nothing too. Agreement on the others: "
            f"{self.count('agree') - self.empty_agree}/{self.expressible - self.gold_empty} "
            f"({100 * self.nonempty_agreement:.2f}%)")
        if self.tree:
            done = self.tree.get("agree", 0)
            expr = sum(v for k, v in self.tree.items() if k != "unsupported")
            lines.append(
                f"  Sql tree (to_query): expressible {expr}/{self.total} "
                f"({100 * expr / self.total:.1f}%), agreement {done}/{expr}"
                f" ({100 * done / expr if expr else 0:.2f}%)"
            )
        constructs = self.constructs
        if constructs:
            lines.append("  unsupported constructs (questions):")
            for code, n in constructs.most_common():
                lines.append(f"    {code:<22} {n:>5}  {CONSTRUCTS.get(code, '')}")
        if self.tree_constructs:
            lines.append("  unsupported by the Sql tree (questions):")
            for code, n in self.tree_constructs.most_common():
                lines.append(f"    {code:<22} {n:>5}  {CONSTRUCTS.get(code, '')}")
        for r in self.residue()[:20]:
            lines.append(f"  {r.status} {r.id}: {r.detail}")
        return "\n".join(lines)


# ------------------------------------------------------------------ comparison


def empty_result(values: Any) -> bool:
    """A gold result that says nothing: no row, or only NULLs (an aggregate over no row).

    >>> empty_result([]), empty_result([None]), empty_result([(None,)]), empty_result([0])
    (True, True, True, False)
    """
    if not values:
        return True
    return all(v is None or (isinstance(v, (list, tuple)) and all(c is None for c in v))
               for v in values)


def normalise_cell(value: Any, *, casefold: bool = False) -> Any:
    """A cell in a comparable form: numbers by value (6 significant digits for floats),
    ``Decimal`` as a number, optionally text case-folded.

    >>> normalise_cell(3.0), normalise_cell(Decimal("2.50")), normalise_cell(1 / 3)
    (3, 2.5, 0.333333)
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return value
        if value.is_integer():
            return int(value)
        return float(f"{value:.6g}")
    if isinstance(value, str) and casefold:
        return value.lower()
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _row(row: Sequence[Any], casefold: bool) -> tuple[Any, ...]:
    return tuple(normalise_cell(c, casefold=casefold) for c in row)


def same_rows(
    got: Iterable[Sequence[Any]], want: Iterable[Sequence[Any]], *, ordered: bool,
    casefold: bool = False,
) -> bool:
    """Equal result rows after :func:`normalise_cell`: as lists if ``ordered``, else multisets."""
    a = [_row(r, casefold) for r in got]
    b = [_row(r, casefold) for r in want]
    if ordered:
        return a == b
    return Counter(map(_key, a)) == Counter(map(_key, b))


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # ints and floats that are equal hash equal; keep None/str/bytes apart from numbers
    return tuple((type(c).__name__ if not isinstance(c, (int, float)) else "n", c) for c in row)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value][:20]
    return str(value)


def _sample(n: int, sample: int | None, seed: int) -> list[int]:
    if sample is None or sample >= n:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(n), sample))


# ------------------------------------------------------------------ WikiSQL


def wikisql_fidelity(
    data_dir: str | Path | None = None,
    *,
    split: str = "dev",
    sample: int | None = None,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> FidelityReport:
    """Run every (or a seeded ``sample`` of) WikiSQL gold program(s) through a SqlSession and
    compare with WikiSQL's own execution (module docs)."""
    from pyql.datasets import wikisql
    from pyql.sql.session import SqlSession

    base = Path(data_dir) if data_dir is not None else default_data_dir()
    folder = base / "wikisql" if (base / "wikisql").is_dir() else base
    tables_path = folder / f"{split}.tables.jsonl.gz"
    if not tables_path.exists():
        tables_path = folder / f"{split}.tables.jsonl"
    start = time.perf_counter()
    tables = wikisql.load_tables(tables_path)
    db = wikisql.load_db(tables_path, cache_dir=cache_dir, sample_values=0)
    items = list(wikisql.load_questions(folder / f"{split}.jsonl", tables))
    chosen = _sample(len(items), sample, seed)
    report = FidelityReport("wikisql")
    for done, index in enumerate(chosen, 1):
        item = items[index]
        want = wikisql.wikisql_execute(tables[item.table_id], **item.sql)
        if empty_result(want):  # no row matched: a program returning nothing (or NULL) agrees
            report.gold_empty += 1
        session = SqlSession(db, table=item.table)
        observations = session.run_program(item.program)
        failed = next((o for o in observations if not o.ok), None)
        if failed is not None:
            report.items.append(ItemResult(item.id, "failed", f"{failed.action}: {failed.text}",
                                           want=want))
        else:
            got = list(observations[-1].answers or ())
            agree = same_rows([[g] for g in got], [[w] for w in want], ordered=True,
                              casefold=True)
            report.items.append(ItemResult(item.id, "agree" if agree else "disagree",
                                           "" if agree else str(item.program).replace("\n", "; "),
                                           got=got, want=want))
        if progress is not None:
            progress(done, len(chosen))
    db.close()
    report.elapsed = time.perf_counter() - start
    return report


# ------------------------------------------------------------------ Spider


def spider_fidelity(
    data_dir: str | Path | None = None,
    *,
    split: str = "dev",
    sample: int | None = None,
    seed: int = 0,
    tree: bool = True,
    progress: Progress | None = None,
) -> FidelityReport:
    """Convert Spider gold SQL to programs, run them through SqlSessions and compare with the
    gold SQL's own rows (module docs). ``tree`` also measures the Sql-tree level."""
    from pyql.datasets import spider
    from pyql.sql.from_sql import Unsupported, to_program, to_query
    from pyql.sql.session import SqlSession

    folder = spider.spider_dir(data_dir)
    start = time.perf_counter()
    items = list(spider.load_items(folder / f"{split}.json"))
    chosen = _sample(len(items), sample, seed)
    dbs: dict[str, Any] = {}
    report = FidelityReport("spider")
    tree_status: Counter[str] = Counter()
    for done, index in enumerate(chosen, 1):
        item = items[index]
        if item.db_id not in dbs:
            dbs[item.db_id] = spider.open_db(folder, item.db_id, max_rows=_MAX_ROWS)
        db = dbs[item.db_id]
        path = spider.db_path(folder, item.db_id)
        schema = db.schema()
        ordered = spider.is_ordered(item.query)
        try:
            want: list[tuple[Any, ...]] | None = spider.gold_rows(path, item.query)
        except sqlite3.Error as exc:
            want = None
            gold_error = f"the gold SQL fails: {exc}"
        if tree:
            query = to_query(item.query, schema)
            if isinstance(query, Unsupported):
                tree_status["unsupported"] += 1
                report.tree_constructs.update(query.constructs)
            elif want is None:
                tree_status["failed"] += 1
            else:
                try:
                    rows = db.execute(query.to_sql(db.dialect)).rows
                    ok = same_rows(rows, want, ordered=ordered)
                    tree_status["agree" if ok else "disagree"] += 1
                except PyqlError as exc:
                    log.info("%s: the Sql tree fails: %s", item.id, exc)
                    tree_status["failed"] += 1
        program = to_program(item.query, schema)
        if isinstance(program, Unsupported):
            report.items.append(ItemResult(item.id, "unsupported", program.detail,
                                           program.constructs))
        elif want is None:
            report.items.append(ItemResult(item.id, "failed", gold_error))
        else:
            session = SqlSession(db)
            observations = session.run_program(program)
            failed = next((o for o in observations if not o.ok), None)
            if failed is not None:
                report.items.append(ItemResult(item.id, "failed",
                                               f"{failed.action}: {failed.text}", want=want))
            else:
                got = list(session.last_result.rows) if session.last_result else []
                ok = same_rows(got, want, ordered=ordered)
                if empty_result(want):
                    report.gold_empty += 1
                report.items.append(ItemResult(
                    item.id, "agree" if ok else "disagree",
                    "" if ok else f"{item.query} || {session.to_sql()}", got=got, want=want))
        if progress is not None:
            progress(done, len(chosen))
    for db in dbs.values():
        db.close()
    report.tree = dict(tree_status)
    report.elapsed = time.perf_counter() - start
    return report
