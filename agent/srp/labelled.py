"""Labelled questions: a question with its gold relation path and answers (what a reference is
made of), read from any dataset whose items carry a gold program.

The relation path of an item is read off its gold program: the chain of ``add_fact`` calls that
leads from a topic entity to the answer variable (``set_answer``), each hop followed forward
(the node is the head) or backward (the node is the tail). MetaQA's gold programs are exactly
such chains; WebQSP's ``PyQL`` programs are too, with the constraints hanging off the chain left
out. Items without a gold program, or whose answer is not reached from a topic entity, have no
relation path and are skipped.

**Disjoint parts of one split.** MetaQA ships dev and test only, so references are built from one
part of a split and questions are evaluated on the other. :func:`id_part` splits by a hash of the
question id: deterministic, independent of file order and of which other questions are read.

>>> from pyql.agent.evaluation.records import EvalItem
>>> item = EvalItem(id="q", question="who directed [Kismet]", entities={"Kismet": "Kismet"},
...                 answers=("William Dieterle",),
...                 program="add_fact(Kismet, directed_by, ?x1)\\nset_answer(?x1)\\nexecute()")
>>> labelled(item).path
(PathStep(relation='directed_by', forward=True),)
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from pyql.program import Program
from pyql.syntax import Atom, AtomKind

if TYPE_CHECKING:
    from pyql.agent.evaluation.records import EvalItem

__all__ = ["PathStep", "LabelledQuestion", "gold_path", "labelled", "labelled_items", "id_part",
           "reference_part", "evaluation_part"]


class PathStep(BaseModel):
    """One hop of a gold relation path: the KB relation and whether the current node is its
    head (``forward``) or its tail."""

    model_config = ConfigDict(frozen=True)

    relation: str
    forward: bool = True

    def __repr__(self) -> str:
        return f"PathStep(relation={self.relation!r}, forward={self.forward})"


class LabelledQuestion(BaseModel):
    """A solved question: its text, the topic entity its path starts from (the mention and the
    KB id), the gold relation path and the gold answers."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    topic: str
    topic_id: str
    path: tuple[PathStep, ...]
    answers: tuple[str, ...] = ()
    #: mentions of every linked entity (masked out of the question for similarity)
    mentions: tuple[str, ...] = ()
    dataset: str = ""


def _key(atom: Atom) -> tuple[str, str]:
    return ("var", atom.value) if atom.kind is AtomKind.VAR else ("node", atom.value)


def gold_path(program: Program | str, entities: Mapping[str, str], *, tools: str = "sparql"
              ) -> tuple[str, tuple[PathStep, ...]] | None:
    """``(topic mention, steps)``: the shortest chain of ``add_fact`` hops from a linked entity
    to the answer variable of ``program``, or None when there is none. Entities are tried in the
    order of ``entities``; the first that reaches the answer wins.

    >>> gold_path("add_fact(?x1, starred_actors, Temuera Morrison)\\nset_answer(?x1)",
    ...           {"Temuera Morrison": "Temuera Morrison"})
    ('Temuera Morrison', (PathStep(relation='starred_actors', forward=False),))
    """
    parsed = program if isinstance(program, Program) else Program.parse(program, tools)
    answer: tuple[str, str] | None = None
    edges: dict[tuple[str, str], list[tuple[PathStep, tuple[str, str]]]] = {}
    for call in parsed:
        if call.name == "set_answer" and call.args and call.args[0].kind is AtomKind.VAR:
            answer = _key(call.args[0])
        elif call.name == "add_fact" and len(call.args) == 3:
            head, relation, tail = call.args
            h, t = _key(head), _key(tail)
            edges.setdefault(h, []).append((PathStep(relation=relation.value, forward=True), t))
            edges.setdefault(t, []).append((PathStep(relation=relation.value, forward=False), h))
    if answer is None:
        return None
    for mention, kb_id in entities.items():
        for start in {("node", kb_id), ("node", mention)}:
            steps = _shortest(edges, start, answer)
            if steps:
                return mention, steps
    return None


def _shortest(edges: Mapping[tuple[str, str], list[tuple[PathStep, tuple[str, str]]]],
              start: tuple[str, str], goal: tuple[str, str]) -> tuple[PathStep, ...] | None:
    queue: deque[tuple[tuple[str, str], tuple[PathStep, ...]]] = deque([(start, ())])
    seen = {start}
    while queue:
        node, steps = queue.popleft()
        if node == goal:
            return steps
        for step, nxt in edges.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, (*steps, step)))
    return None


def labelled(item: EvalItem, *, dataset: str = "") -> LabelledQuestion | None:
    """The labelled question of an evaluation item, or None when its gold program gives no
    relation path (no program, or the answer is not reached from a linked entity)."""
    if not item.program or not item.entities:
        return None
    found = gold_path(item.program, item.entities, tools=item.tools)
    if found is None:
        return None
    topic, steps = found
    return LabelledQuestion(
        id=item.id, question=item.question, topic=topic, topic_id=item.entities[topic],
        path=steps, answers=tuple(str(a) for a in item.answers),
        mentions=tuple(item.entities), dataset=dataset)


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


def reference_part(datasets: Sequence[str], split: str, *, fraction: float = 1.0,
                   salt: str = "srp", data_dir: str | os.PathLike[str] | None = None
                   ) -> tuple[list[LabelledQuestion], list[str]]:
    """The labelled questions of the reference part of ``split`` of each dataset (the
    evaluation datasets of :mod:`pyql.agent.evaluation.datasets`), and the ids of every question
    of that part (with or without a relation path: none of them may be evaluated against a
    base built from it)."""
    from pyql.agent.evaluation.datasets import get_dataset

    questions: list[LabelledQuestion] = []
    ids: list[str] = []
    for name in datasets:
        items = [i for i in get_dataset(name, data_dir).items(split)
                 if fraction >= 1.0 or id_part(i.id, fraction, salt=salt)]
        ids += [i.id for i in items]
        questions += labelled_items(items, dataset=name)
    return questions, ids


def evaluation_part(items: Iterable[EvalItem], fraction: float, *, salt: str = "srp"
                    ) -> list[EvalItem]:
    """The items outside the reference part (``id_part`` false): what a base built with
    ``fraction`` and ``salt`` may be evaluated on."""
    return [i for i in items if not id_part(i.id, fraction, salt=salt)]
