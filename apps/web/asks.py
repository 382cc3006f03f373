"""The Ask page's runs: one question answered by a strategy in its own thread, its steps
published as they are finalised, the run saved as an ordinary run directory.

:meth:`AskManager.create` checks a request (:class:`AskRequest`: the strategy, its options and the
``--llm`` spec are read as ``pyql ask``/``pyql eval`` read them, before anything runs) and makes
an :class:`AskRun`; the run starts when its event stream is first opened (so the page sees every
step as it happens) in a thread of its own: a slow or hung run blocks no other. Its steps come
from the one place steps are finalised, the :class:`~pyql.agent.recorder.Recorder`'s ``on_step``
callback, each stamped with the server's wall clock (``server_ms``) the moment it fires.

A run ends ``done`` (the strategy returned), ``error`` (it raised: the event carries the error's
type and message) or ``cancelled`` (:meth:`AskRun.cancel`: the next step boundary raises
:class:`RunCancelled` inside the strategy; a closed tab cancels too). Whatever the end, the
trajectory so far is written to ``OUT/ask-…/`` as ``pyql eval`` writes a run (``config.json``,
``results.jsonl``, ``trajectories.jsonl``, ``metrics.json``), so ``pyql report`` and the Runs
page read it; its question page is the run's permalink.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyql.agent.evaluation.llm_spec import LLMSpecError, parse_llm_spec
from pyql.agent.evaluation.records import EvalItem, QuestionResult, RunConfig, usage_record
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.strategy import (
    StrategyConfig,
    available_strategies,
    build_strategy,
    check_options,
    get_strategy,
    max_reply_tokens,
)
from pyql.agent.trajectory import Step, Trajectory
from pyql.apps.web.render import highlight, hint_info
from pyql.apps.web.workspace import Workspace, WorkspaceError, parse_entities
from pyql.errors import PyqlError

__all__ = ["AskManager", "AskRequest", "AskRun", "RunCancelled", "ASK_DATASET"]

log = logging.getLogger(__name__)

#: the ``dataset`` of an Ask run's ``config.json``
ASK_DATASET = "ask"
#: finished runs kept in memory (their directories stay on disk)
KEEP_RUNS = 200


class RunCancelled(PyqlError):
    """Raised inside a strategy at the next step boundary after :meth:`AskRun.cancel`."""


@dataclass(frozen=True)
class AskRequest:
    """What the Ask form sends, already checked (see :meth:`AskManager.check`)."""

    question: str
    strategy: str = "queryagent"
    llm: str = "gold"
    entities: Mapping[str, str] = field(default_factory=dict)
    #: entities were linked from the KB labels (not given)
    linked: bool = False
    program: str = ""
    table: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    guidelines: bool = True
    max_steps: int | None = None
    mode: str = "text"


class AskRun:
    """One question being answered (module docstring)."""

    def __init__(self, run_id: str, request: AskRequest, out: Path) -> None:
        self.id = run_id
        self.request = request
        self.out = out
        self.state = "pending"  # pending, running, done, error, cancelled
        self.events: list[dict[str, Any]] = []
        self.started_ms: float | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.steps: list[Step] = []

    @property
    def finished(self) -> bool:
        return self.state in ("done", "error", "cancelled")

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> bool:
        """Stop the run: it ends ``cancelled`` now (its page is told at once), and its thread
        stops at its next step boundary (a step in progress, e.g. a model reply being waited
        for, is dropped when it ends); False when the run has ended already."""
        if self.finished:
            return False
        self._cancel.set()
        started = self.state != "pending"
        self._finish("cancelled", {
            "reason": "cancelled" if started else "cancelled before it started",
            "run_dir": self.out.name, "question_id": f"ask-{self.id}",
            "steps": len(self.steps)})
        return True

    # -- events ---------------------------------------------------------------------------------
    def emit(self, kind: str, data: dict[str, Any], *, final: bool = False
             ) -> dict[str, Any] | None:
        """Publish an event (None: dropped, the run has ended: nothing follows its last)."""
        with self._lock:
            if self._closed:
                return None
            self._closed = final
            event = {"seq": len(self.events), "type": kind, "server_ms": time.time() * 1000,
                     **data}
            self.events.append(event)
            waiters = list(self._waiters)
        for loop, flag in waiters:
            try:
                loop.call_soon_threadsafe(flag.set)
            except RuntimeError:  # the loop has closed (server shutting down)
                pass
        return event

    async def stream(self) -> AsyncIterator[dict[str, Any]]:
        """Every event from the first, then each new one as it comes; ends after the last."""
        loop = asyncio.get_running_loop()
        flag = asyncio.Event()
        waiter = (loop, flag)
        with self._lock:
            self._waiters.add(waiter)
        seen = 0
        try:
            while True:
                flag.clear()
                with self._lock:
                    new = self.events[seen:]
                    ended = self.finished
                for event in new:
                    yield event
                seen += len(new)
                if ended and seen == len(self.events):
                    return
                await flag.wait()
        finally:
            with self._lock:
                self._waiters.discard(waiter)

    # -- running --------------------------------------------------------------------------------
    def start(self, target: Any) -> None:
        """Run ``target(self)`` in a thread of its own (once)."""
        with self._lock:
            if self._thread is not None or self.state != "pending":
                return
            self.state = "running"
            self.started_ms = time.time() * 1000
            self._thread = threading.Thread(target=target, args=(self,), daemon=True,
                                            name=f"pyql-ask-{self.id}")
        self._thread.start()

    def _finish(self, state: str, data: dict[str, Any]) -> None:
        with self._lock:
            if self.finished:
                return
            self.state = state
        self.emit(state, data, final=True)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)


class AskManager:
    """Checks requests, runs them and keeps them by id (module docstring). ``out``: where the
    run directories go."""

    def __init__(self, workspace: Workspace, out: Path) -> None:
        self.workspace = workspace
        self.out = out
        self.runs: dict[str, AskRun] = {}
        self._providers: dict[tuple[str, str], Any] = {}
        self._provider_lock = threading.Lock()
        self._lock = threading.Lock()

    # -- the form -------------------------------------------------------------------------------
    @staticmethod
    def strategies() -> list[dict[str, Any]]:
        """Each installed strategy with its declared options (name, type, help)."""
        out = []
        for name in available_strategies():
            try:
                kind = get_strategy(name)
            except (PyqlError, ImportError, TypeError) as exc:
                log.warning("strategy %s cannot be loaded: %s", name, exc)
                continue
            declared = getattr(kind, "declared_options", None) or {}
            out.append({"name": name, "options": [
                {"name": key, "type": spec.type_name, "help": spec.help}
                for key, spec in declared.items()]})
        return out

    def check(self, form: Mapping[str, Any]) -> AskRequest:
        """The request of a submitted form; :class:`WorkspaceError` (with ``field``),
        :class:`~pyql.agent.evaluation.llm_spec.LLMSpecError` or
        :class:`~pyql.agent.strategy.StrategyOptionError` for what cannot run."""
        question = str(form.get("question") or "").strip()
        if not question:
            raise WorkspaceError("ask a question", field="question")
        strategy = str(form.get("strategy") or "queryagent")
        kind = get_strategy(strategy)  # UnknownStrategyError names the installed ones
        raw_options = form.get("options") or {}
        if not isinstance(raw_options, Mapping):
            raise WorkspaceError("options is an object of NAME: VALUE", field="options")
        options = check_options(kind, {str(k): _option_value(v) for k, v in raw_options.items()
                                       if v != ""})
        spec = parse_llm_spec(str(form.get("llm") or "gold"))
        program = str(form.get("program") or "").strip()
        if spec.is_stand_in:
            from pyql.agent.evaluation.standins import stand_in_assumptions

            stand_in_assumptions(spec, strategy)  # what the strategy's stand-in cannot play
            if not program:
                raise LLMSpecError(f"--llm {spec.text} replays a gold program: give one",
                                   spec=spec.text, parameter="program")
        mode = str(form.get("mode") or "text")
        if mode not in ("text", "tools"):
            raise WorkspaceError(f"mode is text or tools, not {mode!r}", field="mode")
        max_steps = form.get("max_steps")
        try:
            steps = int(max_steps) if max_steps not in (None, "") else None
        except (TypeError, ValueError):
            raise WorkspaceError(f"max steps is a number, not {max_steps!r}",
                                 field="max_steps") from None
        if steps is not None and steps < 1:
            raise WorkspaceError("max steps is at least 1", field="max_steps")
        entities = parse_entities(str(form.get("entities") or ""))
        linked = False
        if not entities and self.workspace.language == "sparql":
            entities, linked = self.workspace.link(question), True
        table = str(form.get("table") or "").strip() or self.workspace.table
        return AskRequest(question=question, strategy=strategy, llm=spec.text,
                          entities=entities, linked=linked, program=program, table=table,
                          options=options, guidelines=_flag(form.get("guidelines", True)),
                          max_steps=steps, mode=mode)

    def create(self, request: AskRequest) -> AskRun:
        run_id = uuid.uuid4().hex[:12]
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        run = AskRun(run_id, request, self.out / f"ask-{stamp}-{run_id}")
        with self._lock:
            self.runs[run_id] = run
            done = [k for k, r in self.runs.items() if r.finished]
            for key in done[: max(0, len(done) - KEEP_RUNS)]:
                del self.runs[key]
        return run

    def get(self, run_id: str) -> AskRun | None:
        return self.runs.get(run_id)

    def start(self, run: AskRun) -> None:
        run.start(self._run)

    def shutdown(self) -> None:
        for run in list(self.runs.values()):
            run.cancel()

    # -- the run --------------------------------------------------------------------------------
    def _llm(self, request: AskRequest, item: EvalItem, strategy_type: Any) -> Any:
        from pyql.agent.evaluation.specs import build_provider

        spec = parse_llm_spec(request.llm)
        if spec.is_stand_in:
            return build_provider(spec, strategy=request.strategy).for_item(item)
        key = (spec.text, request.strategy)
        with self._provider_lock:  # a local model is loaded once, shared by the runs
            provider = self._providers.get(key)
            if provider is None:
                provider = build_provider(spec, strategy=request.strategy, openai_options={
                    "max_tokens": max_reply_tokens(strategy_type)})
                self._providers[key] = provider
        return provider.for_item(item)

    def _run(self, run: AskRun) -> None:
        request = run.request
        workspace = self.workspace
        item = EvalItem(id=f"ask-{run.id}", question=request.question,
                        entities=dict(request.entities), program=request.program or None,
                        tools=workspace.tools, table=request.table)
        run.emit("start", {"question": request.question, "entities": dict(request.entities),
                           "linked": request.linked, "strategy": request.strategy,
                           "llm": request.llm, "language": workspace.language,
                           "table": request.table})
        start = time.perf_counter()
        tally = {"tokens": 0, "calls": 0, "kb_queries": 0}
        program: list[str] = []

        def on_step(step: Step) -> None:
            # the Recorder's callback: the step is final here; its event is stamped now
            if run.cancel_requested:  # the page was told: no step after the cancel
                raise RunCancelled(f"cancelled after step {step.n - 1}")
            tally["tokens"] += step.prompt_tokens + step.completion_tokens
            tally["calls"] += 1 if (step.reply_text or step.tool_calls or step.llm_latency) else 0
            tally["kb_queries"] += step.kb_queries
            rolled_back = step.hint is not None
            if step.accepted and step.action and not rolled_back:
                program.append(step.action)
            shown = run.emit("step", {
                "step": _step_json(step),
                "rolled_back": rolled_back,
                "hint": hint_info(step.hint) if step.hint else None,
                "program": "\n".join(program),
                "query_html": highlight(step.query, workspace.language) if step.query else "",
                "usage": {**tally, "seconds": round(time.perf_counter() - start, 3)},
            })
            if shown is None:  # cancelled meanwhile: the page never saw this step
                raise RunCancelled(f"cancelled after step {step.n - 1}")
            run.steps.append(step)  # what the page saw is what a cancelled run saves
            if run.cancel_requested:
                raise RunCancelled(f"cancelled after step {step.n}")

        result = None
        error: BaseException | None = None
        try:
            strategy_type = get_strategy(request.strategy)
            llm = self._llm(request, item, strategy_type)
            config = StrategyConfig(guidelines=request.guidelines, max_steps=request.max_steps,
                                    mode=request.mode, table=request.table,
                                    options=dict(request.options))
            agent = build_strategy(request.strategy, llm, workspace.backend, config)
            run.emit("ready", {"model": str(getattr(llm, "model", "") or request.llm)})
            if run.cancel_requested:
                raise RunCancelled("cancelled before the first step")
            result = agent.run(request.question, dict(request.entities), table=request.table,
                               meta={"id": item.id, "source": "pyql serve"}, on_step=on_step)
        except RunCancelled as exc:
            error = exc
        except Exception as exc:  # any failure of the run is the run's, shown on its page
            log.info("ask run %s failed: %s: %s", run.id, type(exc).__name__, exc)
            error = exc
        seconds = time.perf_counter() - start
        try:
            self._save(run, item, result, error, seconds)
        except OSError as exc:
            log.warning("ask run %s could not be saved: %s", run.id, exc)
        saved = {"run_dir": run.out.name, "question_id": item.id,
                 "usage": {**tally, "seconds": round(seconds, 3)}}
        if isinstance(error, RunCancelled):
            run._finish("cancelled", {"reason": str(error), **saved})
        elif error is not None:
            run._finish("error", {"error": {"type": type(error).__name__, "message": str(error),
                                            "field": getattr(error, "field", None)
                                            or getattr(error, "parameter", None)}, **saved})
        else:
            assert result is not None
            trajectory = result.trajectory
            run._finish("done", {
                "answers": [str(a) for a in result.answers],
                "query": result.query,
                "query_html": highlight(result.query, workspace.language) if result.query else "",
                "program": trajectory.program,
                "finished": result.finished,
                "stop_reason": result.stop_reason,
                **saved,
                "usage": {**tally, "seconds": round(seconds, 3),
                          "tokens": result.usage.total_tokens,
                          "calls": result.usage.llm_calls,
                          "kb_queries": result.usage.kb_queries},
            })

    def _save(self, run: AskRun, item: EvalItem, result: Any, error: BaseException | None,
              seconds: float) -> None:
        """The run as ``pyql eval`` leaves one: config, one result line, its trajectory,
        metrics."""
        request = run.request
        workspace = self.workspace
        run.out.mkdir(parents=True, exist_ok=True)
        directory = RunDir(run.out)
        from pyql import __version__

        config = RunConfig(
            dataset=ASK_DATASET, split="web", llm=request.llm,
            kb=workspace.location if workspace.language == "sparql" else None,
            db=workspace.location if workspace.language == "sql" else None,
            guidelines=request.guidelines, max_steps=request.max_steps,
            mode="tools" if request.mode == "tools" else "text",
            strategy=request.strategy, options=dict(request.options),
            pyql_version=__version__, extra={"source": "pyql serve", "ask_id": run.id,
                                             "gold_program": request.program or None,
                                             "entities": dict(request.entities)})
        directory.write_config(config)
        if result is not None:
            trajectory = result.trajectory
        else:
            trajectory = Trajectory(question=request.question, entities=dict(request.entities),
                                    strategy=request.strategy, steps=tuple(run.steps),
                                    mode=request.mode, tools=workspace.tools,
                                    meta={"id": item.id})
        meta = {"source": "pyql serve", "ask_id": run.id}
        if request.table:
            meta["table"] = request.table
        usage = usage_record(trajectory.usage)
        usage["steps"] = float(len(trajectory.steps))
        usage["seconds"] = seconds
        cancelled = isinstance(error, RunCancelled)
        record = QuestionResult(
            id=item.id, question=request.question,
            predicted=tuple(str(a) for a in trajectory.answers),
            usage=usage, guidelines=dict(trajectory.usage.guideline_triggers),
            finished=trajectory.finished,
            stop_reason="cancelled" if cancelled else trajectory.stop_reason,
            error=None if error is None else f"{type(error).__name__}: {error}",
            status="ok" if error is None else "error",
            query=trajectory.query, program=trajectory.program, meta=meta)
        log_file = directory.trajectory_log().open()
        try:
            log_file.append(*trajectory.lines())
        finally:
            log_file.close()
        results = directory.results_log().open()
        try:
            results.append(record.model_dump_json())
        finally:
            results.close()
        directory.recompute_metrics()


def _option_value(value: Any) -> Any:
    """A form's option value as ``pyql ask --option`` reads one: text that parses as JSON is
    that value (``3``, ``true``, ``{"a": 1}``), else the text."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _step_json(step: Step) -> dict[str, Any]:
    return step.model_dump(mode="json", include={
        "n", "kind", "thought", "action", "observation", "hint", "suggestions", "status",
        "env_status", "error", "accepted", "format_issue", "query", "prompt_tokens",
        "completion_tokens", "llm_latency", "env_latency", "kb_queries"})
