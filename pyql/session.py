"""The Session: the environment an agent (or a person) acts on, one DSL call at a time.

``Session(kb, entities={mention: kb_id})`` binds a KB, its profile and the linked entities of one
question. ``run(text | Call)`` parses the action, applies it to the immutable query, executes what
needs executing and returns a typed :class:`Observation`. The Session keeps the query, the
program of accepted calls and a read-only :class:`~pyql.memory.Memory`.

With ``guidelines`` (ERASER), every step's :class:`~pyql.feedback.Feedback` goes to the
guidelines; if one fires, the observation carries its :class:`~pyql.feedback.Hint` and the step is
rolled back (query, program and memory stay as they were). Without guidelines the raw result or
error is the observation (the paper's "w/o ERASER" ablation).

>>> from pyql.kb import OxigraphKB
>>> kb = OxigraphKB(profile="metaqa")
>>> kb.load_bytes(b'<http://pyql.dev/metaqa/entity/Kismet> <http://pyql.dev/metaqa/relation/directed_by> <http://pyql.dev/metaqa/entity/William_Dieterle> .', format="ntriples")
>>> s = Session(kb, entities={"Kismet": "Kismet"})
>>> s.run("get_relation(Kismet)").relations.forward
('directed_by',)
>>> print(s.run("add_fact(Kismet, directed_by, ?director)").text)
The value of variable ?director is ['William Dieterle']
>>> s.run("set_answer(?director)").ok
True
>>> s.run("execute()").answers
('William Dieterle',)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from pyql.echo import clip_echoes, echoed_inputs
from pyql.errors import (
    ArityError,
    BackendError,
    BackendTimeoutError,
    InputError,
    ParseError,
    QueryError,
    SchemaError,
    TermError,
    UnknownFunctionError,
)
from pyql.feedback import Feedback, Hint, KBFeedback, PythonFeedback, Relations, VariableValues
from pyql.kb.base import KB
from pyql.memory import Memory
from pyql.program import SPARQL_TOOLS, Call, Program, parse_call
from pyql.sparql import Sparql
from pyql.sparql.apply import resolve_args
from pyql.sparql.compile import compile_relations, render_term
from pyql.terms import BlankNode, Context, Entity, Literal, Var

__all__ = [
    "Session",
    "Observation",
    "GuidelineChecker",
    "HintPolicy",
    "python_feedback_for",
    "render_values",
]

log = logging.getLogger(__name__)


class GuidelineChecker(Protocol):
    """What a Session needs from ERASER: a verdict per step (see :mod:`pyql.guidelines`)."""

    def evaluate(self, feedback: Feedback) -> Hint | None: ...


class Observation(BaseModel):
    """The typed outcome of one step, with a text rendering (``.text``)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    step: int
    action: str
    feedback: Feedback
    hint: Hint | None = None
    elapsed: float = 0.0
    #: the query text after the step (unchanged when the step failed or was rolled back)
    query: str = ""

    @property
    def call(self) -> Call | None:
        return self.feedback.call

    @property
    def ok(self) -> bool:
        """The step was accepted (no error, no hint)."""
        return self.hint is None and self.error is None

    @property
    def status(self) -> str:
        """``hint`` | ``error`` | the KB status (``ok``, ``empty``, ``backend_error``, ``timeout``)."""
        if self.hint is not None:
            return "hint"
        if self.feedback.python.status != "ok":
            return "error"
        return self.feedback.kb.status if self.feedback.kb.status != "not_run" else "ok"

    @property
    def error(self) -> str | None:
        """The raw error message (Python side or backend), if any."""
        if self.feedback.python.status != "ok":
            return self.feedback.python.message
        if self.feedback.kb.status in ("backend_error", "timeout"):
            return self.feedback.kb.message
        return None

    @property
    def relations(self) -> Relations | None:
        return self.feedback.kb.relations

    @property
    def values(self) -> dict[str, VariableValues]:
        return self.feedback.kb.values

    @property
    def answers(self) -> tuple[Any, ...] | None:
        return self.feedback.kb.answers

    @property
    def text(self) -> str:
        return render_observation(self)

    def __str__(self) -> str:
        return self.text


def render_values(values: Mapping[str, VariableValues], *, max_shown: int | None = None) -> str:
    """``The value of variable ?x is ['a', 'b'] (12 in total)`` for each variable."""
    parts = []
    for var, vv in values.items():
        shown = list(vv.values if max_shown is None else vv.values[:max_shown])
        more = f" ({vv.total} in total)" if vv.total > len(shown) else ""
        parts.append(f"The value of variable {var} is {shown}{more}")
    return ". ".join(parts)


def render_observation(obs: Observation) -> str:
    if obs.hint is not None:
        return obs.hint.message
    fb = obs.feedback
    if fb.python.status != "ok":  # the message may quote the arguments: long ones in part
        inputs = echoed_inputs(fb.action_text, fb.call.args if fb.call else ())
        return f"Error: {clip_echoes(fb.python.message, inputs)}"
    kb = fb.kb
    if kb.status == "backend_error" and kb.error_type == "BackendQueryError":
        return f"Error: {kb.message}"  # the engine rejected the query: its own words
    if kb.status in ("backend_error", "timeout"):
        return f"Error: the {'query timed out' if kb.status == 'timeout' else 'KB failed'}: {kb.message}"
    if kb.relations is not None:
        return str({"forward": list(kb.relations.forward), "backward": list(kb.relations.backward)})
    if kb.answers is not None and not kb.values:
        return f"The answer is {list(kb.answers)}"
    if kb.status == "empty":
        return "The query result is empty."
    if kb.values:
        text = render_values(kb.values)
    else:
        text = "Done."
    return text + "".join(f" (Note: {note}.)" for note in fb.notes)


class HintPolicy:
    """Asks the guidelines about a step, once per result-based hint.

    A hint about what the environment *returned* (codes ``KB...``/``DB...``: an empty result, an
    unnamed answer) is given once: when the very next action repeats the hinted action, the model
    has read the hint and insists, and the step is accepted — an empty result can be the right
    answer. Hints about the action itself (``PY...``, ``RM...``) are given every time.
    """

    RESULT_PREFIXES = ("KB", "DB")

    def __init__(self, guidelines: GuidelineChecker | None) -> None:
        self.guidelines = guidelines
        self._last: tuple[str, str] | None = None  # (canonical action, hint code)

    def judge(self, feedback: Feedback) -> Hint | None:
        if self.guidelines is None:
            return None
        action = str(feedback.call) if feedback.call is not None else feedback.action_text
        last, self._last = self._last, None
        if last is not None and last[0] == action and last[1].startswith(self.RESULT_PREFIXES):
            log.info("accepting %s repeated after hint %s", action, last[1])
            return None
        hint = self.guidelines.evaluate(feedback)
        if hint is not None:
            self._last = (action, hint.code)
        return hint


def python_feedback_for(exc: Exception, *, function: str | None = None) -> PythonFeedback:
    """Structured Python-side feedback for an input error."""
    kind = type(exc).__name__
    if isinstance(exc, UnknownFunctionError):
        return PythonFeedback(status="unknown_function", message=str(exc), function=exc.function,
                              suggestions=exc.available, error_type=kind)
    if isinstance(exc, ArityError):
        lo_hi = exc.expected if isinstance(exc.expected, tuple) else (exc.expected, exc.expected)
        return PythonFeedback(status="arity", message=str(exc), function=exc.function,
                              expected_arity=lo_hi, got_arity=exc.got, error_type=kind)
    if isinstance(exc, TermError):
        return PythonFeedback(status="bad_term", message=str(exc), function=function,
                              arg_index=exc.index, arg_text=exc.text, expected=exc.expected,
                              error_type=kind)
    if isinstance(exc, SchemaError):
        return PythonFeedback(status="schema_error", message=str(exc), function=function,
                              arg_text=exc.name, suggestions=exc.suggestions, error_type=kind)
    if isinstance(exc, QueryError):
        return PythonFeedback(status="query_error", message=str(exc), function=function,
                              error_code=exc.code or None, suggestions=exc.suggestions,
                              error_type=kind)
    if isinstance(exc, ParseError):
        status = "parse_error"
        if exc.description.startswith("expected one call, found "):
            found = int(exc.description.rsplit(" ", 1)[-1])
            status = "no_action" if found == 0 else "multiple_actions"
        return PythonFeedback(status=status, message=str(exc), function=function, error_type=kind)
    return PythonFeedback(status="parse_error", message=str(exc), function=function, error_type=kind)


class Session:
    """A KB environment for one question. See the module docstring."""

    tools = "sparql"

    def __new__(cls, kb: Any = None, *args: Any, **kwargs: Any) -> Any:
        """``Session(sql_db, table=...)`` is a :class:`pyql.sql.session.SqlSession`."""
        if cls is Session and _is_sql_db(kb):
            from pyql.sql.session import SqlSession

            return SqlSession(kb, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        kb: KB,
        entities: Mapping[str, str] | None = None,
        *,
        guidelines: GuidelineChecker | bool | None = None,
        max_values: int = 10,
        row_cap: int = 2000,
        max_relations: int | None = None,
        timeout: float | None = None,
        extremum_mode: str = "ties",
        functions: Sequence[str] | None = None,
    ) -> None:
        self.kb = kb
        self.profile = kb.profile
        self.entities = dict(entities or {})
        self.guidelines = _resolve_guidelines(guidelines)
        self.max_values = max_values
        self.row_cap = row_cap
        self.max_relations = max_relations
        self.timeout = timeout
        self._extremum_mode = extremum_mode
        #: the functions the agent was offered (``Feedback.functions``; None: the toolset's)
        self.functions = tuple(functions or ())
        self._labels: dict[str, str | None] = {}
        self.reset()

    # -- state ----------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the query, program and memory (same KB and entities)."""
        self.query = Sparql(profile=self.profile, entities=self.entities,
                            extremum_mode=self._extremum_mode)  # type: ignore[arg-type]
        self.program = Program(tools="sparql")
        self.memory = Memory(entities=dict(self.entities))
        self._policy = HintPolicy(self.guidelines)
        self.step = 0
        self.observations: list[Observation] = []

    @property
    def context(self) -> Context:
        return Context(self.profile, self.entities)

    def to_sparql(self) -> str:
        return self.query.to_sparql()

    # -- one step -------------------------------------------------------------------------------
    def run(self, action: str | Call) -> Observation:
        """Run one action; never raises for bad input or backend failure (see Observation)."""
        start = time.perf_counter()
        self.step += 1
        text = action if isinstance(action, str) else str(action)
        call: Call | None = None
        new_query = self.query
        new_memory = self.memory
        args: tuple[Any, ...] = ()
        notes: list[str] = []
        python = PythonFeedback()
        kb = KBFeedback()
        try:
            call = action if isinstance(action, Call) else parse_call(action, SPARQL_TOOLS)
            resolved = resolve_args(call, self.context)
            args = tuple(resolved)
            notes = self._resolution_notes(call, resolved)
            new_query, kb, new_memory = self._apply(call, resolved)
        except InputError as exc:
            python = python_feedback_for(exc, function=call.name if call else _guess_function(text))
        except BackendTimeoutError as exc:
            kb = KBFeedback(status="timeout", message=str(exc), error_type=type(exc).__name__)
        except BackendError as exc:
            kb = KBFeedback(
                status="backend_error", message=str(exc), error_type=type(exc).__name__)

        feedback = Feedback(
            step=self.step, action_text=text, call=call, tools=self.tools,
            functions=self.functions, python=python, kb=kb,
            memory=self.memory, args=args, notes=tuple(notes),
        )
        hint = self._policy.judge(feedback)
        accepted = hint is None and python.status == "ok" and kb.status not in ("backend_error", "timeout")
        if accepted and call is not None:
            self.query = new_query
            self.program = self.program.append(call)
            self.memory = new_memory.with_(calls=(*self.memory.calls, call))
        obs = Observation(
            step=self.step, action=text, feedback=feedback, hint=hint,
            elapsed=time.perf_counter() - start, query=self.query.to_sparql() if not self.query.is_empty else "",
        )
        self.observations.append(obs)
        return obs

    def run_program(self, program: Program | str) -> list[Observation]:
        """Run every call of a program; returns the observations."""
        prog = Program.parse(program) if isinstance(program, str) else program
        return [self.run(call) for call in prog]

    # -- internals ------------------------------------------------------------------------------
    def _resolution_notes(self, call: Call, resolved: list[Any]) -> list[str]:
        notes = []
        for atom, term in zip(call.args, resolved):
            if (isinstance(term, Entity) and atom.value != term.id
                    and self.context.entity_for_mention(atom.value) == term.id):
                notes.append(f"{atom.value!r} was read as the linked entity {term.id}")
        return notes

    def _apply(self, call: Call, args: list[Any]) -> tuple[Sparql, KBFeedback, Memory]:
        name = call.name
        if name == "get_relation":
            return self.query, *self._get_relation(args[0])
        if name == "execute":
            return self.query, self._execute(), self.memory
        method = getattr(self.query, name)
        query = method(*args)
        kb = self._observe(query)
        memory = self.memory.with_(
            variables=tuple(str(v) for v in query.variables),
            bound_variables=tuple(str(v) for v in query.variables if v in query.bound_variables
                                  or (query.aggregate is not None and v == query.aggregate.new_var)),
            answer=str(query.answer) if query.answer is not None else None,
            last_values=kb.values if kb.status == "ok" else self.memory.last_values,
        )
        return query, kb, memory

    def _get_relation(self, node: Any) -> tuple[KBFeedback, Memory]:
        if isinstance(node, Var) and node not in self.query.bound_variables:
            existing = [str(v) for v in self.query.variables if v in self.query.bound_variables]
            raise QueryError(
                f"get_relation: {node} is not a variable of the query with values"
                + (f" (variables: {', '.join(existing)})" if existing else " (no variables yet)"),
                code="unbound_variable",
                suggestions=[f"get_relation({v})" for v in existing]
                + [f"get_relation({kb_id})" for kb_id in self.entities.values()],
            )
        directions = ("backward",) if isinstance(node, Literal) else ("forward", "backward")
        found: dict[str, list[str]] = {"forward": [], "backward": []}
        hidden = self.profile.hidden_relations
        for direction in directions:
            rs = self.kb.select(compile_relations(self.query, node, direction, limit=self.max_relations),
                                timeout=self.timeout)
            names = sorted({cell.iri for (cell,) in rs.rows if isinstance(cell, Entity)} - hidden)
            found[direction] = [self.profile.compact(iri) for iri in names]
        relations = Relations(forward=tuple(found["forward"]), backward=tuple(found["backward"]))
        key = str(node) if isinstance(node, Var) else node.short
        kb = KBFeedback(status="ok" if len(relations) else "empty", relations=relations, node=key,
                        row_count=len(relations))
        memory = self.memory.with_(relations={**self.memory.relations, key: relations})
        return kb, memory

    def _observe(self, query: Sparql) -> KBFeedback:
        """Execute the query under construction and summarise each variable's values.

        Filters on variables that no pattern binds yet (WebQSP programs start with
        ``add_filter(?x, !=, m.0x)``) wait until their variables are bound: applied early they
        would make every intermediate result empty.
        """
        if query.is_empty:
            return KBFeedback(status="not_run")
        bound = query.bound_variables
        pending = tuple(f for f in query.filters
                        if any(isinstance(n, Var) and n not in bound for n in (f.left, f.right)))
        unconstrained = tuple(str(v) for v in query.variables
                              if v not in bound
                              and not (query.aggregate is not None and v == query.aggregate.new_var))
        if pending:
            query = replace(query, filters=tuple(f for f in query.filters if f not in pending))
        if query.aggregate is not None:
            shown: tuple[Var, ...] = (query.aggregate.new_var,)
        elif query.answer is not None:
            shown = (query.answer,)
        else:
            shown = tuple(v for v in query.variables if v in query.bound_variables)
        rs = self.kb.select(query.to_sparql(select=shown if query.aggregate is None else None,
                                            limit=self.row_cap + 1), timeout=self.timeout)
        # a query without variables (add_fact between two constants) matches with one row of
        # no columns: that is a fact that holds, not an empty result
        if rs.is_empty or (rs.columns and all(all(c is None for c in row) for row in rs.rows)):
            return KBFeedback(status="empty", row_count=0, unconstrained=unconstrained)
        truncated = len(rs.rows) > self.row_cap
        totals = self._totals(query, shown) if truncated else None
        values = {}
        for i, var in enumerate(rs.columns):
            # a stable order, the same on every backend (engines return rows in any order)
            distinct = sorted(rs.distinct(i), key=_sort_key)
            labelled = self._display(distinct[: self.max_values])
            unnamed = self._count_unnamed(distinct)
            total = totals.get(var, len(distinct)) if totals else len(distinct)
            values[f"?{var}"] = VariableValues(values=tuple(labelled), total=total, unnamed=unnamed)
        return KBFeedback(status="ok", row_count=min(len(rs.rows), self.row_cap), values=values,
                          unconstrained=unconstrained)

    def _totals(self, query: Sparql, shown: tuple[Var, ...]) -> dict[str, int]:
        from pyql.sparql.compile import prologue, where_lines

        counts = " ".join(f"(COUNT(DISTINCT {v}) AS ?pyql_n_{v.name})" for v in shown)
        text = "\n".join([*prologue(query.profile), f"SELECT {counts}", "WHERE {",
                          *where_lines(query), "}"])
        rs = self.kb.select(text, timeout=self.timeout)
        row = rs.rows[0] if rs.rows else ()
        return {v.name: int(c.lexical) for v, c in zip(shown, row) if isinstance(c, Literal)}

    def _execute(self) -> KBFeedback:
        query = self.query
        if query.is_empty:
            raise QueryError("execute: the query is empty; add facts first", code="empty_query")
        answer = query.aggregate.new_var if query.aggregate else query.answer
        if answer is None:
            bound = [v for v in query.variables if v in query.bound_variables]
            if len(bound) != 1:
                raise QueryError(
                    "execute: no answer variable; call set_answer() with one of "
                    + ", ".join(str(v) for v in bound),
                    code="no_answer", suggestions=[f"set_answer({v})" for v in bound],
                )
            answer = bound[0]
        rs = self.kb.select(query.to_sparql(select=None if query.aggregate or query.answer else (answer,)),
                            timeout=self.timeout)
        cells = sorted(rs.distinct(0), key=_sort_key) if rs.columns else []
        answers = tuple(self._answer_value(c) for c in cells)
        labels = tuple(self._display(cells[: self.max_values]))
        values = {str(answer): VariableValues(values=labels, total=len(cells),
                                              unnamed=self._count_unnamed(cells))}
        return KBFeedback(status="ok" if answers else "empty", row_count=len(rs.rows),
                          answers=answers, values=values if answers else {})

    # -- labels ---------------------------------------------------------------------------------
    @staticmethod
    def _answer_value(cell: Any) -> Any:
        if isinstance(cell, Entity):
            return cell.short
        if isinstance(cell, Literal):
            return cell.lexical
        return str(cell)

    def _count_unnamed(self, cells: list[Any]) -> int:
        """How many cells are compound nodes without a name (blank nodes; Freebase CVTs)."""
        blank = sum(1 for c in cells if isinstance(c, BlankNode))
        if self.profile.unnamed_label is None:
            return blank
        entities = [c for c in cells if isinstance(c, Entity)]
        labels = self._label_map(entities)  # one batched lookup
        return blank + sum(1 for e in entities if labels.get(e.iri) is None)

    def _display(self, cells: list[Any]) -> list[str]:
        labels = self._label_map([c for c in cells if isinstance(c, Entity)])
        out = []
        for cell in cells:
            if isinstance(cell, Entity):
                label = labels.get(cell.iri)
                out.append(label if label is not None else (self.profile.unnamed_label or cell.short))
            elif isinstance(cell, Literal):
                out.append(cell.lexical)
            elif isinstance(cell, BlankNode):
                out.append(self.profile.unnamed_label or "UnName_Entity")  # blank node ids mean nothing
            else:
                out.append(str(cell))
        return out

    def _label_map(self, entities: list[Entity]) -> dict[str, str | None]:
        profile = self.profile
        if profile.id_encoding == "label":
            return {e.iri: e.short for e in entities}
        missing = [e for e in dict.fromkeys(entities) if e.iri not in self._labels]
        if missing and profile.label_predicates:
            values = " ".join(render_term(e, profile) for e in missing)
            preds = " ".join(f"<{p}>" for p in profile.label_predicates)
            text = (f"SELECT ?e ?l WHERE {{ VALUES ?e {{ {values} }} VALUES ?p {{ {preds} }} "
                    f"?e ?p ?l . }}")
            from pyql.sparql.compile import prologue

            text = "\n".join([*prologue(profile), text])
            found: dict[str, str] = {}
            for e, label in self.kb.select(text, timeout=self.timeout).rows:
                if not isinstance(label, Literal) or not isinstance(e, Entity):
                    continue
                if profile.label_lang and label.lang and not label.lang.lower().startswith(profile.label_lang):
                    continue
                if e.iri not in found or (label.lang or "").lower() == (profile.label_lang or ""):
                    found[e.iri] = label.lexical
            for e in missing:
                self._labels[e.iri] = found.get(e.iri)
        elif missing:
            for e in missing:
                self._labels[e.iri] = None
        return {e.iri: self._labels.get(e.iri) for e in entities}


def _sort_key(cell: Any) -> tuple[int, float, str]:
    if isinstance(cell, Literal):
        value = cell.value
        if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return (0, float(value), cell.lexical)
        return (1, 0.0, cell.lexical)
    if isinstance(cell, Entity):
        return (2, 0.0, cell.short)
    return (3, 0.0, str(cell))


def _is_sql_db(backend: Any) -> bool:
    # Without importing pyql.db (SQLAlchemy): a SqlDB exists only if its module was imported.
    import sys

    module = sys.modules.get("pyql.db.sqldb")
    return module is not None and isinstance(backend, module.SqlDB)


def _guess_function(text: str) -> str | None:
    import re

    m = re.search(r"([A-Za-z_]\w*)\s*\(", text)
    return m.group(1) if m else None


def _resolve_guidelines(guidelines: GuidelineChecker | bool | None) -> GuidelineChecker | None:
    if guidelines is None or guidelines is False:
        return None
    if guidelines is True:
        from pyql.guidelines import default_registry  # type: ignore[attr-defined]

        return default_registry()
    return guidelines
