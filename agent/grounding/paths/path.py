"""The typed reasoning path of Readi (and SRP): one constraint per topic entity, each a sequence
of natural-language relations, in the paper's text format (appendix F)::

    Path: { "France": [ France → border → country ], "Nijmegen": [ Nijmegen → serve_airport → contain ] }

Each list starts with its topic entity (as the paper's demonstrations write it; a list without
it is read the same), relations are separated by ``→`` or ``->``. An edit answers one
constraint as a chain (``Final Path: Miley Cyrus→film.actor.film→ film.performance.film``),
read by :func:`parse_chain`.

>>> path = parse_path('Path: { "France": [ France → border → country ] }')
>>> path.constraints[0].relations
('border', 'country')
>>> parse_path(str(path)) == path
True
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pyql.errors import InputError

if TYPE_CHECKING:
    from pyql.program import Program

__all__ = ["ARROW", "Constraint", "PathFormatError", "ReasoningPath", "error_block", "parse_chain",
           "parse_path", "path_from_program"]

#: the arrow a printed path uses; ``->`` is read too
ARROW = "→"
#: the arrows a path may join its relations with (the paper's, and what models write instead)
ARROWS = ("→", "->", "⟶", "=>")
_ARROWS = re.compile(r"\s*(?:" + "|".join(map(re.escape, ARROWS)) + r")\s*")
# the paper's PDF text has typographic quotes around keys
_QUOTES = {"“": '"', "”": '"', "‘": "'", "’": "'"}

Reason = Literal["no_path", "bad_key", "bad_list", "unclosed", "duplicate_entity",
                 "empty_relation", "unknown_entity"]


class PathFormatError(InputError, ValueError):
    """Text that is not a reasoning path. ``reason`` says why (a code, stable), ``position`` is
    the 0-based offset in ``text`` where reading stopped."""

    def __init__(self, reason: Reason, message: str, text: str = "", position: int = 0) -> None:
        self.reason = reason
        self.description = message
        self.text = text
        self.position = position
        super().__init__(f"{message} (at offset {position})")


def error_block(initial: str, messages: Sequence[str], context: Sequence[str]) -> str:
    """The error block of the edit prompt (appendix F) for a stuck path of any kind: the path,
    the numbered error messages and the instantiation context.

    >>> print(error_block("Initial Path: a → r", ["empty reasoning path."], ["Candidates", "[]"]))
    Initial Path: a → r
    Error Message
    1. empty reasoning path.
    Instantiation Context
    Candidates
    []
    """
    lines = [initial, "Error Message", *(f"{i}. {m}" for i, m in enumerate(messages, 1)),
             "Instantiation Context", *context]
    return "\n".join(lines)


@dataclass(frozen=True)
class Constraint:
    """The relations from one topic entity towards the answer (in natural language)."""

    entity: str
    relations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "relations", tuple(self.relations))

    def chain(self) -> str:
        """``France → border → country`` (the entity alone for an empty constraint)."""
        return f" {ARROW} ".join((self.entity, *self.relations))

    def with_relations(self, relations: Iterable[str]) -> Constraint:
        return Constraint(self.entity, tuple(relations))

    def __str__(self) -> str:
        return f"{json.dumps(self.entity, ensure_ascii=False)}: [ {self.chain()} ]"


@dataclass(frozen=True)
class ReasoningPath:
    """One constraint per topic entity; printable back in the paper's format."""

    constraints: tuple[Constraint, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "constraints", tuple(self.constraints))
        seen: set[str] = set()
        for c in self.constraints:
            if c.entity in seen:
                raise PathFormatError("duplicate_entity", f"two constraints start from {c.entity!r}")
            seen.add(c.entity)

    @classmethod
    def of(cls, mapping: Mapping[str, Sequence[str]]) -> ReasoningPath:
        """``ReasoningPath.of({"France": ["border", "country"]})``."""
        return cls(tuple(Constraint(e, tuple(r)) for e, r in mapping.items()))

    @classmethod
    def empty(cls, entities: Iterable[str]) -> ReasoningPath:
        """No relation from any topic entity (the paper's "empty" initial path)."""
        return cls(tuple(Constraint(e) for e in entities))

    @classmethod
    def parse(cls, text: str) -> ReasoningPath:
        return parse_path(text)

    def as_dict(self) -> dict[str, list[str]]:
        return {c.entity: list(c.relations) for c in self.constraints}

    def constraint(self, entity: str) -> Constraint:
        for c in self.constraints:
            if c.entity == entity:
                return c
        raise KeyError(entity)

    def replace(self, constraint: Constraint) -> ReasoningPath:
        """The path with the constraint of ``constraint.entity`` replaced (or added)."""
        out = [constraint if c.entity == constraint.entity else c for c in self.constraints]
        if all(c.entity != constraint.entity for c in self.constraints):
            out.append(constraint)
        return ReasoningPath(tuple(out))

    @property
    def length(self) -> int:
        """The number of relations, all constraints together."""
        return sum(len(c.relations) for c in self.constraints)

    def __str__(self) -> str:
        return "Path: { " + ", ".join(str(c) for c in self.constraints) + " }"


# -- parsing ---------------------------------------------------------------------------------------
def _normalise(text: str) -> str:
    for a, b in _QUOTES.items():
        text = text.replace(a, b)
    return text


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _read_key(text: str, i: int) -> tuple[str, int]:
    quote = text[i] if i < len(text) else ""
    if quote == '"':
        decoder = json.JSONDecoder()
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise PathFormatError("bad_key", f"the entity name is not a closed string: {exc.msg}",
                                  text, i) from None
        return str(value), end
    if quote == "'":
        end = text.find("'", i + 1)
        if end < 0:
            raise PathFormatError("bad_key", "the entity name is not a closed string", text, i)
        return text[i + 1:end], end + 1
    raise PathFormatError("bad_key", "expected a quoted topic entity", text, i)


def _relations(entity: str, body: str, text: str, position: int) -> tuple[str, ...]:
    body = body.strip()
    if not body:
        return ()
    # the list repeats its entity first (paper's format); it may contain an arrow itself
    for head in (entity, json.dumps(entity, ensure_ascii=False), f"'{entity}'"):
        if body == head:
            return ()
        m = _ARROWS.match(body, len(head)) if body.startswith(head) else None
        if m is not None:
            body = body[m.end():]
            break
    parts = [p.strip().strip("\"'").strip() for p in _ARROWS.split(body)]
    if any(not p for p in parts):
        raise PathFormatError("empty_relation",
                              f"an empty relation in the path from {entity!r}", text, position)
    return tuple(parts)


def parse_path(text: str, entities: Iterable[str] | None = None) -> ReasoningPath:
    """Read the first ``{ "entity": [ entity → r1 → r2 ], ... }`` of ``text`` (after a
    ``Path:`` label if there is one). ``entities``: the topic entities of the question; a
    constraint from another entity is :class:`PathFormatError` ``unknown_entity``."""
    text = _normalise(text)
    label = re.search(r"(?:Final\s+)?Path\s*:", text, re.IGNORECASE)
    start = text.find("{", label.end() if label else 0)
    if start < 0:
        raise PathFormatError("no_path", "no reasoning path ({ \"entity\": [ ... ] }) found",
                              text, label.end() if label else 0)
    constraints: list[Constraint] = []
    i = _skip(text, start + 1)
    while True:
        if i >= len(text):
            raise PathFormatError("unclosed", "the path is not closed with '}'", text, i)
        if text[i] == "}":
            break
        entity, i = _read_key(text, i)
        i = _skip(text, i)
        if i >= len(text) or text[i] != ":":
            raise PathFormatError("bad_list", f"expected ':' after {entity!r}", text, i)
        i = _skip(text, i + 1)
        if i >= len(text) or text[i] != "[":
            raise PathFormatError("bad_list", f"expected '[' to open the path from {entity!r}",
                                  text, i)
        close = text.find("]", i + 1)
        if close < 0:
            raise PathFormatError("unclosed", f"the path from {entity!r} is not closed with ']'",
                                  text, i)
        constraints.append(Constraint(entity, _relations(entity, text[i + 1:close], text, i)))
        i = _skip(text, close + 1)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
    _check_unique(constraints, text, start)
    path = ReasoningPath(tuple(constraints))
    _check_entities(path, entities, text, start)
    return path


def _check_unique(constraints: Sequence[Constraint], text: str, position: int) -> None:
    names = [c.entity for c in constraints]
    for name in names:
        if names.count(name) > 1:
            raise PathFormatError("duplicate_entity", f"two constraints start from {name!r}",
                                  text, position)


def _check_entities(path: ReasoningPath, entities: Iterable[str] | None, text: str,
                    position: int) -> None:
    if entities is None:
        return
    known = {e.casefold() for e in entities}
    for c in path.constraints:
        if c.entity.casefold() not in known:
            raise PathFormatError("unknown_entity",
                                  f"{c.entity!r} is not a topic entity of the question", text,
                                  position)


def parse_chain(text: str, entities: Iterable[str] | None = None) -> Constraint:
    """One constraint written as a chain, as the edit prompt answers
    (``Final Path: Miley Cyrus→film.actor.film→ film.performance.film``): the text after the last
    ``Final Path:`` (else ``Path:``) label, up to the end of its line. With ``entities``, the
    chain must start with one of them (the longest that matches)."""
    text = _normalise(text)
    labels = list(re.finditer(r"(?:Final\s+)?Path\s*:", text, re.IGNORECASE))
    if not labels:
        raise PathFormatError("no_path", "no 'Final Path:' line found", text, 0)
    finals = [m for m in labels if m.group(0).lower().startswith("final")]
    label = (finals or labels)[-1]
    line = text[label.end():].strip().splitlines()[0] if text[label.end():].strip() else ""
    line = line.strip().strip("[]").strip()
    if not line:
        raise PathFormatError("no_path", "the 'Final Path:' line is empty", text, label.end())
    if entities is not None:
        for entity in sorted(entities, key=len, reverse=True):
            if line == entity:
                return Constraint(entity)
            if line.startswith(entity):
                rest = _ARROWS.match(line, len(entity))
                if rest is not None:
                    return Constraint(entity, _relations(entity, line, text, label.end()))
        raise PathFormatError("unknown_entity", "the chain does not start with a topic entity",
                              text, label.end())
    head, *rels = _ARROWS.split(line)
    head = head.strip().strip("\"'")
    if not head or any(not r.strip() for r in rels):
        raise PathFormatError("empty_relation", "an empty element in the chain", text, label.end())
    return Constraint(head, tuple(r.strip().strip("\"'").strip() for r in rels))


def path_from_program(program: Program | str, entities: Mapping[str, str]) -> ReasoningPath:
    """The relation path a PyQL (SPARQL) program follows from each topic entity: its
    ``add_fact`` chain, hop by hop, from the entity to a variable, then on from that variable
    (a gold stand-in's path). A hop followed from the tail to the head is written ``^relation``
    (see :func:`pyql.agent.grounding.paths.instantiate.split_inverse`). Entities the program does not
    start from get no constraint.

    >>> path_from_program("add_fact(?m, written_by, John Godey)\\nadd_fact(?m, directed_by, ?d)"
    ...                   "\\nset_answer(?d)", {"John Godey": "John Godey"}).as_dict()
    {'John Godey': ['^written_by', 'directed_by']}
    """
    from pyql.program import Program as _Program
    from pyql.syntax import AtomKind

    prog = _Program.parse(program) if isinstance(program, str) else program
    facts = [c for c in prog if c.name == "add_fact" and len(c.args) == 3]
    constraints = []
    for mention, kb_id in entities.items():
        names = {mention.casefold(), kb_id.casefold()}
        node: str | None = None  # None: the topic entity itself
        seen: set[str] = set()
        relations: list[str] = []
        used: set[int] = set()
        while True:
            step = None
            for i, call in enumerate(facts):
                if i in used:
                    continue
                head, rel, tail = call.args
                for here, there, inverse in ((head, tail, ""), (tail, head, "^")):
                    at_node = (here.kind is AtomKind.VAR and here.value == node) if node else (
                        here.kind is not AtomKind.VAR and here.value.casefold() in names)
                    if at_node and there.kind is AtomKind.VAR and there.value not in seen:
                        step = (i, inverse + rel.value, there.value)
                        break
                if step:
                    break
            if step is None:
                break
            i, rel_name, var = step
            used.add(i)
            seen.add(var)
            relations.append(rel_name)
            node = var
        if relations:
            constraints.append(Constraint(mention, tuple(relations)))
    return ReasoningPath(tuple(constraints))
