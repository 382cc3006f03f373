"""Lexical layer: what an LLM or a person writes, split into atoms and calls.

This module knows nothing about KBs. It turns text such as
``add_fact(m.0crbvqz, people.person.spouse_s, ?y)`` into a function name and a tuple of
:class:`Atom` values (variable, IRI, quoted string, number, bare name), keeping enough to print
the text back canonically. Giving atoms a meaning (entity? relation? literal?) is the job of
:mod:`pyql.terms`, which needs the KB profile and the entity table.

The scanner is a real tokenizer: commas, quotes and parentheses inside quoted literals are
handled, and every error carries its position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from pyql.errors import ParseError

__all__ = ["AtomKind", "Atom", "lex_atom", "split_arguments", "read_arguments", "quote_string"]


class AtomKind(str, Enum):
    VAR = "var"  # ?x (a leading $ is plain text: SQL headers like "$ Amount")
    IRI = "iri"  # <http://...>
    STRING = "string"  # "..." or '...' with optional @lang / ^^datatype
    NUMBER = "number"  # 12, -1.5, 1e3, optionally ^^datatype
    NAME = "name"  # anything else, trimmed: m.0x, people.person.spouse_s, The Green Mile, >=


_VAR_NAME = re.compile(r"[^\W]\w*|\d\w*", re.UNICODE)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_LANG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")
#: the characters the argument scanner looks at
_ARG_SPECIAL = re.compile(r"[\"'<(),]")
_BARE_TYPED = re.compile(r"([^\s\"'^<>(),]+)\^\^(<[^<>\s]+>|(?:https?://|[A-Za-z][\w.\-]*:)[^\s<>\"'{}|^`\\,()]+)")
#: first characters of an argument that may not be a plain name: a variable, an IRI, a quoted
#: string or a number (``_NUMBER`` starts with a sign, a digit or a dot)
_NOT_PLAIN_FIRST = frozenset("?<\"'+-.0123456789")
_DATATYPE_NAME = re.compile(r"[A-Za-z][\w.\-]*:[^\s,()<>\"'{}|^`\\]+")  # xsd:date
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


@dataclass(frozen=True, slots=True)
class Atom:
    """One argument as written, classified lexically.

    ``value`` is the unescaped content (variable name without ``?``, IRI without ``<>``, string
    content without quotes, number text, trimmed name). ``datatype`` is the datatype as written
    (``xsd:float``, ``http://...#float``) and ``lang`` the language tag, for strings/numbers.
    """

    kind: AtomKind
    value: str
    datatype: str | None = None
    lang: str | None = None

    def __str__(self) -> str:
        if self.kind is AtomKind.VAR:
            return f"?{self.value}"
        if self.kind is AtomKind.IRI:
            return f"<{self.value}>"
        if self.kind is AtomKind.NAME:
            return self.value
        body = quote_string(self.value) if self.kind is AtomKind.STRING else self.value
        if self.lang:
            return f"{body}@{self.lang}"
        if self.datatype:
            dt = self.datatype
            return f"{body}^^{dt}" if ":" in dt and "/" not in dt else f"{body}^^<{dt}>"
        return body


#: how quote_string writes a character: control characters as ``\uXXXX``, unless they have a short
#: escape; backslash and double quote escaped (a single quote needs none between double quotes)
_QUOTED = {c: f"\\u{c:04X}" for c in (*range(0x20), 0x7F)} | {
    ord(raw): "\\" + code for code, raw in _ESCAPES.items() if code != "'"}


def quote_string(value: str) -> str:
    """Double-quoted, escaped form of ``value`` (valid in PyQL text and in SPARQL)."""
    return '"' + value.translate(_QUOTED) + '"'


def _read_quoted(text: str, start: int) -> tuple[str, int]:
    """Read a quoted string starting at ``text[start]``; return (content, index after quote)."""
    quote = text[start]
    i = start + 1
    out: list[str] = []
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text):
                raise ParseError("unterminated escape in string", text, i)
            nxt = text[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if nxt in "uU":
                width = 4 if nxt == "u" else 8
                digits = text[i + 2 : i + 2 + width]
                if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise ParseError(f"bad \\{nxt} escape in string", text, i)
                code = int(digits, 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise ParseError("escape is not a valid unicode character", text, i)
                out.append(chr(code))
                i += 2 + width
                continue
            # Unknown escape: keep the backslash literally (LLMs write e.g. "C:\path").
            out.append(ch)
            i += 1
            continue
        if ch == quote:
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise ParseError("unterminated string", text, start)


def _read_suffix(text: str, i: int) -> tuple[str | None, str | None, int]:
    """Read an optional ``@lang`` or ``^^datatype`` suffix at ``i``."""
    if text.startswith("@", i):
        m = _LANG.match(text, i + 1)
        if not m:
            raise ParseError("bad language tag", text, i)
        return None, m.group(0), m.end()
    if text.startswith("^^", i):
        j = i + 2
        if text.startswith("<", j):
            end = text.find(">", j)
            if end < 0:
                raise ParseError("unterminated datatype IRI", text, j)
            return text[j + 1 : end], None, end + 1
        m = _DATATYPE_NAME.match(text, j)
        if not m:
            raise ParseError("bad datatype after ^^", text, j)
        return m.group(0), None, m.end()
    return None, None, i


def lex_atom(text: str, *, offset: int = 0, source: str | None = None) -> Atom:
    """Classify one argument text as an :class:`Atom`.

    >>> lex_atom("?x")
    Atom(kind=<AtomKind.VAR: 'var'>, value='x', datatype=None, lang=None)
    >>> str(lex_atom('"2015-08-10"^^xsd:dateTime'))
    '"2015-08-10"^^xsd:dateTime'
    >>> lex_atom("The Green Mile").kind
    <AtomKind.NAME: 'name'>
    """
    stripped = text.strip()
    atom = _LEXED.get(stripped)
    if atom is None:
        atom = _lex(stripped, text, offset, source)
        if len(stripped) <= _LEXED_TEXT_MAX:
            if len(_LEXED) >= _LEXED_MAX:
                _LEXED.clear()
            _LEXED[stripped] = atom
    return atom


#: stripped argument text -> its atom: arguments recur from call to call (variables, the
#: question's entities, relations), and an atom depends on nothing else (emptied when full)
_LEXED: dict[str, Atom] = {}
_LEXED_MAX = 1 << 14
_LEXED_TEXT_MAX = 200


def _lex(stripped: str, text: str, offset: int, source: str | None) -> Atom:
    """:func:`lex_atom` of ``text``, whose stripped form is ``stripped``."""
    if not stripped:
        raise ParseError("empty argument", _source(text, source), _lead(text, offset))
    first = stripped[0]
    # most arguments are plain names (m.0x, starred_actors, Temuera Morrison): decided by their
    # first character without trying the number and typed-string patterns
    if first not in _NOT_PLAIN_FIRST and "^^" not in stripped:
        if "\n" in stripped or "\r" in stripped or "\x00" in stripped:
            raise ParseError("control character in unquoted argument; quote it",
                             _source(text, source), _lead(text, offset))
        return _plain_atom(AtomKind.NAME, stripped)
    if first == "?" and len(stripped) > 1:
        name = stripped[1:]
        if not _VAR_NAME.fullmatch(name):
            raise ParseError(f"bad variable name {stripped!r}", _source(text, source),
                             _lead(text, offset))
        return _plain_atom(AtomKind.VAR, name)
    if first == "<" and stripped.endswith(">") and len(stripped) > 2 and " " not in stripped:
        return Atom(AtomKind.IRI, stripped[1:-1])
    if first in "\"'":
        try:
            content, end = _read_quoted(stripped, 0)
            datatype, lang, end = _read_suffix(stripped, end)
        except ParseError as exc:
            raise ParseError(exc.description, _source(text, source),
                             _lead(text, offset) + exc.position) from None
        if end != len(stripped):
            raise ParseError("unexpected text after quoted string", _source(text, source),
                             _lead(text, offset) + end)
        return Atom(AtomKind.STRING, content, datatype, lang)
    m = _NUMBER.match(stripped)
    if m:
        try:
            datatype, lang, end = _read_suffix(stripped, m.end())
        except ParseError as exc:
            raise ParseError(exc.description, _source(text, source),
                             _lead(text, offset) + exc.position) from None
        if end == len(stripped) and lang is None:
            return Atom(AtomKind.NUMBER, m.group(0), datatype)
    bare_typed = _BARE_TYPED.fullmatch(stripped)
    if bare_typed:  # GrailQA linking style: 1998-01-01^^http://www.w3.org/2001/XMLSchema#date
        datatype, _, _ = _read_suffix(stripped, bare_typed.start(2) - 2)
        return Atom(AtomKind.STRING, bare_typed.group(1), datatype)
    if "\n" in stripped or "\r" in stripped or "\x00" in stripped:
        raise ParseError("control character in unquoted argument; quote it",
                         _source(text, source), _lead(text, offset))
    return Atom(AtomKind.NAME, stripped)


def _plain_atom(kind: AtomKind, value: str) -> Atom:
    """``Atom(kind, value)``, made in half the time: the frozen dataclass's ``__init__`` sets each
    field through ``object.__setattr__``; this sets the slots through their descriptors."""
    atom = _new_object(Atom)
    _set_kind(atom, kind)
    _set_value(atom, value)
    _set_datatype(atom, None)
    _set_lang(atom, None)
    return atom


_new_object = object.__new__
_set_kind = Atom.kind.__set__  # type: ignore[attr-defined]
_set_value = Atom.value.__set__  # type: ignore[attr-defined]
_set_datatype = Atom.datatype.__set__  # type: ignore[attr-defined]
_set_lang = Atom.lang.__set__  # type: ignore[attr-defined]


def _source(text: str, source: str | None) -> str:
    """The text a lex_atom error points into."""
    return source if source is not None else text


def _lead(text: str, offset: int) -> int:
    """Where the argument ``text`` found at ``offset`` starts, its leading blanks skipped."""
    return offset + (len(text) - len(text.lstrip()))


def split_arguments(text: str, start: int, end: int) -> list[tuple[str, int]]:
    """Split ``text[start:end]`` at top-level commas.

    A quoted string that starts an argument, and nested parentheses, protect commas. Returns (piece, offset) pairs.
    An empty argument list returns ``[]``.
    """
    pieces, close, depth = _scan_arguments(text, start, end)
    if close is not None:
        raise ParseError("unbalanced ')'", text, close)
    if depth:
        raise ParseError("unbalanced '('", text, start)
    return pieces


def read_arguments(text: str, open_at: int) -> tuple[list[tuple[str, int]], int]:
    """The arguments of the list opened by the ``(`` at ``text[open_at]``, and where its ``)`` is.

    The arguments are split as :func:`split_arguments` splits them; a text that ends before the
    list is closed raises a ParseError at ``open_at``.
    """
    pieces, close, _ = _scan_arguments(text, open_at + 1, len(text))
    if close is None:
        raise ParseError("missing ')'", text, open_at)
    return pieces, close


def _scan_arguments(
    text: str, start: int, end: int
) -> tuple[list[tuple[str, int]], int | None, int]:
    """Split ``text[start:end]`` at top-level commas, up to a ``)`` that closes more than it opened.

    Returns the (piece, offset) pairs, the index of that ``)`` (None when the scan reached
    ``end``) and how many ``(`` are still open at ``end``.
    """
    pieces: list[tuple[str, int]] = []
    depth = 0
    close: int | None = None
    i = start
    piece_start = start
    while i < end:
        special = _ARG_SPECIAL.search(text, i, end)  # skip ordinary characters in one step
        if special is None:
            break
        i = special.start()
        ch = text[i]
        # A quote opens a string only where an argument starts (so "Ocean's Eleven" unquoted works).
        if ch in "\"'" and depth == 0 and not text[piece_start:i].strip():
            _, i = _read_quoted_bounded(text, i, end)
            continue
        # So does an <IRI> (<http://dbpedia.org/resource/Washington,_D.C.> is one argument).
        if ch == "<" and depth == 0 and not text[piece_start:i].strip():
            after = iri_token_end(text, i, end)
            if after is not None:
                i = after
                continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                close = end = i
                break
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append((text[piece_start:i], piece_start))
            piece_start = i + 1
        i += 1
    last = text[piece_start:end]
    if pieces or last.strip():
        pieces.append((last, piece_start))
    return pieces, close, depth


_IRI_TOKEN = re.compile(r"<[A-Za-z][A-Za-z0-9+.\-]*:[^<>\"{}|^`\\\x00-\x20]*>")  # <scheme:...>


def iri_token_end(text: str, i: int, end: int | None = None) -> int | None:
    """If an ``<IRI>`` that makes up a whole argument starts at ``text[i]``, the index after it.

    The IRI must start with a scheme and be followed by blanks and then ``,``, ``)`` or the end,
    so that a comparison operator such as ``<`` is never mistaken for the start of an IRI.
    """
    end = len(text) if end is None else end
    m = _IRI_TOKEN.match(text, i, end)
    if not m:
        return None
    j = m.end()
    while j < end and text[j] in " \t":
        j += 1
    return m.end() if j >= end or text[j] in ",)" else None


def _read_quoted_bounded(text: str, i: int, end: int) -> tuple[str, int]:
    try:
        content, after = _read_quoted(text[:end], i)
    except ParseError as exc:
        raise ParseError(exc.description, text, exc.position) from None
    return content, after
