"""LLM stand-ins for SRP without a model: ``--llm gold`` and ``--llm noisy-gold:RATE``.

:class:`SRPStandIn` plays each SRP stage from the question's gold path and gold answers, reading
only what the prompt shows, in the paper's output formats. The gold path, its corruption and the
edit's repair rule are Readi's stand-in's (:mod:`pyql.agent.readi.standin`), so that SRP and
Readi meet the same noise:

- **relation check**: rates the gold path's first relation highest when it is among the
  candidates shown (then two more candidates, lower);
- **plan**: the gold path; with ``noisy-gold:RATE`` corrupted by
  :func:`~pyql.agent.readi.standin.corrupt_path` (each relation, with probability ``RATE``,
  replaced by another relation of the vocabulary or dropped);
- **judge**: ``<HAVE_ANSWER>`` when a gold answer is among the triples shown, else
  ``<NO_ANSWER>``; it retains the triples that follow the gold path from the gold topic
  (:func:`~pyql.agent.srp.pruning.follow`);
- **edit**: repairs only from the candidates shown: if the gold relation at the position of the
  candidates (the tail of the pruned sequence, or the stuck point) is among them, the path
  becomes the prefix up to there, that relation, then the rest of the gold path (Readi's rule);
  otherwise the path is written back unchanged (SRP then stops editing);
- **answer**: the gold answers that occur in the triples shown, in braces (none: ``{}``, no
  answer).

Replies carry no token usage (the strategy counts the prompt) and cost 0.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.llm import LLMReply, Message
from pyql.agent.paths import ReasoningPath, split_inverse
from pyql.agent.readi.standin import ReadiStandIn, corrupt_path
from pyql.agent.srp.prompts import read_triples, stage_of
from pyql.agent.srp.pruning import follow

__all__ = ["SRPStandIn", "stand_in"]

_ARROW = re.compile(r"\s*(?:->|→)\s*")


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
    """Plays SRP's stages for one question (module docstring) over Readi's stand-in ``readi``,
    which holds the gold path, the corruption rate and its seeded RNG, and the gold answers."""

    def __init__(self, readi: ReadiStandIn) -> None:
        self.readi = readi
        gold = readi.gold if isinstance(readi.gold, ReasoningPath) else None
        first = next((c for c in gold.constraints if c.relations), None) if gold else None
        self.topic = first.entity if first is not None else None
        self.relations: tuple[str, ...] = first.relations if first is not None else ()
        self.answers = readi.answers
        self.model = readi.model
        self._lock = threading.Lock()
        #: the relations the plan was given (after corruption), for reports
        self.planned: tuple[str, ...] | None = None

    def __repr__(self) -> str:
        return f"SRPStandIn({self.model!r}, topic={self.topic!r}, relations={self.relations})"

    def complete(self, messages: Sequence[Message], *, stop: Sequence[str] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
        stage = stage_of(messages)
        if self.topic is None or stage is None:
            what = self.readi.reason or "there is no gold relation path"
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
        first = (split_inverse(self.relations[0])[0] if self.relations and self._is_topic(topic)
                 else None)
        rated = ([first] if first in candidates else [])
        rated += [c for c in candidates if c not in rated][:3 - len(rated)]
        scores = [0.6, 0.3, 0.1] if first in candidates else [0.4, 0.3, 0.3]
        return "\n".join(f"{i}. ('{r}', {s}): {'on the path' if r == first else 'related'}."
                         for i, (r, s) in enumerate(zip(rated, scores, strict=False), 1))

    def _plan(self, text: str) -> str:
        readi = self.readi
        assert isinstance(readi.gold, ReasoningPath) and self.topic is not None
        path, readi.corrupted = corrupt_path(readi.gold, readi.rate, readi.vocabulary, readi.rng)
        planned = path.constraint(self.topic).relations
        self.planned = planned
        chain = " -> ".join((self.topic, *planned))
        return (f"Thought: the gold relation path ({readi.corrupted} corrupted).\nPath: "
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
        steps = [(name, False if inverse else None)
                 for name, inverse in map(split_inverse, self.relations)]
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
            wanted = self.relations
            if position < len(wanted) and split_inverse(wanted[position])[0] in shown:
                fixed = [*current[:position], *wanted[position:]]
                break
        return ("Goal: the path should reach the answer of the question.\n"
                "Thought: I correct the relation the candidates show.\n"
                f"Final Path: {' -> '.join((self.topic, *fixed))}")

    def _answer(self, text: str) -> str:
        knowledge = _line(text, "Knowledge Triplets")
        names = re.findall(r'"((?:[^"\\]|\\.)*)"', knowledge)
        found = [a for a in self.answers
                 if a.casefold() in {json.loads(f'"{n}"').casefold() for n in names}]
        if not found:
            return "No triplet gives the answer. So, the answer is {}."
        return "Based on the triplets, the answer is " + ", ".join(f"{{{a}}}" for a in found) + "."


def _triple(t: tuple[str, str, str]) -> str:
    return "(" + ", ".join(json.dumps(x, ensure_ascii=False) for x in t) + ")"


def stand_in(spec: str, item: Any, *, seed: int = 0) -> SRPStandIn:
    """The stand-in of ``spec`` (``gold`` or ``noisy-gold:RATE``) for an
    :class:`~pyql.agent.evaluation.records.EvalItem`, over Readi's stand-in for the same item and
    seed (the same gold path and the same corruption)."""
    from pyql.agent.readi.standin import stand_in as readi_stand_in

    return SRPStandIn(readi_stand_in(spec, item, seed=seed))
