"""Helpers shared by the SPARQL pack's guidelines."""

from __future__ import annotations

from difflib import SequenceMatcher

from pyql.feedback import Feedback, Relations
from pyql.guidelines.derive import bound_variables, fmt_list, linked_targets
from pyql.syntax import AtomKind
from pyql.terms import Entity, Var

__all__ = [
    "SPARQL", "HINT_RELATIONS", "atom_key", "capped_relations", "cut_note", "existing_text",
    "is_exclusion", "linked_text", "used_before",
]

#: at most this many relations are listed in a hint (a Freebase node may have hundreds)
HINT_RELATIONS = 20

SPARQL = frozenset({"sparql"})


def atom_key(feedback: Feedback, index: int) -> str | None:
    """The memory key of argument ``index`` as written (mentions mapped to their ids)."""
    call = feedback.call
    if call is None or index >= len(call.args):
        return None
    atom = call.args[index]
    if atom.kind is AtomKind.VAR:
        return f"?{atom.value}"
    return feedback.memory.entities.get(atom.value, atom.value)


def used_before(feedback: Feedback, text: str) -> bool:
    """Whether an accepted call already used this argument text (e.g. an id of a gold program)."""
    return any(a.value == text for c in feedback.memory.calls for a in c.args)


def existing_text(feedback: Feedback) -> str:
    """``Existing variables include: ['?a', '?b']`` or a note that there are none yet."""
    bound = bound_variables(feedback.memory)
    if not bound:
        return "There are no variables yet: add a fact with add_fact() first."
    return f"Existing variables include: {fmt_list(bound)}."


def linked_text(feedback: Feedback) -> str:
    targets = linked_targets(feedback.memory)
    return f"Linked entities: {fmt_list(targets)}." if targets else ""


def is_exclusion(feedback: Feedback) -> bool:
    """``add_filter(?x, !=, m.0x)`` / ``add_filter(?x, !=, ?y)``: the WebQSP pattern that keeps the
    question's own entity out of the answers. It may precede the facts that bind ``?x``."""
    args = feedback.args
    return (len(args) == 3 and isinstance(args[0], Var) and args[1] == "!="
            and isinstance(args[2], (Entity, Var)))


def capped_relations(relations: Relations, near: str,
                     limit: int = HINT_RELATIONS) -> tuple[Relations, int]:
    """``relations`` as a hint lists them, and how many there are in all.

    Up to ``limit`` they are kept as listed (the order of the observation). Beyond, the
    ``limit`` closest to ``near`` (the relation the model chose; text similarity, ties in listed
    order) are kept: deterministic, and without the agent's rankers, which the guidelines may not
    import.

    >>> rels = Relations(forward=("a.b.c", "film.film.directed_by", "x.y.z"), backward=("q.r",))
    >>> capped_relations(rels, "film.film.director", limit=2)
    (Relations(forward=('a.b.c', 'film.film.directed_by'), backward=()), 4)
    """
    every = relations.all
    if len(every) <= limit:
        return relations, len(every)
    order = {r: i for i, r in enumerate(every)}
    ranked = sorted(every, key=lambda r: (-SequenceMatcher(None, near, r).ratio(), order[r]))
    keep = set(ranked[:limit])
    forward = tuple(r for r in relations.forward if r in keep)
    backward = tuple(r for r in relations.backward if r in keep and r not in forward)
    return Relations(forward=forward, backward=backward, labels=relations.labels), len(every)


def cut_note(shown: Relations, total: int, near: str) -> str:
    """`` (20 of 143 shown: the closest to r; get_relation(n) lists them all)`` when cut."""
    if len(shown.all) >= total:
        return ""
    return f" ({len(shown.all)} of {total} shown, the closest to {near})"
