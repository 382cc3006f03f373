"""The call parser and printer as they were before their fast paths (commit a3640a7).

Kept to show that the fast paths change nothing (``tests/test_program_parsing.py`` compares
them on generated texts) and to measure them against (``benchmarks/call_parsing.py``). The
helpers neither version changed (the argument scanner, quoted strings and suffixes, the Python
style's literals, whose content today's lex_atom reads) are pyql's own; everything the fast paths
replaced is copied here as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyql.errors import ParseError
from pyql.program import (
    _BARE_VAR,
    _CALL_END,
    _IDENTIFIER,
    _PARSED_MAX,
    _PARSED_TEXT_MAX,
    Call,
    Param,
    ParamKind,
    Program,
    Toolset,
    _name_reads_back,
    _python_arg,
    _toolset,
)
from pyql.resolve import Slot
from pyql.syntax import (
    _BARE_TYPED,
    _NUMBER,
    _VAR_NAME,
    Atom,
    AtomKind,
    _read_quoted,
    _read_suffix,
    quote_string,
    read_arguments,
)

__all__ = ["lex_atom", "parse_calls", "parse_call", "call_text", "program_text"]


def lex_atom(text: str, *, offset: int = 0, source: str | None = None) -> Atom:
    """pyql.syntax.lex_atom before the first-character dispatch and the cache."""
    src = source if source is not None else text
    stripped = text.strip()
    lead = offset + (len(text) - len(text.lstrip()))
    if not stripped:
        raise ParseError("empty argument", src, lead)
    first = stripped[0]
    if first == "?" and len(stripped) > 1:
        name = stripped[1:]
        if not _VAR_NAME.fullmatch(name):
            raise ParseError(f"bad variable name {stripped!r}", src, lead)
        return Atom(AtomKind.VAR, name)
    if first == "<" and stripped.endswith(">") and len(stripped) > 2 and " " not in stripped:
        return Atom(AtomKind.IRI, stripped[1:-1])
    if first in "\"'":
        try:
            content, end = _read_quoted(stripped, 0)
            datatype, lang, end = _read_suffix(stripped, end)
        except ParseError as exc:
            raise ParseError(exc.description, src, lead + exc.position) from None
        if end != len(stripped):
            raise ParseError("unexpected text after quoted string", src, lead + end)
        return Atom(AtomKind.STRING, content, datatype, lang)
    m = _NUMBER.match(stripped)
    if m:
        try:
            datatype, lang, end = _read_suffix(stripped, m.end())
        except ParseError as exc:
            raise ParseError(exc.description, src, lead + exc.position) from None
        if end == len(stripped) and lang is None:
            return Atom(AtomKind.NUMBER, m.group(0), datatype)
    bare_typed = _BARE_TYPED.fullmatch(stripped)
    if bare_typed:  # GrailQA linking style: 1998-01-01^^http://www.w3.org/2001/XMLSchema#date
        datatype, _, _ = _read_suffix(stripped, bare_typed.start(2) - 2)
        return Atom(AtomKind.STRING, bare_typed.group(1), datatype)
    if any(c in stripped for c in "\n\r\x00"):
        raise ParseError("control character in unquoted argument; quote it", src, lead)
    return Atom(AtomKind.NAME, stripped)


def _canonical(atom: Atom, param: Param) -> Atom:
    if (
        atom.kind is AtomKind.NAME
        and param.slot is not None
        and Slot.VAR in param.slot
        and _BARE_VAR.fullmatch(atom.value)
    ):
        return Atom(AtomKind.VAR, atom.value)
    if param.kind is not ParamKind.TERM and atom.kind is AtomKind.VAR:
        return Atom(AtomKind.NAME, f"?{atom.value}")
    if param.kind is ParamKind.OP and atom.kind is AtomKind.NAME and atom.value == "<>":
        return Atom(AtomKind.NAME, "!=")
    return atom


@dataclass
class _Scanner:
    text: str
    pos: int = 0

    def skip_blank(self) -> None:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in " \t\r\n;":
                self.pos += 1
            elif ch == "#":
                nl = text.find("\n", self.pos)
                self.pos = len(text) if nl < 0 else nl + 1
            else:
                break

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_inline(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_blank()
        return self.pos >= len(self.text)

    def identifier(self) -> str:
        m = _IDENTIFIER.match(self.text, self.pos)
        if not m:
            raise ParseError("expected a function call like add_fact(...)", self.text, self.pos)
        self.pos = m.end()
        return m.group(0)


def _call(name: str, atoms: tuple[Atom, ...], tools: Toolset, contextual: bool) -> Call:
    alias = tools.alias(name, len(atoms))
    if alias is not None:
        if not alias.contextual:
            assert alias.expand is not None
            call = alias.expand(atoms)
            name, atoms = call.name, call.args
        elif contextual:
            return Call(name=name, args=atoms)
    sig = tools.signature(name)
    sig.check_arity(len(atoms))
    return Call(name=name, args=tuple(_canonical(a, p) for a, p in zip(atoms, sig.params)))


def parse_calls(text: str, tools: Toolset, contextual: bool = False) -> list[Call]:
    """pyql.program._parse_calls before the fast paths."""
    scanner = _Scanner(text)
    receivers: set[str] = set()
    calls: list[Call] = []
    while not scanner.at_end():
        start = scanner.pos
        name = scanner.identifier()
        scanner.skip_inline()
        if scanner.peek() == "=":
            scanner.pos += 1
            scanner.skip_inline()
            ctor_at = scanner.pos
            ctor = scanner.identifier()
            scanner.skip_inline()
            if ctor not in ("PyQL", "PyQL_SQL", "PyQLSQL") or not scanner.text.startswith(
                    "()", scanner.pos):
                raise ParseError("expected `name = PyQL()`", text, ctor_at)
            scanner.pos += 2
            receivers.add(name)
            continue
        python_style = False
        if scanner.peek() == ".":
            if name not in receivers:
                raise ParseError(f"{name!r} is not a PyQL object (write `{name} = PyQL()` first)",
                                 text, start)
            scanner.pos += 1
            name = scanner.identifier()
            python_style = True
            scanner.skip_inline()
        if scanner.peek() != "(":
            raise ParseError(f"expected '(' after {name!r}", text, scanner.pos)
        open_at = scanner.pos
        pieces, close_at = read_arguments(text, open_at)
        if python_style:
            atoms = [_python_arg(p, off, text) for p, off in pieces]
        else:
            atoms = [lex_atom(p, offset=off, source=text) for p, off in pieces]
        calls.append(_call(name, tuple(atoms), tools, contextual))
        scanner.pos = close_at + 1
        rest = _CALL_END.match(text, scanner.pos)
        if not rest:
            raise ParseError("unexpected text after call", text, scanner.pos)
    return calls


def parse_call(text: str, tools: str | Toolset = "sparql", *, contextual: bool = False) -> Call:
    """pyql.program.parse_call before the fast paths (its memo included)."""
    toolset = _toolset(tools)
    key = (text, contextual)
    found = _PARSED.get((toolset.name, key))
    if found is not None:
        return found
    calls = parse_calls(text, toolset, contextual)
    if len(calls) != 1:
        raise ParseError(f"expected one call, found {len(calls)}", text, 0,
                         kind="no_action" if not calls else "multiple_actions", found=len(calls))
    if len(text) <= _PARSED_TEXT_MAX:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[(toolset.name, key)] = calls[0]
    return calls[0]


_PARSED: dict[tuple[str, tuple[str, bool]], Call] = {}


def _render_arg(atom: Atom) -> str:
    if atom.kind is AtomKind.NAME:
        return atom.value if _name_reads_back(atom.value) else quote_string(atom.value)
    return str(atom)


def call_text(call: Call) -> str:
    """``str(call)`` before the text was kept on the call."""
    return f"{call.name}({', '.join(map(_render_arg, call.args))})"


def program_text(program: Program) -> str:
    """``str(program)`` before the calls kept their text."""
    return "\n".join(call_text(c) for c in program.calls)
