"""Helpers shared by the SPARQL pack's guidelines."""

from __future__ import annotations

from pyql.feedback import Feedback
from pyql.guidelines.derive import bound_variables, fmt_list, linked_targets
from pyql.syntax import AtomKind
from pyql.terms import Entity, Var

__all__ = ["SPARQL", "atom_key", "existing_text", "is_exclusion", "linked_text"]

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
