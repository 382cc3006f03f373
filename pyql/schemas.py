"""The JSON schemas of the DSL's calls, and the call a JSON tool call stands for.

A :class:`~pyql.program.Signature` declares a call's parameters and their kinds; this module
turns signatures into OpenAI function-tool schemas (what native tool calling, the MCP server's
tools and constrained decoding send) and turns a tool call's JSON arguments back into a
:class:`~pyql.program.Call`. They are the DSL's own description of itself, so they live in the
core beside the signatures; prompting, the MCP server and reply formats import them from here.

A parameter's description is its Signature's wording unless ``notes`` (anything with
``note(function, param) -> str``, such as a prompt profile) says otherwise for that KB/DB.

>>> from pyql.program import TOOLSETS
>>> schema = tool_schemas([TOOLSETS["sparql"].signature("set_answer")])[0]["function"]
>>> schema["name"], schema["parameters"]["required"]
('set_answer', ['answer_var'])
>>> signatures = {"set_answer": TOOLSETS["sparql"].signature("set_answer")}
>>> str(call_from_arguments("set_answer", {"answer_var": "?x"}, signatures))
'set_answer(?x)'
>>> call_from_arguments("set_answer", {"var": "?x"}, signatures)
ParseError('set_answer(answer_var): unknown argument(s) var')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from pyql.errors import ArityError, InputError, ParseError
from pyql.program import Call, Param, ParamKind, Signature
from pyql.syntax import Atom, AtomKind, lex_atom

__all__ = ["ParamNotes", "param_doc", "tool_schemas", "call_from_arguments"]


class ParamNotes(Protocol):
    """What may reword a parameter's description for one KB/DB (a prompt profile does)."""

    def note(self, function: str, param: Param) -> str: ...


def param_doc(sig: Signature, param: Param, notes: ParamNotes | None = None) -> str:
    """A parameter's description: ``notes``' wording for it, else the Signature's."""
    doc = notes.note(sig.name, param) if notes is not None else param.doc
    if param.choices and not doc:
        doc = "one of " + ", ".join(param.choices)
    return doc + (" (optional)" if param.optional else "")


_JSON_TYPES: dict[ParamKind, dict[str, Any]] = {
    ParamKind.INT: {"type": "integer", "minimum": 0},
    ParamKind.VALUE: {"type": ["string", "number"]},
    ParamKind.AGG: {"type": "string", "enum": ["None", "MAX", "MIN", "COUNT", "SUM", "AVG"]},
    ParamKind.DIRECTION: {"type": "string", "enum": ["asc", "desc"]},
    ParamKind.QUERY: {"type": "string", "pattern": r"^\?[A-Za-z_]\w*$"},
}


def tool_schemas(signatures: Sequence[Signature], notes: ParamNotes | None = None,
                 ) -> list[dict[str, Any]]:
    """OpenAI function-tool schemas, one per signature (all arguments are text unless typed)."""
    tools = []
    for sig in signatures:
        properties: dict[str, Any] = {}
        for param in sig.params:
            schema = dict(_JSON_TYPES.get(param.kind, {"type": "string"}))
            if param.choices:
                schema = {"type": "string", "enum": list(param.choices)}
            schema["description"] = param_doc(sig, param, notes)
            properties[param.name] = schema
        tools.append({
            "type": "function",
            "function": {
                "name": sig.name,
                "description": sig.doc,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": [p.name for p in sig.params if not p.optional],
                    "additionalProperties": False,
                },
            },
        })
    return tools


def call_from_arguments(name: str, arguments: Mapping[str, Any],
                        signatures: Mapping[str, Signature], raw: str = "", *,
                        literal_fallback: bool = False) -> Call | InputError:
    """The DSL call a tool call (``name`` with JSON ``arguments``, keyed by the parameter names
    of :func:`tool_schemas`) stands for, or the input error it makes. ``raw`` is the arguments as
    written, for the error's position.

    An unknown ``name`` gives a call of that name, so the Session reports it with the list of
    its functions; unknown or missing arguments are a ParseError or an ArityError.

    ``literal_fallback`` (a reply constrained to a JSON schema): each argument is one JSON
    string already, so a string that does not lex as a term (``"Ocean's``, ``? x``, a control
    character) is that text as a quoted literal, not a parse error — the environment then
    judges the value (every schema-valid reply reads back).
    """
    sig = signatures.get(name)
    lex = _lenient_atom if literal_fallback else (lambda v: lex_atom(_arg_text(v)))
    try:
        if sig is None:
            return Call(name=name, args=tuple(lex(v) for v in arguments.values()
                                              if v is not None))
        unknown = [k for k in arguments if k not in {p.name for p in sig.params}]
        if unknown:
            return ParseError(f"{sig}: unknown argument(s) {', '.join(unknown)}", raw, 0)
        values = [arguments.get(p.name) for p in sig.params]
        while values and values[-1] is None:
            values.pop()
        if any(v is None for v in values):
            lo, hi = sig.arity
            got = sum(1 for v in values if v is not None)
            return ArityError(sig.name, lo if lo == hi else (lo, hi), got, str(sig))
        return Call(name=name, args=tuple(lex(v) for v in values))
    except ParseError as exc:
        return exc
    except ValidationError as exc:  # not a function name
        return ParseError(f"{name!r} is not a function name ({exc.error_count()} errors)",
                          name, 0)


def _lenient_atom(value: Any) -> Atom:
    """One constrained argument: its term, or (a string that does not lex) that string as a
    quoted literal."""
    text = _arg_text(value)
    try:
        return lex_atom(text)
    except ParseError:
        return Atom(AtomKind.STRING, text)


def _arg_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)
