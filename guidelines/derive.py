"""Facts guidelines derive from a :class:`~pyql.feedback.Feedback`, and how hints show them.

The Session reports what happened; some facts a guideline needs are derived here rather than
stored: which variables an ``add_fact`` introduces (``args`` against ``memory.variables``), the
calls that would be valid next (``get_relation`` of bound variables and linked entities), whether
a node was linked, which variable displayed a label the model copied as an id.

Lists are rendered the way the paper's guidelines show them (Python list syntax):

>>> fmt_list(["?car", "?speed"])
"['?car', '?speed']"
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyql.errors import ParseError
from pyql.feedback import Feedback, Relations
from pyql.memory import Memory
from pyql.program import TOOLSETS, Signature
from pyql.syntax import AtomKind, lex_atom
from pyql.terms import Entity, Literal, Relation, Var

__all__ = [
    "fmt_list",
    "fmt_relations",
    "term_text",
    "node_key",
    "literal_lexical",
    "linked_targets",
    "is_linked",
    "bound_variables",
    "get_relation_calls",
    "value_owner",
    "new_variables",
    "signature_of",
    "closest",
    "arg_text",
    "bad_arg_text",
]


def fmt_list(items: Iterable[Any]) -> str:
    """``['a', 'b']``: how the paper's guidelines list options."""
    return str([str(i) for i in items])


def fmt_relations(relations: Relations) -> str:
    """``{'forward': [...], 'backward': [...]}``: how observations show a relation list (opaque
    ids with their labels: ``P161 (cast member)``)."""
    shown = relations.shown
    return str({"forward": [shown(r) for r in relations.forward],
                "backward": [shown(r) for r in relations.backward]})


def term_text(term: Any) -> str:
    """The short form of a resolved argument, as the model would write it."""
    if isinstance(term, Var):
        return str(term)
    if isinstance(term, (Entity, Relation)):
        return term.short
    if isinstance(term, Literal):
        return term.lexical
    return str(term)


def node_key(term: Any) -> str:
    """The key of a node in ``Memory.relations`` (``?x`` for variables, the short id else)."""
    if isinstance(term, Var):
        return str(term)
    if isinstance(term, (Entity, Literal)):
        return term.short
    return str(term)


def literal_lexical(value: str) -> str | None:
    """The lexical form when an entity-table value is a literal (``"1.0"^^xsd:float`` -> 1.0)."""
    text = value.strip()
    if not text.startswith(('"', "'")):
        return None
    try:
        atom = lex_atom(text)
    except ParseError:
        return None
    return atom.value if atom.kind is AtomKind.STRING else None


def linked_targets(memory: Memory) -> list[str]:
    """What to write to query a linked entity: its id, or the mention of a linked literal."""
    out: list[str] = []
    for mention, value in memory.entities.items():
        out.append(mention if literal_lexical(value) is not None else value)
    return list(dict.fromkeys(out))


def is_linked(term: Any, memory: Memory) -> bool:
    """Whether an entity/literal argument is one of the question's linked entities."""
    entities: Mapping[str, str] = memory.entities
    if isinstance(term, Entity):
        values = set(entities.values())
        return term.short in values or term.iri in values or str(term) in values
    if isinstance(term, Literal):
        lexicals = {literal_lexical(v) for v in entities.values()} - {None}
        return term.lexical in entities or term.lexical in lexicals
    return False


def bound_variables(memory: Memory) -> list[str]:
    """Variables of the query that have values (``?x`` form), in order of appearance."""
    return [v for v in memory.variables if v in memory.bound_variables] or list(
        memory.bound_variables
    )


def get_relation_calls(memory: Memory, *, exclude: Iterable[str] = ()) -> list[str]:
    """Valid next ``get_relation`` calls: bound variables, then linked entities."""
    skip = set(exclude)
    nodes = [*bound_variables(memory), *linked_targets(memory)]
    return [f"get_relation({n})" for n in dict.fromkeys(nodes) if n not in skip]


def value_owner(memory: Memory, text: str) -> str | None:
    """The variable whose last shown values include ``text`` (a label copied as an id)."""
    folded = text.strip().casefold()
    for var, values in memory.last_values.items():
        if any(v.casefold() == folded for v in values.values):
            return var
    return None


def new_variables(feedback: Feedback, positions: Sequence[int]) -> list[str]:
    """Distinct variables at ``positions`` of the resolved args that the memory has never seen."""
    seen = set(feedback.memory.variables)
    out = []
    for i in positions:
        if i < len(feedback.args) and isinstance(feedback.args[i], Var):
            name = str(feedback.args[i])
            if name not in seen and name not in out:
                out.append(name)
    return out


def signature_of(feedback: Feedback, function: str | None = None) -> Signature | None:
    """The DSL signature of the step's function in the step's toolset (None if unknown)."""
    name = function or feedback.function
    toolset = TOOLSETS.get(feedback.tools)
    if name is None or toolset is None:
        return None
    return toolset.get(name)


def closest(word: str, candidates: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` candidates close to ``word`` (case-insensitive), best first."""
    pool = list(dict.fromkeys(str(c) for c in candidates))
    by_fold = {c.casefold(): c for c in reversed(pool)}
    hits = difflib.get_close_matches(word.casefold(), list(by_fold), n=n, cutoff=cutoff)
    return [by_fold[h] for h in hits]


def arg_text(feedback: Feedback, index: int) -> str | None:
    """Argument ``index`` of the call as written (None if absent)."""
    call = feedback.call
    if call is None or index >= len(call.args):
        return None
    atom = call.args[index]
    return atom.value if atom.kind in (AtomKind.NAME, AtomKind.STRING) else str(atom)


def bad_arg_text(feedback: Feedback) -> str:
    """The argument a ``bad_term`` error is about, as the model wrote it."""
    py = feedback.python
    if py.arg_index is not None:
        written = arg_text(feedback, py.arg_index)
        if written is not None:
            return written
    return py.arg_text or "?"
