"""Typed step records and trajectories, saved as JSONL and reloadable.

A :class:`Trajectory` is one question's run: the question and its linked entities, one
:class:`Step` per LLM call (thought, action, observation, the guideline that fired, the query
after the step, tokens, latencies, and the raw reply so it can be replayed with
:class:`~pyql.agent.llm.clients.ReplayLLM`), and the result (answers, final query, program, usage).

On disk a trajectory is a run of JSON lines: one ``{"record": "question", ...}``, one
``{"record": "step", ...}`` per step, and ``{"record": "result", ...}``. Several trajectories may
share one file (an evaluation run appends them); :func:`load_trajectories` reads them all, and a
trajectory cut short by a crash loads with ``finished=False``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pyql.agent.calls import ToolCall
from pyql.agent.jsonl import Malformed, json_lines
from pyql.agent.llm.accounting import Usage

__all__ = ["Step", "Trajectory", "load_trajectories", "iter_trajectories", "trajectory_records"]


class Step(BaseModel):
    """One step of Algorithm 1: the model's thought and action, and the observation."""

    model_config = ConfigDict(frozen=True)

    #: step number (1-based), as the prompt numbers it
    n: int
    #: what the step is, for strategies with several kinds of LLM call or environment work:
    #: ``action`` (a QueryAgent step), Readi's ``generate`` / ``instantiate`` / ``edit`` /
    #: ``answer``, SRP's ``references`` / ``relation_check`` / ``plan`` / ``judge`` ...
    kind: str = "action"
    thought: str = ""
    #: the action as handed to the environment (text; tool calls rendered as a call)
    action: str = ""
    #: the observation text as rendered into the prompt (a hint includes the retry wording)
    observation: str = ""
    #: code of the guideline that fired (the step was rolled back), else None
    hint: str | None = None
    #: the fired hint's suggestions (structured: what stand-ins and reports read, not the text)
    suggestions: tuple[str, ...] = ()
    #: the Session's status: ok, empty, error, hint, backend_error, timeout
    status: str = "ok"
    #: what the backend itself reported, whatever a guideline made of it: ``ok``, ``empty``,
    #: ``backend_error`` (the KB/DB failed or is unreachable), ``timeout``; "" when not run
    env_status: str = ""
    #: the raw error of the step (Python side or backend), if any
    error: str | None = None
    #: the step was accepted (no error, no hint)
    accepted: bool = True
    #: how the model's output broke the one-thought-one-action format, if it did:
    #: ``no_action``, ``multiple_actions``, ``bad_tool_call``
    format_issue: str | None = None
    #: the query text after the step
    query: str = ""
    #: the raw LLM output (text, and tool calls in tools mode): what a replay returns
    reply_text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    #: what the model wrote when it differs from ``reply_text``: the JSON of a constrained call
    #: (``reply_text`` and ``tool_calls`` are what it reads as, and what a replay returns)
    raw_reply: str = ""
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: of ``prompt_tokens``, those the server took from its prompt cache
    cached_tokens: int = 0
    estimated_tokens: bool = False
    cost: float = 0.0
    llm_latency: float = 0.0
    env_latency: float = 0.0
    kb_queries: int = 0
    retries: int = 0
    #: fingerprint of the prompt this step was generated from (see ``prompt_fingerprint``)
    prompt_hash: str = ""
    #: structured data of the step that a strategy records beyond the text fields (a reasoning
    #: path, an instantiation error, a judge verdict, ...); JSON-serialisable
    data: dict[str, Any] = Field(default_factory=dict)


class Trajectory(BaseModel):
    """One question's run. See the module docstring."""

    model_config = ConfigDict(frozen=True)

    question: str
    entities: dict[str, str] = Field(default_factory=dict)
    #: the registered name of the strategy that ran (``queryagent``, ``readi``, ``srp``, ...)
    strategy: str = "queryagent"
    #: prompt profile (freebase, metaqa, wikisql, ...), tools mode (text/tools), tool set
    profile: str = ""
    mode: str = "text"
    tools: str = "sparql"
    model: str = ""
    steps: tuple[Step, ...] = ()
    answers: tuple[Any, ...] = ()
    query: str = ""
    program: str = ""
    #: the model called execute() and it was accepted
    finished: bool = False
    #: ``execute``, ``max_steps``, ``context_length`` (or empty for a run cut short)
    stop_reason: str = ""
    usage: Usage = Field(default_factory=Usage)
    #: free-form data of the caller (question id, gold answers, ...)
    meta: dict[str, Any] = Field(default_factory=dict)

    # -- JSONL --------------------------------------------------------------------------------
    def records(self) -> Iterator[dict[str, Any]]:
        head = self.model_dump(mode="json", include={"question", "entities", "strategy",
                                                     "profile", "mode", "tools", "model", "meta"})
        yield {"record": "question", **head}
        for step in self.steps:
            yield {"record": "step", **step.model_dump(mode="json")}
        tail = self.model_dump(mode="json", include={"answers", "query", "program", "finished",
                                                     "stop_reason", "usage"})
        yield {"record": "result", **tail}

    def lines(self) -> Iterator[str]:
        """:meth:`records` as JSON lines (what :meth:`save` and the evaluation write), made by
        pydantic's serialiser directly; values JSON cannot hold are written as text."""
        head = self.model_dump_json(include={"question", "entities", "strategy", "profile",
                                             "mode", "tools", "model", "meta"}, fallback=str)
        yield '{"record":"question",' + head[1:]
        for step in self.steps:
            yield '{"record":"step",' + step.model_dump_json(fallback=str)[1:]
        tail = self.model_dump_json(include={"answers", "query", "program", "finished",
                                             "stop_reason", "usage"}, fallback=str)
        yield '{"record":"result",' + tail[1:]

    def save(self, path: str | os.PathLike[str], *, append: bool = False) -> Path:
        """Write the JSONL records (``append=True`` adds to an existing file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w", encoding="utf-8") as handle:
            for line in self.lines():
                handle.write(line + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], index: int = 0) -> Trajectory:
        """The ``index``-th trajectory of a JSONL file."""
        for i, trajectory in enumerate(iter_trajectories(path)):
            if i == index:
                return trajectory
        raise ValueError(f"{path}: no trajectory #{index}")

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Trajectory:
        items = list(records)
        if not items or items[0].get("record") != "question":
            raise ValueError("a trajectory starts with a 'question' record")
        head = {k: v for k, v in items[0].items() if k != "record"}
        steps = [Step.model_validate({k: v for k, v in r.items() if k != "record"})
                 for r in items[1:] if r.get("record") == "step"]
        tails = [r for r in items[1:] if r.get("record") == "result"]
        tail = {k: v for k, v in tails[-1].items() if k != "record"} if tails else {}
        return cls.model_validate({**head, **tail, "steps": steps})

    # -- reading ------------------------------------------------------------------------------
    def render(self) -> str:
        """A transcript in the paper's appendix-G layout."""
        lines = [f"Question: {self.question}", f"Entity: {self.entities}", ""]
        for step in self.steps:
            lines += [f"Step {step.n}:", f"Thought {step.n}: {step.thought}",
                      f"Action {step.n}: {step.action}",
                      f"Observation {step.n}: {step.observation}", ""]
        lines.append(f"Answer: {list(self.answers)}")
        return "\n".join(lines)


def trajectory_records(path: str | os.PathLike[str], *,
                       keep: Callable[[int, dict[str, Any]], bool] | None = None,
                       malformed: Malformed | None = None
                       ) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(line of its question record, its records) for each trajectory of a JSONL file, in file
    order: the one grouping of the records (:func:`iter_trajectories`, and the evaluation's
    :meth:`~pyql.agent.evaluation.rundir.RunDir.trajectories`).

    A last line without its newline is skipped (it is being written, or was cut short); a
    trajectory without its result record (a crash) ends at the next question record or at the
    end of the file. ``keep(line, question record)`` says whether a trajectory is read: the
    lines of one that is not are skipped unparsed (by the ``{"record":"...`` prefix pyql writes).
    A line that cannot be read (not JSON, not a trajectory record, a step or result outside a
    trajectory) is passed to ``malformed(line, why)`` and skipped, or without it raises a
    ``ValueError`` naming the file and the line."""

    def bad(number: int, why: str) -> None:
        if malformed is None:
            raise ValueError(f"{path}:{number}: {why}")
        malformed(number, why)

    current: list[dict[str, Any]] | None = None
    start = 0
    # the lines up to the next question record belong to a trajectory not read: not parsed
    skipping = False

    def skip(line: bytes) -> bool:
        return skipping and _record_kind(line) not in (None, "question")

    for number, record in json_lines(path, complete=True, skip=skip, malformed=bad):
        kind = record.get("record") if isinstance(record, dict) else None
        if kind == "question":
            if current is not None:
                yield start, current
            skipping = keep is not None and not keep(number, record)
            start, current = number, (None if skipping else [record])
        elif kind in ("step", "result"):
            if skipping:
                continue
            if current is None:
                bad(number, f"a {kind} record outside a trajectory")
                skipping = True
                continue
            current.append(record)
            if kind == "result":
                yield start, current
                current = None
        else:
            bad(number, "not a trajectory record")
    if current is not None:
        yield start, current


#: the kind of a trajectory line as pyql writes it (``{"record":"step",...``), read unparsed
_RECORD_KIND = re.compile(rb'\{\s*"record"\s*:\s*"(\w+)"')


def _record_kind(line: bytes) -> str | None:
    match = _RECORD_KIND.match(line)
    return match.group(1).decode() if match else None


def iter_trajectories(path: str | os.PathLike[str]) -> Iterator[Trajectory]:
    """Every trajectory of a JSONL file, in order (one cut short by a crash included, with
    ``finished=False``; see :func:`trajectory_records`). Raises ``ValueError`` naming the line
    that cannot be read."""
    for _, records in trajectory_records(path):
        yield Trajectory.from_records(records)


def load_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    return list(iter_trajectories(path))
