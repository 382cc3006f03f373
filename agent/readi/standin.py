"""LLM stand-ins for Readi runs without a model (``--llm gold`` / ``--llm noisy-gold:R``).

:class:`ReadiStandIn` plays the three Readi requests (told apart by
:func:`pyql.agent.readi.prompts.task_of`) from a question's gold path:

- **generate**: the gold relation path in the path format (MetaQA: the dataset's relation chain,
  read from the gold program; WikiSQL: the gold columns, conditions and answer). With
  ``rate`` R each NL relation is corrupted with probability R: replaced by another relation's
  name (of the vocabulary: MetaQA's relations, else those of the gold program) or dropped, with
  equal odds.
- **edit**: reads the error as a model does (the ``Initial Path`` chain, how far ``Instantiate
  Paths`` got, the ``Candidate Relations`` list) and repairs the stuck relation only if the right
  one — the gold relation at that position — is among the candidates: the path becomes the
  instantiated prefix, that relation, then the rest of the gold path (the model re-plans from
  where it was told it broke). Otherwise it answers the same path (nothing to repair; Readi
  stops editing).
- **answer**: a perfect reader: a gold answer that appears among the retrieved triples (or rows)
  is the answer, else ``{}``.

Replies carry no token usage (Readi counts the prompt) and cost 0.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.llm import LLMReply
from pyql.agent.paths import ARROW, Constraint, PathFormatError, ReasoningPath, parse_chain
from pyql.agent.paths.instantiate import split_inverse
from pyql.agent.paths.path import path_from_program
from pyql.agent.paths.table import TablePath, table_path_from_program
from pyql.agent.readi.prompts import task_of

__all__ = ["ReadiStandIn", "corrupt_path", "gold_path", "stand_in"]


def gold_path(item: Any) -> ReasoningPath | TablePath | None:
    """The gold path of an evaluation item (from its gold program), or None without one."""
    program = getattr(item, "program", None)
    if not program:
        return None
    try:
        if getattr(item, "tools", "sparql") == "sql":
            return table_path_from_program(program)
        path = path_from_program(program, item.entities)
    except PathFormatError:
        return None
    return path if path.constraints else None


def _vocabulary(item: Any, path: ReasoningPath) -> tuple[str, ...]:
    if "qtype" in getattr(item, "meta", {}):
        from pyql.datasets.metaqa import RELATIONS

        return tuple(sorted(set(RELATIONS.values())))
    return tuple(sorted({r for c in path.constraints for r in c.relations}))


def corrupt_path(path: ReasoningPath, rate: float, vocabulary: Sequence[str],
                 rng: random.Random) -> tuple[ReasoningPath, int]:
    """Each relation, with probability ``rate``, replaced by another vocabulary relation or
    dropped (equal odds; dropped when the vocabulary has no other); returns the path and how
    many relations were corrupted."""
    corrupted = 0
    out = []
    for c in path.constraints:
        rels: list[str] = []
        for r in c.relations:
            if rng.random() >= rate:
                rels.append(r)
                continue
            corrupted += 1
            others = [v for v in vocabulary if v != r]
            if others and rng.random() < 0.5:
                rels.append(rng.choice(others))
        out.append(c.with_relations(rels))
    return ReasoningPath(tuple(out)), corrupted


class ReadiStandIn:
    """A stand-in model for Readi (see the module docstring)."""

    def __init__(self, gold: ReasoningPath | TablePath | None, *, rate: float = 0.0,
                 seed: int = 0, vocabulary: Sequence[str] = (), answers: Sequence[Any] = (),
                 model: str = "gold", reason: str = "") -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"the corruption rate must be between 0 and 1, not {rate}")
        self.gold = gold
        self.rate = rate
        self.rng = random.Random(seed)
        self.vocabulary = tuple(vocabulary)
        self.answers = tuple(str(a) for a in answers)
        self.model = model
        self.reason = reason or "there is no gold path"
        #: relations corrupted in the generated path (for the records)
        self.corrupted = 0

    def __repr__(self) -> str:
        return f"ReadiStandIn({self.model!r}, rate={self.rate})"

    def complete(self, messages: Sequence[Mapping[str, Any]], *, stop: Sequence[str] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
        task = task_of(messages)
        user = str(next(m for m in reversed(messages) if m.get("role") == "user")["content"])
        if task == "answer":
            text = self._answer(user)
        elif self.gold is None:
            raise LLMScriptExhaustedError(f"{self.reason}; a {task} request was made",
                                          model=self.model)
        elif task == "generate":
            text = self._generate()
        else:
            text = self._edit(user)
        return LLMReply(text=text, model=self.model, finish_reason="stop", cost=0.0)

    # -- the three requests -------------------------------------------------------------------
    def _generate(self) -> str:
        gold = self.gold
        if isinstance(gold, TablePath):
            return f"Thought: the gold table path.\n{gold}"
        assert gold is not None
        path, self.corrupted = corrupt_path(gold, self.rate, self.vocabulary, self.rng)
        return f"Thought: the gold relation path ({self.corrupted} corrupted).\n{path}"

    def _edit(self, user: str) -> str:
        gold = self.gold
        if isinstance(gold, TablePath):
            return f"Thought: the gold table path.\nFinal Path: {gold}"
        assert gold is not None
        lines = user.splitlines()
        initial = next((ln for ln in lines if ln.startswith("Initial Path:")), "")
        current = parse_chain("Final Path:" + initial.split(":", 1)[1],
                              entities=[c.entity for c in gold.constraints])
        reached = next((ln for ln in lines if ln.startswith("Instantiate Paths:")), "")
        position = reached.count(ARROW) // 2
        candidates = _list_after(lines, "Candidate Relations")
        try:
            wanted = gold.constraint(current.entity).relations
        except KeyError:  # the gold path does not start from this entity
            wanted = ()
        if position < len(wanted) and split_inverse(wanted[position])[0] in candidates:
            done = current.relations[:position]
            fixed = Constraint(current.entity, (*done, wanted[position], *wanted[position + 1:]))
            return (f'Thought: "{wanted[position]}" is among the candidates.\n'
                    f"Final Path: {fixed.chain()}")
        return f"Thought: no candidate fits.\nFinal Path: {current.chain()}"

    def _answer(self, user: str) -> str:
        found = _elements(user)
        for answer in self.answers:
            if answer in found:
                return f"So, the answer is {{{answer}}}."
        return "So, the answer is {}."


def _list_after(lines: Sequence[str], header: str) -> list[str]:
    for i, line in enumerate(lines[:-1]):
        if line.strip() == header:
            try:
                value = json.loads(lines[i + 1])
            except json.JSONDecodeError:
                return []
            return [str(v) for v in value] if isinstance(value, list) else []
    return []


def _elements(user: str) -> set[str]:
    """The entities of retrieved triples ``(h, r, t)`` and the cells of JSON rows."""
    out: set[str] = set()
    for line in user.splitlines():
        line = line.strip()
        if line.startswith("["):
            try:
                out.update(str(v) for v in json.loads(line))
            except json.JSONDecodeError:
                pass
        elif line.startswith("("):
            for triple in re.findall(r"\(([^()]*)\)", line):
                parts = [p.strip() for p in triple.split(", ")]
                if len(parts) >= 3:
                    out.update((parts[0], ", ".join(parts[2:])))
    return out


def stand_in(spec: str, item: Any, *, seed: int = 0) -> ReadiStandIn:
    """The stand-in for ``--llm gold`` / ``--llm noisy-gold:R`` and an evaluation item."""
    kind, _, arg = spec.strip().partition(":")
    kind = kind.strip().lower()
    if kind == "gold" and not arg:
        rate = 0.0
    elif kind == "noisy-gold" and arg:
        try:
            rate = float(arg)
        except ValueError:
            raise ValueError(f"noisy-gold:RATE needs a number, not {arg!r}") from None
    else:
        raise ValueError(f"Readi stand-ins are 'gold' and 'noisy-gold:R', not {spec!r}")
    gold = gold_path(item)
    if rate and isinstance(gold, TablePath):
        raise ValueError("noisy-gold is not available for table paths (gold only)")
    from pyql.agent.evaluation.specs import item_seed

    vocabulary = _vocabulary(item, gold) if isinstance(gold, ReasoningPath) else ()
    return ReadiStandIn(gold, rate=rate, seed=item_seed(seed, getattr(item, "id", "")),
                        vocabulary=vocabulary, answers=getattr(item, "answers", ()),
                        model=kind, reason="no gold program" if gold is None else "")
