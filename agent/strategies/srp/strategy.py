"""SRP as a strategy (registered as ``srp`` in ``pyql.strategies``).

One question, the paper's four modules (Figure 2)::

    references   <- top-k of the reference base                    (no LLM call)
    for each topic entity:
        R0       <- LLM rates its one-hop relations                 relation check, 1 call each
    path         <- LLM plans, each constraint starting from R0     path planning, 1 call
    repeat (at most max_rounds edits):
        S        <- instantiate the path on the KB                  Readi's PathInstantiator
        verdict, S' <- LLM judges S                                 sequence judge, 1 call
        if HAVE_ANSWER: stop
        path     <- LLM edits with the judge message, the stuck     path edit, 1 call
                    points and the candidates at the tail of S'
    answers      <- LLM answers by chain of thought over S'         answering, 1 call
                    (+ the program's answers when the path is complete and judged to answer)

The path type, relation binding and instantiation are Readi's (:mod:`pyql.agent.grounding.paths`); SRP
adds the references, the relation check, the judge and its pruned triples, and the edit
candidates at the pruned sequence's tail (section 4.5: "the 1-hop relations linked to the tail
entity of the pruned sequence").

**The plan starts from a checked relation.** A constraint whose first relation is not one the
relation check kept is mended before instantiation: the checked relation its first relation
binds to, else the best-rated checked relation; the step record says which (``enforced``).

**Step records** (``Step.kind`` and ``Step.data``). LLM calls: ``relation_check`` (entity, rated
and checked relations), ``plan`` (the path, what was enforced), ``judge`` (round, verdict,
sequences, retained triples), ``edit`` (round, path before and after), ``answer`` (the
chain-of-thought answers, the program's answers). Environment work, recorded before the call
that is shown it: ``references`` (ids, questions, paths, scores), ``candidates`` (for the
relation check: the entity and its ranked one-hop relations; for an edit: the error messages,
the instantiated chains and, per constraint, the position and relations offered), ``retrieve``
(the instantiation: constraints, hops, stuck points, program, answers, retrieved instances, the
triplet sequences), ``knowledge`` (the triples the answer is given). A stand-in LLM with an
``observe(step)`` hook is handed every record as it is made, so it reads data, never prompts.
The evaluation runner reads ``data["counts"]`` (``judge.have_answer``, ``judge.no_answer``,
``plans_mended``) and the retrieved ``instances`` (answer coverage) into its per-strategy
metrics (``pyql.agent.evaluation.metrics.step_usage``). Malformed replies are recorded (``parse_error``) and handled:
a relation check falls back to the ranker's order, a plan to the best checked relation per
topic, a judge to the instantiation's own state, an edit ends the reflection.

``reflection=False`` is the paper's "w/o self-reflection": no judge, no edit;
``relation_check=False`` its "w/o relation check" (no rating call: the plan is shown the topic's
one-hop relations as ranked, ``check_count`` of them, and no first relation is mended);
``reference_mode="random"`` its "w/ random reference" (``top_k_references`` drawn from the
base, seeded by the question, instead of the nearest).

``preset="paper"`` starts from :data:`PAPER_SETTINGS` (Table 6-10's plan keeps every path the
model writes for a topic, the first relation is not forced, compound nodes keep their ids as
the paper's triplet sequences show them); ``--temperature`` comes from the preset (0.3).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pyql.agent.grounding.candidates import PathOptions, check_choose, kb_path_options
from pyql.agent.grounding.paths import (
    BINDING_TOP_K,
    MAX_CANDIDATES,
    Constraint,
    ConstraintInstance,
    Instantiation,
    PathFormatError,
    PathInstantiator,
    ReasoningPath,
    RelationBinder,
    RelationVocabulary,
    parse_chain,
    split_inverse,
)
from pyql.agent.grounding.paths.instantiate import COMPOUND_NODE
from pyql.agent.grounding.paths.instantiate import checked as checked_observation
from pyql.agent.grounding.ranking import TOP_K, RelationRanker
from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.clients import LLM
from pyql.agent.llm.structured import (
    Constrain,
    ReplyFormat,
    answer_text,
    answers_format,
    constrain_level,
    edit_chains_format,
    judge_format,
    plan_format,
    relation_check_format,
)
from pyql.agent.recorder import Recorder

# the path core's vocabulary of a KB, asked once per KB (shared with Readi)
from pyql.agent.strategies.srp import prompts as P
from pyql.agent.strategies.srp.prompts import Judgement, SRPParseError, Triple
from pyql.agent.strategies.srp.pruning import follow
from pyql.agent.strategies.srp.references import DEFAULT_K, ReferenceBase, Retrieved
from pyql.agent.strategy import GoldItem, Result, StrategyConfig, StrategyOption

# the path core's vocabulary of a KB, asked once per KB (shared with Readi)
from pyql.agent.trajectory import Step, Trajectory
from pyql.kb.base import KB
from pyql.program import Call, Program
from pyql.syntax import Atom, AtomKind

__all__ = ["CVT_TAG", "PAPER_SETTINGS", "SRP", "DEFAULT_MAX_ROUNDS", "DEFAULT_CHECK_COUNT",
           "open_references"]

log = logging.getLogger(__name__)

#: edits after the first retrieval (the paper does not say; Readi's default edit budget)
DEFAULT_MAX_ROUNDS = 3
#: relations the relation check keeps per topic entity (the paper's prompt: 3)
DEFAULT_CHECK_COUNT = 3
#: one-hop relations shown to the relation check (ranked against the question, capped)
DEFAULT_CHECK_CANDIDATES = MAX_CANDIDATES
#: triples shown to the answering prompt when the judge kept none
MAX_ANSWER_TRIPLES = 100
_INT_OPTIONS = ("top_k_references", "max_rounds", "check_count", "check_candidates",
                "binding_top_k", "max_frontier", "max_triples", "plan_paths")
#: how the edit prompt names a compound node: its instruction's and demonstration's tag (the
#: path core writes ``<compound node>``)
CVT_TAG = "<cvt></cvt>"
#: SRP's options under ``preset="paper"``: every path the plan writes per topic (the plan demo
#: writes two for "princess leia"), no first relation forced from the relation check (section
#: 4.3: the checked relations are "candidates for the first relation"), CVT ids in the triplet
#: sequences (section 4.4's ``m.0cg8r04``)
PAPER_SETTINGS: Mapping[str, Any] = {"plan_paths": 0, "enforce_checked": False, "cvt_ids": True}


@lru_cache(maxsize=16)
def _open_cached(path: str, stamp: float) -> ReferenceBase:
    return ReferenceBase.open(path)


def open_references(spec: ReferenceBase | str | Path | None) -> ReferenceBase | None:
    """A reference base from an instance or a directory (opened once per directory and
    manifest version: strategies built per question share it)."""
    if spec is None or isinstance(spec, ReferenceBase):
        return spec
    path = Path(spec).expanduser().resolve()
    manifest = path / "manifest.json"
    stamp = manifest.stat().st_mtime if manifest.is_file() else 0.0
    return _open_cached(str(path), stamp)


def _rating(fmt: ReplyFormat, relation: str, n: int = 1) -> str:
    """The check's line rating ``relation`` (``n. ("relation", 1)``), as its parser reads it."""
    text = fmt.read_text(json.dumps({"relations": [{"relation": relation, "score": 1}]}))
    assert text is not None
    return f"{n}." + text.split(".", 1)[1] if n != 1 else text


def _mention(written: str, entities: Mapping[str, str]) -> str | None:
    if written in entities:
        return written
    folded = written.casefold()
    return next((m for m, i in entities.items() if m.casefold() == folded or i == written), None)


def _chain(inst: ConstraintInstance, hops: int | None = None) -> str:
    """``Kismet → directed_by → William Dieterle``: what a constraint reached, hop by hop."""
    parts = [inst.constraint.entity]
    for hop in inst.hops[:hops]:
        parts += [hop.bound, hop.end()]
    return " → ".join(parts)


def _cvt(text: str) -> str:
    """``text`` with the path core's compound-node marker written as the edit prompt's tag."""
    return text.replace(COMPOUND_NODE, CVT_TAG)


def _merged(insts: Sequence[Instantiation]) -> Instantiation:
    """Several alternative paths' instantiations as one: every distinct constraint (the judge
    sees each one's sequence), the program and answers of the first complete one (else of the
    one instantiated furthest; the plan's order is the model's preference). The others reach
    the answer only through the triples the judge keeps."""
    if len(insts) == 1:
        return insts[0]
    best = next((i for i in insts if i.complete),
                max(insts, key=lambda i: i.instantiated_length))
    seen: dict[tuple[str, tuple[str, ...]], ConstraintInstance] = {}
    for inst in insts:
        for c in inst.constraints:
            seen.setdefault((c.constraint.entity, c.constraint.relations), c)
    return Instantiation(
        path=best.path, constraints=tuple(seen.values()), program=best.program,
        query=best.query, answers=best.answers,
        kb_queries=sum(i.kb_queries for i in insts), complete=any(i.complete for i in insts),
        triples=tuple(dict.fromkeys(t for i in insts for t in i.triples)))


class SRP:
    """Self-Reflective Planning over a KB (see the module docstring).

    ``references``: a :class:`~pyql.agent.strategies.srp.references.ReferenceBase` or its directory (None:
    no references, the paper's "w/o reference"); ``top_k_references``: how many are retrieved
    (4); ``max_rounds``: edits at most (3); ``check_count``: relations the relation check keeps
    per topic (3); ``check_candidates``: one-hop relations it is shown (35, ranked);
    ``reflection``: judge and edit (False: the paper's "w/o self-reflection"); ``ranker`` and
    ``binding_top_k``: relation binding (Readi's); ``vocabulary``: the relations paths bind to (a
    :class:`~pyql.agent.grounding.paths.RelationVocabulary`, a file with one per line, or None: every
    relation of the KB); ``profile``: the prompts' demonstrations (``freebase`` or ``metaqa``,
    default from the KB). ``on_step`` is called with each step as soon as it is recorded.

    >>> from pyql.agent.llm.clients import ScriptedLLM
    >>> from pyql.kb import OxigraphKB
    >>> kb = OxigraphKB(profile="metaqa")
    >>> kb.load_bytes(b'<http://pyql.dev/metaqa/entity/Kismet> <http://pyql.dev/metaqa/relation/directed_by> <http://pyql.dev/metaqa/entity/William_Dieterle> .', format="ntriples")
    >>> llm = ScriptedLLM([
    ...     "1. ('directed_by', 1.0): the director.",
    ...     'Thought: one hop.\\nPath: {"Kismet": ["Kismet -> directed_by"]}',
    ...     'Thinking Process: the director is there. <HAVE_ANSWER>\\nRetained sequences:\\n'
    ...     '1. [("Kismet", "directed_by", "William Dieterle")]',
    ...     "So, the answer is {William Dieterle}."])
    >>> result = SRP(llm, kb).run("who directed [Kismet]", {"Kismet": "Kismet"})
    >>> result.answers, result.usage.llm_calls
    (('William Dieterle',), 4)
    >>> [s.kind for s in result.steps]
    ['candidates', 'relation_check', 'plan', 'retrieve', 'judge', 'knowledge', 'answer']
    """

    name = "srp"
    #: a plan of several paths, or a judge's verdict with the triples it keeps
    max_reply_tokens = 512
    #: what ``--option`` may set: constructor keywords (see the class docstring)
    declared_options: ClassVar[Mapping[str, StrategyOption]] = {
        "references": StrategyOption(str, "a reference base directory"),
        "top_k_references": StrategyOption(int, "references per question", ge=0),
        "max_rounds": StrategyOption(int, "judge/edit rounds", ge=0),
        "check_count": StrategyOption(int, "relation checks", ge=1),
        "check_candidates": StrategyOption(int, "candidates per relation check", ge=1),
        "reflection": StrategyOption(bool, "the judge and edit stages on or off"),
        "ranker": StrategyOption(str | None, "relation ranker: bm25, openai, minilm, hybrid"),
        "binding_top_k": StrategyOption(int, "binding candidates per NL relation", ge=1),
        "vocabulary": StrategyOption(str, "a relation vocabulary file"),
        "profile": StrategyOption(str, "prompt profile"),
        "max_frontier": StrategyOption(int, "most values kept per hop", ge=1),
        "max_triples": StrategyOption(int, "most triples shown to the judge", ge=1),
        "plan_paths": StrategyOption(int, "paths kept per topic from the plan (0: all)", ge=0),
        "enforce_checked": StrategyOption(bool, "mend a plan's first relation to a checked one"),
        "relation_check": StrategyOption(bool, "the relation check on or off (ablation)"),
        "reference_mode": StrategyOption(Literal["nearest", "random"],
                                         "nearest references, or random ones (ablation)"),
        "cvt_ids": StrategyOption(bool, "compound nodes keep their ids in the triples"),
        "choose": StrategyOption(bool, "score the relation check, the plan and the answer "
                                 "among their candidates (choose mode)"),
    }

    def __init__(
        self,
        llm: LLM,
        kb: KB,
        *,
        references: ReferenceBase | str | Path | None = None,
        top_k_references: int = DEFAULT_K,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        check_count: int = DEFAULT_CHECK_COUNT,
        check_candidates: int = DEFAULT_CHECK_CANDIDATES,
        reflection: bool = True,
        ranker: RelationRanker | str | None = "bm25",
        binding_top_k: int = BINDING_TOP_K,
        vocabulary: RelationVocabulary | str | Path | None = None,
        profile: str | None = None,
        max_frontier: int = 2000,
        max_triples: int = 50,
        price_table: PriceTable | Mapping[str, Any] | None = None,
        token_counter: TokenCounter | None = None,
        on_step: Callable[[Step], None] | None = None,
        constrain: Constrain | bool = "auto",
        plan_paths: int = 1,
        enforce_checked: bool = True,
        relation_check: bool = True,
        reference_mode: Literal["nearest", "random"] = "nearest",
        cvt_ids: bool = False,
        choose: bool = False,
    ) -> None:
        if plan_paths < 0:
            raise ValueError("plan_paths must be 0 (all) or more")
        if reference_mode not in ("nearest", "random"):
            raise ValueError(f"reference_mode must be nearest or random, not {reference_mode!r}")
        if not isinstance(kb, KB):
            raise TypeError(f"SRP runs on a pyql KB, not {type(kb).__name__}")
        if max_rounds < 0 or top_k_references < 0 or check_count < 1 or check_candidates < 1:
            raise ValueError("max_rounds and top_k_references must be >= 0, check_count and "
                             "check_candidates >= 1")
        self.llm = llm
        self.kb = kb
        #: checks, plans, verdicts, edits and answers follow their JSON schemas (checked now);
        #: ``grounded``: a plan's relations from the checked ones and the KB's vocabulary around
        #: the topic, the reader's answers from the retrieved values
        self.level = constrain_level(constrain, llm)
        self.constrained = bool(self.level)
        #: choose mode: the relation check, the plan (one topic entity) and the answer are
        #: scored among their candidates (``llm.score``; checked now)
        self.choose = choose
        if choose:
            check_choose(llm)
        self.references = open_references(references)
        self.top_k_references = top_k_references
        self.max_rounds = max_rounds
        self.check_count = check_count
        self.check_candidates = check_candidates
        self.reflection = reflection
        self.plan_paths = plan_paths
        self.enforce_checked = enforce_checked and relation_check
        self.relation_check = relation_check
        self.reference_mode = reference_mode
        if vocabulary is None:
            vocab = RelationVocabulary.of_kb(kb)
        elif isinstance(vocabulary, RelationVocabulary):
            vocab = vocabulary
        else:
            vocab = RelationVocabulary.from_file_shared(vocabulary)
        # shared across questions, as Readi's: the bindings' cache outlives one question
        self.binder = RelationBinder.shared(vocab, ranker, top_k=binding_top_k)
        self.instantiator = PathInstantiator(kb, self.binder, max_frontier=max_frontier,
                                             max_triples=max_triples, cvt_ids=cvt_ids)
        name = profile or kb.profile.name
        self.profile = name if name in P.PROFILES else "freebase"
        self.price_table = PriceTable.of(price_table)
        #: estimates the tokens of calls whose client does not report usage
        self.token_counter = (token_counter if token_counter is not None
                              else TokenCounter.for_llm(llm))
        self.on_step = on_step

    @classmethod
    def measures(cls, steps: Sequence[Step], item: GoldItem) -> dict[str, float]:
        """SRP's per-question measures for an evaluation (metrics.json's ``strategy``
        section): judge accuracy and reference hit rate as pooled ``NAME:hits``/``NAME:of``
        counts, edits, reflection rounds, mended plans and complete instantiations
        (:func:`pyql.agent.strategies.srp.metrics.srp_measures`)."""
        from pyql.agent.strategies.srp.metrics import srp_measures

        m = srp_measures(steps, item)
        known = m["reference_hit"] is not None
        return {"judge_accuracy:hits": m["judge_correct"], "judge_accuracy:of": m["judged"],
                "reliable_answering:hits": float(m["reliable"]),
                "reliable_answering:of": float(m["correct"]),
                "reference_hit_rate:hits": float(bool(m["reference_hit"])),
                "reference_hit_rate:of": float(known), "edits": m["edits"],
                "rounds": m["rounds"], "complete": float(m["complete"])}

    @classmethod
    def held_out(cls, options: Mapping[str, Any]) -> frozenset[str]:
        """The questions an evaluation must leave out: those the reference base (the
        ``references`` option) was built from (the runner skips them before --limit/--sample)."""
        base = open_references(options.get("references"))
        return base.source_ids if base is not None else frozenset()

    @classmethod
    def from_config(cls, llm: LLM, backend: KB, config: StrategyConfig) -> SRP:
        """The ``srp`` strategy factory: ``config.ranker`` binds relations, ``config.top_k``
        caps the relation-check candidates, ``config.profile`` picks the demonstrations; the
        options are constructor keywords (``references``, ``top_k_references``, ``max_rounds``,
        ``reflection``, ``check_count``, ``vocabulary``, ...)."""
        kwargs: dict[str, Any] = {**(PAPER_SETTINGS if config.preset == "paper" else {}),
                                  "token_counter": config.token_counter,
                                  "price_table": config.price_table,
                                  "constrain": config.constrain, "choose": config.choose,
                                  **config.given("ranker")}  # unset: SRP's own default
        if config.profile in P.PROFILES:
            kwargs["profile"] = config.profile
        if config.top_k is not None:
            kwargs["check_candidates"] = config.top_k
        kwargs.update(config.typed_options(ints=_INT_OPTIONS, flags=(
            "reflection", "enforce_checked", "relation_check", "cvt_ids")))
        return cls(llm, backend, **kwargs)

    def __repr__(self) -> str:
        return (f"SRP(llm={self.llm!r}, profile={self.profile!r}, references="
                f"{len(self.references) if self.references is not None else 'none'}, "
                f"max_rounds={self.max_rounds}, reflection={self.reflection})")

    # -- one question -------------------------------------------------------------------------
    def run(self, question: str, entities: Mapping[str, str] | None = None, *,
            meta: Mapping[str, Any] | None = None, on_step: Callable[[Step], None] | None = None,
            **context: Any) -> Result:
        """Answer one question (see the module docstring). ``meta["id"]`` is checked against the
        reference base's source questions (:class:`~pyql.agent.strategies.srp.references.ReferenceLeakError`).
        Other ``context`` keys of the Strategy contract are not used."""
        return _Run(self, question, dict(entities or {}), dict(meta or {}),
                    on_step if on_step is not None else self.on_step).run()


class _Run:
    """The state of one question."""

    def __init__(self, srp: SRP, question: str, entities: dict[str, str], meta: dict[str, Any],
                 notify: Callable[[Step], None] | None) -> None:
        self.srp = srp
        self.question = question
        self.entities = entities
        self.meta = meta
        self.rec = Recorder(srp.llm, question, counter=srp.token_counter,
                            price_table=srp.price_table, constrain=srp.level,
                            on_step=notify)
        self.hits: list[Retrieved] = []
        self._options: dict[str, PathOptions] | None = None
        #: KB queries of the relations looked up around pruned sequences, for the step that
        #: shows them
        self._around_queries = 0

    # -- records --------------------------------------------------------------------------------
    def _ask(self, kind: str, messages: list[dict[str, Any]], data: dict[str, Any],
             format: ReplyFormat, options: Sequence[str] | None = None) -> tuple[str, Step]:
        """One LLM call (constrained to ``format`` when constraints are on), accounted; the
        step of ``kind`` is recorded by the caller through :meth:`_record`. In choose mode with
        ``options`` (reply texts the parser reads), the best scored option instead."""
        if self.srp.choose and options:
            choice = self.rec.choose(messages, list(options))
            call = choice.call
            data = {**data, **choice.step_data()}
        else:
            call = self.rec.llm(messages, format=format)
        step = Step(n=self.rec.next_n, kind=kind, action=kind, data=data, **call.step_fields())
        return call.text, step

    def _path_options(self) -> dict[str, PathOptions]:
        """Per topic entity the KB's paths around it (fetched once per question, counted)."""
        if self._options is None:
            srp = self.srp

            def work() -> dict[str, PathOptions]:
                return {m: kb_path_options(srp.instantiator.session(self.entities), m,
                                           self.question, ranker=srp.binder.ranker)
                        for m in self.entities}

            self._options, _, queries = self._kb_work(work)
            self.rec.add_queries(queries)
        return self._options

    def _record(self, step: Step, **update: Any) -> Step:
        step = step.model_copy(update=update)
        problem = step.data.get("parse_error")
        if problem and step.reply_text + step.raw_reply:  # a reply SRP could not read
            step = step.model_copy(update={"format_issue": str(problem)})
        return self.rec.add(step)

    def _env_step(self, kind: str, action: str, observation: str, data: dict[str, Any], *,
                  seconds: float = 0.0, kb_queries: int = 0, status: str = "ok") -> Step:
        return self._record(Step(n=self.rec.next_n, kind=kind, action=action,
                                 observation=observation, env_latency=seconds,
                                 kb_queries=kb_queries, status=status, data=data))

    def _kb_work(self, fn: Callable[[], Any]) -> tuple[Any, float, int]:
        """``fn()`` timed, with its KB queries (counted once the step that reports them is
        recorded)."""
        return self.rec.env(fn, backend=self.srp.kb)

    # -- the modules ----------------------------------------------------------------------------
    def run(self) -> Result:
        srp = self.srp
        references = self.hits = self._references()
        checked = self._relation_check(references)
        alternatives = self._plan(checked, references)
        path = alternatives[0] if alternatives else None
        stop = "no_plan"
        inst: Instantiation | None = None
        judgement: Judgement | None = None
        rounds = 0
        while path is not None and path.constraints:
            inst = self._retrieve(alternatives, rounds)
            if not srp.reflection:
                stop = "no_reflection"
                break
            judgement = self._judge(inst, rounds)
            if judgement.have_answer:
                stop = "have_answer"
                break
            if rounds >= srp.max_rounds:
                stop = "max_rounds"
                break
            edited = self._edit(path, inst, judgement, checked, references, rounds)
            rounds += 1
            if edited is None:
                stop = "edit_failed"
                break
            if edited == path:
                stop = "unchanged_edit"
                break
            path = edited
            alternatives = [edited]
        answers = self._answer(inst, judgement)
        program = inst.program if inst is not None else Program(tools="sparql")
        usage = self.rec.finish_usage()
        trajectory = Trajectory(
            question=self.question, entities=self.entities, strategy=srp.name,
            profile=srp.profile, mode="text", tools="sparql",
            model=srp.llm.model, steps=tuple(self.rec.steps), answers=answers,
            query=inst.query if inst is not None else "", program=str(program),
            finished=stop in ("have_answer", "no_reflection"), stop_reason=stop,
            usage=usage, meta=self.meta)
        return Result(trajectory=trajectory, program=program)

    def _references(self) -> list[Retrieved]:
        base = self.srp.references
        if base is None:
            return []
        if "id" in self.meta:
            base.check_disjoint([str(self.meta["id"])])
        start = time.perf_counter()
        if self.srp.reference_mode == "random":  # the paper's "w/ random reference" ablation
            rng = random.Random(f"references:{self.question}")
            drawn = rng.sample(list(base.references),
                               min(self.srp.top_k_references, len(base.references)))
            hits = [Retrieved(r, 0.0) for r in drawn]
        else:
            hits = base.retrieve(self.question, self.srp.top_k_references,
                                 mentions=self.entities)
        shown = "\n".join(f"{h.score:.3f} {h.reference.question} | "
                          f"{P.render_reference_path(h.reference)}" for h in hits)
        self._env_step("references", f"retrieve {self.srp.top_k_references} references", shown, {
            "references": [{"id": h.reference.id, "question": h.reference.question,
                            "path": list(h.reference.path),
                            "score": h.score, "cluster": h.reference.cluster} for h in hits],
            "base": base.manifest.source, "model": base.manifest.model,
        }, seconds=time.perf_counter() - start)
        return hits

    def _relation_check(self, references: list[Retrieved]) -> dict[str, tuple[str, ...]]:
        srp = self.srp
        refs = [h.reference for h in references]
        checked: dict[str, tuple[str, ...]] = {}
        for mention in self.entities:
            def around(mention: str = mention) -> tuple[str, ...]:
                session = srp.instantiator.session(self.entities)
                topic = Atom(AtomKind.STRING, mention)
                obs = checked_observation(session.run(Call.of("get_relation", topic)))
                return obs.relations.all if obs.relations else ()

            relations, seconds, queries = self._kb_work(around)
            candidates = srp.binder.rank(self.question, list(relations),
                                         limit=srp.check_candidates)
            self._env_step("candidates", f"get_relation({mention})",
                           "; ".join(candidates) or "no relation around the entity",
                           {"for": "relation_check", "entity": mention,
                            "candidates": candidates, "relations_around": len(relations)},
                           seconds=seconds, kb_queries=queries,
                           status="ok" if candidates else "empty")
            if not candidates:
                checked[mention] = ()
                continue
            if not srp.relation_check:  # the ablation: the ranked relations, unrated
                checked[mention] = tuple(candidates[:srp.check_count])
                continue
            data: dict[str, Any] = {"entity": mention}
            check_format = relation_check_format(candidates, srp.check_count)
            # choose mode scores each candidate as a check rating it alone, and keeps the best
            rated = {_rating(check_format, c): c for c in candidates}
            text, step = self._ask("relation_check", P.relation_check_messages(
                self.question, mention, candidates, refs, count=srp.check_count,
                profile=srp.profile), data, check_format, list(rated))
            if "choose" in step.data:
                best = [rated[row[0]] for row in step.data["choose"]["best"]]
                text = "\n".join(_rating(check_format, r, i)
                                 for i, r in enumerate(best[:srp.check_count], 1))
            try:
                check = P.parse_relation_check(text, candidates, count=srp.check_count)
                kept = check.names
                data.update(rated=[[r.relation, r.score] for r in check.relations],
                            unknown=list(check.unknown))
                status = "ok"
            except SRPParseError as exc:
                kept = tuple(candidates[:srp.check_count])
                data.update(parse_error=exc.reason, fallback="ranker")
                status = "error"
            data["checked"] = list(kept)
            checked[mention] = kept
            self._record(step, observation=f"{mention}: {', '.join(kept)}", status=status,
                         accepted=status == "ok", data=data)
        return checked

    def _constraint(self, text: str) -> Constraint | None:
        try:
            return parse_chain(f"Final Path: {text}", list(self.entities))
        except PathFormatError:
            return None

    def _enforce(self, constraint: Constraint, checked: Mapping[str, tuple[str, ...]]
                 ) -> tuple[Constraint, dict[str, Any] | None]:
        """The constraint with a checked first relation (module docstring)."""
        mention = _mention(constraint.entity, self.entities)
        kept = checked.get(mention or "", ())
        if not kept:
            return constraint, None
        first = constraint.relations[0] if constraint.relations else None
        name = split_inverse(first)[0] if first else None
        if name in kept:
            return constraint, None
        bound = [r for r in (self.srp.binder.bind(name) if name else ()) if r in kept]
        chosen = bound[0] if bound else kept[0]
        rest = constraint.relations[1:] if first else ()
        how = "bound" if bound else "replaced"
        return constraint.with_relations((chosen, *rest)), {
            "entity": constraint.entity, "from": first, "to": chosen, "how": how}

    def _plan(self, checked: Mapping[str, tuple[str, ...]], references: list[Retrieved]
              ) -> list[ReasoningPath]:
        """The planned path, or several when the plan writes several paths for a topic and
        ``plan_paths`` keeps them: the k-th alternative takes each topic's k-th path (its last
        when it has fewer)."""
        srp = self.srp
        relations = {m: list(r) for m, r in checked.items() if r}
        if not relations:
            return []
        grounded = self._plan_relations(relations) if srp.level.grounded else None
        fmt = plan_format(list(relations), grounded)
        text, step = self._ask("plan", P.plan_messages(
            self.question, relations, [h.reference for h in references], profile=srp.profile),
            {"checked": relations}, fmt, self._plan_options(relations, fmt))
        data = dict(step.data)
        constraints: dict[str, Constraint] = {}
        more: dict[str, list[Constraint]] = {}
        keep = srp.plan_paths or None
        try:
            reply = P.parse_plan(text)
            for _topic, chain in reply.paths:
                constraint = self._constraint(chain)
                if constraint is None:
                    continue
                if constraint.entity not in constraints:
                    constraints[constraint.entity] = constraint
                    more[constraint.entity] = [constraint]
                elif (keep is None or len(more[constraint.entity]) < keep) \
                        and constraint not in more[constraint.entity]:
                    more[constraint.entity].append(constraint)
            thought = reply.thought
            if not constraints:
                data["parse_error"] = "no_topic_path"
        except SRPParseError as exc:
            thought = ""
            data["parse_error"] = exc.reason
        if not constraints:  # the best checked relation of each topic
            constraints = {m: Constraint(m, (r[0],)) for m, r in relations.items()}
            data["fallback"] = "checked_relation"
        enforced = []
        options: dict[str, list[Constraint]] = {}
        for entity in constraints:
            options[entity] = []
            for constraint in more.get(entity, [constraints[entity]]):
                if srp.enforce_checked:
                    constraint, note = self._enforce(constraint, checked)
                    if note is not None:
                        enforced.append(note)
                if constraint not in options[entity]:
                    options[entity].append(constraint)
        width = max(len(v) for v in options.values())
        alternatives = [ReasoningPath(tuple(v[min(k, len(v) - 1)] for v in options.values()))
                        for k in range(width)]
        path = alternatives[0]
        data.update(path=str(path), constraints=path.as_dict(), enforced=enforced,
                    counts={"plans_mended": float(bool(enforced))})
        if len(alternatives) > 1:
            data["alternatives"] = [str(p) for p in alternatives]
        self._record(step, thought=thought,
                     observation="\n".join(str(p) for p in alternatives), data=data,
                     status="error" if "parse_error" in data else "ok",
                     accepted="parse_error" not in data)
        return alternatives

    def _plan_relations(self, checked: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
        """Per topic, the relations a grounded plan may use: the checked ones, then the KB's
        vocabulary around the topic."""
        options = self._path_options() if self.srp.choose or self.srp.level.grounded else {}
        return {m: list(dict.fromkeys([*rels, *(options[m].vocabulary.items
                                                 if m in options else ())]))
                for m, rels in checked.items()}

    def _plan_options(self, checked: Mapping[str, Sequence[str]], fmt: ReplyFormat
                      ) -> list[str] | None:
        """Choose mode's plans (one topic entity): the KB's 1- and 2-hop paths that start with a
        checked relation, as the plan text the parser reads."""
        if not self.srp.choose or len(checked) != 1:
            return None
        (topic, kept), = checked.items()
        paths = [p for p in self._path_options()[topic].paths() if p[0] in kept]
        paths += [(r,) for r in kept if (r,) not in paths]
        return [t for t in (fmt.read_text(json.dumps({"thought": "", "paths": {topic: [list(p)]}}))
                            for p in paths) if t] or None

    def _retrieve(self, paths: Sequence[ReasoningPath], round_: int) -> Instantiation:
        def work() -> Instantiation:
            return _merged([self.srp.instantiator.instantiate(p, self.entities, self.question)
                            for p in paths])

        inst, seconds, queries = self._kb_work(work)
        sequences = [list(c.triples) for c in inst.constraints]
        data = {**inst.to_dict(), "round": round_, "sequences": sequences}
        shown = "; ".join(_chain(c) for c in inst.constraints)
        self._env_step("retrieve", "\n".join(map(str, paths)), shown, data, seconds=seconds,
                       kb_queries=queries, status="ok" if inst.complete else "stuck")
        return inst

    def _sequences(self, inst: Instantiation) -> list[tuple[int, tuple[Triple, ...]]]:
        """(constraint index, triples) of the constraints that retrieved something."""
        return [(i, c.triples) for i, c in enumerate(inst.constraints) if c.triples]

    def _judge(self, inst: Instantiation, round_: int) -> Judgement:
        srp = self.srp
        sequences = self._sequences(inst)
        shown = [list(t) for _, t in sequences]
        if not sequences:  # nothing retrieved: nothing to judge
            judgement = Judgement("NO_ANSWER", "No triple was retrieved.", (), auto=True)
            self._env_step("judge", "judge", "NO_ANSWER (nothing retrieved)",
                           {"round": round_, "verdict": judgement.verdict, "auto": True,
                            "sequences": []})
            return judgement
        refs = [h.reference for h in self.hits]
        text, step = self._ask("judge", P.judge_messages(self.question, shown, refs,
                                                         profile=srp.profile),
                               {"round": round_, "sequences": shown}, judge_format(len(shown)))
        data = dict(step.data)
        try:
            judgement = P.parse_judge(text, shown)
        except SRPParseError as exc:
            # unreadable: the instantiation's own state decides, and every triple is kept
            verdict = "HAVE_ANSWER" if inst.complete else "NO_ANSWER"
            judgement = Judgement(verdict, "", tuple(tuple(t) for t in shown), auto=True)
            data.update(parse_error=exc.reason, fallback="instantiation")
        data.update(verdict=judgement.verdict, retained=[list(s) for s in judgement.retained],
                    unknown=list(judgement.unknown),
                    counts={"judge.have_answer": float(judgement.have_answer),
                            "judge.no_answer": float(not judgement.have_answer)})
        self._record(step, thought=judgement.thinking, observation=judgement.verdict, data=data,
                     status="error" if "parse_error" in data else "ok",
                     accepted="parse_error" not in data)
        return judgement

    def _pruned_hops(self, inst: ConstraintInstance, retained: Sequence[Triple]) -> int:
        """How many leading hops of ``inst`` the judge's retained triples cover (the tail of the
        pruned sequence, :func:`~pyql.agent.strategies.srp.pruning.follow`)."""
        mention = _mention(inst.constraint.entity, self.entities) or inst.constraint.entity
        return len(follow(retained, mention, [(h.bound, h.forward) for h in inst.hops]))

    def _around(self, inst: ConstraintInstance, hops: int) -> list[str]:
        """The relations around the node ``hops`` hops along ``inst``, ranked, capped."""
        srp = self.srp
        mention = _mention(inst.constraint.entity, self.entities) or inst.constraint.entity
        topic = Atom(AtomKind.STRING, mention)
        names = [h.var.lstrip("?") for h in inst.hops]

        def work() -> tuple[str, ...]:
            session = srp.instantiator.session(self.entities)
            for call in inst.calls(topic, names)[:hops]:
                checked_observation(session.run(call))
            node = Atom(AtomKind.VAR, names[hops - 1]) if hops else topic
            obs = checked_observation(session.run(Call.of("get_relation", node)))
            return obs.relations.all if obs.relations else ()

        around, _, queries = self._kb_work(work)
        self._around_queries += queries
        return srp.binder.rank(self.question, list(around), limit=srp.instantiator.max_candidates)

    def _edit(self, path: ReasoningPath, inst: Instantiation, judgement: Judgement,
              checked: Mapping[str, tuple[str, ...]], references: list[Retrieved], round_: int
              ) -> ReasoningPath | None:
        srp = self.srp
        errors: list[str] = []
        instantiated: list[str] = []
        at: list[dict[str, Any]] = []
        retained = dict(zip([i for i, _ in self._sequences(inst)], judgement.retained,
                            strict=False))
        judged = bool(self._sequences(inst)) and not judgement.auto
        start, self._around_queries = time.perf_counter(), 0
        for i, c in enumerate(inst.constraints):
            if c.stuck is not None:
                errors += [f"{c.constraint.entity}: {m}" for m in c.stuck.messages()]
            # the tail of the pruned sequence: where the judge stopped keeping triples (the stuck
            # point when it kept everything instantiated)
            keep = self._pruned_hops(c, retained.get(i, ())) if judged else len(c.hops)
            if c.stuck is not None and keep >= len(c.hops):
                instantiated.append(c.stuck.instantiated_chain())
                at.append({"entity": c.constraint.entity, "position": c.stuck.position,
                           "chain": c.stuck.instantiated_chain(),
                           "relations": list(c.stuck.candidates)})
            else:
                instantiated.append(_chain(c))
                at.append({"entity": c.constraint.entity, "position": keep,
                           "chain": _chain(c, keep), "relations": self._around(c, keep)})
        if judgement.thinking or any(judgement.retained):
            errors.append(judgement.message())
        elif not errors:
            errors.append("Current Information is not enough.")
        candidates = {a["chain"]: a["relations"] for a in at}
        self._env_step("candidates", "get_relation at the tail of the pruned sequence",
                       "; ".join(f"{k}: {', '.join(v)}" for k, v in candidates.items()),
                       {"for": "edit", "round": round_, "errors": errors,
                        "instantiated": instantiated, "at": at},
                       seconds=time.perf_counter() - start,
                       kb_queries=self._around_queries)
        before = [c.chain() for c in path.constraints]
        text, step = self._ask("edit", P.edit_messages(
            self.question, before, [_cvt(e) for e in errors], [_cvt(i) for i in instantiated],
            {_cvt(k): v for k, v in candidates.items()},
            [h.reference for h in references], profile=srp.profile),
            {"round": round_, "before": str(path)}, edit_chains_format(list(self.entities)))
        data = dict(step.data)
        edited: ReasoningPath | None = path
        try:
            reply = P.parse_edit(text)
            found = [c for c in (self._constraint(t) for t in reply.paths) if c is not None]
            if not found:
                raise SRPParseError("edit", "no_topic_path", text)
            for constraint in found:
                mention = _mention(constraint.entity, self.entities)
                current = next((c for c in path.constraints
                                if _mention(c.entity, self.entities) == mention), None)
                if current is not None:
                    constraint = Constraint(current.entity, constraint.relations)
                edited = edited.replace(constraint) if edited is not None else None
            thought = reply.thought
        except SRPParseError as exc:
            edited, thought = None, ""
            data["parse_error"] = exc.reason
        data["after"] = str(edited) if edited is not None else None
        self._record(step, thought=thought, observation=data["after"] or "no path",
                     data=data, status="error" if edited is None else "ok",
                     accepted=edited is not None)
        return edited

    def _answer(self, inst: Instantiation | None, judgement: Judgement | None
                ) -> tuple[Any, ...]:
        srp = self.srp
        if inst is None:
            return ()
        kept: tuple[Triple, ...] = judgement.kept if judgement is not None else ()
        source = "judge"
        if not kept:
            kept = tuple(dict.fromkeys(t for _, seq in self._sequences(inst) for t in seq))
            kept = kept[:MAX_ANSWER_TRIPLES]
            source = "retrieved"
        program_counts = inst.complete and (judgement is None or judgement.have_answer)
        program_answers = tuple(inst.answers) if program_counts else ()
        self._env_step("knowledge", f"keep the triples of the {source}",
                       f"{len(kept)} triples", {"kept": [list(t) for t in kept],
                                                "kept_from": source})
        topics = set(self.entities) | set(self.entities.values())
        values = [v for v in dict.fromkeys(str(x) for t in kept for x in (t[2], t[0]))
                  if v not in topics and v.strip()][:TOP_K]
        text, step = self._ask("answer", P.answer_messages(self.question, kept,
                                                           profile=srp.profile), {},
                               answers_format(values if srp.level.grounded else None),
                               [answer_text(v) for v in values])
        data = dict(step.data)
        try:
            cot = P.parse_answer(text)
        except SRPParseError as exc:
            cot = ()
            data["parse_error"] = exc.reason
        answers = tuple(dict.fromkeys((*cot, *program_answers)))
        data.update(cot=list(cot), program_answers=[str(a) for a in program_answers[:50]],
                    program_answer_count=len(program_answers))
        self._record(step, thought=text, observation=", ".join(map(str, answers[:20])),
                     data=data, status="error" if "parse_error" in data else "ok",
                     accepted="parse_error" not in data)
        return answers
