"""A gold-program stand-in LLM that makes the paper's hallucinations on purpose.

:class:`NoisyGoldLLM` implements the :class:`~pyql.agent.llm.clients.LLM` protocol. It replays a
question's gold program (agent-style text, one call per line) in the agent's reply format —
``Thought n: ...`` / ``Action n: <call>``, one step per :meth:`~NoisyGoldLLM.complete` — and at
each step, with probability ``rate``, writes one of the hallucinations the paper discusses
instead of the gold call (section 3.3, Tables 11-13):

=======================  ======================================================================
``wrong_relation``       KB: another relation in ``add_fact`` — one listed by the last
                         ``get_relation`` observation, else a plausible one of the profile
                         (MetaQA's relation names; Freebase: a relation seen so far, else a
                         made-up sibling). SQL: another column of the table header in
                         ``add_condition`` / ``set_answer``.
``reversed_direction``   KB: head and tail of ``add_fact`` swapped. SQL: ``<`` / ``>`` of an
                         ``add_condition`` flipped.
``missing_get_relation`` KB only: a ``get_relation(node)`` skipped, the ``add_fact`` that follows
                         written at once with a relation guessed from the profile (the node's
                         relations were never fetched).
``invalid_action``       An unknown function (``find_relation(...)`` for ``get_relation(...)``).
``wrong_arity``          An argument dropped (or one added when the call would still be valid).
``label_instead_of_id``  KB: a value label shown in an earlier observation written where its
                         variable is expected (``set_answer(Kismet)`` for ``set_answer(?x1)``;
                         MetaQA names *are* ids, so the mistake is a label where a *variable*
                         belongs). SQL: a column header variant (``school_club_team`` for
                         ``School/Club Team``) or a condition value in the wrong case.
``cvt_answer``           Freebase only: ``set_answer(?v)`` on a variable whose shown values are
                         all unnamed compound nodes (``UnName_Entity``), where the gold program
                         goes on with ``get_relation(?v)``. Never applies on MetaQA/WikiSQL.
``premature_execute``    ``execute()`` before the last fact / before ``set_answer``.
=======================  ======================================================================

and, at the rate ``silent`` (its own draw per gold call), a mistake no guideline addresses
(:data:`SILENT_TYPES`):

=======================  ======================================================================
``silent_relation``      KB: ``add_fact`` with another relation the node's ``get_relation``
                         listed *in the same direction* — the fact still has rows, the query
                         stays valid, nothing for a guideline to see. SQL: ``set_answer`` of
                         another column of the header (when the gold one aggregates nothing).
=======================  ======================================================================

**What happens next.** The stand-in reads what became of its mistake from the step record the
agent hands it after every step (:meth:`NoisyGoldLLM.observe`, called by
:class:`~pyql.agent.strategies.queryagent.strategy.QueryAgent` for any LLM that has it): the guideline code
(``Step.hint``) and whether the step was accepted — structured fields, never the wording of a
hint.

- a hint whose code is in :data:`ADDRESSED_BY` for the injected type ("names the problem"): with
  probability ``fix_on_hint`` the stand-in writes the gold call it should have written
  (``corrected``);
- otherwise, if the step was not accepted — any other hint (ERASER rolled the step back) or an
  error (without ERASER: a parse, arity or unknown-function error leaves the query as it was) —
  with probability ``fix_on_error`` it goes on with the gold call (``retried``);
- a rejected mistake that is not fixed is written again (``repeats`` counts it; a result-based
  hint is then accepted, :class:`pyql.session.HintPolicy`, and the mistake stays), and what
  follows the repeat is decided the same way, with a fresh draw;
- otherwise the mistake was accepted unnoticed: it goes on with the gold program from where it
  was, so the wrong fact stays in the query as with a real LLM that does not notice (``kept``).
  For the insertions (``cvt_answer``, an accepted ``premature_execute``) "where it was" is the
  gold call the mistake was written before; ``missing_get_relation`` consumed two gold calls.

``fix_on_hint``, ``fix_on_error`` and ``silent`` are the stand-in's declared :data:`PARAMETERS`
(``noisy-gold:0.3`` takes their defaults; ``noisy-gold:0.3:fix_on_hint=1,fix_on_error=1,silent=0``
is the oracle of the measurements made before they existed). Equal defaults for the two fix
rates keep the ERASER on/off gap from being an input: a hint helps here only by making a
mistake visible that the Session would accept.

A run that ends right after the mistake (an accepted premature ``execute()``, the step limit)
leaves its record ``pending``; :meth:`NoisyGoldLLM.reconcile` settles it from the trajectory and
adds the code of every mistake's step (``trajectory_code``) to every record.

**Determinism.** Whether gold call *i* gets a mistake, which one, and its details are drawn from
``random.Random(f"{seed}:{i}")`` (the silent mistake from ``f"{seed}:{i}:silent"``, the fix of
its n-th rejection from ``f"{seed}:{i}:fix:{n}"``): the same seed gives the same injections,
and a run with ERASER and one without make the same mistake at the same gold call whenever both
reach it (fair ablations). Each gold call is decided once; the step that follows a rejected
mistake is the gold call or, when not fixed, the mistake again. Per-question seeds come from
:func:`pyql.agent.evaluation.records.item_seed`.

>>> llm = NoisyGoldLLM("get_relation(Kismet)\\nexecute()", rate=0.0, seed=0)
>>> print(llm.complete([{"role": "system", "content": "..."},
...                     {"role": "user", "content": "Question : q"}]).text)
Thought 1: I follow the plan with get_relation.
Action 1: get_relation(Kismet)
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from pyql.agent.evaluation.llm_spec import (
    LLMSpecError,
    StandInParameter,
    probability,
)
from pyql.agent.llm.clients import LLMReply, Message, Stop, ToolCall, Tools, apply_stop
from pyql.agent.strategies.queryagent.paper_request import paper_step_number
from pyql.errors import ParseError
from pyql.program import TOOLSETS, Call, Program
from pyql.syntax import Atom, AtomKind, lex_atom

if TYPE_CHECKING:
    from pyql.agent.trajectory import Step, Trajectory

__all__ = [
    "INJECTION_TYPES",
    "SILENT_TYPES",
    "ADDRESSED_BY",
    "PARAMETERS",
    "Injection",
    "NoisyGoldLLM",
    "UNKNOWN_CODE",
    "summarise",
]

#: the mistakes no guideline addresses (injected at the rate ``silent``)
SILENT_TYPES: tuple[str, ...] = ("silent_relation",)


def _declare() -> tuple[StandInParameter, ...]:
    calibrated = ("QueryAgent §4.4 (200 GrailQA questions, GPT-3.5): 30% of the questions that "
                  "triggered ERASER were completely corrected; 0.6 per fix is about that for "
                  "two hints a question (0.6^2 = 0.36) - an assumption calibrated on it")
    return (
        StandInParameter("fix_on_hint", 0.6,
                         "a mistake is fixed at the next step after a hint that names it",
                         calibrated),
        StandInParameter("fix_on_error", 0.6,
                         "a rejected mistake is fixed at the next step after a raw error or a "
                         "hint that does not name it", "assumption: equal to fix_on_hint, so "
                         "that the ERASER on/off gap is not an input"),
        StandInParameter("silent", 0.05,
                         "per gold add_fact (SQL: set_answer), a mistake no guideline "
                         "addresses (silent_relation)", "assumption", oracle=0.0),
    )


#: the stand-in's declared assumptions (see :mod:`pyql.agent.evaluation.llm_spec`)
PARAMETERS: tuple[StandInParameter, ...] = _declare()

#: the guideline codes whose hint names the problem of each injected mistake
ADDRESSED_BY: dict[str, frozenset[str]] = {
    # an empty fact blamed on its relation (listed or not, explored or not); a wrong column
    "wrong_relation": frozenset({"KB201", "KB202", "KB203", "PY202", "DB101", "DB102", "DB103",
                                 "DB104"}),
    # KB202 says "wrong direction" when the relation is listed the other way
    "reversed_direction": frozenset({"KB201", "KB202", "RM203", "DB102", "DB103"}),
    # "use get_relation() first"
    "missing_get_relation": frozenset({"KB203", "PY202", "RM204", "RM205"}),
    "invalid_action": frozenset({"PY102", "PY103"}),
    "wrong_arity": frozenset({"PY104"}),
    # a label where an id or a variable belongs; SQL: a name or value the table does not have
    "label_instead_of_id": frozenset({"PY201", "PY204", "PY205", "PY206", "PY207", "PY290",
                                      "RM201", "RM202", "RM206", "KB204", "DB101", "DB102"}),
    "cvt_answer": frozenset({"KB207"}),
    "premature_execute": frozenset({"PY208", "DB105", "KB207", "KB208"}),
    "silent_relation": frozenset(),
}

#: the hallucination types this stand-in makes, in the order tables list them: what
#: ``noisy-gold:RATE:TYPES`` may name for QueryAgent (its factory's ``injection_types``)
INJECTION_TYPES: tuple[str, ...] = (
    "wrong_relation",
    "reversed_direction",
    "missing_get_relation",
    "invalid_action",
    "wrong_arity",
    "label_instead_of_id",
    "cvt_answer",
    "premature_execute",
)

#: the code reported for a detected mistake whose step has no code (never from the Session)
UNKNOWN_CODE = "?"

_RELATIONS = re.compile(r"\{'forward': (\[[^\]]*\]), 'backward': (\[[^\]]*\])\}")
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_VALUES = re.compile(r"The value of variable (\?\w+) is (\[(?:" + _QUOTED + r"|[^\]'\"])*\])")
_FREEBASE_ID = re.compile(r"^[mg]\.[0-9a-z_]+$")
#: labels a KB profile shows for unnamed compound nodes
_UNNAMED = frozenset({"UnName_Entity"})
#: invented names for the invalid-action mistake (none is a DSL function)
_INVALID_NAMES = {
    "get_relation": "find_relation", "add_fact": "add_triple", "add_filter": "filter_by",
    "add_type": "set_type", "add_count": "count", "add_max": "argmax", "add_min": "argmin",
    "set_answer": "return_answer", "execute": "run_query", "add_condition": "add_where",
    "get_column": "show_column", "add_time_constrain": "add_time_filter",
}

Outcome = Literal["pending", "corrected", "retried", "kept", "ended"]


class Injection(BaseModel):
    """One injected mistake and what became of it."""

    #: one of :data:`INJECTION_TYPES`
    type: str
    #: the agent step (1-based) whose action was the mistake
    step: int
    #: the gold call (0-based index) the mistake replaced or was written before
    gold_index: int
    gold: str
    #: the action written instead
    action: str
    #: the variant (``listed``, ``profile``, ``column_variant``, ``value_case``, ...)
    detail: str = ""
    #: a hint followed the mistake (None while unseen)
    hint_fired: bool | None = None
    #: its guideline code, from the step record the stand-in observed
    hint_code: str | None = None
    #: the code in the trajectory's step (set by :meth:`NoisyGoldLLM.reconcile`)
    trajectory_code: str | None = None
    #: the hint named the problem and the stand-in wrote the gold call next
    corrected: bool = False
    #: how many times the mistake was written again because the stand-in did not fix it
    repeats: int = 0
    outcome: Outcome = "pending"
    #: the start of the observation that followed the mistake
    observation: str = ""

    @property
    def code(self) -> str | None:
        """The hint code: the trajectory's when known, else the observed one."""
        return self.trajectory_code if self.trajectory_code is not None else self.hint_code


@dataclass
class _Pending:
    injection: Injection
    #: where the gold program resumes when the mistake was accepted unnoticed
    kept_pos: int
    #: the mistaken action (written again when it is not fixed)
    action: Call | None = None


@dataclass
class _Context:
    """What the stand-in reads from the prompt."""

    step: int
    #: the record of the previous step (None before the first)
    last: Step | None
    columns: tuple[str, ...]
    relations: tuple[str, ...] | None
    values: dict[str, list[str]] = field(default_factory=dict)
    seen_relations: tuple[str, ...] = ()


def _plain(atom: Atom) -> Atom:
    """A name written bare when it reads back as itself, else quoted."""
    try:
        bare = lex_atom(atom.value)
    except ParseError:  # e.g. a control character: quoted
        bare = None
    if (bare is not None and bare.kind is AtomKind.NAME and bare.value == atom.value
            and not re.fullmatch(r"x\d+", atom.value)
            and not any(c in atom.value for c in ",()\"'#;")):
        return bare
    return Atom(AtomKind.STRING, atom.value)


def _name(text: str) -> Atom:
    return _plain(Atom(AtomKind.NAME, text))


def _arg_text(atom: Atom) -> str:
    """An argument as the agent writes it (quoted when needed)."""
    return str(Call(name="f", args=(atom,)))[2:-1]


class NoisyGoldLLM:
    """Replays a gold program and injects hallucinations (see the module docstring).

    ``program_text``: the gold program, one call per line; ``rate``: the probability that a gold
    call gets a mistake; ``seed``: the injections' seed; ``tools``: ``"sparql"`` or ``"sql"``;
    ``types``: the injection types allowed (default all of :data:`INJECTION_TYPES`; those that
    do not apply to a call or a toolset are skipped). The records are in :attr:`injections`.
    """

    #: the agent need not fingerprint its prompts (see ``QueryAgent.run``)
    prompts_matter = False

    def __init__(self, program_text: str, *, rate: float, seed: int, tools: str = "sparql",
                 types: Sequence[str] | None = None, fix_on_hint: float = 1.0,
                 fix_on_error: float = 1.0, silent: float = 0.0) -> None:
        for name, value in (("rate", rate), ("fix_on_hint", fix_on_hint),
                            ("fix_on_error", fix_on_error), ("silent", silent)):
            probability(name, value)
        if tools not in TOOLSETS:
            raise ValueError(f"tools must be one of {', '.join(TOOLSETS)}, not {tools!r}")
        chosen = tuple(types) if types is not None else INJECTION_TYPES
        unknown = [t for t in chosen if t not in INJECTION_TYPES]
        if unknown:
            raise LLMSpecError(f"unknown injection type(s) {', '.join(unknown)}; known: "
                               f"{', '.join(INJECTION_TYPES)}", parameter="types",
                               value=",".join(unknown))
        self.model = "noisy-gold"
        self.program = Program.parse(program_text, tools)
        self.calls: tuple[Call, ...] = tuple(self.program.calls)
        self.rate = rate
        self.seed = seed
        self.tools = tools
        self.types = chosen
        self.fix_on_hint = fix_on_hint
        self.fix_on_error = fix_on_error
        self.silent = silent
        #: every injected mistake, in order
        self.injections: list[Injection] = []
        self._pos = 0
        self._decided: set[int] = set()
        self._pending: _Pending | None = None
        #: the gold call written last (index), and the one already insisted on after a hint
        self._last_gold: int | None = None
        self._insisted: int | None = None
        self._vocabulary = self._profile_vocabulary()
        #: what the observed steps showed: the last step, relations listed, values per variable
        self._last_step: Step | None = None
        self._relations: tuple[str, ...] | None = None
        #: the last listing's relations by direction (forward: the node is the head)
        self._directed: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._seen: dict[str, None] = {}
        self._values: dict[str, list[str]] = {}

    def __repr__(self) -> str:
        return (f"NoisyGoldLLM(rate={self.rate}, seed={self.seed}, tools={self.tools!r}, "
                f"calls={len(self.calls)}, injections={len(self.injections)})")

    # -- the LLM protocol -----------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None
                 ) -> LLMReply:
        ctx = self._context(messages)
        call, thought = self._next_action(ctx)
        n = ctx.step
        # no usage, as every stand-in: the recorder estimates it when the run asks for it
        if tools:
            return LLMReply(text=f"Thought {n}: {thought}", tool_calls=(self._tool_call(call, n),),
                            model=self.model, finish_reason="tool_calls", cost=0.0)
        text = f"Thought {n}: {thought}\nAction {n}: {call}"
        if not tools and paper_step_number(messages) is not None:  # continues "Thought n:"
            text = f" {thought}\nAction {n}: {call}"
        return LLMReply(text=apply_stop(text, stop), model=self.model, finish_reason="stop",
                        cost=0.0)

    def observe(self, step: Step) -> None:
        """Read the record of the step just taken (its hint code, whether it was accepted, and
        from an accepted observation the relations listed and the values shown)."""
        self._last_step = step
        if step.hint is not None or not step.accepted:
            return
        for fwd, bwd in _RELATIONS.findall(step.observation):
            listed = (*_literal_list(fwd), *_literal_list(bwd))
            self._relations = listed
            self._directed = (tuple(_literal_list(fwd)), tuple(_literal_list(bwd)))
            self._seen.update(dict.fromkeys(listed))
        for var, shown in _VALUES.findall(step.observation):
            self._values[var] = _literal_list(shown)

    # -- records --------------------------------------------------------------------------------
    def reconcile(self, trajectory: Trajectory) -> list[Injection]:
        """Settle the records with the trajectory: the code each step really got
        (``trajectory_code``) and, for a mistake the run ended on, whether a hint fired
        (outcome ``ended``).

        ``corrected`` is decided again from the trajectory's code (a run that did not hand the
        stand-in its steps is settled here). What the stand-in wrote does not change: after any
        hint it wrote the gold call.
        """
        steps = {s.n: s for s in trajectory.steps}
        for inj in self.injections:
            step = steps.get(inj.step)
            if step is None:
                continue
            inj.trajectory_code = step.hint
            if inj.outcome == "pending":
                inj.hint_fired = step.hint is not None
                inj.observation = step.observation[:200]
                inj.outcome = "ended"
            elif (inj.outcome in ("corrected", "retried") and step.hint is not None
                  and not inj.repeats):
                inj.corrected = step.hint in ADDRESSED_BY[inj.type]
                inj.outcome = "corrected" if inj.corrected else "retried"
        return self.injections

    # -- reading the prompt ---------------------------------------------------------------------
    def _context(self, messages: Sequence[Message]) -> _Context:
        step = paper_step_number(messages) or 1 + sum(
            1 for m in messages if m.get("role") == "assistant")
        columns: tuple[str, ...] = ()
        if len(messages) > 1 and self.tools == "sql":
            columns = _columns(str(messages[1].get("content") or ""))
        last = self._last_step if step > 1 else None
        return _Context(step=step, last=last, columns=columns, relations=self._relations,
                        values=self._values, seen_relations=tuple(self._seen))

    # -- choosing the next action ---------------------------------------------------------------
    def _next_action(self, ctx: _Context) -> tuple[Call, str]:
        pending, self._pending = self._pending, None
        last_gold, self._last_gold = self._last_gold, None
        last = ctx.last
        if (pending is None and last_gold is not None and last_gold != self._insisted
                and last is not None and last.hint is not None):
            # a correct step got a hint: insist once, as a model sure of its step would (a
            # result-based hint is accepted when the action is repeated: HintPolicy)
            self._insisted = last_gold
            self._last_gold = last_gold
            return self.calls[last_gold], "I checked that step; the question needs it as it is."
        if pending is not None:
            inj = pending.injection
            fired = last is not None and last.hint is not None
            if not inj.repeats:  # what followed the mistake the first time
                inj.hint_fired = fired
                inj.hint_code = last.hint if last is not None else None
                inj.observation = last.observation[:200] if last is not None else ""
            rejected = fired or (last is not None and not last.accepted)
            addressed = fired and last is not None and last.hint in ADDRESSED_BY[inj.type]
            if rejected and not self._fixes(inj, addressed):
                # not fixed: the model writes its mistake again
                inj.repeats += 1
                self._pending = pending
                assert pending.action is not None
                return pending.action, "I checked that step; I keep it."
            if addressed:
                inj.corrected = True
                inj.outcome = "corrected"
            elif rejected:
                inj.outcome = "retried"
            else:
                inj.outcome = "kept"
                self._pos = pending.kept_pos
            if inj.outcome != "kept":
                i = inj.gold_index
                self._pos = i + 1
                thought = ("The observation names my mistake; I write the step correctly."
                           if inj.corrected else "That step failed; I try the step again.")
                self._last_gold = i
                return self.calls[i], thought
        i = self._pos
        if i >= len(self.calls):
            return Call(name="execute"), "The plan is complete; I execute the query."
        gold = self.calls[i]
        if i not in self._decided:
            self._decided.add(i)
            made = self._inject(i, ctx)
            if made is not None:
                kind, action, detail, kept_pos = made
                inj = Injection(type=kind, step=ctx.step, gold_index=i, gold=str(gold),
                                action=str(action), detail=detail)
                self.injections.append(inj)
                self._pending = _Pending(inj, kept_pos, action)
                return action, f"I follow the plan with {action.name}."
        self._pos = i + 1
        self._last_gold = i
        return gold, f"I follow the plan with {gold.name}."

    def _fixes(self, inj: Injection, addressed: bool) -> bool:
        """Whether the stand-in fixes a rejected mistake at this attempt (a fresh draw each)."""
        p = self.fix_on_hint if addressed else self.fix_on_error
        if p >= 1.0:
            return True
        draw = random.Random(f"{self.seed}:{inj.gold_index}:fix:{inj.repeats}").random()
        return draw < p

    def _inject(self, i: int, ctx: _Context) -> tuple[str, Call, str, int] | None:
        made = self._inject_typed(i, ctx)
        if made is None and self.silent > 0.0:
            rng = random.Random(f"{self.seed}:{i}:silent")
            if rng.random() < self.silent:
                silent = self._make_silent_relation(i, ctx, rng)
                if silent is not None:
                    return ("silent_relation", *silent)
        return made

    def _inject_typed(self, i: int, ctx: _Context) -> tuple[str, Call, str, int] | None:
        rng = random.Random(f"{self.seed}:{i}")
        if self.rate <= 0.0 or rng.random() >= self.rate:
            return None
        builders = {t: getattr(self, f"_make_{t}") for t in self.types}
        options = [(t, made) for t, build in builders.items()
                   if (made := build(i, ctx, random.Random(f"{self.seed}:{i}:{t}"))) is not None]
        if not options:
            return None
        kind, (action, detail, kept_pos) = rng.choice(options)
        return kind, action, detail, kept_pos

    # -- the mistakes: each returns (action, detail, where to resume if kept) or None -----------
    def _make_wrong_relation(self, i: int, ctx: _Context, rng: random.Random
                             ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        if self.tools == "sql":
            if gold.name not in ("add_condition", "set_answer") or not gold.args:
                return None
            current = gold.args[0].value
            others = [c for c in ctx.columns if c.casefold() != current.casefold()]
            if not others:
                return None
            column = _name(rng.choice(others))
            return _replace(gold, 0, column), "column", i + 1
        if gold.name != "add_fact" or len(gold.args) != 3:
            return None
        relation = gold.args[1].value
        listed = [r for r in (ctx.relations or ()) if r != relation]
        if listed:
            return _replace(gold, 1, _name(rng.choice(listed))), "listed", i + 1
        wrong = self._guess_relation(relation, ctx, rng)
        return _replace(gold, 1, _name(wrong)), "profile", i + 1

    def _make_silent_relation(self, i: int, ctx: _Context, rng: random.Random
                              ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        if self.tools == "sql":
            plain = len(gold.args) == 1 or (len(gold.args) == 2
                                            and gold.args[1].value.casefold() == "none")
            if gold.name != "set_answer" or not plain:
                return None
            current = gold.args[0].value.casefold()
            others = [c for c in ctx.columns if c.casefold() != current]
            if not others:
                return None
            return _replace(gold, 0, _name(rng.choice(others))), "answer_column", i + 1
        if gold.name != "add_fact" or len(gold.args) != 3 or i == 0:
            return None
        listing = self.calls[i - 1]
        if listing.name != "get_relation" or not listing.args:
            return None
        node = listing.args[0]
        forward, backward = self._directed
        if gold.args[0] == node:
            pool = forward
        elif gold.args[2] == node:
            pool = backward
        else:
            return None
        relation = gold.args[1].value
        others = sorted(r for r in set(pool) if r != relation)
        if not others:
            return None
        return _replace(gold, 1, _name(rng.choice(others))), "listed_same_direction", i + 1

    def _make_reversed_direction(self, i: int, ctx: _Context, rng: random.Random
                                 ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        if self.tools == "sql":
            if gold.name != "add_condition" or len(gold.args) != 3:
                return None
            flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(gold.args[1].value.strip())
            if flipped is None:
                return None
            return _replace(gold, 1, Atom(AtomKind.NAME, flipped)), "operator", i + 1
        if gold.name != "add_fact" or len(gold.args) != 3 or gold.args[0] == gold.args[2]:
            return None
        head, relation, tail = gold.args
        return Call(name="add_fact", args=(tail, relation, head)), "swapped", i + 1

    def _make_missing_get_relation(self, i: int, ctx: _Context, rng: random.Random
                                   ) -> tuple[Call, str, int] | None:
        if self.tools != "sparql" or i + 1 >= len(self.calls):
            return None
        gold, fact = self.calls[i], self.calls[i + 1]
        if gold.name != "get_relation" or fact.name != "add_fact" or len(fact.args) != 3:
            return None
        if not gold.args or gold.args[0] not in (fact.args[0], fact.args[2]):
            return None
        wrong = self._guess_relation(fact.args[1].value, ctx, rng, listed=False)
        return _replace(fact, 1, _name(wrong)), "guessed", i + 2

    def _make_invalid_action(self, i: int, ctx: _Context, rng: random.Random
                             ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        name = _INVALID_NAMES.get(gold.name, f"do_{gold.name}")
        if name in TOOLSETS[self.tools]:
            return None
        return Call(name=name, args=gold.args), name, i

    def _make_wrong_arity(self, i: int, ctx: _Context, rng: random.Random
                          ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        sig = TOOLSETS[self.tools].get(gold.name)
        if sig is None:
            return None
        lo, hi = sig.arity
        if gold.args and len(gold.args) - 1 < lo:
            return Call(name=gold.name, args=gold.args[:-1]), "missing", i
        extra = gold.args[-1] if gold.args else self._some_argument()
        if len(gold.args) + 1 > hi:
            return Call(name=gold.name, args=(*gold.args, extra)), "extra", i
        return None

    def _make_label_instead_of_id(self, i: int, ctx: _Context, rng: random.Random
                                  ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        if self.tools == "sql":
            return self._sql_label(i, ctx, rng)
        sites = [k for k, a in enumerate(gold.args)
                 if a.kind is AtomKind.VAR and [v for v in ctx.values.get(str(a), ())
                                                if v not in _UNNAMED]]
        if not sites:
            return None
        k = rng.choice(sites)
        labels = [v for v in ctx.values[str(gold.args[k])] if v not in _UNNAMED]
        return _replace(gold, k, _name(labels[0])), f"label_for_{gold.args[k]}", i + 1

    def _sql_label(self, i: int, ctx: _Context, rng: random.Random
                   ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        options: list[tuple[Call, str]] = []
        if gold.name in ("add_condition", "set_answer") and gold.args:
            column = gold.args[0].value
            variant = _header_variant(column)
            if variant.casefold() not in {c.casefold() for c in (*ctx.columns, column)}:
                options.append((_replace(gold, 0, _name(variant)), "column_variant"))
        if gold.name == "add_condition" and len(gold.args) == 3:
            value = gold.args[2]
            if value.kind in (AtomKind.STRING, AtomKind.NAME) and value.value.strip():
                text = value.value
                wrong = text.lower() if text != text.lower() else text.upper()
                if wrong != text:
                    options.append((_replace(gold, 2, Atom(AtomKind.STRING, wrong)), "value_case"))
        if not options:
            return None
        action, detail = rng.choice(options)
        return action, detail, i + 1

    def _make_cvt_answer(self, i: int, ctx: _Context, rng: random.Random
                         ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        if self.tools != "sparql" or gold.name != "get_relation" or not gold.args:
            return None
        node = gold.args[0]
        shown = ctx.values.get(str(node), [])
        if node.kind is not AtomKind.VAR or not shown or not all(v in _UNNAMED for v in shown):
            return None
        return Call(name="set_answer", args=(node,)), "cvt", i

    def _make_premature_execute(self, i: int, ctx: _Context, rng: random.Random
                                ) -> tuple[Call, str, int] | None:
        gold = self.calls[i]
        if gold.name in ("execute", "get_column"):
            return None
        answered = any(c.name == "set_answer" for c in self.calls[:i])
        if answered:
            return None
        if self.tools == "sparql" and not any(c.name == "add_fact" for c in self.calls[:i]):
            return None  # nothing built yet: not "premature", just empty
        return Call(name="execute"), "before_" + gold.name, i

    # -- helpers --------------------------------------------------------------------------------
    def _profile_vocabulary(self) -> tuple[str, ...]:
        """The relation names of the profile the program is written for (MetaQA's), if known."""
        from pyql.datasets.metaqa import RELATIONS

        metaqa = tuple(dict.fromkeys(RELATIONS.values()))
        facts = [c for c in self.calls if c.name == "add_fact" and len(c.args) == 3]
        if self.tools == "sparql" and facts and all(c.args[1].value in metaqa for c in facts):
            return metaqa
        return ()

    def _guess_relation(self, relation: str, ctx: _Context, rng: random.Random, *,
                        listed: bool = True) -> str:
        """A plausible wrong relation: the profile's, else one seen so far, else a sibling."""
        pool = [r for r in self._vocabulary if r != relation]
        if not pool and listed:
            pool = [r for r in ctx.seen_relations if r != relation]
        if not pool:
            program = [c.args[1].value for c in self.calls
                       if c.name == "add_fact" and len(c.args) == 3]
            pool = [r for r in dict.fromkeys(program) if r != relation]
        if pool:
            return rng.choice(pool)
        head, _, last = relation.rpartition(".")
        return f"{head}.{last}_of" if head else f"{relation}_of"

    def _some_argument(self) -> Atom:
        for call in self.calls:
            for atom in call.args:
                if atom.kind is AtomKind.VAR:
                    return atom
        return Atom(AtomKind.NAME, "answer")

    def _tool_call(self, call: Call, n: int) -> ToolCall:
        import json

        sig = TOOLSETS[self.tools].get(call.name)
        names = [p.name for p in sig.params] if sig is not None else []
        arguments: dict[str, str] = {}
        for k, atom in enumerate(call.args):
            key = names[k] if k < len(names) else f"arg{k + 1}"
            arguments[key] = _arg_text(atom)
        return ToolCall(id=f"call_{n}", name=call.name,
                        arguments=json.dumps(arguments, ensure_ascii=False))


def _replace(call: Call, index: int, atom: Atom) -> Call:
    args = list(call.args)
    args[index] = atom
    return Call(name=call.name, args=tuple(args))


def _literal_list(text: str) -> list[str]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    if not isinstance(value, (list, tuple)):
        return []
    return [v for v in value if isinstance(v, str)]


def _columns(question_message: str) -> tuple[str, ...]:
    """The table header of a SQL question message (``Table Header : ['a', 'b']``)."""
    for line in question_message.splitlines()[1:]:
        _, sep, rest = line.partition(":")
        if sep and rest.strip().startswith("["):
            return tuple(_literal_list(rest.strip()))
    return ()


def _header_variant(column: str) -> str:
    """A header as a model might misremember it: snake_case without punctuation, or the
    singular/plural of a plain word (``School/Club Team`` -> ``school_club_team``)."""
    snake = "_".join(w for w in re.split(r"[^0-9A-Za-z]+", column) if w).lower()
    if snake and snake.casefold() != column.casefold():
        return snake
    word = column.strip()
    return word[:-1] if word.endswith("s") and len(word) > 1 else word + "s"


def summarise(injections: Iterable[Injection]) -> dict[str, dict[str, Any]]:
    """Per injection type: ``n``, ``detected`` (a hint fired), ``corrected``, ``kept``,
    ``retried``, ``ended``, ``repeats`` (mistakes written again, not fixed) and the hint codes
    seen (``codes``)."""
    out: dict[str, dict[str, Any]] = {}
    for inj in injections:
        row = out.setdefault(inj.type, {"n": 0, "detected": 0, "corrected": 0, "kept": 0,
                                        "retried": 0, "ended": 0, "repeats": 0, "codes": {}})
        row["n"] += 1
        row["repeats"] += inj.repeats
        if inj.hint_fired:
            row["detected"] += 1
            code = inj.code or UNKNOWN_CODE
            row["codes"][code] = row["codes"].get(code, 0) + 1
        if inj.corrected:
            row["corrected"] += 1
        if inj.outcome in ("kept", "retried", "ended"):
            row[inj.outcome] += 1
    return out
