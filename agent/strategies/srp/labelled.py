"""Labelled questions: a question with its gold relation path and answers (what a reference is
made of), read from any dataset whose items carry a gold program.

The relation path of an item is read off its gold program by the path core
(:func:`pyql.agent.grounding.paths.path_from_program`: the ``add_fact`` chain from a topic entity, a hop
followed from the tail back to the head written ``^relation``); the first topic entity with a
chain is the reference's topic. MetaQA's gold programs are exactly such chains; WebQSP's
``PyQL`` programs start with one. Items without a gold program have no relation path and are
skipped.

**Disjoint parts of one split.** MetaQA ships dev and test only, so references are built from one
part of a split and questions are evaluated on the other. :func:`id_part` splits by a hash of the
question id: deterministic, independent of file order and of which other questions are read.
The reference part of an evaluation dataset's split is read by
:func:`pyql.agent.evaluation.compare.reference_part` (the evaluation layer owns the datasets).

>>> from pyql.agent.evaluation.records import EvalItem
>>> item = EvalItem(id="q", question="who directed [Kismet]", entities={"Kismet": "Kismet"},
...                 answers=("William Dieterle",),
...                 program="add_fact(Kismet, directed_by, ?x1)\\nset_answer(?x1)\\nexecute()")
>>> labelled(item).path
('directed_by',)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from pyql.agent.grounding.paths import PathFormatError, path_from_program
from pyql.errors import ParseError

if TYPE_CHECKING:
    from pyql.agent.evaluation.records import EvalItem

__all__ = ["LabelledQuestion", "labelled", "labelled_items", "id_part", "evaluation_part"]


class LabelledQuestion(BaseModel):
    """A solved question: its text, the topic entity its path starts from (the mention and the
    KB id), the gold relation path and the gold answers."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    topic: str
    topic_id: str
    #: the relations from the topic, in the path format of :mod:`pyql.agent.grounding.paths`
    #: (``^relation``: followed from the tail back to the head)
    path: tuple[str, ...]
    answers: tuple[str, ...] = ()
    #: mentions of every linked entity (masked out of the question for similarity)
    mentions: tuple[str, ...] = ()
    dataset: str = ""


def labelled(item: EvalItem, *, dataset: str = "") -> LabelledQuestion | None:
    """The labelled question of an evaluation item, or None when its gold program gives no
    relation path (no program, a SQL program, or no chain from a linked entity)."""
    if not item.program or not item.entities or item.tools != "sparql":
        return None
    try:
        path = path_from_program(item.program, item.entities)
    except (PathFormatError, ParseError):
        return None
    constraint = next((c for c in path.constraints if c.relations), None)
    if constraint is None:
        return None
    return LabelledQuestion(
        id=item.id, question=item.question, topic=constraint.entity,
        topic_id=item.entities[constraint.entity], path=constraint.relations,
        answers=tuple(str(a) for a in item.answers), mentions=tuple(item.entities),
        dataset=dataset)


def labelled_items(items: Iterable[EvalItem], *, dataset: str = "") -> Iterator[LabelledQuestion]:
    """:func:`labelled` over ``items``, skipping those without a relation path."""
    for item in items:
        found = labelled(item, dataset=dataset)
        if found is not None:
            yield found


def id_part(item_id: str, fraction: float, *, salt: str = "srp") -> bool:
    """Whether ``item_id`` falls in the reference part of a split: the ids whose salted sha256
    lies in the first ``fraction`` of the range. The rest is the evaluation part.

    >>> [id_part(f"1hop-dev-{i}", 0.5) for i in range(6)]
    [True, True, False, False, False, True]
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be between 0 and 1, not {fraction}")
    digest = hashlib.sha256(f"{salt}\x00{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def evaluation_part(items: Iterable[EvalItem], fraction: float, *, salt: str = "srp"
                    ) -> list[EvalItem]:
    """The items outside the reference part (``id_part`` false): what a base built with
    ``fraction`` and ``salt`` may be evaluated on."""
    return [i for i in items if not id_part(i.id, fraction, salt=salt)]
