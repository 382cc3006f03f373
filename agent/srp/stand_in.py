"""LLM stand-ins for SRP without a model: ``--llm gold`` and ``--llm noisy-gold:RATE``.

:class:`SRPStandIn` plays each SRP stage from the question's gold relation path (read off its
gold program, :func:`pyql.agent.srp.labelled.gold_path`) and gold answers, reading only what the
prompt shows, in the paper's output formats:

- **relation check**: rates the gold path's first relation highest when it is among the
  candidates shown (then two more candidates, lower);
- **plan**: the gold path from the gold topic; with ``noisy-gold:RATE`` each relation is replaced,
  with probability ``RATE``, by another relation seen in the prompts of this question (the
  relation check's candidates), or by a made-up one when there is none (seeded per question);
- **judge**: ``<HAVE_ANSWER>`` when a gold answer is among the triples shown, else
  ``<NO_ANSWER>``; it retains the triples that follow the gold path from the gold topic
  (:func:`~pyql.agent.srp.pruning.follow`);
- **edit**: repairs only from the candidates shown: at the first position where the path
  departs from the gold path, the gold relation replaces the current one if the prompt lists it
  among the candidates of that position; otherwise the path is written back unchanged (the
  stand-in cannot repair it, and SRP stops editing);
- **answer**: the gold answers that occur in the triples shown, in braces (none: "The triplets
  do not contain the answer.", which is not an answer).

Replies carry no token usage (the strategy counts the prompt) and cost 0.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.llm import LLMReply, Message
from pyql.agent.srp.labelled import gold_path
from pyql.agent.srp.prompts import read_triples, stage_of
from pyql.agent.srp.pruning import follow

__all__ = ["SRPStandIn", "stand_in", "corrupt_relations", "MADE_UP_RELATION"]

#: what a corrupted relation becomes when no other relation was seen
MADE_UP_RELATION = "related_to"
_ARROW = re.compile(r"\s*(?:->|→)\s*")


def corrupt_relations(relations: Sequence[str], rate: float, rng: random.Random,
                      pool: Sequence[str]) -> tuple[str, ...]:
    """Each relation replaced with probability ``rate`` by another one of ``pool`` (or
    :data:`MADE_UP_RELATION` when the pool has no other).

    >>> corrupt_relations(["a", "b"], 1.0, random.Random(0), ["a", "b", "c"])
    ('c', 'c')
    """
    out = []
    for relation in relations:
        if rng.random() < rate:
            others = sorted({r for r in pool if r != relation})
            relation = rng.choice(others) if others else MADE_UP_RELATION
        out.append(relation)
    return tuple(out)


def _line(text: str, label: str) -> str:
    m = re.search(rf"(?m)^{re.escape(label)}\s*:\s*(.*)$", text)
    return m.group(1).strip() if m else ""


def _user(messages: Sequence[Message]) -> str:
    content = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    return content if isinstance(content, str) else ""


def _question_part(text: str) -> str:
    """The user message after the references block (its last ``Question:`` / ``Q:``)."""
    starts = [m.start() for m in re.finditer(r"(?m)^(?:Question|Q):", text)]
    return text[starts[-1]:] if starts else text


class SRPStandIn:
    """Plays SRP's stages for one question (module docstring). ``rate`` 0 is ``gold``."""

    def __init__(self, topic: str | None, relations: Sequence[str], answers: Sequence[str], *,
                 rate: float = 0.0, seed: int = 0, model: str = "gold", reason: str = "") -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be between 0 and 1, not {rate}")
        self.topic = topic
        self.relations = tuple(relations)
        self.answers = tuple(str(a) for a in answers)
        self.rate = rate
        self.model = model
        self.reason = reason
        self._rng = random.Random(seed)
        self._seen: list[str] = []
        self._lock = threading.Lock()
        #: the corrupted plan, for reports: (gold relations, planned relations)
        self.planned: tuple[str, ...] | None = None

    def __repr__(self) -> str:
        return f"SRPStandIn({self.model!r}, topic={self.topic!r}, relations={self.relations})"

    def complete(self, messages: Sequence[Message], *, stop: Sequence[str] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
        stage = stage_of(messages)
        if self.topic is None or stage is None:
            what = self.reason or "there is no gold relation path"
            raise LLMScriptExhaustedError(
                f"{what}" if stage is not None else "not an SRP prompt", model=self.model)
        text = _question_part(_user(messages))
        with self._lock:
            reply = getattr(self, f"_{stage}")(text)
        return LLMReply(text=reply, model=self.model, finish_reason="stop", cost=0.0)

    def _is_topic(self, name: str) -> bool:
        return self.topic is not None and name.strip().casefold() == self.topic.casefold()

    # -- stages -----------------------------------------------------------------------------------
    def _relation_check(self, text: str) -> str:
        topic = _line(text, "Topic Entity")
        candidates = [c.strip() for c in _line(text, "Candidate Relations").split(";") if c.strip()]
        self._seen += [c for c in candidates if c not in self._seen]
        first = self.relations[0] if self.relations and self._is_topic(topic) else None
        rated = ([first] if first in candidates else [])
        rated += [c for c in candidates if c not in rated][:3 - len(rated)]
        scores = [0.6, 0.3, 0.1] if first in candidates else [0.4, 0.3, 0.3]
        return "\n".join(f"{i}. ('{r}', {s}): {'on the path' if r == first else 'related'}."
                         for i, (r, s) in enumerate(zip(rated, scores, strict=False), 1))

    def _plan(self, text: str) -> str:
        assert self.topic is not None
        pool = [*self._seen, *self.relations]
        planned = corrupt_relations(self.relations, self.rate, self._rng, pool)
        self.planned = planned
        chain = " -> ".join((self.topic, *planned))
        return ("Thought: the path follows the relations of the gold path.\nPath: "
                + json.dumps({self.topic: [chain]}, ensure_ascii=False))

    def _judge(self, text: str) -> str:
        body = text.split("Triplet sequences:", 1)[-1]
        sequences: list[list[tuple[str, str, str]]] = []
        for line in body.splitlines():
            m = re.match(r"\s*\d+\.\s*(\[.*\])\s*$", line)
            if m:
                sequences.append(read_triples(m.group(1)) or [])
        found = self._found(t for seq in sequences for t in seq)
        verdict = "<HAVE_ANSWER>" if found else "<NO_ANSWER>"
        assert self.topic is not None
        steps = [(r, None) for r in self.relations]
        kept = [{t for hop in follow(seq, self.topic, steps) for t in hop} for seq in sequences]
        retained = "\n".join(
            f"{i}. [{', '.join(_triple(t) for t in seq if t in keep)}]"
            for i, (seq, keep) in enumerate(zip(sequences, kept, strict=True), 1))
        why = (f"The triplets contain {found[0]}." if found
               else "No triplet contains the answer.")
        return f"Thinking Process: {why} {verdict}\nRetained sequences:\n{retained}"

    def _found(self, triples: Any) -> list[str]:
        names = {x.casefold() for t in triples for x in (t[0], t[2])}
        return [a for a in self.answers if a.casefold() in names]

    def _edit(self, text: str) -> str:
        assert self.topic is not None
        initial = text.split("Initial Path:", 1)[-1].split(">> Error Message", 1)[0]
        current: list[str] = list(self.relations)
        for line in initial.strip().splitlines():
            parts = _ARROW.split(line.strip())
            if parts and self._is_topic(parts[0]):
                current = parts[1:]
                break
        try:
            candidates = json.loads(_line(text, "Candidate Relations") or "{}")
        except ValueError:
            candidates = {}
        fixed = list(current)
        for chain, shown in candidates.items():
            parts = _ARROW.split(chain.strip())
            if not parts or not self._is_topic(parts[0]):
                continue
            position = (len(parts) - 1) // 2
            if position < len(self.relations) and self.relations[position] in shown:
                gold = self.relations[position]
                if position < len(fixed):
                    fixed[position] = gold
                else:
                    fixed.append(gold)
        return ("Goal: the path should reach the answer of the question.\n"
                "Thought: I correct the relation the candidates show.\n"
                f"Final Path: {' -> '.join((self.topic, *fixed))}")

    def _answer(self, text: str) -> str:
        knowledge = _line(text, "Knowledge Triplets")
        names = re.findall(r'"((?:[^"\\]|\\.)*)"', knowledge)
        found = [a for a in self.answers
                 if a.casefold() in {json.loads(f'"{n}"').casefold() for n in names}]
        if not found:
            return "The triplets do not contain the answer."
        return "Based on the triplets, the answer is " + ", ".join(f"{{{a}}}" for a in found) + "."


def _triple(t: tuple[str, str, str]) -> str:
    return "(" + ", ".join(json.dumps(x, ensure_ascii=False) for x in t) + ")"


def stand_in(spec: str, item: Any, *, seed: int = 0) -> SRPStandIn:
    """The stand-in of ``spec`` (``gold`` or ``noisy-gold:RATE``) for an
    :class:`~pyql.agent.evaluation.records.EvalItem`; seeded per question from ``seed`` and the
    item's id."""
    from pyql.agent.evaluation.specs import LLMSpecError, item_seed, parse_llm_spec

    kind, arg = parse_llm_spec(spec)
    if kind == "gold":
        rate = 0.0
    elif kind == "noisy-gold":
        try:
            rate = float(arg)
        except ValueError:
            raise LLMSpecError(f"noisy-gold:RATE needs a number, not {arg!r}") from None
        if not 0.0 <= rate <= 1.0:
            raise LLMSpecError(f"noisy-gold:RATE needs a rate between 0 and 1, not {rate}")
    else:
        raise LLMSpecError(f"SRP has stand-ins for gold and noisy-gold:RATE, not {spec!r}")
    model = "gold" if kind == "gold" else f"noisy-gold:{rate:g}"
    found = gold_path(item.program, item.entities, tools=item.tools) \
        if item.program and item.entities else None
    if found is None:
        return SRPStandIn(None, (), (), model=model,
                          reason=f"{item.id}: no gold relation path (no gold program, or its "
                                 "answer is not reached from a linked entity)")
    topic, steps = found
    return SRPStandIn(topic, [s.relation for s in steps], item.answers, rate=rate,
                      seed=item_seed(seed, item.id), model=model)
