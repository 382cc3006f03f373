"""Readi (Cheng et al., "Call Me When Necessary"): generate a whole reasoning path, instantiate it
on the KB or table, and call the LLM again only to edit the path when instantiation gets stuck.

Algorithm 1 of the paper::

    P0 <- Generate(Q, E)                               one LLM call (or an empty/corrupt path)
    t <- 0
    loop:
        I, err <- Instantiate(Pt)                      pyql.agent.grounding.paths (no LLM)
        if no err or t = T: stop                       T = max_edits (default 3)
        Pt+1 <- Edit(err, Pt, Q); t <- t + 1           one LLM call per edit
    answers <- the instantiated program's answers      when complete (no LLM call)
               else LLM(Q, retrieved triples)          the paper's {answer} format

An edit answers one stuck constraint (``Final Path: E → r1 → r2``) or the whole path; an edit
that changes nothing ends the loop (the model has nothing better). With ``max_edits=0`` the
longest instantiable prefix is kept (the paper's "w/o edit"). The steps of the result record the
path history: ``generate`` (the initial path), ``instantiate`` (each instantiation, with the
structured error), ``edit`` (the error shown and the edited path) and ``answer`` (which source
was used: ``program`` or ``llm``).

On SQL databases (a ``SqlDB`` or a session factory making ``SqlSession``\\ s) the path is a
table path (:mod:`pyql.agent.grounding.paths.table`): columns, then row conditions, then the answer.
``table_mode`` says how it is used: ``program`` (pyql's own: every row condition must match, and
the instantiated PyQL-SQL program answers when complete) or ``retrieval`` (the paper's
Appendix A: only unknown columns are errors, an unmatched row condition retrieves every row of
the columns, the generation prompt shows a randomly sampled row, and the LLM answers from the
retrieved rows).

``preset="paper"`` (``pyql eval --strategy readi --preset paper``) sets the paper's choices
(:data:`PAPER_SETTINGS`); options given one by one override them. ``docs/paper_preset.md`` puts
them beside the paper's sections.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pyql.agent.grounding.candidates import check_choose
from pyql.agent.grounding.paths import (
    BINDING_TOP_K,
    MAX_CANDIDATES,
    PathFormatError,
    PathInstantiator,
    RelationBinder,
    RelationVocabulary,
)
from pyql.agent.grounding.paths.table import TableInstantiator
from pyql.agent.grounding.ranking import TOP_K
from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.clients import LLM, AccountedCall, WrappedLLM
from pyql.agent.llm.ranker import overlap_priors
from pyql.agent.llm.structured import (
    Constrain,
    ReplyFormat,
    answer_text,
    answers_format,
    constrain_level,
)
from pyql.agent.recorder import Recorder
from pyql.agent.strategies.readi import prompts
from pyql.agent.strategies.readi.kinds import I, KBPaths, P, Path, PathKind, Stuck, TablePaths
from pyql.agent.strategy import (
    Backend,
    GoldItem,
    Result,
    SessionFactory,
    StrategyConfig,
    StrategyOption,
)
from pyql.agent.trajectory import Step, Trajectory
from pyql.errors import PyqlError
from pyql.kb.base import KB
from pyql.program import Program

if TYPE_CHECKING:
    from pyql.environment import Environment

__all__ = ["PAPER_SETTINGS", "InitialPath", "ModuleLLMError", "Readi", "module_llm"]

log = logging.getLogger(__name__)

InitialPath = Literal["generate", "corrupt", "empty"]
AnswerMode = Literal["auto", "program", "llm"]
TableMode = Literal["program", "retrieval"]
Module = Literal["generate", "edit", "answer"]

#: Readi's options under ``preset="paper"`` (each overridable with ``--option``): the LLM reader
#: always answers (Algorithm 1 line 13, section 4.5: "QA Reasoning" on the retrieved instances),
#: compound nodes keep their ids in the retrieved triples (the answering demos of Appendix F,
#: ``m.0k0p0c``), the reader sees the instances every constraint agrees on (Algorithm 1 line 12,
#: ``Merge_Results``) and all of them, not a 50-row sample (up to the 2,000 of a hop), TableQA
#: as Appendix A (``table_mode="retrieval"``, every retrieved row shown)
PAPER_SETTINGS: Mapping[str, Any] = {
    "answer": "llm", "cvt_ids": True, "intersection": True, "max_triples": 2000,
    "table_mode": "retrieval", "max_rows": 1000}


class ModuleLLMError(PyqlError, ValueError):
    """A module's own model (``edit_model=NAME``) was asked of a client that cannot switch
    models (a stand-in, a replay): ``module``, ``model`` and the ``client`` type name."""

    def __init__(self, module: str, model: str, client: str) -> None:
        self.module = module
        self.model = model
        self.client = client
        super().__init__(f"{module}_model={model!r} needs an OpenAI-compatible client to run "
                         f"another model on, not {client}")


def module_llm(llm: LLM, model: str, module: str = "edit") -> LLM:
    """A client like ``llm`` (same server, key, bounds and temperature) that asks ``model``:
    the LLM of one Readi module when a run mixes models (the paper's Table 3 pairs a generation
    model with an editing model). A wrapper of the client (the evaluation's rate gate, its LLM
    cache: an ``llm`` attribute) is copied around the new client."""
    from pyql.agent.llm.clients import OpenAIChat

    if isinstance(llm, OpenAIChat):
        other = copy.copy(llm)
        other.model = model
        other.history = deque(maxlen=llm.history.maxlen)
        other.token_counter = TokenCounter(model=model)
        return other
    if not isinstance(llm, WrappedLLM) or llm.llm is llm:
        raise ModuleLLMError(module, model, type(llm).__name__)
    wrapper = copy.copy(llm)
    wrapper.llm = module_llm(llm.llm, model, module)
    wrapper.model = model
    return wrapper



class Readi:
    """The Readi strategy over a KB or a SQL database (see the module docstring).

    ``ranker``/``top_k``: relation binding (BM25 by default, ``"openai"``, ``"minilm"`` or a
    ranker; 5 candidates per NL relation). ``relations``: the vocabulary to bind to (a
    :class:`RelationVocabulary`, a list, or a file such as ``fb_relation.txt.gz``; default: every
    relation of the KB). ``max_edits``: T. ``initial_path``: ``generate`` (the LLM), ``empty``
    (no relation from any topic entity) or ``corrupt`` (``corrupt_length`` random relations of the
    vocabulary per topic entity) — the starts of the paper's Table 3. ``answer``: ``auto`` (the
    program's answers when the instantiation is complete and has answers, else the LLM),
    ``program`` or ``llm``. ``max_frontier``/``max_candidates``: the instantiation caps.
    ``cvt_ids``: compound nodes keep their ids in the triples the reader sees; ``intersection``:
    the reader sees the joined constraints' solutions, ``max_triples`` of each (else the union of
    each constraint's). ``table_mode``:
    ``program`` or ``retrieval`` (module docstring); ``max_rows``: the most rows retrieved.
    ``llms``: another model per module (``{"edit": llm2}``); ``generate_model``, ``edit_model``,
    ``answer_model`` name one on the same server as ``llm`` (:func:`module_llm`).

    >>> from pyql.agent.llm.clients import ScriptedLLM
    >>> from pyql.kb import OxigraphKB
    >>> kb = OxigraphKB(profile="metaqa")
    >>> kb.load_bytes(b'<http://pyql.dev/metaqa/entity/Kismet> <http://pyql.dev/metaqa/relation/directed_by> <http://pyql.dev/metaqa/entity/William_Dieterle> .', format="ntriples")
    >>> llm = ScriptedLLM(['Thought: one hop.\\nPath: { "Kismet": [ Kismet → directed_by ] }'])
    >>> result = Readi(llm, kb).run("who directed Kismet", {"Kismet": "Kismet"})
    >>> result.answers, result.usage.llm_calls, [s.kind for s in result.steps]
    (('William Dieterle',), 1, ['generate', 'instantiate', 'answer'])
    """

    name = "readi"
    #: a whole reasoning path (or a table path) with its thought
    max_reply_tokens = 512
    #: what ``--option`` may set: constructor keywords (see the class docstring)
    declared_options: ClassVar[Mapping[str, StrategyOption]] = {
        "ranker": StrategyOption(str | None, "relation ranker: bm25, openai, minilm, hybrid"),
        "top_k": StrategyOption(int, "binding candidates per NL relation", ge=1),
        "max_edits": StrategyOption(int, "edits of a stuck path", ge=0),
        "relations": StrategyOption(str, "a relation vocabulary file"),
        "profile": StrategyOption(str, "prompt profile"),
        "initial_path": StrategyOption(Literal["generate", "corrupt", "empty"],
                                       "where the first path comes from"),
        "corrupt_length": StrategyOption(int, "relations of a corrupted initial path", ge=1),
        "answer": StrategyOption(Literal["auto", "program", "llm"], "who gives the answer"),
        "max_frontier": StrategyOption(int, "most values kept per hop", ge=1),
        "max_candidates": StrategyOption(int, "most candidates per hop", ge=1),
        "exclude_topic": StrategyOption(bool, "drop the topic entity from the answers"),
        "seed": StrategyOption(int, "seed"),
        "table": StrategyOption(str, "the SQL table"),
        "cvt_ids": StrategyOption(bool, "compound nodes keep their ids in the retrieved triples"),
        "intersection": StrategyOption(bool, "the reader sees the joined constraints' instances"),
        "max_triples": StrategyOption(int, "most solutions retrieved per constraint", ge=1),
        "table_mode": StrategyOption(Literal["program", "retrieval"],
                                     "tables: pyql's program route or the paper's retrieval"),
        "max_rows": StrategyOption(int, "most table rows retrieved for the reader", ge=1),
        "generate_model": StrategyOption(str, "the path generation module's model"),
        "edit_model": StrategyOption(str, "the path editing module's model"),
        "answer_model": StrategyOption(str, "the QA reasoning module's model"),
        "choose": StrategyOption(bool, "score the KB's paths and the retrieved values instead "
                                 "of generating (choose mode)"),
        "prior_weight": StrategyOption(float, "choose mode: weight of the word-overlap prior "
                                       "(the ranker baseline's rule) added to the model's "
                                       "log-likelihood of a first path", ge=0),
    }

    def __init__(
        self,
        llm: LLM,
        backend: Backend,
        *,
        ranker: Any = "bm25",
        top_k: int = BINDING_TOP_K,
        max_edits: int = 3,
        relations: RelationVocabulary | Sequence[str] | str | None = None,
        profile: str | None = None,
        initial_path: InitialPath = "generate",
        corrupt_length: int = 2,
        answer: AnswerMode = "auto",
        max_frontier: int = 2000,
        max_candidates: int = MAX_CANDIDATES,
        exclude_topic: bool = True,
        seed: int = 0,
        table: str | None = None,
        token_counter: TokenCounter | None = None,
        price_table: PriceTable | Mapping[str, Any] | None = None,
        on_step: Callable[[Step], None] | None = None,
        constrain: Constrain | bool = "auto",
        cvt_ids: bool = False,
        intersection: bool = False,
        max_triples: int = 50,
        table_mode: TableMode = "program",
        max_rows: int = 50,
        llms: Mapping[Module, LLM] | None = None,
        generate_model: str | None = None,
        edit_model: str | None = None,
        answer_model: str | None = None,
        choose: bool = False,
        prior_weight: float = 0.0,
    ) -> None:
        if table_mode not in ("program", "retrieval"):
            raise ValueError(f"table_mode must be program or retrieval, not {table_mode!r}")
        if max_rows < 1:
            raise ValueError("max_rows must be at least 1")
        if max_edits < 0:
            raise ValueError("max_edits must be 0 or more")
        if initial_path not in ("generate", "corrupt", "empty"):
            raise ValueError(f"initial_path must be generate, corrupt or empty, not {initial_path!r}")
        if answer not in ("auto", "program", "llm"):
            raise ValueError(f"answer must be auto, program or llm, not {answer!r}")
        self.llm = llm
        #: the model of each module that does not use ``llm``
        self.llms: dict[str, LLM] = dict(llms or {})
        unknown = set(self.llms) - {"generate", "edit", "answer"}
        if unknown:
            raise ValueError(f"llms are per module: generate, edit, answer, not "
                             f"{', '.join(sorted(unknown))}")
        for module, name in (("generate", generate_model), ("edit", edit_model),
                             ("answer", answer_model)):
            if name is not None:
                self.llms[module] = module_llm(llm, name, module)
        self.table_mode: TableMode = table_mode
        self.max_rows = max_rows
        self.backend = backend
        #: paths, edits and answers are constrained to their JSON schemas (checked now);
        #: ``grounded``: a path's relations from the KB's vocabulary around its topic entity,
        #: the reader's answers from the retrieved values
        self.level = constrain_level(constrain, llm)
        self.constrained = bool(self.level)
        #: choose mode: the first path (one topic entity) and the reader's answer are scored
        #: among the KB's paths and the retrieved values (``llm.score``; checked now)
        self.choose = choose
        #: choose mode: the first paths' prior is the no-model baseline's word overlap with the
        #: question, times this weight, added to the model's log-likelihood (``combine``)
        self.prior_weight = prior_weight
        if choose:
            check_choose(llm)
        self.max_edits = max_edits
        self.initial_path: InitialPath = initial_path
        self.corrupt_length = corrupt_length
        self.answer_mode: AnswerMode = answer
        self.seed = seed
        self.table = table
        self.on_step = on_step
        self.price_table = PriceTable.of(price_table)
        #: estimates the tokens of calls whose client does not report usage
        self.token_counter = (token_counter if token_counter is not None
                              else TokenCounter.for_llm(llm))
        self.tables = not isinstance(backend, KB)
        if self.tables:
            self.profile = profile if prompts.PROFILES.get(profile or "") == "table" else "table"
            self.binder = RelationBinder((), ranker, top_k=top_k)
            self.max_candidates = max_candidates
        else:
            self.profile = profile or backend.profile.name
            if self.profile not in prompts.PROFILES:
                self.profile = "freebase"
            if isinstance(relations, str):
                vocabulary = RelationVocabulary.from_file_shared(relations)
            elif isinstance(relations, RelationVocabulary):
                vocabulary = relations
            elif relations is not None:
                vocabulary = RelationVocabulary(relations)
            else:
                vocabulary = RelationVocabulary.of_kb(backend)
            self.binder = RelationBinder.shared(vocabulary, ranker, top_k=top_k)
            self.instantiator = PathInstantiator(
                backend, self.binder, max_frontier=max_frontier, max_candidates=max_candidates,
                exclude_topic=exclude_topic, cvt_ids=cvt_ids, intersection=intersection,
                max_triples=max_triples)

    @classmethod
    def from_config(cls, llm: LLM, backend: Backend, config: StrategyConfig) -> Readi:
        """The ``readi`` strategy factory (entry point ``pyql.strategies``): ``ranker``,
        ``top_k``, ``seed``, ``table``, ``profile``, token counter and prices from ``config``;
        its ``options`` (``max_edits``, ``initial_path``, ``answer``, ``relations``, ...) as
        keyword arguments (numbers given as text are read as numbers); ``preset="paper"``
        starts from :data:`PAPER_SETTINGS`. ``generate_model``/``edit_model``/``answer_model``
        name a module's own model (:func:`module_llm`)."""
        kwargs: dict[str, Any] = {
            **(PAPER_SETTINGS if config.preset == "paper" else {}),
            "seed": config.seed, "table": config.table,
            "token_counter": config.token_counter, "price_table": config.price_table,
            "constrain": config.constrain, "choose": config.choose,
            # unset: Readi's own defaults (BM25)
            **config.given("ranker", "profile", "top_k"),
            **config.typed_options(ints=("max_edits", "corrupt_length", "max_frontier",
                                         "max_candidates", "top_k", "max_rows",
                                         "max_triples"),
                                   flags=("exclude_topic", "cvt_ids", "intersection")),
        }
        return cls(llm, backend, **kwargs)

    @classmethod
    def measures(cls, steps: Sequence[Step], item: GoldItem) -> dict[str, float]:
        """Readi's reliable answering (SRP's Figure 3 measures it for Readi too), as pooled
        ``reliable_answering:hits``/``:of`` counts: of the questions answered correctly, those
        whose correct answer the KG gave (the program's answers, or an instance the reader was
        shown: :func:`pyql.agent.strategies.srp.metrics.reliable_answer`)."""
        from pyql.agent.strategies.srp.metrics import reliable_answer

        answer = next((s for s in reversed(steps) if s.kind == "answer"), None)
        if answer is None or item.tools == "sql":
            return {}
        predicted = answer.data.get("answers", ())
        supported = (predicted if answer.data.get("source") == "program"
                     else answer.data.get("instances", ()))
        correct, grounded = reliable_answer(predicted, supported, item.answers)
        return {"reliable_answering:hits": float(correct and grounded),
                "reliable_answering:of": float(correct)}

    def __repr__(self) -> str:
        return (f"Readi(llm={self.llm!r}, profile={self.profile!r}, max_edits={self.max_edits}, "
                f"initial_path={self.initial_path!r})")

    # -- one question -------------------------------------------------------------------------------
    def run(self, question: str, entities: Mapping[str, str] | None = None, *,
            table: str | None = None, meta: Mapping[str, Any] | None = None,
            on_step: Callable[[Step], None] | None = None, **context: Any) -> Result:
        """Answer one question (Algorithm 1). ``table`` names the table (SQL databases); other
        ``context`` keys of the Strategy contract are not used."""
        entities = dict(entities or {})
        run = Recorder(self.llm, question, counter=self.token_counter,
                       price_table=self.price_table, constrain=self.level,
                       on_step=on_step if on_step is not None else self.on_step)
        kind = self._kind(run, entities, table or self.table)
        answers, program, query, finished, stop = self._loop(run, kind)
        usage = run.finish_usage()
        trajectory = Trajectory(
            question=question, entities=entities, strategy=self.name, profile=self.profile,
            mode="text", tools="sql" if self.tables else "sparql",
            model=self.llm.model, steps=tuple(run.steps), answers=answers,
            query=query, program=str(program), finished=finished, stop_reason=stop, usage=usage,
            meta=dict(meta or {}),
        )
        return Result(trajectory=trajectory, program=program)

    def _stop(self, complete: bool, edits: int) -> str:
        """Why the edit loop ends after an instantiation ("" while it goes on)."""
        if complete:
            return "instantiated"
        if edits >= self.max_edits:
            return "max_edits" if self.max_edits else "no_edit"
        return ""

    def _kind(self, run: Recorder, entities: Mapping[str, str], table: str | None
              ) -> PathKind[Any, Any]:
        """The kind of path this backend takes, for one question."""
        if not self.tables:
            return KBPaths(self, run, self.instantiator, entities, self.profile)
        inst = TableInstantiator(self._session_factory(table), self.binder,
                                 max_candidates=self.max_candidates, max_rows=self.max_rows,
                                 row_errors=self.table_mode == "program")
        return TablePaths(self, run, inst, table, self.profile, seed=self.seed,
                          retrieval=self.table_mode == "retrieval")

    # -- the loop (Algorithm 1), one for every kind of path -----------------------------------------
    def _loop(self, run: Recorder, kind: PathKind[P, I]
              ) -> tuple[tuple[Any, ...], Program, str, bool, str]:
        path = self._initial(run, kind)
        edits = 0
        while True:
            inst = self._instantiate(run, kind, path)
            stop = self._stop(inst.complete, edits)
            stuck = kind.stuck(inst)
            if stop or stuck is None:
                stop = stop or "no_edit"
                break
            messages, format = kind.edit(stuck, path)
            reply = self._ask(run, messages, format, "edit")
            edits += 1
            new_path, problem = kind.read_edit(reply.text, path)
            self._record_edit(run, reply, stuck, path, new_path, problem, edits)
            if new_path == path:
                stop = "edit_unchanged"
                if kind.insists(stuck):
                    inst = self._instantiate(run, kind, path, allow_empty=True)
                    stop = "insisted"
                break
            path = new_path
        answers = kind.answer(inst, edits)
        return answers, inst.program, inst.query, inst.complete, stop

    def _initial(self, run: Recorder, kind: PathKind[P, I]) -> P:
        """The first path: generated by the LLM, or the empty or corrupted start (Table 3)."""
        if self.initial_path != "generate":
            rng = random.Random(f"{self.seed}:{run.question}")
            path = (kind.empty() if self.initial_path == "empty"
                    else kind.corrupt(rng, self.corrupt_length))
            self._record_start(run, path, self.initial_path)
            return path
        messages, format = kind.generation()
        options = kind.choices() if self.choose and hasattr(kind, "choices") else None
        chosen: dict[str, Any] = {}
        if options:
            prior = (overlap_priors(run.question, options, kind.mentions)
                     if self.prior_weight else None)
            choice = run.choose(messages, options, prior=prior, prior_weight=self.prior_weight)
            reply, chosen = choice.call, choice.step_data()
        else:
            reply = self._ask(run, messages, format, "generate")
        problem = None
        try:
            path = kind.parse(reply.text)
        except PathFormatError as exc:
            problem = exc.reason
            log.info("the generated path does not parse (%s): starting from an empty path", exc)
            path = kind.empty()
        self._record(run, reply, "generate", thought=_thought(reply.text), action=str(path),
                     issue=problem, data={"path": path.as_dict(), "text": str(path),
                                          "format_error": problem, "source": "llm", **chosen})
        return path

    def _instantiate(self, run: Recorder, kind: PathKind[P, I], path: P, *,
                     allow_empty: bool = False) -> I:
        start = time.perf_counter()
        inst = kind.instantiate(path, allow_empty=allow_empty)
        stuck = kind.stuck(inst)
        run.add(Step(
            n=run.next_n, kind="instantiate", action=str(path),
            observation=stuck.render() if stuck is not None else "instantiated",
            status="ok" if inst.complete else "stuck", accepted=inst.complete, query=inst.query,
            env_latency=time.perf_counter() - start, kb_queries=inst.kb_queries,
            data=inst.to_dict(),
        ))
        return inst

    def _session_factory(self, table: str | None) -> Callable[[], Environment]:
        backend = self.backend
        from pyql.db.base import DB

        if isinstance(backend, DB):
            from pyql.sql.session import SqlSession

            return lambda: SqlSession(backend, table=table)
        if isinstance(backend, KB) or not callable(backend):
            raise TypeError(f"Readi runs on a pyql KB, a SqlDB or a SQL session factory, not "
                            f"{type(backend).__name__}")
        factory: SessionFactory = backend
        return lambda: factory(entities={}, guidelines=None, table=table)

    # -- answers (the kinds' answer steps) ------------------------------------------------------
    def program_answer(self, run: Recorder, answers: Sequence[Any], data: dict[str, Any]
                       ) -> tuple[Any, ...]:
        """The answer step when the instantiated program's answers are the answers."""
        run.add(Step(n=run.next_n, kind="answer", action="program",
                     observation=str(list(answers[:20])),
                     data={**data, "source": "program", "answers": [str(a) for a in answers[:50]]}))
        return tuple(answers)

    def llm_answer(self, run: Recorder, messages: list[dict[str, Any]], data: dict[str, Any],
                   values: Sequence[str] = ()) -> tuple[Any, ...]:
        """The answer step when the LLM answers from the retrieved knowledge in ``messages``;
        ``values``: what was retrieved (grounded: the only answers admitted; choose mode: the
        candidates scored)."""
        values = list(dict.fromkeys(str(v) for v in values if str(v).strip()))[:TOP_K]
        if self.choose and values:
            choice = run.choose(messages, [answer_text(v) for v in values])
            reply = choice.call
            data = {**data, **choice.step_data()}
        else:
            reply = self._ask(run, messages, answers_format(
                values if self.level.grounded else None), "answer")
        answers = prompts.parse_answers(reply.text, unique=not self.tables)
        self._record(run, reply, "answer", thought=reply.text, action="llm",
                     observation=str(list(answers)),
                     data={**data, "source": "llm", "answers": list(answers),
                           "counts": {**data["counts"], "answered_by_llm": 1.0}})
        return answers

    # -- LLM calls and records ----------------------------------------------------------------------
    def _ask(self, run: Recorder, messages: list[dict[str, Any]], format: ReplyFormat,
             module: Module) -> AccountedCall:
        return run.llm(messages, format=format, client=self.llms.get(module))

    def _record(self, run: Recorder, call: AccountedCall, kind: str, *, thought: str = "",
                action: str = "", observation: str = "", issue: str | None = None,
                data: dict[str, Any] | None = None) -> None:
        run.add(Step(
            n=run.next_n, kind=kind, thought=thought, action=action, observation=observation,
            status="ok" if issue is None else "error", accepted=issue is None,
            format_issue=issue, data=data or {}, **call.step_fields(),
        ))

    def _record_edit(self, run: Recorder, call: AccountedCall, stuck: Stuck, path: Path,
                     new_path: Path, problem: str | None, edits: int) -> None:
        """The step of one edit: the stuck error shown, the path before and the path read."""
        self._record(run, call, "edit", thought=_thought(call.text), action=str(new_path),
                     observation=stuck.render(), issue=problem,
                     data={"error": stuck.to_dict(), "path_before": path.as_dict(),
                           "path": new_path.as_dict(), "text": str(new_path),
                           "format_error": problem, "edit": edits})

    def _record_start(self, run: Recorder, path: Path, source: str) -> None:
        run.add(Step(n=run.next_n, kind="generate", action=str(path),
                     data={"path": path.as_dict(), "text": str(path), "format_error": None,
                           "source": source}))


def _thought(text: str) -> str:
    """The reasoning before the path (``Thought:``/``Goal:`` lines)."""
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip().lower().startswith(("thought", "goal"))]
    return " ".join(lines)
