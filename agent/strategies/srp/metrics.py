"""SRP's own measures, read from a trajectory's step records (``Step.kind`` / ``Step.data``).

- **judge accuracy**: a judge verdict is right when it says ``HAVE_ANSWER`` exactly when the
  triples it was shown contain a gold answer (an entity of a triple equal to a gold answer, case
  aside). Verdicts the model did not give (nothing retrieved, an unreadable reply) are not
  counted.
- **reference hit**: a retrieved reference has the question's gold relation path (the same
  relations, the same directions: the path core's ``^relation`` notation).
- **edits**, **rounds** (retrievals), **enforced** (plans whose first relation was mended to a
  checked one), **complete** (the last instantiation joined every constraint).
- **reliable answering** (the paper's Figure 3, "the proportion of correct answers supported by
  factual triples from the KG"): of the questions answered correctly (a predicted answer is a
  gold one), those whose correct answer is an entity of the triples the answering module was
  shown or an answer of the instantiated program (:func:`reliable_answer`; Readi's
  ``measures`` reads its answer step the same way).

:meth:`pyql.agent.strategies.srp.strategy.SRP.measures` hands them to the evaluation runner per question;
metrics.json's ``strategy`` section pools them over the run.

The gold path is the item's (:func:`pyql.agent.grounding.paths.gold.gold_path`, the first constraint
with relations, as references are labelled).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pyql.agent.trajectory import Step

if TYPE_CHECKING:
    from pyql.agent.strategy import GoldItem

__all__ = ["judge_outcomes", "reference_hit", "reliable_answer", "srp_measures"]


def reliable_answer(predicted: Iterable[Any], supported: Iterable[Any],
                    gold: Iterable[Any]) -> tuple[bool, bool]:
    """``(correct, supported)``: a predicted answer is a gold one, and one such is among the
    ``supported`` values (what the KG gave the answer), compared without case.

    >>> reliable_answer(["Paris"], ["paris", "Lyon"], ["Paris"])
    (True, True)
    >>> reliable_answer(["Paris"], ["Lyon"], ["Paris"])
    (True, False)
    """
    def fold(values: Iterable[Any]) -> set[str]:
        return {str(v).strip().casefold() for v in values}

    right = fold(predicted) & fold(gold)
    return bool(right), bool(right & fold(supported))


def _names(sequences: Iterable[Sequence[Sequence[str]]]) -> set[str]:
    return {str(t[i]).casefold() for seq in sequences for t in seq for i in (0, 2)
            if len(t) == 3}


def judge_outcomes(steps: Iterable[Step], gold: Iterable[Any]) -> list[tuple[bool, bool]]:
    """``(said HAVE_ANSWER, the triples shown contain a gold answer)`` per judge verdict."""
    answers = {str(a).casefold() for a in gold}
    out = []
    for step in steps:
        if step.kind != "judge" or step.data.get("auto") or "parse_error" in step.data:
            continue
        names = _names(step.data.get("sequences", ()))
        out.append((step.data.get("verdict") == "HAVE_ANSWER", bool(answers & names)))
    return out


def reference_hit(steps: Iterable[Step], gold_path: Sequence[str] | None) -> bool | None:
    """Whether a retrieved reference has ``gold_path``; None without references or gold path."""
    if not gold_path:
        return None
    refs = next((s.data.get("references", []) for s in steps if s.kind == "references"), None)
    if refs is None:
        return None
    return any(tuple(r.get("path", ())) == tuple(gold_path) for r in refs)


def _gold_relations(item: GoldItem) -> tuple[str, ...] | None:
    from pyql.agent.grounding.paths import ReasoningPath
    from pyql.agent.grounding.paths.gold import gold_path

    path = gold_path(item)
    if not isinstance(path, ReasoningPath):
        return None
    first = next((c for c in path.constraints if c.relations), None)
    return first.relations if first is not None else None


def srp_measures(steps: Sequence[Step], item: GoldItem) -> dict[str, Any]:
    """The measures of one question (module docstring) for an evaluation item."""
    outcomes = judge_outcomes(steps, item.answers)
    retrieves = [s for s in steps if s.kind == "retrieve"]
    plan = next((s for s in steps if s.kind == "plan"), None)
    answer = next((s for s in reversed(steps) if s.kind == "answer"), None)
    knowledge = next((s for s in reversed(steps) if s.kind == "knowledge"), None)
    predicted: list[Any] = []
    supported: list[Any] = []
    if answer is not None:
        predicted = [*answer.data.get("cot", ()), *answer.data.get("program_answers", ())]
        supported = list(answer.data.get("program_answers", ()))
    if knowledge is not None:
        supported += [t[i] for t in knowledge.data.get("kept", ()) for i in (0, 2) if len(t) == 3]
    correct, grounded = reliable_answer(predicted, supported, item.answers)
    return {
        "correct": correct,
        "reliable": correct and grounded,
        "judged": len(outcomes),
        "judge_correct": sum(1 for said, has in outcomes if said == has),
        "reference_hit": reference_hit(steps, _gold_relations(item)),
        "edits": sum(1 for s in steps if s.kind == "edit"),
        "rounds": len(retrieves),
        "enforced": bool(plan is not None and plan.data.get("enforced")),
        "complete": bool(retrieves and retrieves[-1].data.get("complete")),
    }
