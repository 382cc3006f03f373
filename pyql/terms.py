"""Typed terms: variables, entities, relations and literals.

Terms are frozen, hashable values; ``str(term)`` is valid SPARQL (IRIs in ``<...>``, literals
quoted and escaped), so a term can never break out of its position in a query.

:func:`parse_term` turns what an LLM or a person writes into a term for a given *slot* (which
kinds the argument position accepts), using the KB :class:`~pyql.profiles.Profile` and the
question's entity table (mention -> KB id). Text that is none of the accepted kinds is a
:class:`~pyql.errors.TermError` saying what was expected; it is never silently a variable.

>>> from pyql.profiles import FREEBASE
>>> str(parse_term("m.0crbvqz", Slot.NODE, Context(FREEBASE)))
'<http://rdf.freebase.com/ns/m.0crbvqz>'
>>> parse_term("?x", Slot.NODE, Context(FREEBASE))
Var(name='x')
>>> str(parse_term('"1.0"^^xsd:float', Slot.VALUE, Context(FREEBASE)))
'"1.0"^^<http://www.w3.org/2001/XMLSchema#float>'
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import Flag, auto
from typing import TYPE_CHECKING

import pyoxigraph as _ox

from pyql.errors import ParseError, TermError, UnknownEntityError
from pyql.syntax import Atom, AtomKind, lex_atom, quote_string

if TYPE_CHECKING:
    from pyql.profiles import Profile

__all__ = [
    "XSD",
    "RDF_TYPE",
    "Var",
    "Entity",
    "Relation",
    "Literal",
    "BlankNode",
    "Term",
    "Node",
    "Slot",
    "Context",
    "parse_term",
    "resolve_atom",
    "validate_iri",
]

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
_INVALID_IRI_CHARS = re.compile(r'[\x00-\x20<>"{}|^`\\]')
# SPARQL's VARNAME (PN_CHARS_U, digits, and the combining/extender characters after the first),
# restricted to the BMP, which is what Oxigraph accepts. ``\w`` is wider (``?x²`` is not SPARQL).
_PN_CHARS_U = (
    "A-Za-z_\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd"
)
_VAR_NAME = re.compile(f"[{_PN_CHARS_U}0-9][{_PN_CHARS_U}0-9\u00b7\u0300-\u036f\u203f\u2040]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BARE_VAR = re.compile(r"x\d+")  # original PyQL writes variables as 'x0', 'x1', ...
_ISO_DATE = re.compile(r"-?\d{4}(-\d{2}(-\d{2})?)?")
_ISO_DATETIME = re.compile(r"-?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?")


def validate_iri(iri: str) -> str:
    """Return ``iri`` if it can be written between ``<>`` in SPARQL, else raise TermError."""
    if not iri or _INVALID_IRI_CHARS.search(iri):
        raise TermError(f"invalid IRI {iri!r}", text=iri, expected="an IRI without spaces or <>\"{}|^`\\")
    if ":" not in iri:
        raise TermError(f"IRI {iri!r} is not absolute (no scheme)", text=iri, expected="an absolute IRI")
    try:  # the full RFC 3987 check (percent-encoding, host, one '#', ...), as SPARQL parsers do
        _ox.NamedNode(iri)
    except ValueError as exc:  # UnicodeEncodeError (lone surrogates) is a ValueError too
        raise TermError(f"invalid IRI {iri!r}: {exc}", text=iri, expected="a valid IRI") from None
    return iri


@dataclass(frozen=True, slots=True)
class Var:
    """A query variable. ``str(Var("x"))`` is ``?x``."""

    name: str

    def __post_init__(self) -> None:
        if not _VAR_NAME.fullmatch(self.name):
            raise TermError(f"invalid variable name {self.name!r}", text=self.name, expected="?name")

    def __str__(self) -> str:
        return f"?{self.name}"


@dataclass(frozen=True, slots=True)
class Entity:
    """A KB node named by an IRI. ``id`` is the short form the LLM writes (``m.0crbvqz``)."""

    iri: str
    id: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate_iri(self.iri)

    def __str__(self) -> str:
        return f"<{self.iri}>"

    @property
    def short(self) -> str:
        return self.id if self.id is not None else str(self)


@dataclass(frozen=True, slots=True)
class Relation:
    """A KB relation (predicate) named by an IRI; ``name`` is its short form."""

    iri: str
    name: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate_iri(self.iri)

    def __str__(self) -> str:
        return f"<{self.iri}>"

    @property
    def short(self) -> str:
        return self.name if self.name is not None else str(self)


@dataclass(frozen=True, slots=True)
class BlankNode:
    """A blank node seen in results (never written by the LLM)."""

    id: str

    def __str__(self) -> str:
        return f"_:{self.id}"

    @property
    def short(self) -> str:
        return str(self)


_NUMERIC = {XSD + t for t in ("integer", "decimal", "double", "float", "int", "long", "short",
                             "nonNegativeInteger", "positiveInteger", "negativeInteger",
                             "nonPositiveInteger", "unsignedInt", "unsignedLong", "byte")}
_TEMPORAL = {XSD + t for t in ("date", "dateTime", "gYear", "gYearMonth", "time")}


@dataclass(frozen=True, slots=True)
class Literal:
    """An RDF literal: lexical form, datatype IRI (None = xsd:string) and language tag."""

    lexical: str
    datatype: str | None = None
    lang: str | None = None

    def __post_init__(self) -> None:
        if _SURROGATE.search(self.lexical):
            raise TermError("a literal cannot contain a lone surrogate (not valid UTF-8)",
                            text=self.lexical.encode("utf-8", "backslashreplace").decode(),
                            expected="valid unicode text")
        if self.lang is not None:
            if self.datatype not in (None, RDF_LANG_STRING):
                raise TermError("a literal has either a language or a datatype", text=self.lexical,
                                expected="a language tag or a datatype, not both")
            if not re.fullmatch(r"[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*", self.lang):
                raise TermError(f"invalid language tag {self.lang!r}", text=self.lang,
                                expected="a BCP 47 language tag (en, en-GB)")
            try:  # BCP 47 well-formedness (``en-a`` is not), as SPARQL parsers check it
                _ox.Literal("", language=self.lang)
            except ValueError:
                raise TermError(f"invalid language tag {self.lang!r}", text=self.lang,
                                expected="a BCP 47 language tag (en, en-GB)") from None
            object.__setattr__(self, "datatype", None)
        elif self.datatype is not None:
            validate_iri(self.datatype)
            if self.datatype == XSD + "string":
                object.__setattr__(self, "datatype", None)

    def __str__(self) -> str:
        body = quote_string(self.lexical)
        if self.lang:
            return f"{body}@{self.lang}"
        if self.datatype:
            return f"{body}^^<{self.datatype}>"
        return body

    @property
    def short(self) -> str:
        return self.lexical

    @property
    def is_numeric(self) -> bool:
        return self.datatype in _NUMERIC

    @property
    def is_temporal(self) -> bool:
        return self.datatype in _TEMPORAL

    @property
    def value(self) -> int | float | Decimal | str | _dt.date | _dt.datetime:
        """The Python value when the lexical form is valid for the datatype, else the text."""
        dt = self.datatype
        try:
            if dt in (XSD + "integer", XSD + "int", XSD + "long", XSD + "short", XSD + "byte",
                      XSD + "nonNegativeInteger", XSD + "positiveInteger",
                      XSD + "negativeInteger", XSD + "nonPositiveInteger",
                      XSD + "unsignedInt", XSD + "unsignedLong"):
                return int(self.lexical)
            if dt == XSD + "decimal":
                return Decimal(self.lexical)
            if dt in (XSD + "double", XSD + "float"):
                return float(self.lexical)
            if dt == XSD + "date":
                return _dt.date.fromisoformat(self.lexical)
            if dt == XSD + "dateTime":
                return _dt.datetime.fromisoformat(self.lexical.replace("Z", "+00:00"))
        except (ValueError, InvalidOperation):
            return self.lexical
        return self.lexical

    @classmethod
    def of(cls, value: object) -> Literal:
        """A literal for a Python value (bool, int, float, Decimal, date, datetime, str)."""
        if isinstance(value, bool):
            return cls("true" if value else "false", XSD + "boolean")
        if isinstance(value, int):
            return cls(str(value), XSD + "integer")
        if isinstance(value, float):
            return cls(repr(value), XSD + "double")
        if isinstance(value, Decimal):
            return cls(str(value), XSD + "decimal")
        if isinstance(value, _dt.datetime):
            return cls(value.isoformat(), XSD + "dateTime")
        if isinstance(value, _dt.date):
            return cls(value.isoformat(), XSD + "date")
        if isinstance(value, str):
            return cls(value)
        raise TermError(f"cannot make a literal of {type(value).__name__}", text=repr(value))


Term = Var | Entity | Relation | Literal | BlankNode
Node = Var | Entity | Literal


class Slot(Flag):
    """What an argument position accepts. Combine with ``|``."""

    VAR = auto()  # ?x (and, in original PyQL style, bare x0)
    ENTITY = auto()  # an id, IRI, prefixed name, or a linked mention
    LITERAL = auto()  # numbers, quoted strings, typed literals, dates
    RELATION = auto()  # a relation name / IRI
    CLASS = auto()  # a type (for add_type)

    NODE = VAR | ENTITY | LITERAL
    VALUE = VAR | ENTITY | LITERAL

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


def resolve_atom(atom: Atom, slot: Slot, ctx: Context, *, source: str | None = None) -> Term:
    """Give a lexical :class:`~pyql.syntax.Atom` its meaning for ``slot``.

    Resolution order for a bare name: variable (``x0`` style, where a variable is allowed) ->
    relation (in a relation slot) -> a mention or id of the entity table -> an id the profile
    recognises (``m.0x``) -> a prefixed name with a known prefix -> a bare ISO date (literal
    slots). Anything else is a :class:`TermError` naming what the slot expects.
    """
    text = source if source is not None else str(atom)
    profile = ctx.profile
    expected = slot.describe()

    def refuse(what: str) -> TermError:
        return TermError(f"expected {expected}, got {what} {text!r}", text=text, expected=expected)

    if atom.kind is AtomKind.VAR:
        if Slot.VAR not in slot:
            raise refuse("a variable")
        return Var(atom.value)

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
            dt = _datatype_iri(atom.datatype, profile, text) if atom.datatype else None
            return _number_literal(atom.value, dt)
        raise refuse("a number")

    if atom.kind is AtomKind.STRING:
        if atom.lang or atom.datatype:
            if Slot.LITERAL not in slot:
                raise refuse("a literal")
            dt = _datatype_iri(atom.datatype, profile, text) if atom.datatype else None
            if dt in _NUMERIC and not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", atom.value):
                raise TermError(
                    f"{atom.value!r} is not a valid number for its datatype", text=text,
                    expected="a number",
                )
            return Literal(atom.value, dt, atom.lang)
        value = atom.value
        linked = _linked(value, slot, ctx)
        if linked is not None:
            return linked
        if Slot.ENTITY in slot:
            if ctx.is_linked_id(value) or profile.is_entity_id(value):
                return profile.entity(value)
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
    linked = _linked(value, slot, ctx)
    if linked is not None:
        return linked
    if Slot.ENTITY in slot:
        if ctx.is_linked_id(value) or profile.is_entity_id(value):
            return profile.entity(value)
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
            text=text,
            expected=expected,
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
