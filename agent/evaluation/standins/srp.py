"""SRP's stand-ins: ``--llm gold`` and ``--llm noisy-gold:RATE``.

:class:`SRPStandIn` plays each SRP stage from the question's gold path and gold answers. What a
stage is shown it reads from the step records SRP hands to :meth:`SRPStandIn.observe` (the
``candidates``, ``retrieve`` and ``knowledge`` steps' data), never from the prompt's wording,
and it answers in the paper's output formats. The gold path, its corruption and the edit's
repair rule are Readi's stand-in's (:mod:`pyql.agent.evaluation.standins.readi`), so that SRP
and Readi meet the same noise:

- **relation check**: rates the gold path's first relation highest when it is among the
  candidates shown, with probability ``check_accuracy`` (else it leaves it out: three other
  candidates are rated, so the plan's first relation is mended to a wrong checked one); then two
  more candidates, lower;
- **plan**: the gold path; with ``noisy-gold:RATE`` corrupted by
  :func:`~pyql.agent.evaluation.standins.readi.corrupt_path` (each relation, with probability
  ``RATE``, replaced by another relation of the vocabulary or dropped);
- **judge**: the right verdict (``<HAVE_ANSWER>`` when a gold answer is among the triples shown,
  else ``<NO_ANSWER>``) with probability ``judge_accuracy``, else the other one; it retains the
  triples that follow the gold path from the gold topic (:func:`~pyql.agent.strategies.srp.pruning.follow`);
- **edit**: repairs only from the candidates shown: if the gold relation at the position of the
  candidates (the tail of the pruned sequence, or the stuck point) is among them, the edit picks
  it with probability ``edit_success`` (else another candidate), and the path becomes the prefix
  up to there, the picked relation, then the rest of the gold path corrupted at the same rate
  (Readi's rule: the model re-plans as noisily as it planned); otherwise the path is written
  back unchanged (SRP then stops editing);
- **answer**: Readi's reader over the kept triples: the gold answers that occur in them with
  probability ``reader_accuracy``, else a distractor among their entities (none: ``{}``).

The probabilities are the declared :data:`PARAMETERS` (Readi's ``edit_success`` and
``reader_accuracy``, plus ``judge_accuracy`` and ``check_accuracy``): ``noisy-gold`` takes their
defaults, ``gold`` names the oracle (all 1.0); ``noisy-gold:0.3:judge_accuracy=1.0`` is the
oracle judge of the measurements before these parameters existed.

Replies carry no token usage (the strategy's recorder estimates it under ``pyql eval
--token-estimates``) and cost 0.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.evaluation.llm_spec import StandInParameter, StandInSpec, probability
from pyql.agent.evaluation.standins import StandInFactory
from pyql.agent.evaluation.standins.readi import PARAMETERS as READI_PARAMETERS
from pyql.agent.evaluation.standins.readi import ReadiStandIn, corrupt_path, readi_stand_in
from pyql.agent.grounding.paths import ReasoningPath, split_inverse
from pyql.agent.llm.clients import LLMReply, Message
from pyql.agent.strategies.srp.prompts import stage_of
from pyql.agent.strategies.srp.pruning import follow

if TYPE_CHECKING:
    from pyql.agent.evaluation.records import EvalItem

__all__ = ["PARAMETERS", "SRPStandIn", "SRPStandIns"]

#: the stand-in's declared assumptions (see :mod:`pyql.agent.evaluation.llm_spec`)
PARAMETERS: tuple[StandInParameter, ...] = (
    *READI_PARAMETERS,
    StandInParameter(
        "judge_accuracy", 0.85,
        "the sequence judge's verdict is right (HAVE_ANSWER exactly when a gold answer is "
        "among the triples shown)",
        "assumption (the SRP paper reports no judge accuracy)"),
    StandInParameter(
        "check_accuracy", 0.85,
        "the relation check keeps the gold first relation (rated highest) when it is shown",
        "assumption (the SRP paper reports the check's ablation, not its accuracy)"),
)


class SRPStandIn:
    """Plays SRP's stages for one question (module docstring) over Readi's stand-in ``readi``,
    which holds the gold path, the corruption rate and its seeded RNG, and the gold answers.

    What a stage is shown comes from the step records SRP hands to :meth:`observe` (the
    candidates, the triplet sequences, the kept triples), never from the prompt's wording; the
    prompt only says which stage is asked (:func:`~pyql.agent.strategies.srp.prompts.stage_of`)."""

    def __init__(self, readi: ReadiStandIn, *, judge_accuracy: float = 1.0,
                 check_accuracy: float = 1.0) -> None:
        probability("judge_accuracy", judge_accuracy)
        probability("check_accuracy", check_accuracy)
        self.readi = readi
        self.judge_accuracy = judge_accuracy
        self.check_accuracy = check_accuracy
        gold = readi.gold if isinstance(readi.gold, ReasoningPath) else None
        first = next((c for c in gold.constraints if c.relations), None) if gold else None
        self.topic = first.entity if first is not None else None
        self.relations: tuple[str, ...] = first.relations if first is not None else ()
        self.answers = readi.answers
        self.model = readi.model
        self._lock = threading.Lock()
        #: the last record of each step kind SRP took
        self._last: dict[str, dict[str, Any]] = {}
        #: the relations the plan was given (after corruption), for reports
        self.planned: tuple[str, ...] | None = None

    def __repr__(self) -> str:
        return f"SRPStandIn({self.model!r}, topic={self.topic!r}, relations={self.relations})"

    def observe(self, step: Any) -> None:
        """Read the record of the step SRP just took."""
        with self._lock:
            self._last[step.kind] = dict(step.data)

    def complete(self, messages: Sequence[Message], *, stop: Sequence[str] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
        stage = stage_of(messages)
        if self.topic is None or stage is None:
            what = self.readi.reason or "there is no gold relation path"
            raise LLMScriptExhaustedError(
                f"{what}" if stage is not None else "not an SRP prompt", model=self.model)
        with self._lock:
            reply = getattr(self, f"_{stage}")()
        return LLMReply(text=reply, model=self.model, finish_reason="stop", cost=0.0)

    def _is_topic(self, name: str) -> bool:
        return self.topic is not None and name.strip().casefold() == self.topic.casefold()

    def _seen(self, kind: str) -> dict[str, Any]:
        return self._last.get(kind, {})

    # -- stages -----------------------------------------------------------------------------------
    def _relation_check(self) -> str:
        shown = self._seen("candidates")
        candidates = [str(c) for c in shown.get("candidates", ())]
        first = (split_inverse(self.relations[0])[0]
                 if self.relations and self._is_topic(str(shown.get("entity", ""))) else None)
        rated = ([first] if first in candidates else [])
        if rated and not self.readi.succeeds(self.check_accuracy):
            others = [c for c in candidates if c != first]
            if others:  # the gold relation left out of the rated ones
                rated = [self.readi.noise.choice(others)]
                candidates = others
        rated += [c for c in candidates if c not in rated][:3 - len(rated)]
        scores = [0.6, 0.3, 0.1] if first in candidates else [0.4, 0.3, 0.3]
        return "\n".join(f"{i}. ('{r}', {s}): {'on the path' if r == first else 'related'}."
                         for i, (r, s) in enumerate(zip(rated, scores, strict=False), 1))

    def _plan(self) -> str:
        readi = self.readi
        assert isinstance(readi.gold, ReasoningPath) and self.topic is not None
        path, readi.corrupted = corrupt_path(readi.gold, readi.rate, readi.vocabulary, readi.rng)
        planned = path.constraint(self.topic).relations
        self.planned = planned
        chain = " -> ".join((self.topic, *planned))
        return (f"Thought: the gold relation path ({readi.corrupted} corrupted).\nPath: "
                + json.dumps({self.topic: [chain]}, ensure_ascii=False))

    def _judge(self) -> str:
        # the judge is shown the sequences of the constraints that retrieved something
        sequences = [[tuple(t) for t in seq]
                     for seq in self._seen("retrieve").get("sequences", ()) if seq]
        found = self._found(t for seq in sequences for t in seq)
        have = bool(found) == self.readi.succeeds(self.judge_accuracy)
        verdict = "<HAVE_ANSWER>" if have else "<NO_ANSWER>"
        assert self.topic is not None
        steps = [(name, False if inverse else None)
                 for name, inverse in map(split_inverse, self.relations)]
        kept = [{t for hop in follow(seq, self.topic, steps) for t in hop} for seq in sequences]
        retained = "\n".join(
            f"{i}. [{', '.join(_triple(t) for t in seq if t in keep)}]"
            for i, (seq, keep) in enumerate(zip(sequences, kept, strict=True), 1))
        why = (f"The triplets contain {found[0]}." if found and have
               else "The triplets answer the question." if have
               else "No triplet contains the answer.")
        return f"Thinking Process: {why} {verdict}\nRetained sequences:\n{retained}"

    def _found(self, triples: Any) -> list[str]:
        names = {str(x).casefold() for t in triples for x in (t[0], t[2])}
        return [a for a in self.answers if a.casefold() in names]

    def _edit(self) -> str:
        assert self.topic is not None
        constraints = self._seen("retrieve").get("constraints", ())
        current = next((list(c.get("relations", ())) for c in constraints
                        if self._is_topic(str(c.get("entity", "")))), list(self.relations))
        fixed = list(current)
        for at in self._seen("candidates").get("at", ()):
            if not self._is_topic(str(at.get("entity", ""))):
                continue
            position = int(at.get("position", 0))
            wanted = self.relations
            offered = [str(r) for r in at["relations"]]
            if position < len(wanted) and split_inverse(wanted[position])[0] in offered:
                # Readi's rule: the rest re-planned as noisily as the plan was
                readi = self.readi
                picked = readi.pick(wanted[position], offered)
                rest, _ = corrupt_path(ReasoningPath.of({self.topic: wanted[position + 1:]}),
                                       readi.rate, readi.vocabulary, readi.rng)
                fixed = [*current[:position], picked, *rest.constraints[0].relations]
                break
        return ("Goal: the path should reach the answer of the question.\n"
                "Thought: I correct the relation the candidates show.\n"
                f"Final Path: {' -> '.join((self.topic, *fixed))}")

    def _answer(self) -> str:
        kept = self._seen("knowledge").get("kept", ())
        found = self.readi.read({str(x) for t in kept for x in (t[0], t[2])}, fold=True)
        if not found:
            return "No triplet gives the answer. So, the answer is {}."
        return "Based on the triplets, the answer is " + ", ".join(f"{{{a}}}" for a in found) + "."


def _triple(t: tuple[str, str, str]) -> str:
    return "(" + ", ".join(json.dumps(x, ensure_ascii=False) for x in t) + ")"


class SRPStandIns(StandInFactory):
    """``gold`` and ``noisy-gold`` for SRP: :class:`SRPStandIn` over Readi's stand-in for the
    same item and seed (the same gold path and the same corruption); the same under any
    preset."""

    parameters = PARAMETERS

    def build(self, spec: StandInSpec, item: EvalItem, *, seed: int = 0,
              preset: str | None = None) -> SRPStandIn:
        values = spec.values(PARAMETERS)
        return SRPStandIn(readi_stand_in(spec, item, seed=seed, parameters=PARAMETERS),
                          judge_accuracy=values["judge_accuracy"],
                          check_accuracy=values["check_accuracy"])
