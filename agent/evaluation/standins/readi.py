"""Readi's stand-ins (``--llm gold`` / ``--llm noisy-gold:R``).

:class:`ReadiStandIn` plays the three Readi requests (told apart by
:func:`pyql.agent.strategies.readi.prompts.task_of`) from a question's gold path
(:func:`pyql.agent.grounding.paths.gold.gold_path`):

- **generate**: the gold relation path in the path format (MetaQA: the dataset's relation chain,
  read from the gold program; WikiSQL: the gold columns, conditions and answer). With
  ``rate`` R each NL relation is corrupted with probability R: replaced by another relation's
  name (of the vocabulary: MetaQA's relations, else those of the gold program) or dropped, with
  equal odds.
- **edit**: reads the structured error of the last instantiation (the step record Readi's
  Recorder hands to :meth:`ReadiStandIn.observe`: the stuck constraint, its position, the
  candidate relations). When the right relation — the gold relation at that position — is
  among the candidates, the edit picks it with probability ``edit_success``, else another
  candidate (a wrong pick); the path becomes the instantiated prefix, the picked relation, then
  the rest of the gold path, corrupted at the same rate (the model re-plans from where it was
  told it broke, as noisily as it planned at first). When the right relation is not offered it
  answers the same path (nothing to repair; Readi stops editing).
- **answer**: a reader that can err: when a gold answer is among the retrieved instances (the
  program's answers and the entities of the retrieved triples) it answers them (each gold
  answer found) with probability ``reader_accuracy``, else another instance (a distractor;
  ``{}`` when there is none); without a gold answer among them, ``{}``. On a table it reads the
  rows it was shown (never the program's answers): the gold answers are read when each is a
  cell (without case: WikiSQL's gold is lower-cased) or what the question's aggregation (the
  gold path's ``COUNT``, ``MAX``, ``MIN``, ``SUM``, ``AVG``) gives over the shown rows' answer
  column — what a reader that can count and compare derives.

The two probabilities are the stand-in's declared :data:`PARAMETERS` (``noisy-gold`` takes their
defaults, ``gold`` the oracle's 1.0; ``noisy-gold:0.3:edit_success=1`` names the oracle edit).
Their draws come from a stream of their own, so the corruption of a question is the same
whatever they are. Readi's noisy-gold corrupts path relations: it makes none of QueryAgent's
injection types (``noisy-gold:0.3:wrong_relation`` is refused before the run).

Replies carry no token usage (Readi's recorder estimates it under ``pyql eval --token-estimates``)
and cost 0.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.evaluation.llm_spec import LLMSpecError, StandInParameter, StandInSpec, probability
from pyql.agent.evaluation.standins import StandInFactory
from pyql.agent.grounding.paths import Constraint, ReasoningPath
from pyql.agent.grounding.paths.gold import gold_path
from pyql.agent.grounding.paths.instantiate import split_inverse
from pyql.agent.grounding.paths.table import TablePath
from pyql.agent.llm.clients import LLMReply
from pyql.agent.strategies.readi.prompts import task_of

if TYPE_CHECKING:
    from pyql.agent.evaluation.records import EvalItem

__all__ = ["PARAMETERS", "ReadiStandIn", "ReadiStandIns", "corrupt_path", "gold_path",
           "readi_stand_in"]

#: the stand-in's declared assumptions (see :mod:`pyql.agent.evaluation.llm_spec`)
PARAMETERS: tuple[StandInParameter, ...] = (
    StandInParameter(
        "edit_success", 0.8,
        "the edit picks the right relation when the candidates offer it (else a wrong one)",
        "assumption (neither paper reports a per-edit rate)"),
    StandInParameter(
        "reader_accuracy", 0.9,
        "the reader answers a gold answer when the retrieved instances hold one",
        "Readi Table 3 (CWQ, GPT-3.5/GPT-4): Hit@1 / AC = 0.90-0.94"),
)


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
                 model: str = "gold", reason: str = "", edit_success: float = 1.0,
                 reader_accuracy: float = 1.0) -> None:
        for name, value in (("rate", rate), ("edit_success", edit_success),
                            ("reader_accuracy", reader_accuracy)):
            probability(name, value)
        self.gold = gold
        self.rate = rate
        self.edit_success = edit_success
        self.reader_accuracy = reader_accuracy
        self.rng = random.Random(seed)
        #: the draws of the accuracies (a stream apart from the corruption's)
        self.noise = random.Random(f"{seed}:accuracy")
        self.vocabulary = tuple(vocabulary)
        self.answers = tuple(str(a) for a in answers)
        self.model = model
        self.reason = reason or "there is no gold path"
        #: relations corrupted in the generated path (for the records)
        self.corrupted = 0
        #: the data of the last instantiation Readi recorded (see :meth:`observe`)
        self._last: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (f"ReadiStandIn({self.model!r}, rate={self.rate}, edit_success="
                f"{self.edit_success}, reader_accuracy={self.reader_accuracy})")

    def succeeds(self, probability: float) -> bool:
        """A draw of the accuracy stream: True with ``probability`` (no draw at 0 or 1)."""
        if probability >= 1.0:
            return True
        if probability <= 0.0:
            return False
        return self.noise.random() < probability

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
        candidates = [str(c) for c in stuck["candidates"]]
        if position < len(wanted) and split_inverse(wanted[position])[0] in candidates:
            picked = self.pick(wanted[position], candidates)
            rest, _ = corrupt_path(ReasoningPath.of({current.entity: wanted[position + 1:]}),
                                   self.rate, self.vocabulary, self.rng)
            fixed = current.with_relations((*current.relations[:position], picked,
                                            *rest.constraints[0].relations))
            return (f'Thought: "{picked}" is the candidate that fits.\n'
                    f"Final Path: {fixed.chain()}")
        return f"Thought: no candidate fits.\nFinal Path: {current.chain()}"

    def pick(self, right: str, candidates: Sequence[str]) -> str:
        """The relation an edit writes when ``right`` is among ``candidates``: ``right`` with
        probability ``edit_success``, else another candidate (``right`` when there is none)."""
        if self.succeeds(self.edit_success):
            return right
        name = split_inverse(right)[0]
        others = sorted({c for c in candidates if c != name})
        return self.noise.choice(others) if others else right

    def read(self, found: Sequence[str] | set[str], *, fold: bool = False) -> list[str]:
        """What the reader answers from the names ``found`` in what it was shown: the gold
        answers among them with probability ``reader_accuracy``, else one distractor (none:
        nothing); no gold answer among them: nothing. ``fold`` matches without case."""
        def key(text: str) -> str:
            return text.casefold() if fold else text

        shown = {key(str(x)): str(x) for x in found}
        right = [a for a in self.answers if key(a) in shown]
        if not right:
            return []
        if self.succeeds(self.reader_accuracy):
            return right
        gold = {key(a) for a in self.answers}
        wrong = sorted(v for k, v in shown.items() if k not in gold)
        return [self.noise.choice(wrong)] if wrong else []

    def _answer(self) -> str:
        if isinstance(self.gold, TablePath):
            return self._answer_rows()
        read = self.read(set(self._last.get("instances", ())))
        return "So, the answer is " + (" ".join(f"{{{a}}}" for a in read) or "{}") + "."

    def _answer_rows(self) -> str:
        gold = self.gold
        assert isinstance(gold, TablePath)
        columns = [str(c).casefold() for c in self._last.get("columns", ())]
        rows = self._last.get("shown_rows", ())
        found: dict[str, str] = {}
        for row in rows:
            for cell in row:
                if cell is not None:
                    found.setdefault(_key(cell), str(cell))
        column = (gold.answer_column or "").casefold()
        if gold.aggregation and column in columns:
            for value in _aggregate(gold.aggregation, [r[columns.index(column)] for r in rows]):
                found.setdefault(_key(value), str(value))
        right = [found[_key(a)] for a in self.answers if _key(a) in found]
        if len(right) < len(self.answers):
            return "So, the answer is {}."
        if not self.succeeds(self.reader_accuracy):
            wrong = sorted(v for k, v in found.items() if k not in {_key(a) for a in self.answers})
            right = [self.noise.choice(wrong)] if wrong else []
        return "So, the answer is " + " ".join(f"{{{a}}}" for a in right) + "."


def _key(value: Any) -> str:
    """Values a reader takes for the same: numbers by value (``3`` and ``3.0``), text without
    case."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value).strip().casefold()
    return repr(number)


def _aggregate(name: str, cells: Sequence[Any]) -> list[Any]:
    """What ``name`` gives over ``cells`` (empty when it needs numbers the cells are not)."""
    present = [c for c in cells if c is not None and c != ""]
    if name == "COUNT":
        return [len(present)]
    try:
        numbers = [float(c) for c in present]
    except (TypeError, ValueError):
        return []
    if not numbers:
        return []
    return {"MAX": [max(numbers)], "MIN": [min(numbers)], "SUM": [sum(numbers)],
            "AVG": [sum(numbers) / len(numbers)]}.get(name, [])


def _table_json(path: TablePath) -> str:
    return str(path).removeprefix("Path: ")


def readi_stand_in(spec: StandInSpec, item: EvalItem, *, seed: int = 0,
                   parameters: Sequence[StandInParameter] = PARAMETERS) -> ReadiStandIn:
    """The stand-in of a checked ``spec`` for an evaluation item (noisy-gold on a table item,
    or ``edit_success`` below 1 on one, is :class:`LLMSpecError`, which stops the run:
    ``pyql eval`` aborts on a spec error);
    ``seed`` is the question's own seed. ``parameters`` are the declared ones the spec sets
    (SRP's stand-in adds its own)."""
    values = spec.values(parameters)
    gold = gold_path(item)
    if spec.rate and isinstance(gold, TablePath):
        raise LLMSpecError("noisy-gold is not available for Readi's table paths (gold only)",
                           spec=spec.text, parameter="rate", value=f"{spec.rate:g}")
    if isinstance(gold, TablePath) and values.get("edit_success", 1.0) < 1.0:
        raise LLMSpecError("the table-path stand-in edits to the gold path: edit_success is "
                           "for relation paths", spec=spec.text, parameter="edit_success",
                           value=f"{values['edit_success']:g}")
    vocabulary = _vocabulary(item, gold) if isinstance(gold, ReasoningPath) else ()
    return ReadiStandIn(gold, rate=spec.rate, seed=seed,
                        vocabulary=vocabulary, answers=getattr(item, "answers", ()),
                        model=spec.kind, reason="no gold program" if gold is None else "",
                        edit_success=values.get("edit_success", 1.0),
                        reader_accuracy=values.get("reader_accuracy", 1.0))


class ReadiStandIns(StandInFactory):
    """``gold`` and ``noisy-gold`` for Readi (module docstring); the same under any preset (it
    reads the step records, not the prompts)."""

    parameters = PARAMETERS

    def build(self, spec: StandInSpec, item: EvalItem, *, seed: int = 0,
              preset: str | None = None) -> ReadiStandIn:
        return readi_stand_in(spec, item, seed=seed)
