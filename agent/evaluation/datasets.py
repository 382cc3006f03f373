"""Datasets as :class:`~pyql.agent.evaluation.records.EvalItem` lists, and their backends.

- ``metaqa-1hop``, ``metaqa-2hop``, ``metaqa-3hop`` (SPARQL, prompt profile ``metaqa``):
  ``metaqa/{k}-hop/qa_{split}.txt``; the question as MetaQA writes it (topic in brackets, as in
  the prompt's example), ``entities={topic: topic}``, the gold answers, the gold program of
  :func:`pyql.datasets.metaqa.gold_program`, meta ``qtype`` and ``hops``. Backend: the MetaQA KB
  (:func:`pyql.datasets.metaqa.load_kb`), kept as an on-disk Oxigraph store in the cache
  directory (built once in a few seconds, then reopened in ~0.1 s).
- ``wikisql`` (SQL, profile ``wikisql``): ``wikisql/{split}.jsonl``; ``table`` = the table's
  name in the database, gold answers from :func:`~pyql.datasets.wikisql.wikisql_execute`
  (WikiSQL's own semantics), the gold program, meta ``agg``, ``conds``, ``table_id``. Backend:
  the database of :func:`~pyql.datasets.wikisql.load_db`, built once into the cache directory.
- ``spider`` (SQL, prompt profile ``spider``: full SQL tool set, database schema after the question): ``spider/{split}.json``;
  ``db_id``, gold answers = the rows of the gold SQL on its SQLite file (read-only), the gold
  program of :func:`pyql.sql.from_sql.to_program` where the DSL can express it (else ``None``
  and meta ``unsupported``: the constructs in the way), meta ``db_id``, ``ordered`` (top-level
  ``ORDER BY``), ``expressible``, ``gold_sql``. Backend: each database, opened read-only on first
  use.
- ``webqsp`` (SPARQL, profile ``freebase``; split ``test``):
  ``freebase_questions/WebQSP_test_processed.json.gz``: the gold entity linking, the answers
  (mids), the ``PyQL`` program with ``execute()`` added (``None`` for the 42 questions without
  one), meta ``answer_sets`` (``different_answer``). Backend: a Freebase KB given with ``--kb``
  (a SPARQL endpoint URL, an Oxigraph store directory, or an RDF file); there is no default.

Every dataset lists the splits its files hold (:meth:`EvalDataset.splits`: a MetaQA
``qa_test.txt``, a WikiSQL ``test.jsonl`` ... make a ``test`` split); ``--split`` takes any of
them, and an absent one is a :class:`DatasetError` naming those there are. More datasets join
the registry with :func:`register_dataset` or an entry point in the group
``pyql.eval_datasets`` (the value: an :class:`EvalDataset` subclass), e.g. GrailQA and CWQ over
the loaders of :mod:`pyql.datasets.freebase`; a name taken twice (a built-in's included) is a
:class:`~pyql.plugins.PluginConflictError` when used, an unknown one an
:class:`UnknownDatasetError`.

Questions are selected by :func:`select_indices` (``--limit``, then ``--sample``/``--seed``)
before their gold answers are computed (Spider: its gold SQL run).

Nothing is ever written into the data directory. Built stores and databases go to the cache
directory: ``$PYQL_CACHE``, else ``~/.cache/pyql``. ``--kb``/``--db`` replace a dataset's
backend: ``--kb`` takes an ``http(s)://`` SPARQL endpoint, an Oxigraph store directory, an RDF
file (``.ttl``, ``.nt``, ``.nt.gz`` ...) or, for MetaQA, a ``kb.txt``; ``--db`` takes a SQLAlchemy
URL or a SQLite file (Spider: a folder with ``<db_id>/<db_id>.sqlite``, or a URL containing
``{db_id}``).
"""

from __future__ import annotations

import copy
import gzip
import json
import logging
import os
import random
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pyql.agent.evaluation.caches import DBView, KBView, QueryCache
from pyql.agent.evaluation.records import EvalItem
from pyql.datasets.paths import cache_dir, default_data_dir
from pyql.errors import PyqlError
from pyql.kb.base import KB
from pyql.plugins import Plugin, PluginConflictError, PluginLoadError, plugins
from pyql.registry import UnknownNameError, lookup

__all__ = [
    "DatasetError",
    "UnknownDatasetError",
    "Backend",
    "KBBackend",
    "SqlBackend",
    "EvalDataset",
    "KBQuestionsDataset",
    "MetaQADataset",
    "WikiSQLDataset",
    "SpiderDataset",
    "WebQSPDataset",
    "DATASETS",
    "get_dataset",
    "dataset_names",
    "register_dataset",
    "ENTRY_POINT_GROUP",
    "select_indices",
    "cache_dir",
    "open_kb",
    "open_db",
    "MAX_ANSWER_ROWS",
]

log = logging.getLogger(__name__)

#: rows an answer may have (SqlDB's default of 10,000 would cut Spider's largest answers short,
#: 20,662 rows; observations are bounded by the Session, not by this)
MAX_ANSWER_ROWS = 1_000_000


class DatasetError(PyqlError):
    """A dataset that cannot be read or run (missing files, unknown split, no backend)."""


def select_indices(n: int, limit: int | None = None, sample: int | None = None,
                   seed: int = 0) -> list[int]:
    """Which of ``n`` questions a run takes: the first ``limit``, then a seeded random
    ``sample`` of those, kept in file order.

    >>> select_indices(10, limit=5), select_indices(10, sample=3, seed=1)
    ([0, 1, 2, 3, 4], [1, 2, 4])
    """
    chosen = list(range(n if limit is None else min(n, max(0, limit))))
    if sample is not None and sample < len(chosen):
        chosen = sorted(random.Random(seed).sample(chosen, max(0, sample)))
    return chosen


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


# -- backends -----------------------------------------------------------------------------------


class Backend(ABC):
    """Where a dataset's questions run. :meth:`for_item` makes one question's environment: a
    :class:`~pyql.kb.KB` view or a session factory, each counting its own queries and reading
    through the query cache when there is one."""

    tools: str = "sparql"

    @abstractmethod
    def for_item(self, item: EvalItem, *, cache: QueryCache | None = None) -> Any: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend opened."""

    def with_kb_timeout(self, seconds: float | None) -> Backend:
        """This backend with ``seconds`` (wall clock) per KB query (``pyql eval --timeout``);
        a backend that runs no KB queries is returned as it is."""
        return self


class KBBackend(Backend):
    """One shared KB (thread-safe for reads); each question gets a :class:`KBView`, whose
    queries get ``timeout`` seconds each (None: the KB's own)."""

    tools = "sparql"

    def __init__(self, kb: KB, identity: str, *, timeout: float | None = None) -> None:
        self.kb = kb
        self.identity = identity
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"KBBackend({self.kb!r})"

    def with_kb_timeout(self, seconds: float | None) -> KBBackend:
        if seconds is None:
            return self
        timed = copy.copy(self)  # a subclass stays what it is
        timed.timeout = seconds
        return timed

    def for_item(self, item: EvalItem, *, cache: QueryCache | None = None) -> KBView:
        return KBView(self.kb, cache=cache, identity=self.identity, timeout=self.timeout)

    def close(self) -> None:
        self.kb.close()


class SqlBackend(Backend):
    """SQL databases opened on first use (one per ``db_id``, or one for all), shared by the
    workers (SQLAlchemy pools a connection per thread); each question gets a
    :class:`~pyql.sql.session.SqlSession` over a :class:`DBView`."""

    tools = "sql"

    def __init__(self, open_one: Callable[[str | None], tuple[Any, str]]) -> None:
        self._open_one = open_one
        self._dbs: dict[str | None, tuple[Any, str]] = {}
        self._lock = threading.Lock()

    def db(self, db_id: str | None) -> tuple[Any, str]:
        """The database of ``db_id`` (None: the only one) and its identity."""
        with self._lock:
            found = self._dbs.get(db_id)
            if found is None:
                found = self._dbs[db_id] = self._open_one(db_id)
            return found

    def for_item(self, item: EvalItem, *, cache: QueryCache | None = None) -> Any:
        from pyql.sql.session import SqlSession

        db, identity = self.db(item.db_id)
        view = DBView(db, cache=cache, identity=identity)

        def session(*, entities: Mapping[str, str], guidelines: Any, table: str | None
                    ) -> SqlSession:
            return SqlSession(view, table=table, guidelines=guidelines)  # type: ignore[arg-type]

        return session

    def close(self) -> None:
        with self._lock:
            dbs, self._dbs = self._dbs, {}
        for db, _ in dbs.values():
            db.close()


def open_kb(spec: str, profile: str) -> tuple[KB, str]:
    """A KB from ``--kb`` with ``profile`` (:func:`pyql.kb.open_kb`, the rule of every
    command), and its identity."""
    from pyql.kb import open_kb as open_location

    kb = open_location(spec, profile=profile)
    if spec.startswith(("http://", "https://")):
        return kb, f"endpoint:{spec}"
    path = Path(spec).expanduser()
    kind = "store" if path.is_dir() else "metaqa" if path.suffix == ".txt" else "file"
    return kb, f"{kind}:{_stamp(path)}"


def open_db(spec: str, **options: Any) -> tuple[Any, str]:
    """A read-only SqlDB from ``--db`` (:func:`pyql.db.open_db`: a SQLAlchemy URL or a SQLite
    file), and its identity."""
    from pyql.db import open_db as open_location

    db = open_location(spec, **options)
    if "://" in spec:
        return db, f"url:{db.url}"
    return db, f"sqlite:{_stamp(Path(spec).expanduser())}"


# -- datasets -----------------------------------------------------------------------------------


#: what a dataset over Freebase asks for when no ``--kb`` is given
FREEBASE_KB = ("a Freebase KB: pass --kb URL (a SPARQL endpoint holding Freebase) or a store "
               "from `pyql kb load` (a local Oxigraph store or RDF file)")


class EvalDataset(ABC):
    """A dataset an evaluation runs over."""

    #: the registry name (``metaqa-3hop``)
    name: ClassVar[str] = ""
    tools: ClassVar[str] = "sparql"
    #: the agent's prompt profile
    profile: ClassVar[str] = "generic"
    #: how answers are scored (:func:`pyql.agent.evaluation.metrics.score_item`)
    metric: ClassVar[str] = "kbqa"
    #: the headline score
    primary: ClassVar[str] = "hit@1"
    default_split: ClassVar[str] = "dev"
    description: ClassVar[str] = ""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *,
                 cache: str | os.PathLike[str] | None = None) -> None:
        try:
            self.data_dir = Path(data_dir).expanduser() if data_dir is not None \
                else default_data_dir()
        except FileNotFoundError as exc:
            raise DatasetError(str(exc)) from None
        if not self.data_dir.is_dir():
            raise DatasetError(f"data directory not found: {self.data_dir}")
        self.cache_dir = Path(cache).expanduser() if cache is not None else cache_dir()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, data_dir={str(self.data_dir)!r})"

    @abstractmethod
    def items(self, split: str | None = None, *, limit: int | None = None,
              sample: int | None = None, seed: int = 0) -> list[EvalItem]:
        """The questions of ``split`` a run takes (see :func:`select_indices`)."""

    @abstractmethod
    def backend(self, *, split: str | None = None, kb: str | None = None,
                db: str | None = None) -> Backend:
        """The backend the questions of ``split`` run on (``kb``/``db``: the ``--kb``/``--db``
        override)."""

    def splits(self) -> list[str]:
        """The splits whose files are in the data directory (``pyql eval --split``)."""
        return [self.default_split]

    def entities_for(self, item: EvalItem) -> EvalItem:
        """``item`` with its entity list as a strategy gets it, once the backend is open:
        ``item`` itself (a dataset whose ids are opaque, Wikidata's, names them by their KB
        labels)."""
        return item

    def gold_answers(self, item: EvalItem) -> tuple[Any, ...]:
        """The gold answers a result records: ``item.answers`` (a dataset whose gold is read
        from the KB, WikiWebQuestions train, overrides it)."""
        return item.answers

    def score(self, item: EvalItem, predicted: Iterable[Any]) -> dict[str, float]:
        """The per-question scores of ``predicted``: :func:`~pyql.agent.evaluation.metrics.
        score_item` of :attr:`metric` (a dataset scoring by the KB's names overrides it)."""
        from pyql.agent.evaluation.metrics import score_item

        return score_item(self.metric, item, predicted)

    def split(self, split: str | None) -> str:
        """``split`` (default: :attr:`default_split`), checked against :meth:`splits`."""
        split = split or self.default_split
        found = self.splits()
        if split not in found:
            raise DatasetError(f"{self.name}: no {split!r} split in {self.data_dir}; the data has: "
                               f"{', '.join(found) or 'none'}")
        return split

    def _require(self, path: Path, what: str) -> Path:
        if not path.exists():
            raise DatasetError(f"{self.name}: {what} not found: {path}")
        return path

    def _kb_override(self, kb: str | None, db: str | None, profile: str, *,
                     required: str | None = None) -> KBBackend | None:
        """The backend of ``--kb`` (opened with ``profile``), or None without one; ``--db`` is
        an error for a dataset over a KB, and so is no ``--kb`` when the dataset has no KB of
        its own (``required``: what to pass)."""
        if db is not None:
            raise DatasetError(f"{self.name} runs on a KB: use --kb, not --db")
        if kb is None:
            if required is not None:
                raise DatasetError(f"{self.name} needs {required}")
            return None
        return KBBackend(*open_kb(kb, profile))


class KBQuestionsDataset(EvalDataset):
    """Questions over a KB that ``--kb`` must name (Freebase's, Wikidata's): :meth:`items` takes
    the selected ones (:func:`select_indices`) of :meth:`_questions` and makes each an item with
    :meth:`_item`; :meth:`backend` opens ``--kb`` with :attr:`profile` and keeps its KB
    (``self._kb``) for what reads the KB after the run (gold answers, answer names)."""

    tools = "sparql"
    #: what ``--kb`` must name (the error without one)
    kb_needed: ClassVar[str] = "--kb"

    @abstractmethod
    def _questions(self, split: str | None) -> Sequence[Any]:
        """The questions of ``split`` (checked with :meth:`split`), in the file's order."""

    @abstractmethod
    def _item(self, question: Any) -> EvalItem:
        """One question as an item: its gold program and meta."""

    def items(self, split: str | None = None, *, limit: int | None = None,
              sample: int | None = None, seed: int = 0) -> list[EvalItem]:
        questions = self._questions(split)
        return [self._item(questions[index])
                for index in select_indices(len(questions), limit, sample, seed)]

    def backend(self, *, split: str | None = None, kb: str | None = None,
                db: str | None = None) -> Backend:
        backend = self._kb_override(kb, db, self.profile, required=self.kb_needed)
        assert backend is not None
        self._kb = backend.kb
        return backend


class MetaQADataset(EvalDataset):
    tools = "sparql"
    profile = "metaqa"
    metric = "kbqa"
    primary = "hit@1"
    hops: ClassVar[int] = 1

    def __init_subclass__(cls, *, hops: int | None = None, **kwargs: Any) -> None:
        """``class MetaQA2Hop(MetaQADataset, hops=2)`` is the dataset ``metaqa-2hop``."""
        super().__init_subclass__(**kwargs)
        if hops is not None:
            cls.hops = hops
            cls.name = f"metaqa-{hops}hop"
            cls.description = f"MetaQA {hops}-hop questions over the WikiMovies KB"

    def items(self, split: str | None = None, *, limit: int | None = None,
              sample: int | None = None, seed: int = 0) -> list[EvalItem]:
        from pyql.datasets import metaqa

        split = self.split(split)
        qa, qtype = metaqa.paths(self.data_dir, self.hops, split)
        self._require(qa, f"{split} questions")
        self._require(qtype, f"{split} question types")
        questions = list(metaqa.load_questions(qa, qtype))
        with qa.open(encoding="utf-8-sig") as handle:  # a BOM is not part of question 0
            raw = [line.rstrip("\r\n").partition("\t")[0] for line in handle]
        out = []
        for index in select_indices(len(questions), limit, sample, seed):
            q = questions[index]
            out.append(EvalItem(
                id=q.id, question=raw[index], entities={q.topic: q.topic}, answers=q.answers,
                program=str(metaqa.gold_program(q)), tools="sparql",
                meta={"qtype": q.qtype, "hops": q.hops,
                      "paper_program": metaqa.paper_walk(q)},
            ))
        return out

    def splits(self) -> list[str]:
        from pyql.datasets import metaqa

        folder = metaqa.paths(self.data_dir, self.hops, "dev").qa.parent
        return sorted(p.name[3:-4] for p in folder.glob("qa_*.txt")
                      if not p.name.endswith("_qtype.txt"))

    def backend(self, *, split: str | None = None, kb: str | None = None,
                db: str | None = None) -> Backend:
        from pyql.datasets import metaqa

        override = self._kb_override(kb, db, "metaqa")
        if override is not None:
            return override
        source = self._require(metaqa.kb_path(self.data_dir), "KB file (kb.txt)")
        store = metaqa.cache_store_dir(source, self.cache_dir)
        try:
            store.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("cannot use the cache directory %s (%s); the KB is loaded in memory",
                        self.cache_dir, exc)
            return KBBackend(metaqa.load_kb(source), f"metaqa:{_stamp(source)}")
        return KBBackend(metaqa.load_kb(source, store_dir=store), f"metaqa:{_stamp(source)}")


class MetaQA1Hop(MetaQADataset, hops=1):
    pass


class MetaQA2Hop(MetaQADataset, hops=2):
    pass


class MetaQA3Hop(MetaQADataset, hops=3):
    pass


class WikiSQLDataset(EvalDataset):
    name = "wikisql"
    tools = "sql"
    profile = "wikisql"
    metric = "wikisql"
    primary = "accuracy"
    description = "WikiSQL questions, one table each (execution accuracy)"

    def _folder(self) -> Path:
        base = self.data_dir
        return base / "wikisql" if (base / "wikisql").is_dir() else base

    def splits(self) -> list[str]:
        return sorted(p.name[:-6] for p in self._folder().glob("*.jsonl")
                      if not p.name.endswith(".tables.jsonl"))

    def _tables_path(self, split: str) -> Path:
        folder = self._folder()
        for name in (f"{split}.tables.jsonl.gz", f"{split}.tables.jsonl"):
            if (folder / name).is_file():
                return folder / name
        raise DatasetError(f"wikisql: no tables file {split}.tables.jsonl[.gz] in {folder}")

    def items(self, split: str | None = None, *, limit: int | None = None,
              sample: int | None = None, seed: int = 0) -> list[EvalItem]:
        from pyql.datasets import wikisql

        split = self.split(split)
        questions_path = self._require(self._folder() / f"{split}.jsonl", f"{split} questions")
        tables = wikisql.load_tables(self._tables_path(split))
        questions = list(wikisql.load_questions(questions_path, tables))
        out = []
        for index in select_indices(len(questions), limit, sample, seed):
            q = questions[index]
            gold = wikisql.wikisql_execute(tables[q.table_id], **q.sql)
            out.append(EvalItem(
                id=q.id, question=q.question, answers=tuple(gold), program=str(q.program),
                tools="sql", table=q.table,
                meta={"agg": wikisql.AGG_OPS[q.sql["agg"]] or "none",
                      "conds": len(q.sql["conds"]), "table_id": q.table_id},
            ))
        return out

    def backend(self, *, split: str | None = None, kb: str | None = None,
                db: str | None = None) -> Backend:
        from pyql.datasets import wikisql

        if kb is not None:
            raise DatasetError("wikisql runs on a database: use --db, not --kb")
        if db is not None:
            opened = open_db(db, max_rows=MAX_ANSWER_ROWS)
            return SqlBackend(lambda _db_id: opened)
        tables = self._tables_path(split or self.default_split)

        def open_one(_db_id: str | None) -> tuple[Any, str]:
            built = wikisql.load_db(tables, cache_dir=self.cache_dir / "wikisql",
                                    max_rows=MAX_ANSWER_ROWS)
            return built, f"wikisql:{_stamp(tables)}:nocase"

        return SqlBackend(open_one)


def _jsonable_cell(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return value


class SpiderDataset(EvalDataset):
    name = "spider"
    tools = "sql"
    profile = "spider"
    metric = "spider"
    primary = "accuracy"
    description = "Spider cross-database text-to-SQL (execution accuracy)"

    def items(self, split: str | None = None, *, limit: int | None = None,
              sample: int | None = None, seed: int = 0) -> list[EvalItem]:
        from pyql.datasets import spider
        from pyql.sql.from_sql import Unsupported, to_program

        split = self.split(split)
        folder = spider.spider_dir(self.data_dir)
        questions = list(spider.load_items(self._require(folder / f"{split}.json",
                                                         f"{split} questions")))
        schemas: dict[str, Any] = {}
        out = []
        for index in select_indices(len(questions), limit, sample, seed):
            q = questions[index]
            path = self._require(spider.db_path(folder, q.db_id), f"database {q.db_id}")
            if q.db_id not in schemas:
                with spider.open_db(folder, q.db_id, sample_values=0) as db:
                    schemas[q.db_id] = db.schema()
            meta: dict[str, Any] = {"db_id": q.db_id, "ordered": spider.is_ordered(q.query),
                                    "gold_sql": q.query}
            try:
                rows = spider.gold_rows(path, q.query)
            except sqlite3.Error as exc:
                rows = []
                meta["gold_error"] = str(exc)
            program = to_program(q.query, schemas[q.db_id])
            if isinstance(program, Unsupported):
                meta["expressible"] = False
                meta["unsupported"] = list(program.constructs)
                text = None
            else:
                meta["expressible"] = True
                text = str(program)
            out.append(EvalItem(
                id=q.id, question=q.question,
                answers=tuple(tuple(_jsonable_cell(c) for c in r) for r in rows),
                program=text, tools="sql", db_id=q.db_id, meta=meta,
            ))
        return out

    def splits(self) -> list[str]:
        from pyql.datasets import spider

        try:
            folder = spider.spider_dir(self.data_dir)
        except (FileNotFoundError, OSError):
            return []
        return sorted(p.stem for p in folder.glob("*.json") if p.stem != "tables")

    def backend(self, *, split: str | None = None, kb: str | None = None,
                db: str | None = None) -> Backend:
        from pyql.datasets import spider

        if kb is not None:
            raise DatasetError("spider runs on databases: use --db, not --kb")
        folder = spider.spider_dir(self.data_dir)

        def open_one(db_id: str | None) -> tuple[Any, str]:
            if db_id is None:
                raise DatasetError("spider: a question without a db_id")
            if db is not None and "{db_id}" in db:
                return open_db(db.replace("{db_id}", db_id), max_rows=MAX_ANSWER_ROWS)
            root = Path(db).expanduser() if db is not None else folder
            path = spider.db_path(root, db_id)
            if not path.is_file():
                raise DatasetError(f"spider: database {db_id} not found: {path}")
            return (spider.open_db(root, db_id, max_rows=MAX_ANSWER_ROWS),
                    f"spider:{_stamp(path)}")

        return SqlBackend(open_one)


class WebQSPDataset(KBQuestionsDataset):
    name = "webqsp"
    profile = "freebase"
    metric = "kbqa"
    primary = "f1"
    default_split = "test"
    description = "WebQuestionsSP test over Freebase (needs --kb: a Freebase endpoint)"
    kb_needed = FREEBASE_KB
    FILE: ClassVar[str] = "freebase_questions/WebQSP_test_processed.json.gz"

    def splits(self) -> list[str]:
        return ["test"] if (self.data_dir / self.FILE).exists() else []

    def _records(self, split: str) -> list[dict[str, Any]]:
        split = self.split(split)
        path = self._require(self.data_dir / self.FILE, "WebQSP questions")
        opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON array of questions")
        return data

    def _questions(self, split: str | None) -> list[dict[str, Any]]:
        return self._records(split or self.default_split)

    def _item(self, question: Any) -> EvalItem:
        from pyql.program import Call, Program

        raw: dict[str, Any] = question
        meta: dict[str, Any] = {}
        text = raw.get("PyQL")
        program = None
        if isinstance(text, str) and text.strip() and text.strip() != "null":
            parsed = Program.parse(text)
            if not len(parsed) or parsed[-1].name != "execute":
                parsed = parsed.append(Call(name="execute"))
            program = str(parsed)
        else:
            meta["unsupported"] = "no PyQL program in the dataset"
        alternatives = raw.get("different_answer") or []
        if alternatives:
            meta["answer_sets"] = [list(a) for a in alternatives]
        return EvalItem(
            id=str(raw["qid"]), question=raw["question"],
            entities={str(k): str(v) for k, v in (raw.get("entity_linking") or {}).items()},
            answers=tuple(raw.get("answer") or ()), program=program, tools="sparql", meta=meta,
        )


#: the datasets ``pyql eval --dataset`` knows (the built-in ones; :func:`register_dataset` and
#: the ``pyql.eval_datasets`` entry points add more)
DATASETS: dict[str, type[EvalDataset]] = {
    cls.name: cls
    for cls in (MetaQA1Hop, MetaQA2Hop, MetaQA3Hop, WikiSQLDataset, SpiderDataset, WebQSPDataset)
}

#: the entry-point group of third-party datasets (the value: an :class:`EvalDataset` subclass)
ENTRY_POINT_GROUP = "pyql.eval_datasets"
_loaded_entry_points = False
#: names whose plugin cannot be used (a conflict, an import failure): raised when asked for
_unusable: dict[str, PyqlError] = {}
_registry_lock = threading.Lock()


class UnknownDatasetError(UnknownNameError, DatasetError):
    """No dataset of that name (``known``: the registered ones)."""


def _target(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def register_dataset(cls: type[EvalDataset]) -> type[EvalDataset]:
    """Add a dataset class to the registry (usable as a class decorator); its ``name`` must be
    new (:class:`~pyql.plugins.PluginConflictError` otherwise, the loader's one policy). The one
    registry of ``pyql eval``, the ablation mode and the report."""
    if not (isinstance(cls, type) and issubclass(cls, EvalDataset)) or not cls.name:
        raise TypeError(f"{cls!r} is not an EvalDataset subclass with a name")
    with _registry_lock:
        held = DATASETS.get(cls.name)
        if held is not None and held is not cls:
            raise PluginConflictError(ENTRY_POINT_GROUP, cls.name, (
                Plugin(ENTRY_POINT_GROUP, cls.name, _target(held)),
                Plugin(ENTRY_POINT_GROUP, cls.name, _target(cls))))
        DATASETS[cls.name] = cls
    return cls


def _load_entry_points() -> None:
    """Register the ``pyql.eval_datasets`` plugins (:mod:`pyql.plugins`: a name claimed twice,
    a built-in's included, or a plugin that fails to import is kept to be raised when used)."""
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    found = plugins(ENTRY_POINT_GROUP, builtin={n: _target(c) for n, c in DATASETS.items()})
    for name in found.names():
        try:
            plugin = found[name]
            if name not in DATASETS:
                register_dataset(plugin.load())
        except (PluginConflictError, PluginLoadError) as exc:
            _unusable[name] = exc
    _loaded_entry_points = True


def dataset_names() -> list[str]:
    _load_entry_points()
    return [*DATASETS, *sorted(set(_unusable) - set(DATASETS))]


def get_dataset(name: str, data_dir: str | os.PathLike[str] | None = None, *,
                cache: str | os.PathLike[str] | None = None) -> EvalDataset:
    """The dataset called ``name`` (see :data:`DATASETS`); :class:`UnknownDatasetError` if
    there is none."""
    _load_entry_points()
    if name in _unusable:
        raise _unusable[name]
    cls = lookup(DATASETS, name, "dataset", UnknownDatasetError)
    return cls(data_dir, cache=cache)
