"""Run the agent over a dataset: concurrent, rate-limit aware, and resumable after a crash.

:func:`evaluate` starts a run in a fresh directory; :func:`resume` finishes one. The run
directory's files (``config.json``, ``results.jsonl``, ``trajectories.jsonl``, ``metrics.json``,
``.lock``: how each is written durably and read back) belong to
:class:`~pyql.agent.evaluation.rundir.RunDir`; this module decides what goes in them.
``metrics.json`` is rewritten every few seconds during a run, with a ``run`` section (this
session's wall time, concurrency, rate-limit pauses, cache hits, ``complete``) and, for a
stand-in, ``stand_in`` (its name and the values of its declared parameters,
:func:`pyql.agent.evaluation.standins.stand_in_assumptions`), and written a last time at the
end. Every snapshot aggregates the results the run holds in memory, which are
``results.jsonl``'s: its lines are read once when the run opens (the last line of an id
counts) and each new line is added as it is written, so the file is never read again.

The metrics are :func:`pyql.agent.evaluation.metrics.aggregate` (the one aggregate: the report
shows it) of the last line of each question id (:func:`read_results`,
:func:`recompute_metrics`).

**Exactly once.** :func:`resume` reads the ids in ``results.jsonl`` and runs only the selected
questions that are missing, each once. A killed run loses at most the questions in flight. After
an abort or Ctrl-C the questions in flight finish and are written before the process exits.

**Concurrency.** ``config.concurrency`` asyncio workers pull questions from one queue and run
the synchronous agent in a thread pool of the same size (``loop.run_in_executor``; a dedicated
pool, so ``K`` is not capped by asyncio's default executor); a single worker thread answers
questions back to back and hands their results to the event loop every
:data:`BATCH_SECONDS` (a thread hop per question costs more CPU than a gold question's
bookkeeping). The backend is shared (Oxigraph stores and SQLAlchemy engines are thread-safe
for reads); each question gets its own Session over a per-question view of it, so query counts
are exact. LLM calls go through the run's
:class:`~pyql.agent.evaluation.specs.RateGate`: a 429 pauses every worker until its
``Retry-After``.

**Strategies.** Each question is answered by
``get_strategy(config.strategy).from_config(llm, backend, StrategyConfig(...))`` (entry-point
group ``pyql.strategies``; ``config.options`` are the strategy's own options); the runner knows
no strategy by name. ``--llm gold`` / ``noisy-gold`` come from the stand-in registered for the
strategy's name (:mod:`pyql.agent.evaluation.standins`); the runner holds each question's
stand-in and reads its records of the mistakes it made (``meta.injections``).
``config.ablation`` runs ERASER on and off as two sub-runs (:mod:`.ablation`).

**Worker processes.** A CPU-bound stand-in run (``config.processes``; ``None``: the cores for at
least :data:`PROCESS_MIN_QUESTIONS` questions) answers in spawned worker processes, each with its
own backend handle; the parent alone writes the files, in the order answers arrive. A worker
gets up to :data:`PROCESS_BATCH` questions at a time and hands back what it answered within
:data:`BATCH_SECONDS` (the rest goes back to the queue), as a single worker thread does.

**Outages and errors.** A question whose KB/DB or LLM failed — an LLM timeout (``--llm-timeout``
per call, ``--deadline`` of LLM time per question: a :class:`pyql.deadline.Budget` made current
with :func:`pyql.deadline.within` around the strategy's run),
an LLM server or connection failure after its retries, a reply that is not a chat completion, a
backend that failed (raised, or reported by a step's ``env_status`` — a failure or a query that
timed out, ``--timeout`` — on a question that did not finish) — ends as an *outage*
(``status`` ``llm_timeout`` / ``llm_error`` / ``backend_error``, :func:`outage_status`): its
trajectory so far is kept, its error names the cause, it is left out of the scores and counted
in ``metrics.json`` (``outages``), and :func:`resume` runs it again. ``config.max_outages``
outages in a row stop the run (:class:`OutageAbort`, a one-line reason). Any other failure of a
question (a replay without a recording, a gold program that runs out) is ``error``: recorded,
scored 0, and the run goes on. Authentication errors, an unknown model, an exhausted quota, an
unknown strategy and a bad ``--llm`` spec abort the run (:class:`EvalAbort`) with the message;
so do five first questions in a row that all fail with unexpected (non-pyql) exceptions, which
means a bug, not a bad question.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from pyql import __version__
from pyql.agent.errors import (
    LLMAuthError,
    LLMModelNotFoundError,
    LLMRateLimitError,
    LLMReplayMismatchError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
    ScoringUnsupportedError,
)
from pyql.agent.evaluation.caches import LLMCache, QueryCache
from pyql.agent.evaluation.datasets import (
    Backend,
    DatasetError,
    EvalDataset,
    get_dataset,
    select_indices,
)
from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.evaluation.metrics import aggregate, corrections, step_usage
from pyql.agent.evaluation.progress import RunProgress
from pyql.agent.evaluation.records import (
    OUTAGES,
    EvalItem,
    QuestionResult,
    RunConfig,
    usage_record,
)
from pyql.agent.evaluation.rundir import (
    TRAJECTORIES,
    ResultsLog,
    RunDir,
    RunDirError,
    iter_records,
    load_config,
    read_results,
    recompute_metrics,
)
from pyql.agent.evaluation.specs import (
    LLMProvider,
    RateGate,
    StandInProvider,
    build_provider,
)
from pyql.agent.evaluation.standins import stand_in_assumptions
from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.structured import ConstrainRefusedError
from pyql.agent.strategies.queryagent.presets import preset_temperature, primary_metric
from pyql.agent.strategy import (
    StrategyConfig,
    StrategyType,
    UnknownStrategyError,
    check_options,
    get_strategy,
    max_reply_tokens,
)
from pyql.agent.trajectory import Step, Trajectory
from pyql.deadline import Budget, within
from pyql.errors import BackendError, PyqlError
from pyql.orphans import die_with_parent

__all__ = [
    "evaluate",
    "resume",
    "EvalAbort",
    "OutageAbort",
    "outage_status",
    "RunDirError",
    "ResultsLog",
    "read_results",
    "iter_records",
    "load_config",
    "recompute_metrics",
    "TRAJECTORIES",
]

log = logging.getLogger(__name__)

#: seconds between rewrites of metrics.json during a run
METRICS_INTERVAL = 5.0
#: abort when this many first questions all fail with unexpected exceptions
_BUG_THRESHOLD = 5
#: a stand-in run of at least this many questions uses worker processes (``processes=None``)
PROCESS_MIN_QUESTIONS = 2000
#: at most this many worker processes when chosen automatically
MAX_AUTO_PROCESSES = 4
#: a single worker thread, or a worker process, hands its results to the event loop at least
#: this often (seconds)
BATCH_SECONDS = 0.2
#: questions sent to a worker process at a time (those it has not started after
#: BATCH_SECONDS come back to the queue)
PROCESS_BATCH = 32


class EvalAbort(PyqlError):
    """A failure that stops the whole run (auth, unknown model, quota, bad spec, a bug)."""


class OutageAbort(EvalAbort):
    """The circuit breaker: ``count`` questions in a row ended in an outage (``status``: one of
    :data:`~pyql.agent.evaluation.records.OUTAGES`); ``error`` is the last one's error."""

    def __init__(self, status: str, count: int, error: str) -> None:
        self.status = status
        self.count = count
        self.error = error
        what = {"backend_error": "the KB/DB is down", "llm_error": "the LLM is failing",
                "llm_timeout": "the LLM does not answer in time"}.get(status, status)
        super().__init__(f"{what}: {count} questions in a row ended in {status} (last: {error})")


#: a step's ``env_status`` that means the KB/DB failed (its query timed out, or it failed)
_BACKEND_FAILED = ("backend_error", "timeout")


def outage_status(exc: BaseException | None, steps: tuple[Step, ...] | list[Step] = ()) -> str:
    """How a question ended: an outage of :data:`~pyql.agent.evaluation.records.OUTAGES`, else
    ``error`` (an exception of the question itself) or ``ok``.

    An LLM that timed out is ``llm_timeout``; an LLM server or connection failure (after its
    retries), or a reply that is not a chat completion (malformed JSON, no ``choices``),
    ``llm_error``; a backend that failed — raised, or reported by a step whose ``env_status`` is
    ``backend_error`` or ``timeout`` (a hung endpoint) on a question that did not finish (a gold
    program then runs out of calls, a model out of steps) — ``backend_error``.

    >>> from pyql.agent.errors import LLMResponseError, LLMTimeoutError
    >>> outage_status(LLMTimeoutError("slow")), outage_status(LLMResponseError("no choices"))
    ('llm_timeout', 'llm_error')
    >>> outage_status(None), outage_status(ValueError())
    ('ok', 'error')
    """
    if isinstance(exc, LLMTimeoutError):
        return "llm_timeout"
    if isinstance(exc, (LLMServerError, LLMRateLimitError)) or (
            isinstance(exc, LLMResponseError) and not isinstance(exc, LLMReplayMismatchError)):
        return "llm_error"
    if isinstance(exc, BackendError) or any(s.env_status in _BACKEND_FAILED for s in steps):
        return "backend_error"
    return "ok" if exc is None else "error"


def _backend_failure(steps: Sequence[Step], default: str) -> str:
    """The error of the last step whose backend failed (what ended the question), else
    ``default``."""
    return next((s.error for s in reversed(steps)
                 if s.env_status in _BACKEND_FAILED and s.error), default)


def _status(record: QuestionResult) -> str:
    """A result's status (results written before statuses existed: ``error`` when they have
    one)."""
    if record.status == "ok" and record.error is not None:
        return "error"
    return record.status


# -- one question -------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (list, tuple)):
        return tuple(_jsonable(v) for v in value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


class _MemoCounter(TokenCounter):
    """A token counter that remembers its counts: the system prompt is counted again for every
    question, a stand-in's reply once as the completion and once as the next prompt's turn,
    a message's role (``user``, ``assistant``) with every message: a call to the encoder costs
    microseconds even for a word. Bounded: the memo is emptied when full."""

    _MAX = 8192

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._memo: dict[str, int] = {}

    def count(self, text: str) -> int:
        found = self._memo.get(text)
        if found is None:
            found = super().count(text)
            if len(self._memo) >= self._MAX:
                self._memo.clear()
            self._memo[text] = found
        return found


class _Stopped(Exception):
    """The run is stopping: the question was not started."""


class _Session:
    """One process working on a run directory: the shared parts and the per-question work."""

    def __init__(
        self,
        config: RunConfig,
        out_dir: Path,
        dataset: EvalDataset,
        items: list[EvalItem],
        backend: Backend,
        provider: LLMProvider,
        gate: RateGate,
        llm_cache: LLMCache | None,
        kb_cache: QueryCache | None,
        concurrency: int,
    ) -> None:
        self.config = config
        self.out_dir = out_dir
        self.dataset = dataset
        self.items = items
        self.backend = backend
        self.provider = provider
        self.gate = gate
        self.llm_cache = llm_cache
        self.kb_cache = kb_cache
        self.concurrency = concurrency
        #: worker processes answering (1: this process, ``concurrency`` threads)
        self.processes = 1
        self.run_dir = RunDir(out_dir)
        self.results_log = self.run_dir.results_log()
        self.trajectory_log = self.run_dir.trajectory_log()
        self.stop = threading.Event()
        #: every result of the run (results.jsonl's: read when the run opens, added as written;
        #: the last line of an id counts): what the aggregate reads
        self.done: dict[str, QuestionResult] = {}
        self.session_done = 0
        self.unexpected = 0
        self.clean = 0
        #: questions in a row that ended in an outage (the circuit breaker's count)
        self.outages_in_a_row = 0
        self._write_lock = threading.Lock()
        try:
            self.strategy: StrategyType = get_strategy(config.strategy)
        except UnknownStrategyError as exc:
            raise EvalAbort(str(exc)) from exc
        #: what the run's stand-in assumes (None: a model answers), read once
        self.assumptions = stand_in_assumptions(config.llm, config.strategy)
        self.prices = PriceTable()
        model = getattr(getattr(provider, "base", None), "model", "") or ""
        # tiktoken's own cache (or $PYQL_TIKTOKEN_DIR) first; the data's copy when offline
        offline = dataset.data_dir / "tiktoken"
        # a stand-in's prompts are counted only when asked for (TokenCounter.estimates)
        estimates = config.token_estimates or not isinstance(provider, StandInProvider)
        self.counter = _MemoCounter(model=model, fallback=str(offline) if offline.is_dir() else None,
                                    estimates=estimates)
        #: the headline score: the dataset's, or under the paper preset the paper's own
        self.primary = primary_metric(dataset.primary, metric=dataset.metric,
                                      strategy=config.strategy, preset=config.preset)

    # -- in a worker thread ---------------------------------------------------------------------
    def run_item(self, item: EvalItem) -> QuestionResult:
        if self.stop.is_set():
            raise _Stopped
        result, lines = self.answer(item)
        return self.record(result, lines)

    def run_batch(self, items: list[EvalItem]
                  ) -> tuple[list[QuestionResult], list[EvalItem], BaseException | None]:
        """Answer ``items`` in order for up to :data:`BATCH_SECONDS`: the results (written),
        the items not started, and what stopped the batch (``_Stopped``, an
        :class:`EvalAbort`), if anything did."""
        return _batch(items, self.run_item)

    def record(self, result: QuestionResult, lines: list[str], line: str | None = None
               ) -> QuestionResult:
        """Write a question's result (``line``: its JSON when already made) and trajectory
        lines, and keep the result for the aggregate in :attr:`done`; then the circuit
        breaker. Returns the result."""
        self._write(result, lines, line)
        self._breaker(result)
        return result

    def answer(self, item: EvalItem) -> tuple[QuestionResult, list[str]]:
        """Answer one question: its result and trajectory lines (never written here)."""
        start = time.perf_counter()
        steps: list[Step] = []
        lines: list[str] = []
        try:
            result, lines = self._answer(item, steps)
        except (LLMAuthError, LLMModelNotFoundError, LLMSpecError, ConstrainRefusedError,
                ScoringUnsupportedError) as exc:
            raise EvalAbort(f"{type(exc).__name__}: {exc}") from exc
        except LLMRateLimitError as exc:
            if exc.code == "insufficient_quota":
                raise EvalAbort(f"the API quota is exhausted: {exc}") from exc
            result, lines = self._failed(item, exc, start, steps)
        except (PyqlError, OSError) as exc:
            log.info("%s: %s: %s", item.id, type(exc).__name__, exc)
            result, lines = self._failed(item, exc, start, steps)
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on (see module doc)
            log.exception("%s: unexpected error", item.id)
            with self._write_lock:
                self.unexpected += 1
                bug = self.clean == 0 and self.unexpected == _BUG_THRESHOLD
            if bug:
                raise EvalAbort(f"the first {_BUG_THRESHOLD} questions all failed with "
                                f"unexpected errors; the last: {type(exc).__name__}: {exc}"
                                ) from exc
            result, lines = self._failed(item, exc, start, steps)
        else:
            with self._write_lock:
                self.clean += 1
        return result, lines

    def _breaker(self, result: QuestionResult) -> None:
        """Stop the run after ``max_outages`` questions in a row ended in an outage."""
        limit = self.config.max_outages
        with self._write_lock:
            if result.status in OUTAGES:
                self.outages_in_a_row += 1
            else:
                self.outages_in_a_row = 0
            tripped = limit > 0 and self.outages_in_a_row >= limit
        if tripped:
            raise OutageAbort(result.status, self.outages_in_a_row, result.error or "")

    def _strategy_config(self, item: EvalItem) -> StrategyConfig:
        options = dict(self.config.options)
        if self.config.extremum is not None:
            options.setdefault("extremum_mode", self.config.extremum)
        return StrategyConfig(
            guidelines=self.config.guidelines, max_steps=self.config.max_steps,
            mode=self.config.mode, profile=self.dataset.profile, seed=self.config.seed,
            table=item.table, token_counter=self.counter, price_table=self.prices,
            dataset=self.config.dataset, preset=self.config.preset, ranker=self.config.ranker,
            constrain=self.config.constrain, choose=self.config.choose, options=options,
        )

    def _measures(self, steps: Sequence[Step], item: EvalItem) -> dict[str, float]:
        """The strategy's own per-question measures (its optional ``measures(steps, item)``:
        numbers that need the gold answers, e.g. SRP's judge accuracy)."""
        measures = getattr(self.strategy, "measures", None)
        return {k: float(v) for k, v in measures(steps, item).items()} if measures else {}

    def _answer(self, item: EvalItem, steps: list[Step]) -> tuple[QuestionResult, list[str]]:
        # the entity list as the model reads it (Wikidata: an id's label as its mention)
        item = self.dataset.entities_for(item)
        # a stand-in is held for its records; never looked for behind the LLM's wrappers
        stand_in = (self.provider.stand_in_for(item)
                    if isinstance(self.provider, StandInProvider) else None)
        llm = stand_in.llm if stand_in is not None else self.provider.for_item(item)
        env = self.backend.for_item(item, cache=self.kb_cache)
        strategy = self.strategy.from_config(llm, env, self._strategy_config(item))
        # the question's budget of LLM time: its LLM calls (retries, backoff) use it up, the
        # time before and between them does not
        seconds = self.config.question_deadline
        with within(Budget(seconds) if seconds is not None else None):
            res = strategy.run(item.question, item.entities, table=item.table,
                               meta={"id": item.id}, on_step=steps.append)
        trajectory = res.trajectory
        usage = res.usage
        status = outage_status(None, trajectory.steps) if not res.finished else "ok"
        error = _backend_failure(trajectory.steps, status) if status != "ok" else None
        result = QuestionResult(
            id=item.id, question=item.question, gold=_jsonable(self.dataset.gold_answers(item)),
            predicted=_jsonable(tuple(res.answers)),
            metrics=self.dataset.score(item, res.answers) if status == "ok" else {},
            usage={
                **usage_record(usage), "steps": len(trajectory.steps),
                **step_usage(trajectory.steps, self.dataset.gold_answers(item)),
                **self._measures(trajectory.steps, item),
            },
            guidelines=dict(usage.guideline_triggers), corrected=corrections(trajectory.steps),
            finished=res.finished, stop_reason=res.stop_reason, query=res.query,
            # the trajectory's text of the program (printed once), else the program printed
            program=trajectory.program or str(res.program), meta=self._meta(item),
            status=status, error=error,
        )
        lines = list(trajectory.lines())
        injections = stand_in.mistakes(trajectory) if stand_in is not None else None
        if injections is not None:
            injections = [_jsonable(r.model_dump(mode="json") if hasattr(r, "model_dump") else r)
                          for r in injections]
            result = result.model_copy(update={"meta": {**result.meta, "injections": injections}})
        return result, lines

    def _meta(self, item: EvalItem) -> dict[str, Any]:
        meta = dict(_jsonable(item.meta))
        if item.table is not None:
            meta.setdefault("table", item.table)
        if item.db_id is not None:
            meta.setdefault("db_id", item.db_id)
        return meta

    def _failed(self, item: EvalItem, exc: BaseException, start: float, steps: list[Step]
                ) -> tuple[QuestionResult, list[str]]:
        """The result of a question that raised, and its trajectory so far (the steps the
        strategy reported before it failed). The hints of those steps are its guideline
        triggers, as a strategy's usage counts them for a question that ran to its end."""
        status = outage_status(exc, steps)
        error = f"{type(exc).__name__}: {exc}"
        if status == "backend_error" and not isinstance(exc, BackendError):
            # the gold program ran out because the backend failed: name the backend's error
            error = _backend_failure(steps, error)
        seconds = time.perf_counter() - start
        triggers = dict(Counter(step.hint for step in steps if step.hint))
        result = QuestionResult(
            id=item.id, question=item.question, gold=_jsonable(item.answers), predicted=(),
            metrics=({k: 0.0 for k in self.dataset.score(item, ())}
                     if status == "error" else {}),
            usage={"seconds": seconds, "steps": len(steps),
                   "llm_calls": sum(1 for s in steps if s.reply_text or s.tool_calls),
                   "kb_queries": sum(s.kb_queries for s in steps)},
            guidelines=triggers, corrected=corrections(steps),
            finished=False, stop_reason=status, error=error, status=status,
            meta=self._meta(item),
        )
        trajectory = Trajectory(
            question=item.question, entities=dict(item.entities), strategy=self.config.strategy,
            steps=tuple(steps), finished=False, stop_reason=status,
            meta={"id": item.id, "error": error, "status": status},
        )
        lines = list(trajectory.lines())
        return result, lines

    def _write(self, result: QuestionResult, trajectory: list[str],
               line: str | None = None) -> None:
        line = result.model_dump_json() if line is None else line
        with self._write_lock:  # the line and its result in memory: both or neither
            if trajectory:
                self.trajectory_log.append(*trajectory)
            self.results_log.append(line)
            self.done[result.id] = result
            self.session_done += 1

    def snapshot(self) -> dict[str, QuestionResult]:
        """:attr:`done` as it is now (the worker threads add to it)."""
        with self._write_lock:
            return dict(self.done)

    # -- in the event loop ----------------------------------------------------------------------
    def stand_in(self) -> dict[str, Any] | None:
        """The stand-in's name and parameter values (its declared assumptions), or None when a
        model answers: ``metrics.json``'s ``stand_in``."""
        return self.assumptions.to_dict() if self.assumptions is not None else None

    def run_section(self, started: float, results: Mapping[str, QuestionResult]
                    ) -> dict[str, Any]:
        """``metrics.json``'s ``run``: the selected questions done in ``results`` (an outage is
        not done), this session's work, the rate gate's and the caches' counts."""
        done = sum(1 for item in self.items
                   if (r := results.get(item.id)) is not None and r.status not in OUTAGES)
        items_total = len(self.items)
        section: dict[str, Any] = {
            "dataset": self.config.dataset, "split": self.config.split, "llm": self.config.llm,
            "strategy": self.config.strategy,
            "items": items_total, "done": done,
            "complete": done >= items_total,
            "this_session": {"questions": self.session_done,
                             "wall_seconds": round(time.perf_counter() - started, 3),
                             "concurrency": self.concurrency,
                             "processes": self.processes},
            **self.gate.stats(),
        }
        if self.llm_cache is not None:
            section["llm_cache"] = self.llm_cache.stats()
        if self.kb_cache is not None:
            section["kb_cache"] = self.kb_cache.stats()
        return section


# -- the run ------------------------------------------------------------------------------------


def _run_coroutine(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="pyql-eval-loop")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Answer the questions with the objects that exist now (the dataset's items, the store's
    and the strategy's tables, the results read back) left out of the garbage collector's
    passes: they live for the whole run, and every full collection walked them again (about 0.1
    ms of CPU a gold question, more the larger the dataset). They are collectable again after,
    unless the caller had frozen a heap of its own (``gc.unfreeze`` would thaw that too)."""
    thaw = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if thaw:
            gc.unfreeze()


#: the answering session of a worker process (``processes > 1``)
_WORKER: _Session | None = None


def _worker_init(config: RunConfig, out_dir: Path, parent: int | None = None) -> None:
    global _WORKER
    # a worker (and, once every worker is gone, the resource tracker) must not outlive a run
    # whose process was killed: it would answer for nobody, re-parented to PID 1. ``parent``
    # is the run's pid, given: a worker still starting when the run died has another parent
    # already, and leaves at once.
    die_with_parent(parent, watch_only=True)
    logging.getLogger("pyql").setLevel(logging.WARNING)
    _WORKER = _open(config, out_dir, provider=None, gate=None, concurrency=1,
                    with_items=False)[0]
    gc.freeze()  # see _frozen_heap: this process lives for the run


_T = TypeVar("_T")


def _batch(items: list[EvalItem], work: Callable[[EvalItem], _T]
           ) -> tuple[list[_T], list[EvalItem], BaseException | None]:
    """``work`` on ``items`` in order for up to :data:`BATCH_SECONDS`: what it returned, the
    items not started, and what stopped the batch (``_Stopped``, an :class:`EvalAbort`), if
    anything did. A batch, not a question, is what crosses to the event loop (and to a worker
    process): a hop per question cost more CPU than a stand-in's question itself."""
    done: list[_T] = []
    until = time.perf_counter() + BATCH_SECONDS
    for index, item in enumerate(items):
        try:
            done.append(work(item))
        except (_Stopped, EvalAbort) as exc:
            return done, [], exc
        if time.perf_counter() >= until:
            return done, items[index + 1:], None
    return done, [], None


def _worker_answer(item: EvalItem) -> tuple[QuestionResult, list[str], str]:
    """In a worker: the result (what the parent keeps), the trajectory lines and the result's
    JSON line (made here: the parent only writes)."""
    assert _WORKER is not None, "the worker process was not initialised"
    result, lines = _WORKER.answer(item)
    return result, lines, result.model_dump_json()


def _worker_batch(items: list[EvalItem]) -> tuple[list[tuple[QuestionResult, list[str], str]],
                                                  list[EvalItem], BaseException | None]:
    """In a worker: :func:`_batch` of :func:`_worker_answer`."""
    return _batch(items, _worker_answer)


def _processes(config: RunConfig, todo: int, provider: LLMProvider | None) -> int:
    """Worker processes for this session: ``config.processes``, or (``None``) the cores for a
    stand-in run of at least :data:`PROCESS_MIN_QUESTIONS` questions (gold, noisy-gold and
    replays are CPU-bound: one process cannot use two cores), else 1. An injected provider
    runs in this process; so does ``local`` (one llama.cpp server whose parallel slots serve
    the ``--concurrency`` threads: a process per core would load the model again each, and
    their threads would fight over the same cores)."""
    if provider is not None:
        return 1
    if config.processes is not None:
        return max(1, config.processes)
    kind = config.llm.partition(":")[0].strip().lower()
    if kind in ("openai", "local") or todo < PROCESS_MIN_QUESTIONS:
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_AUTO_PROCESSES))


async def _drive(session: _Session, todo: list[EvalItem], progress: RunProgress,
                 started: float, processes: int = 1) -> None:
    loop = asyncio.get_running_loop()
    pool: Any
    if processes > 1:
        import multiprocessing

        # spawn: a fresh interpreter opens its own store (a forked RocksDB handle is unsafe)
        pool = ProcessPoolExecutor(max_workers=processes,
                                   mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_init,
                                   initargs=(session.config, session.out_dir, os.getpid()))
        # a second batch queued per process keeps every core busy while one is handed over
        workers_n = max(1, min(processes * 2, len(todo)))
    else:
        workers_n = max(1, min(session.concurrency, len(todo)))
        pool = ThreadPoolExecutor(max_workers=workers_n, thread_name_prefix="pyql-eval")
    executor = pool
    queue = deque(todo)  # the workers are coroutines of one event loop: no lock needed
    aborted: list[BaseException] = []
    # one worker thread: it answers questions back to back (for up to BATCH_SECONDS) before
    # handing their results over, instead of a hop between the threads per question
    batched = processes == 1 and workers_n == 1

    answer_batch: Callable[[list[EvalItem]], tuple[list[Any], list[EvalItem],
                                                    BaseException | None]]
    keep: Callable[[Any], QuestionResult]
    if processes > 1:  # a worker process answers, this process writes
        answer_batch, keep = _worker_batch, lambda answered: session.record(*answered)
    else:  # the worker thread answers and writes (run_batch)
        answer_batch, keep = session.run_batch, lambda result: result

    def abort(exc: BaseException) -> None:
        if not aborted:
            aborted.append(exc)
        session.stop.set()

    async def worker() -> None:
        while not aborted and queue:
            if processes > 1 or batched:
                if session.stop.is_set():
                    return
                # a worker process gets a share: a short run's questions go to every process
                size = (min(PROCESS_BATCH, -(-len(queue) // workers_n)) if processes > 1
                        else len(queue))
                batch = [queue.popleft() for _ in range(size)]
                done, rest, stopped = await loop.run_in_executor(executor, answer_batch, batch)
                queue.extendleft(reversed(rest))
                for answered in done:  # all written, also after the breaker tripped
                    try:
                        progress.add(keep(answered))
                    except EvalAbort as exc:
                        abort(exc)
                if isinstance(stopped, EvalAbort):
                    abort(stopped)
                if stopped is not None:
                    return
                continue
            item = queue.popleft()
            try:
                result = await loop.run_in_executor(executor, session.run_item, item)
            except _Stopped:
                return
            except EvalAbort as exc:
                abort(exc)
                return
            progress.add(result)

    async def ticker() -> None:
        interval = METRICS_INTERVAL
        while True:
            await asyncio.sleep(interval)
            cost = time.perf_counter()
            _write_metrics(session, started)
            # a large run's aggregate takes a while: rewrite it less often, so the snapshot
            # never costs more than a few percent of the time
            interval = max(METRICS_INTERVAL, 30 * (time.perf_counter() - cost))

    tasks = [asyncio.create_task(worker()) for _ in range(workers_n)]
    tick = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*tasks)
    finally:
        tick.cancel()
        session.stop.set()
        # questions in flight (after an abort or Ctrl-C) finish and write their result lines
        executor.shutdown(wait=True, cancel_futures=True)
    if aborted:
        raise aborted[0]


def _write_metrics(session: _Session, started: float) -> dict[str, Any]:
    """Write ``metrics.json``: the aggregate of the results in memory (``results.jsonl``'s,
    module docstring) with this session's ``run`` section and the stand-in's assumptions."""
    results = session.snapshot()
    metrics = aggregate(results.values(), primary=session.primary)
    metrics["run"] = session.run_section(started, results)
    metrics["stand_in"] = session.stand_in()
    session.run_dir.write_metrics(metrics)
    return metrics


def _client_options(config: RunConfig) -> dict[str, Any]:
    """The OpenAI client's bounds from the run's configuration (only those set)."""
    options: dict[str, Any] = {
        "max_tokens": config.max_tokens or max_reply_tokens(get_strategy(config.strategy))}
    if config.llm_timeout is not None:
        options["timeout"] = config.llm_timeout
    temperature = (config.temperature if config.temperature is not None
                   else preset_temperature(config.preset, config.strategy))
    if temperature is not None:
        options["temperature"] = temperature
    return options


def _open(config: RunConfig, out_dir: Path, *, provider: LLMProvider | None,
          gate: RateGate | None, concurrency: int, with_items: bool = True
          ) -> tuple[_Session, EvalDataset]:
    dataset = get_dataset(config.dataset, config.data_dir)
    gate = gate or getattr(provider, "gate", None) or RateGate()
    llm_cache = LLMCache(config.llm_cache) if config.llm_cache else None
    kb_cache = QueryCache(config.kb_cache) if config.kb_cache else None
    if provider is None:
        try:
            provider = build_provider(config.llm, base_url=config.base_url, seed=config.seed,
                                      strategy=config.strategy, gate=gate, llm_cache=llm_cache,
                                      openai_options=_client_options(config),
                                      max_retries=config.max_retries, preset=config.preset,
                                      concurrency=concurrency)
        except (LLMAuthError, LLMModelNotFoundError, LLMSpecError,
                UnknownStrategyError) as exc:
            raise EvalAbort(str(exc)) from exc
    items = _select_items(config, dataset) if with_items else []
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise RunDirError(f"{config.dataset}: question ids are not unique")
    backend = dataset.backend(split=config.split, kb=config.kb, db=config.db)
    if config.kb_timeout is not None:
        backend = backend.with_kb_timeout(config.kb_timeout)
    session = _Session(config, out_dir, dataset, items, backend, provider, gate, llm_cache,
                       kb_cache, concurrency)
    return session, dataset


def _select_items(config: RunConfig, dataset: EvalDataset) -> list[EvalItem]:
    """The questions of the run: ``--limit``/``--sample`` of the split, after leaving out the
    questions the strategy must not be evaluated on (its optional ``held_out(options)``: e.g.
    the questions SRP's reference base was built from) and those of ``config.exclude_ids``."""
    held_out = getattr(get_strategy(config.strategy), "held_out", None)
    excluded = frozenset(held_out(config.options)) if held_out is not None else frozenset()
    if config.exclude_ids:
        try:
            text = Path(config.exclude_ids).read_text(encoding="utf-8")
        except OSError as exc:
            raise DatasetError(f"{config.exclude_ids}: cannot read the ids to leave out: "
                               f"{exc.strerror or exc}") from None
        excluded |= frozenset(text.split())
    if not excluded:
        return dataset.items(config.split, limit=config.limit, sample=config.sample,
                             seed=config.seed)
    kept = [item for item in dataset.items(config.split, seed=config.seed)
            if item.id not in excluded]
    log.info("%d question ids left out (strategy %s, exclude_ids %s)", len(excluded),
             config.strategy, config.exclude_ids)
    return [kept[i] for i in select_indices(len(kept), config.limit, config.sample, config.seed)]


def _execute(config: RunConfig, out_dir: Path, *, fresh: bool, progress: bool,
             provider: LLMProvider | None, gate: RateGate | None,
             concurrency: int | None) -> dict[str, Any]:
    started = time.perf_counter()
    k = concurrency if concurrency is not None else config.concurrency
    if k < 1:
        raise ValueError("concurrency must be at least 1")
    run_dir = RunDir(out_dir)
    with run_dir.lock():
        session, dataset = _open(config, out_dir, provider=provider, gate=gate, concurrency=k)
        try:
            if fresh:
                run_dir.write_config(config)
            session.results_log.repair()
            session.trajectory_log.repair()
            wanted = {item.id for item in session.items}
            for _, result in run_dir.lines():
                earlier = session.done.get(result.id)
                if earlier is not None and earlier.status not in OUTAGES:
                    log.warning("%s: question %s appears twice; the last line counts",
                                run_dir.results_path, result.id)
                elif result.id not in wanted:
                    log.warning("%s: question %s is not in this run's selection",
                                run_dir.results_path, result.id)
                session.done[result.id] = result.model_copy(update={"status": _status(result)})
            # questions that ended in an outage run again (their new line counts)
            todo = [item for item in session.items
                    if item.id not in session.done or session.done[item.id].status in OUTAGES]
            session.processes = _processes(config, len(todo), provider)
            log.info("%s: %d questions, %d done, %d to run (concurrency %d, processes %d)",
                     out_dir, len(session.items), len(session.items) - len(todo), len(todo), k,
                     session.processes)
            session.results_log.open()
            session.trajectory_log.open()
            _write_metrics(session, started)
            label = f"{config.dataset} {config.split} · {config.llm}"
            with RunProgress(progress, len(session.items), len(session.items) - len(todo),
                           session.primary, label) as bar:
                for result in session.done.values():
                    bar.add(result, advance=False)
                try:
                    with _frozen_heap():
                        _run_coroutine(_drive(session, todo, bar, started, session.processes))
                except BaseException:
                    _write_metrics(session, started)  # what was done, before raising
                    raise
        finally:
            session.results_log.close()
            session.trajectory_log.close()
            session.backend.close()
            for cache in (session.llm_cache, session.kb_cache):
                if cache is not None:
                    cache.close()
        return _write_metrics(session, started)


def _default_data_dir() -> Path:
    from pyql.datasets.paths import default_data_dir

    try:
        return default_data_dir().resolve()
    except FileNotFoundError as exc:
        raise DatasetError(str(exc)) from None


def evaluate(config: RunConfig, out_dir: str | os.PathLike[str], *, progress: bool = True,
             provider: LLMProvider | None = None, gate: RateGate | None = None) -> dict[str, Any]:
    """Start the run ``config`` in ``out_dir`` (new or empty) and return its metrics.

    ``provider`` and ``gate`` replace what ``config.llm`` would build (tests inject fakes).
    Raises :class:`RunDirError` when ``out_dir`` already holds a run, :class:`EvalAbort` when
    the run had to stop, and the dataset's errors when it cannot be read.
    """
    out = Path(out_dir)
    run_dir = RunDir(out)
    if run_dir.holds_run():
        raise RunDirError(f"{out} already holds a run: resume it (pyql eval --resume {out}) or "
                          "choose another --out")
    config = _with_checked_options(config)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        if not config.pyql_version:
            config = config.model_copy(update={"pyql_version": __version__})
        if config.data_dir is None:  # pinned, so that a resume from elsewhere reads the same data
            config = config.model_copy(update={"data_dir": str(_default_data_dir())})
        if config.ablation:
            run_dir.write_config(config)
            return _ablation(config, out, progress=progress, provider=provider, gate=gate,
                             concurrency=None)
        return _execute(config, out, fresh=True, progress=progress, provider=provider,
                        gate=gate, concurrency=None)
    except BaseException:
        if not run_dir.config_path.exists():  # the run never started: leave no run directory behind
            _discard(out, created)
        raise


def _with_checked_options(config: RunConfig) -> RunConfig:
    """``config`` with its strategy options read as the strategy declares them
    (:func:`~pyql.agent.strategy.check_options`: :class:`~pyql.agent.strategy.StrategyOptionError`
    before a run directory is made); an unknown strategy is left to :func:`_open`."""
    try:
        options = check_options(config.strategy, config.options)
    except UnknownStrategyError:
        return config
    return config if options == config.options else config.model_copy(update={"options": options})


def _discard(out: Path, created: bool) -> None:
    """Remove what a run that never started left in ``out``: its lock, and the directory itself
    when this run created it and nothing else is in it."""
    RunDir(out).discard_lock()
    if created and not any(out.iterdir()):
        out.rmdir()


def _ablation(config: RunConfig, out: Path, *, progress: bool, provider: LLMProvider | None,
              gate: RateGate | None, concurrency: int | None) -> dict[str, Any]:
    """The ablation mode (:mod:`pyql.agent.evaluation.ablation`): ERASER on and off as two
    sub-runs (started, or resumed where they exist), then their combined summary and table."""
    from pyql.agent.evaluation.ablation import (
        ABLATION_TABLE,
        format_table,
        side_configs,
        summarise_ablation,
    )

    for name, side in side_configs(config).items():
        where = out / name
        if RunDir(where).config_path.exists():
            resume(where, progress=progress, concurrency=concurrency, provider=provider,
                   gate=gate)
        else:
            where.mkdir(exist_ok=True)
            _execute(side, where, fresh=True, progress=progress, provider=provider, gate=gate,
                     concurrency=concurrency)
    summary = summarise_ablation(config, out)
    RunDir(out).write_metrics(summary)
    (out / ABLATION_TABLE).write_text(format_table({config.llm: summary}) + "\n",
                                      encoding="utf-8")
    return summary


def resume(out_dir: str | os.PathLike[str], *, progress: bool = True,
           concurrency: int | None = None, provider: LLMProvider | None = None,
           gate: RateGate | None = None) -> dict[str, Any]:
    """Finish the run in ``out_dir``: run the selected questions that have no result line yet
    (``concurrency`` overrides the configured one for this session) and return the metrics."""
    out = Path(out_dir)
    config = load_config(out)
    if config.ablation:
        return _ablation(config, out, progress=progress, provider=provider, gate=gate,
                         concurrency=concurrency)
    return _execute(config, out, fresh=False, progress=progress, provider=provider, gate=gate,
                    concurrency=concurrency)
