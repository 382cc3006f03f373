"""Replay a parsed :class:`~pyql.program.Call` onto a :class:`~pyql.sparql.query.Sparql` tree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyql.errors import QueryError, TermError
from pyql.profiles import Profile, get_profile
from pyql.program import SPARQL_TOOLS, Call, ParamKind, Program, register_replay
from pyql.resolve import Context, resolve_atom
from pyql.sparql.query import Sparql
from pyql.terms import Term

__all__ = ["apply_call", "resolve_args", "replay"]


def resolve_args(call: Call, ctx: Context) -> list[Term | str]:
    """The call's arguments as terms (TERM params) or plain text (operators).

    Raises UnknownFunctionError / ArityError / TermError (located at the argument).
    """
    sig = call.validate_against(SPARQL_TOOLS)
    out: list[Term | str] = []
    for index, (param, atom) in enumerate(zip(sig.params, call.args)):
        if param.kind is ParamKind.TERM:
            assert param.slot is not None
            try:
                out.append(resolve_atom(atom, param.slot, ctx))
            except TermError as exc:
                raise exc.at(index, call.name) from None
        else:
            out.append(atom.value)
    return out


def apply_call(query: Sparql, call: Call, ctx: Context | None = None) -> Sparql:
    """The query after ``call``. Environment calls (get_relation, execute) return it unchanged."""
    ctx = ctx or query.context
    args = resolve_args(call, ctx)
    name = call.name
    if name in ("get_relation", "execute"):
        return query
    method = getattr(query, name, None)
    if method is None:  # pragma: no cover - every SPARQL_TOOLS build call is a Sparql method
        raise QueryError(f"{name} cannot be applied to a SPARQL query")
    if name == "add_type":
        return query.add_type(args[0], args[1])  # type: ignore[arg-type]
    return method(*args)


def replay(
    program: Program, profile: str | Profile = "freebase",
    entities: Mapping[str, str] | None = None, **options: Any,
) -> Sparql:
    """``program`` replayed onto an empty query (what :meth:`Program.to_query` returns)."""
    prof = get_profile(profile)
    ctx = Context(prof, dict(entities or {}))
    query = Sparql(profile=prof, entities=ctx.entities, **options)
    for call in program.calls:
        query = apply_call(query, call, ctx)
    return query


register_replay("sparql", replay)
