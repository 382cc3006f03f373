"""Replay a parsed :class:`~pyql.program.Call` onto a :class:`~pyql.sparql.query.Sparql` tree."""

from __future__ import annotations

from pyql.errors import QueryError, TermError
from pyql.program import SPARQL_TOOLS, Call, ParamKind
from pyql.sparql.query import Sparql
from pyql.terms import Context, Term, resolve_atom

__all__ = ["apply_call", "resolve_args"]


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
