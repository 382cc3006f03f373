"""LLM stand-ins for Readi runs without a model (``--llm gold`` / ``--llm noisy-gold:R``).

:class:`ReadiStandIn` plays the three Readi requests (told apart by
:func:`pyql.agent.readi.prompts.task_of`) from a question's gold path:

- **generate**: the gold relation path in the path format (MetaQA: the dataset's relation chain,
  read from the gold program; WikiSQL: the gold columns, conditions and answer). With
  ``rate`` R each NL relation is corrupted with probability R: replaced by another relation's
  name (of the vocabulary: MetaQA's relations, else those of the gold program) or dropped, with
  equal odds.
- **edit**: reads the structured error of the last instantiation (the step record Readi hands to
  :meth:`ReadiStandIn.observe`: the stuck constraint, its position, the candidate relations)
  and repairs the stuck relation only if the right one — the gold relation at that position — is
  among the candidates: the path becomes the instantiated prefix, that relation, then the rest
  of the gold path, corrupted at the same rate (the model re-plans from where it was told it
  broke, as noisily as it planned at first). Otherwise it answers the same path (nothing to
  repair; Readi stops editing).
- **answer**: a perfect reader: a gold answer among the retrieved instances (the program's
  answers and the entities of the sampled triples, or the rows' cells) is the answer, else
  ``{}``.

Replies carry no token usage (Readi counts the prompt) and cost 0.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.llm import LLMReply
from pyql.agent.paths import Constraint, PathFormatError, ReasoningPath
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
        #: the data of the last instantiation Readi recorded (see :meth:`observe`)
        self._last: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"ReadiStandIn({self.model!r}, rate={self.rate})"

    def observe(self, step: Any) -> None:
        """Read the record of the step Readi just took (the structured instantiation result
        and error; never the prompt's wording)."""
        if step.kind == "instantiate":
            self._last = dict(step.data)

    def complete(self, messages: Sequence[Mapping[str, Any]], *, stop: Sequence[str] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
        task = task_of(messages)
        if task == "answer":
            text = self._answer()
        elif self.gold is None:
            raise LLMScriptExhaustedError(f"{self.reason}; a {task} request was made",
                                          model=self.model)
        elif task == "generate":
            text = self._generate()
        else:
            text = self._edit()
        return LLMReply(text=text, model=self.model, finish_reason="stop", cost=0.0)

    # -- the three requests -------------------------------------------------------------------
    def _generate(self) -> str:
        gold = self.gold
        if isinstance(gold, TablePath):
            return f"Thought: the gold table path.\nPath: {_table_json(gold)}"
        assert gold is not None
        path, self.corrupted = corrupt_path(gold, self.rate, self.vocabulary, self.rng)
        return f"Thought: the gold relation path ({self.corrupted} corrupted).\n{path}"

    def _edit(self) -> str:
        gold = self.gold
        if isinstance(gold, TablePath):
            return f"Thought: the gold table path.\nFinal Path: {_table_json(gold)}"
        assert isinstance(gold, ReasoningPath)
        stuck = next((c["stuck"] for c in self._last.get("constraints", ()) if c.get("stuck")),
                     None)
        if stuck is None:
            raise LLMScriptExhaustedError("an edit was asked before a stuck instantiation was "
                                          "observed", model=self.model)
        current = Constraint(stuck["entity"], tuple(stuck["relations"]))
        position = int(stuck["position"])
        try:
            wanted = gold.constraint(current.entity).relations
        except KeyError:  # the gold path does not start from this entity
            wanted = ()
        if position < len(wanted) and split_inverse(wanted[position])[0] in stuck["candidates"]:
            rest, _ = corrupt_path(ReasoningPath.of({current.entity: wanted[position + 1:]}),
                                   self.rate, self.vocabulary, self.rng)
            fixed = current.with_relations((*current.relations[:position], wanted[position],
                                            *rest.constraints[0].relations))
            return (f'Thought: "{wanted[position]}" is among the candidates.\n'
                    f"Final Path: {fixed.chain()}")
        return f"Thought: no candidate fits.\nFinal Path: {current.chain()}"

    def _answer(self) -> str:
        found = set(self._last.get("instances", ()))
        for answer in self.answers:
            if answer in found:
                return f"So, the answer is {{{answer}}}."
        return "So, the answer is {}."


def _table_json(path: TablePath) -> str:
    return str(path).removeprefix("Path: ")


def stand_in(spec: str, item: Any, *, seed: int = 0) -> ReadiStandIn:
    """The stand-in for ``--llm gold`` / ``--llm noisy-gold:R`` and an evaluation item;
    ``seed`` is the question's own seed (the runner derives it from the run's seed and the
    item id)."""
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
    vocabulary = _vocabulary(item, gold) if isinstance(gold, ReasoningPath) else ()
    return ReadiStandIn(gold, rate=rate, seed=seed,
                        vocabulary=vocabulary, answers=getattr(item, "answers", ()),
                        model=kind, reason="no gold program" if gold is None else "")
