"""Resolution: what a written argument means in a slot, given the KB profile and the entities.

:func:`parse_term` turns what an LLM or a person writes into a term (:mod:`pyql.terms`) for a
given *slot* (which kinds the argument position accepts), using the KB
:class:`~pyql.profiles.Profile` and the question's entity table (mention -> KB id). Text that is
none of the accepted kinds is a :class:`~pyql.errors.TermError` saying what was expected; it is
never silently a variable.

>>> from pyql.profiles import FREEBASE
>>> str(parse_term("m.0crbvqz", Slot.NODE, Context(FREEBASE)))
'<http://rdf.freebase.com/ns/m.0crbvqz>'
>>> parse_term("?x", Slot.NODE, Context(FREEBASE))
Var(name='x')
>>> str(parse_term('"1.0"^^xsd:float', Slot.VALUE, Context(FREEBASE)))
'"1.0"^^<http://www.w3.org/2001/XMLSchema#float>'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Flag, auto
from functools import lru_cache

from pyql.errors import ParseError, TermError, UnknownEntityError
from pyql.profiles import Profile
from pyql.syntax import Atom, AtomKind, lex_atom
from pyql.terms import _NUMERIC, XSD, Entity, Literal, Relation, Term, Var, validate_iri

__all__ = ["Slot", "Context", "parse_term", "resolve_atom"]

_BARE_VAR = re.compile(r"x\d+")  # original PyQL writes variables as 'x0', 'x1', ...
_ISO_DATE = re.compile(r"-?\d{4}(-\d{2}(-\d{2})?)?")
_ISO_DATETIME = re.compile(r"-?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?")


class Slot(Flag):
    """What an argument position accepts. Combine with ``|``."""

    VAR = auto()  # ?x (and, in original PyQL style, bare x0)
    ENTITY = auto()  # an id, IRI, prefixed name, or a linked mention
    LITERAL = auto()  # numbers, quoted strings, typed literals, dates
    RELATION = auto()  # a relation name / IRI
    CLASS = auto()  # a type (for add_type)

    NODE = VAR | ENTITY | LITERAL
    VALUE = VAR | ENTITY | LITERAL

    def __contains__(self, other: object) -> bool:
        # Flag's own test is general and slow; resolution asks it for every argument
        if type(other) is Slot:
            return other._value_ & self._value_ == other._value_
        return super().__contains__(other)

    def describe(self) -> str:
        names = {
            Slot.VAR: "a variable (?x)",
            Slot.ENTITY: "an entity id or linked mention",
            Slot.LITERAL: "a literal (number, date or quoted string)",
            Slot.RELATION: "a relation",
            Slot.CLASS: "a type",
        }
        parts = [text for flag, text in names.items() if flag in self]
        return " or ".join(parts)


@dataclass(frozen=True)
class Context:
    """What term parsing needs to know: the KB profile and the question's entity table."""

    profile: Profile
    entities: Mapping[str, str] = field(default_factory=dict)

    def entity_for_mention(self, text: str) -> str | None:
        if text in self.entities:
            return self.entities[text]
        folded = text.casefold()
        for mention, kb_id in self.entities.items():
            if mention.casefold() == folded:
                return kb_id
        return None

    def is_linked_id(self, text: str) -> bool:
        return text in set(self.entities.values())


def _datatype_iri(written: str, profile: Profile, source: str) -> str:
    if written.startswith(("http://", "https://", "urn:")):
        return validate_iri(written)
    prefix, _, local = written.partition(":")
    base = profile.prefixes.get(prefix)
    if base is None:
        raise TermError(
            f"unknown prefix {prefix!r} in datatype {written!r}",
            text=source,
            expected=f"one of the prefixes {', '.join(sorted(profile.prefixes))}",
        )
    return validate_iri(base + local)


def _number_literal(text: str, datatype: str | None) -> Literal:
    if datatype is not None:
        return Literal(text, datatype)
    if re.fullmatch(r"[+-]?\d+", text):
        return Literal(text, XSD + "integer")
    if "e" in text.lower():
        return Literal(text, XSD + "double")
    return Literal(text, XSD + "decimal")


def _bare_temporal(text: str) -> Literal | None:
    if _ISO_DATETIME.fullmatch(text):
        return Literal(text, XSD + "dateTime")
    if _ISO_DATE.fullmatch(text) and "-" in text.lstrip("-"):
        return Literal(text, XSD + "date") if text.count("-") - text.startswith("-") == 2 else None
    return None


def _linked_literal(kb_id: str, slot: Slot, ctx: Context) -> Literal | None:
    """The literal an entity table links a mention to (``"2011-12-31"^^xsd:dateTime``,
    ``1.0^^http://www.w3.org/2001/XMLSchema#float``), if the table links it to one."""
    # only an explicitly written literal counts: a plain "1984" in the table is an id (MetaQA)
    if Slot.LITERAL not in slot or not kb_id or (kb_id[0] not in "\"'" and "^^" not in kb_id):
        return None
    try:
        atom = lex_atom(kb_id)
    except ParseError:
        return None
    if atom.kind not in (AtomKind.STRING, AtomKind.NUMBER):
        return None
    term = resolve_atom(atom, Slot.LITERAL, Context(ctx.profile))
    return term if isinstance(term, Literal) else None


def _linked(value: str, slot: Slot, ctx: Context) -> Term | None:
    """What the entity table links ``value`` to, for this slot: an entity or a literal."""
    kb_id = ctx.entity_for_mention(value)
    if kb_id is None:
        return None
    literal = _linked_literal(kb_id, slot, ctx)
    if literal is not None:
        return literal
    if Slot.ENTITY in slot and not kb_id.startswith(("\"", "'")):
        return ctx.profile.entity(kb_id)
    return None


def _linked_or_entity_id(value: str, slot: Slot, ctx: Context) -> Term | None:
    """What the entity table links ``value`` to, else the entity of a linked or known id."""
    linked = _linked(value, slot, ctx)
    if linked is not None:
        return linked
    if Slot.ENTITY in slot and (ctx.is_linked_id(value) or ctx.profile.is_entity_id(value)):
        return ctx.profile.entity(value)
    return None


@lru_cache(maxsize=1 << 12)
def _var(name: str) -> Var:
    """The variable called ``name`` (variables are frozen values: programs reuse a few names)."""
    return Var(name)


def resolve_atom(atom: Atom, slot: Slot, ctx: Context, *, source: str | None = None) -> Term:
    """Give a lexical :class:`~pyql.syntax.Atom` its meaning for ``slot``.

    Resolution order for a bare name: variable (``x0`` style, where a variable is allowed) ->
    relation (in a relation slot) -> a mention or id of the entity table -> an id the profile
    recognises (``m.0x``) -> a prefixed name with a known prefix -> a bare ISO date (literal
    slots). Anything else is a :class:`TermError` naming what the slot expects.
    """
    profile = ctx.profile

    def written() -> str:  # the argument as written, for errors only (most atoms resolve)
        return source if source is not None else str(atom)

    def refuse(what: str) -> TermError:
        expected, text = slot.describe(), written()
        return TermError(f"expected {expected}, got {what} {text!r}", text=text, expected=expected)

    if atom.kind is AtomKind.VAR:
        if Slot.VAR not in slot:
            raise refuse("a variable")
        return _var(atom.value)

    if atom.kind is AtomKind.IRI:
        iri = validate_iri(atom.value)
        if Slot.RELATION in slot or Slot.CLASS in slot:
            return Relation(iri, profile.compact(iri))
        if Slot.ENTITY in slot:
            return Entity(iri, profile.compact(iri))
        raise refuse("an IRI")

    if atom.kind is AtomKind.NUMBER:
        linked = _linked(atom.value, slot, ctx) if atom.datatype is None else None
        if linked is not None:  # a linked number keeps its linked datatype (1.0 -> xsd:float)
            return linked
        if Slot.LITERAL in slot:
            dt = _datatype_iri(atom.datatype, profile, written()) if atom.datatype else None
            return _number_literal(atom.value, dt)
        raise refuse("a number")

    if atom.kind is AtomKind.STRING:
        if atom.lang or atom.datatype:
            if Slot.LITERAL not in slot:
                raise refuse("a literal")
            dt = _datatype_iri(atom.datatype, profile, written()) if atom.datatype else None
            if dt in _NUMERIC and not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", atom.value):
                raise TermError(
                    f"{atom.value!r} is not a valid number for its datatype", text=written(),
                    expected="a number",
                )
            return Literal(atom.value, dt, atom.lang)
        value = atom.value
        entity = _linked_or_entity_id(value, slot, ctx)
        if entity is not None:
            return entity
        if Slot.RELATION in slot or Slot.CLASS in slot:
            return profile.relation(value)
        if Slot.LITERAL in slot:
            return Literal(value)
        if Slot.VAR in slot and _BARE_VAR.fullmatch(value):
            return Var(value)
        raise refuse("a string")

    # NAME
    value = atom.value
    if Slot.VAR in slot and _BARE_VAR.fullmatch(value) and ctx.entity_for_mention(value) is None:
        return Var(value)
    if Slot.RELATION in slot or Slot.CLASS in slot:
        return profile.relation(value)
    entity = _linked_or_entity_id(value, slot, ctx)
    if entity is not None:
        return entity
    if Slot.ENTITY in slot:
        prefixed = profile.expand_prefixed(value)
        if prefixed is not None:
            return Entity(prefixed, value)
    if Slot.LITERAL in slot:
        temporal = _bare_temporal(value)
        if temporal is not None:
            return temporal
        if value in ("true", "false"):
            return Literal(value, XSD + "boolean")
    if Slot.ENTITY in slot:
        raise UnknownEntityError(
            f"unknown entity {value!r}: not a variable, an id, a literal or a linked mention"
            + (f" (linked: {', '.join(sorted(ctx.entities))})" if ctx.entities else ""),
            text=written(),
            expected=slot.describe(),
        )
    raise refuse("the text")


def parse_term(text: str, slot: Slot, ctx: Context) -> Term:
    """Parse ``text`` as a term for ``slot``; raise :class:`TermError` when it is not one."""
    try:
        atom = lex_atom(text)
    except ParseError as exc:
        raise TermError(f"cannot parse {text!r}: {exc.description}", text=text,
                        expected=slot.describe()) from None
    return resolve_atom(atom, slot, ctx, source=text.strip())
