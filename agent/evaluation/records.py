"""The data of an evaluation run: items in, one result line per question out.

A run directory holds:

- ``config.json``: the :class:`RunConfig` (dataset, split, data dir, llm spec, limit/sample/seed,
  concurrency, guidelines on/off, ...), written once when the run starts;
- ``results.jsonl``: one :class:`QuestionResult` per line, append-only, each with its ``id``:
  the outcome (answers, scores, usage with the step count, guideline triggers), not the steps;
- ``trajectories.jsonl``: each question's :class:`~pyql.agent.trajectory.Trajectory` (its
  ``meta["id"]`` is the question id), the one record of its steps
  (:meth:`~pyql.agent.evaluation.rundir.RunDir.trajectories` reads them);
- ``metrics.json``: the aggregate (:func:`pyql.agent.evaluation.metrics.aggregate`), rewritten
  as results arrive and at the end;
- ``report.html``: written by ``pyql report RUN_DIR``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from pyql.agent.llm.accounting import Usage

__all__ = ["EvalItem", "QuestionResult", "RunConfig", "RESULTS", "CONFIG", "METRICS", "OUTAGES",
           "item_seed", "usage_record"]

CONFIG = "config.json"
RESULTS = "results.jsonl"
METRICS = "metrics.json"

#: the statuses of a question that ended in an outage (the KB/DB or the LLM was unreachable,
#: failed or timed out): not a wrong answer, left out of the scores, re-run by ``--resume``
OUTAGES: tuple[str, ...] = ("backend_error", "llm_error", "llm_timeout")


def item_seed(seed: int, item_id: str) -> int:
    """The seed of one question: the run's ``seed`` and the question id, the same in every
    process (unlike ``hash``). The one place item seeds come from: stand-ins and ablations get
    it, so an ERASER-on and an ERASER-off run make the same choices on the same question.

    >>> item_seed(0, "1hop-dev-3") == item_seed(0, "1hop-dev-3") != item_seed(1, "1hop-dev-3")
    True
    """
    digest = hashlib.sha256(f"{seed}\x00{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class EvalItem(BaseModel):
    """One question to evaluate, whatever the dataset."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    #: linked entities (mention -> KB id), for KB datasets
    entities: dict[str, str] = Field(default_factory=dict)
    #: gold answers (KB ids/labels, or SQL result values)
    answers: tuple[Any, ...] = ()
    #: the gold program text (agent style), when the dataset has one
    program: str | None = None
    tools: Literal["sparql", "sql"] = "sparql"
    #: SQL: the table (WikiSQL) / database id (Spider)
    table: str | None = None
    db_id: str | None = None
    #: dataset-specific facts for breakdowns (qtype, hops, difficulty, ...)
    meta: dict[str, Any] = Field(default_factory=dict)


def usage_record(usage: Usage) -> dict[str, float]:
    """A question's :class:`~pyql.agent.llm.accounting.Usage` as the numbers of
    ``QuestionResult.usage``: each of its scalar fields, read from the model itself (a field
    added to ``Usage`` is recorded too); ``estimated_tokens`` is 1.0 or 0.0. The guideline
    triggers are ``QuestionResult.guidelines``."""
    return {name: float(value) for name, value in usage
            if isinstance(value, (int, float))}


class QuestionResult(BaseModel):
    """The outcome of one question (one line of results.jsonl). Its steps are in its trajectory
    (trajectories.jsonl); a line of an older pyql that still holds ``steps`` loads, the key
    ignored, as any key this model does not know."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str = ""
    gold: tuple[Any, ...] = ()
    predicted: tuple[Any, ...] = ()
    #: per-question metrics: f1, hit@1, em, accuracy (those defined for the dataset)
    metrics: dict[str, float] = Field(default_factory=dict)
    #: llm_calls, prompt_tokens, completion_tokens, cost, kb_queries, seconds
    usage: dict[str, float] = Field(default_factory=dict)
    #: guideline triggers by code
    guidelines: dict[str, int] = Field(default_factory=dict)
    #: guideline codes whose hint was followed by an accepted step (a successful correction)
    corrected: dict[str, int] = Field(default_factory=dict)
    finished: bool = True
    stop_reason: str = ""
    #: an error that ended the question (the run goes on); None when it ran to the end
    error: str | None = None
    #: what ended the question: ``ok`` (it ran to its end; the answer is scored), ``error``
    #: (a failure of the question itself, scored 0), or an outage of :data:`OUTAGES`
    #: (``backend_error``, ``llm_error``, ``llm_timeout``: not scored, re-run by ``--resume``)
    status: str = "ok"
    query: str = ""
    program: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)


class RunConfig(BaseModel):
    """How a run was started; ``pyql eval --resume`` reads it back."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    split: str = "dev"
    data_dir: str | None = None
    llm: str
    base_url: str | None = None
    kb: str | None = None
    db: str | None = None
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    concurrency: int = 1
    #: worker processes (each answers one question at a time; started with ``spawn``, so a
    #: script calling :func:`~pyql.agent.evaluation.runner.evaluate` needs the usual
    #: ``if __name__ == "__main__":`` guard); None (``pyql eval``'s default): the machine's
    #: cores for a long stand-in run (gold, noisy-gold, replay: CPU-bound), else 1
    processes: int | None = 1
    guidelines: bool = True
    #: steps per question; None: the strategy's (or the preset's) default
    max_steps: int | None = None
    #: a named bundle of settings (:mod:`pyql.agent.strategies.queryagent.presets`: ``default``, ``paper``)
    preset: str | None = None
    #: relation ranker (bm25, openai, minilm, hybrid, hybrid:openai); None: the preset's
    ranker: str | None = None
    #: argmax/argmin semantics: ``ties`` keeps tied rows, ``limit`` is ORDER BY ... LIMIT 1
    #: (the original's); None: the preset's
    extremum: Literal["ties", "limit"] | None = None
    mode: Literal["text", "tools"] = "text"
    llm_cache: str | None = None
    kb_cache: str | None = None
    #: the registered strategy (entry-point group ``pyql.strategies``) and its own options
    strategy: str = "queryagent"
    options: dict[str, Any] = Field(default_factory=dict)
    #: a file of question ids (one per line) the run leaves out, before --limit/--sample (e.g. a
    #: reference base's ``source_ids.txt``, to compare strategies on the same held-out part)
    exclude_ids: str | None = None
    #: run ERASER on and off (sub-runs ``eraser_on/`` and ``eraser_off/``, one combined table)
    ablation: bool = False
    #: LLM client bounds: seconds per call, retries per call; seconds of LLM time per question
    #: (None: none)
    llm_timeout: float | None = None
    max_retries: int | None = None
    question_deadline: float | None = None
    #: structured output (``auto``, ``off``, ``format``, ``grounded``; ``on`` is ``format``)
    #: and the longest reply (None: the strategy's ``max_reply_tokens``)
    constrain: Literal["auto", "off", "format", "grounded", "on"] = "auto"
    #: choose mode: enumerable steps score their candidates (``llm.score``)
    choose: bool = False
    max_tokens: int | None = None
    #: the sampling temperature of every LLM call (None: the preset's, else the client's, 0)
    temperature: float | None = None
    #: wall-clock seconds per KB query (a SPARQL endpoint's; None: the KB's own, 30)
    kb_timeout: float | None = None
    #: estimate the tokens of a stand-in's calls too (they report none; a model's are the
    #: server's, or estimated when it reports none): off, a stand-in run's tokens count 0
    token_estimates: bool = False
    #: stop the run after this many questions in a row ended in an outage (0: never)
    max_outages: int = 5
    pyql_version: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)
