"""Typed terms: variables, entities, relations and literals.

Terms are frozen, hashable values; ``str(term)`` is valid SPARQL (IRIs in ``<...>``, literals
quoted and escaped), so a term can never break out of its position in a query. This module
holds the values only: giving a written argument its meaning (which needs the KB profile and the
question's entity table) is :mod:`pyql.resolve`.

>>> str(Entity("http://rdf.freebase.com/ns/m.0crbvqz", "m.0crbvqz"))
'<http://rdf.freebase.com/ns/m.0crbvqz>'
>>> str(Literal("1.0", XSD + "float"))
'"1.0"^^<http://www.w3.org/2001/XMLSchema#float>'
>>> Var("x")
Var(name='x')
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

import pyoxigraph as _ox

from pyql.errors import TermError
from pyql.syntax import quote_string

__all__ = [
    "XSD",
    "RDF_TYPE",
    "Var",
    "Entity",
    "Relation",
    "RelationPath",
    "Literal",
    "BlankNode",
    "Term",
    "Node",
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

    # the generated hash builds a tuple per call; terms are hashed on every set and dict lookup
    def __hash__(self) -> int:
        return hash(self.name)


@dataclass(frozen=True, slots=True)
class _IRITerm:
    """A term named by a validated IRI, written ``<iri>``; subclasses add the short form."""

    iri: str

    def __post_init__(self) -> None:
        validate_iri(self.iri)

    def __str__(self) -> str:
        return f"<{self.iri}>"

    def __hash__(self) -> int:  # equal terms have equal IRIs (the short forms do not compare)
        return hash(self.iri)


# eq=False: equality (same class, same IRI) and the hash are _IRITerm's
@dataclass(frozen=True, slots=True, eq=False)
class Entity(_IRITerm):
    """A KB node named by an IRI. ``id`` is the short form the LLM writes (``m.0crbvqz``)."""

    id: str | None = field(default=None, compare=False)

    @property
    def short(self) -> str:
        return self.id if self.id is not None else str(self)


@dataclass(frozen=True, slots=True, eq=False)
class Relation(_IRITerm):
    """A KB relation (predicate) named by an IRI; ``name`` is its short form."""

    name: str | None = field(default=None, compare=False)

    @property
    def short(self) -> str:
        return self.name if self.name is not None else str(self)


@dataclass(frozen=True, slots=True, eq=False)
class RelationPath(Relation):
    """A property path over relations, in a relation position: alternatives (``op="|"``,
    ``P22|P25``: either relation) or a closure of one relation (``op="+"``, ``P131+``: one step
    or more; ``op="*"``: zero or more). ``iri`` is the first relation's; ``name`` the path as
    written.

    >>> p = RelationPath("http://e.org/a", "a+", parts=(Relation("http://e.org/a", "a"),), op="+")
    >>> str(p)
    '<http://e.org/a>+'
    """

    parts: tuple[Relation, ...] = ()
    op: str = "|"

    def __post_init__(self) -> None:
        validate_iri(self.iri)
        if self.op not in ("|", "+", "*") or not self.parts:
            raise TermError(f"not a property path: {self.op!r} over {len(self.parts)} relations",
                            text=self.name or "", expected="P1|P2, P1+ or P1*")
        if self.op != "|" and len(self.parts) != 1:
            raise TermError("a closure (+, *) is of one relation", text=self.name or "",
                            expected="P1+ or P1*")

    def __str__(self) -> str:
        if self.op == "|":
            return "|".join(str(p) for p in self.parts)
        return f"{self.parts[0]}{self.op}"

    def __eq__(self, other: object) -> bool:
        return (type(other) is RelationPath and other.op == self.op
                and tuple(p.iri for p in other.parts) == tuple(p.iri for p in self.parts))

    def __hash__(self) -> int:
        return hash((self.op, *(p.iri for p in self.parts)))


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
