"""The Session: the environment an agent (or a person) acts on, one DSL call at a time.

``Session(backend, ...)`` is the one entry point: a KB gives a :class:`KBSession`, a database
(:class:`~pyql.db.DB`) a :class:`~pyql.sql.session.SqlSession`; both are ``Session`` instances
and implement the :class:`~pyql.environment.Environment` contract (one step template, one
:class:`~pyql.environment.Observation`).

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

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from heapq import nsmallest
from operator import attrgetter
from typing import Any

from pyql.echo import clip
from pyql.environment import (
    Environment,
    GuidelineChecker,
    HintPolicy,
    Observation,
    Outcome,
    python_feedback_for,
    render_observation,
    render_values,
    resolve_guidelines,
)
from pyql.errors import InputError, PyqlError, QueryError
from pyql.feedback import Feedback, Hint, KBFeedback, Relations, VariableValues
from pyql.kb.base import KB
from pyql.memory import Memory
from pyql.profiles import RelationFilter, get_relation_filter
from pyql.program import Alias, Call, Program
from pyql.resolve import Context
from pyql.sparql import Sparql
from pyql.sparql.apply import resolve_args
from pyql.sparql.compile import compile_counts, compile_labels, compile_relations
from pyql.syntax import Atom, AtomKind
from pyql.terms import BlankNode, Entity, Literal, Relation, RelationPath, Var

__all__ = [
    "Session",
    "KBSession",
    "Observation",
    "GuidelineChecker",
    "HintPolicy",
    "python_feedback_for",
    "render_observation",
    "render_values",
]


class Session(Environment):
    """The environment for one question over a KB or a database (see the module docstring).

    ``Session(kb, entities, ...)`` is a :class:`KBSession`; ``Session(db, entities, table=...)``
    a :class:`~pyql.sql.session.SqlSession`.
    """

    def __new__(cls, backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        if cls is Session:
            cls = _session_class(backend)
        return super().__new__(cls)


def _session_class(backend: Any) -> type[Session]:
    # Without importing pyql.db (SQLAlchemy): a DB exists only if pyql.db.base was imported.
    base = sys.modules.get("pyql.db.base")
    if base is not None and isinstance(backend, base.DB):
        return backend.session_class()
    return KBSession


@dataclass
class _KBOutcome(Outcome):
    query: Sparql | None = None
    #: calls the step implies before it (recorded in the program, e.g. a walk's set_answer)
    implied: tuple[Call, ...] = ()
    #: the call the program records instead of the one run (``fact_fallback``: reversed)
    recorded: Call | None = None
    #: the query starts again from this step (``fact_fallback``: the fact alone)
    restart: bool = False


class KBSession(Session):
    """A KB environment for one question. See the module docstring.

    Options beyond the module docstring's: ``max_values`` values shown per variable,
    ``row_cap`` rows read per observation, ``max_relations`` relations per direction,
    ``timeout`` per query, ``extremum_mode`` (``ties`` | ``limit``: the original's
    ``ORDER BY ... LIMIT 1``), ``functions`` (the tool names the agent was offered, for the
    guidelines), and two silent semantics of the original QueryAgent environment
    (off by default, on in the ``paper`` preset; docs/paper_preset.md):

    - ``exclude_topic``: ``answer`` keeps the answer variable apart from the linked entities
      (the original's ``set_answer`` added ``FILTER(?ans != mid)`` on Freebase); ``nodes``
      keeps every variable apart from them (the original MetaQA walk dropped the topic entity
      at every hop).
    - ``relation_filter``: a :data:`~pyql.profiles.RELATION_FILTERS` name (``webqsp``,
      ``grailqa``, ``graphq``): the administrative relations the original hid from
      ``get_relation``.

    ``cvt_note=True`` adds the original GraphQ environment's note to a result whose only
    variable holds unnamed compound nodes (Freebase CVTs): "It seems that ?x is CVT node, you may
    use get_relation(?x) to further constrain the query." (``wikienv_graphq.py`` lines 273-276;
    a note on an accepted step, not a hint: the step stands).

    ``walk=True`` reads ``get_relation()`` (no argument) as the relations of the current node of
    a walk, as the original MetaQA environment did, from the first step on; otherwise it means
    that only once a ``relate()`` walk has started (before, it is an arity error, as on
    Freebase). ``relate(r)`` is always read (:meth:`_expand_alias`).
    """

    tools = "sparql"

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
        exclude_topic: str = "off",
        relation_filter: str | RelationFilter | None = None,
        walk: bool = False,
        cvt_note: bool = False,
        fact_fallback: bool = False,
    ) -> None:
        self.kb = kb
        self.profile = kb.profile
        self.entities = dict(entities or {})
        self.guidelines = resolve_guidelines(guidelines)
        self.max_values = max_values
        self.row_cap = row_cap
        self.max_relations = max_relations
        self.timeout = timeout
        self._extremum_mode = extremum_mode
        self.functions = tuple(functions or ())
        self._exclude_topic = exclude_topic
        self.relation_filter = (get_relation_filter(relation_filter)
                                if relation_filter is not None else None)
        self.walk = walk
        self.cvt_note = cvt_note
        self.fact_fallback = fact_fallback
        self._labels: dict[str, str | None] = {}
        self._context = Context(self.profile, self.entities)
        self.reset()

    # -- state ----------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self.query = self._empty_query()
        #: relate() was used: execute() then answers with the node the walk reached
        self._walking = False

    def _empty_query(self) -> Sparql:
        return Sparql(profile=self.profile, entities=self.entities,
                      extremum_mode=self._extremum_mode,  # type: ignore[arg-type]
                      exclude_topic=self._exclude_topic)  # type: ignore[arg-type]

    def _initial_memory(self) -> Memory:
        return Memory(entities=dict(self.entities))

    @property
    def context(self) -> Context:
        return self._context

    def to_sparql(self) -> str:
        return self.query.to_sparql()

    def to_query(self) -> str:
        """The current query as SPARQL text."""
        return self.query.to_sparql()

    def _query_text(self) -> str:
        return self.query.to_sparql() if not self.query.is_empty else ""

    # -- the original MetaQA walk (relate / get_relation()) ---------------------------------------
    def _expand_alias(self, alias: Alias, call: Call) -> Call:
        """``relate(r)`` and ``get_relation()`` of the original MetaQA environment
        (ag_src/meta_src/wikienv_meta.py:67-90) as canonical calls from the *current node*: the
        first linked entity, then the node the last ``add_fact`` reached.

        ``relate(r)`` is ``add_fact(current, r, ?eN)``, or ``add_fact(?eN, r, current)`` when
        the current node has ``r`` only backward (the original walks a relation in both
        directions: from the writers back to their films). When the node has ``r`` both ways,
        the walk goes on away from where it came from: backward from a node reached forward (as
        a tail), forward otherwise. A relation the node does not have is written forward, so it
        gets the KB's usual feedback (an empty result, the ERASER hint).
        """
        if call.name == "get_relation" and not (self.walk or self._walking):
            self.toolset["get_relation"].check_arity(len(call.args))  # the arity error
        current = self.current_node()
        if current is None:
            raise QueryError(f"{call.name}(): no current entity (no entity was linked)",
                             code="no_current_entity")
        if call.name == "get_relation":
            return Call(name="get_relation", args=(current,))
        relation = call.args[0]
        new = Atom(AtomKind.VAR, self._fresh_walk_var())
        relations, _ = self._get_relation(resolve_args(Call(name="get_relation", args=(current,)),
                                                       self.context)[0])
        assert relations.relations is not None
        forward = relation.value in relations.relations.forward
        backward = relation.value in relations.relations.backward
        if forward and backward:
            # both ways (MetaQA names entities by label: a few names are both a person and a
            # film): walk on through the node, away from where the walk came from
            backward = self._reached_as_tail()
        self._walking = True
        args = (new, relation, current) if backward else (current, relation, new)
        return Call(name="add_fact", args=args)

    def relations_of(self, node: Atom) -> Relations:
        """The relations of ``node`` as ``get_relation`` finds them, without taking a step (the
        original MetaQA prompt lists the topic entity's relations before the first step)."""
        kb, _ = self._get_relation(resolve_args(Call(name="get_relation", args=(node,)),
                                                self.context)[0])
        assert kb.relations is not None
        return kb.relations

    def current_node(self) -> Atom | None:
        """Where a walk stands: the first linked entity, then the node the last ``add_fact`` of
        the program reached (its newest variable)."""
        return self._walk_position()[0]

    def _reached_as_tail(self) -> bool:
        return self._walk_position()[1]

    def _walk_position(self) -> tuple[Atom | None, bool]:
        """The current node, and whether the walk reached it as a tail (forward)."""
        topic = next(iter(self.entities.values()), None)
        node = Atom(AtomKind.NAME, topic) if topic is not None else None
        as_tail = False
        seen: set[str] = set()
        for call in self.program.calls:
            if call.name != "add_fact":
                continue
            head, _, tail = call.args
            new = [a for a in (head, tail) if a.kind is AtomKind.VAR and a.value not in seen]
            seen.update(a.value for a in new)
            if new:
                node, as_tail = new[-1], new[-1] == tail
        return node, as_tail

    def _fresh_walk_var(self) -> str:
        taken = {v.name for v in self.query.variables}
        return next(f"e{i}" for i in range(1, len(taken) + 2) if f"e{i}" not in taken)

    # -- the step hooks -------------------------------------------------------------------------
    def _resolve(self, call: Call) -> tuple[tuple[Any, ...], list[str]]:
        resolved = resolve_args(call, self.context)
        return tuple(resolved), self._resolution_notes(call, resolved)

    def _apply(self, call: Call, resolved: tuple[Any, ...]) -> Outcome:
        name = call.name
        if name == "get_relation":
            kb, memory = self._get_relation(resolved[0])
            return _KBOutcome(backend=kb, memory=memory)
        if name == "execute":
            implied = self._walk_answer()
            if implied is not None:  # the original MetaQA: the answer is where the walk stands
                query = self.query.set_answer(Var(implied.args[0].value))
                return _KBOutcome(backend=self._execute(query), query=query, implied=(implied,))
            return _KBOutcome(backend=self._execute())
        query = getattr(self.query, name)(*resolved)
        _refuse_repeat(name, call, self.query, query)
        kb = self._observe(query)
        recorded, restart = None, False
        if name == "add_fact" and self.fact_fallback and kb.status == "empty":
            found = self._fact_fallback(call, resolved)
            if found is not None:
                query, kb, recorded, restart = found
        bound = query.bound_variables
        new_var = query.aggregate.new_var if query.aggregate is not None else None
        memory = self.memory.with_(
            variables=tuple(map(str, query.variables)),
            bound_variables=tuple(str(v) for v in query.variables if v in bound or v == new_var),
            answer=str(query.answer) if query.answer is not None else None,
            last_values=kb.values if kb.status == "ok" else self.memory.last_values,
        )
        return _KBOutcome(backend=kb, memory=memory, query=query, recorded=recorded, restart=restart)

    def _fact_fallback(self, call: Call, resolved: tuple[Any, ...]
                       ) -> tuple[Sparql, KBFeedback, Call | None, bool] | None:
        """The original's silent retries of an ``add_fact`` with an empty result
        (``grail_src/wikienv.py:472-514``, ``webqsp_src/wikienv_webqsp.py:489-531``,
        ``graphq_src/wikienv_graphq.py:497-539``): the fact reversed; then, unless both ends
        are variables, the fact alone as the whole query, as written and reversed. The first
        with a result is kept: (query, feedback, the call the program records, restarted)."""
        head, relation, tail = resolved
        raw_head, raw_relation, raw_tail = call.args
        reverse = call.model_copy(update={"args": (raw_tail, raw_relation, raw_head)})
        tries: list[tuple[Sparql, tuple[Any, ...], Call | None, bool]] = [
            (self.query, (tail, relation, head), reverse, False)]
        if not (isinstance(head, Var) and isinstance(tail, Var)):
            alone = self._empty_query()
            tries += [(alone, (head, relation, tail), None, True),
                      (alone, (tail, relation, head), reverse, True)]
        for base, args, recorded, restart in tries:
            try:
                query = base.add_fact(*args)
            except InputError:
                continue
            kb = self._observe(query)
            if kb.status == "ok":
                return query, kb, recorded, restart
        return None

    def _walk_answer(self) -> Call | None:
        """``set_answer(current)`` when a relate() walk ends in execute() with no answer set."""
        query = self.query
        if not self._walking or query.answer is not None or query.aggregate is not None:
            return None
        node = self.current_node()
        if node is None or node.kind is not AtomKind.VAR:
            return None
        return Call(name="set_answer", args=(node,))

    def _commit(self, call: Call, outcome: Outcome) -> None:
        if getattr(outcome, "restart", False):  # the program is the query's: it starts again
            self.program = Program(tools=self.tools)
            self.memory = self.memory.with_(calls=())
        query = getattr(outcome, "query", None)
        if query is not None:
            self.query = query
        implied = getattr(outcome, "implied", ())
        if implied:  # recorded before the call, so that the program replays as it ran
            self.program = Program(calls=(*self.program.calls, *implied), tools=self.tools)
            self.memory = self.memory.with_(calls=self.memory.calls.extend(implied),
                                            answer=str(query.answer) if query else None)

    def _summary(self, feedback: Feedback, outcome: Outcome) -> str:
        kb = feedback.kb
        if kb.relations is not None:
            shown = kb.relations.shown
            return str({"forward": [shown(r) for r in kb.relations.forward],
                        "backward": [shown(r) for r in kb.relations.backward]})
        if kb.answers is not None and not kb.values:
            return f"The answer is {list(kb.answers)}{kb.bound_note}"
        if kb.status == "empty":
            return "The query result is empty."
        text = (render_values(kb.values) if kb.values else "Done.") + kb.bound_note
        if self.cvt_note and len(kb.values) == 1:
            var, values = next(iter(kb.values.items()))
            if values.unnamed:
                text += (f". It seems that {var} is CVT node, you may use get_relation({var}) to "
                         "further constrain the query.")
        return text + "".join(f" (Note: {note}.)" for note in feedback.notes)

    # -- internals ------------------------------------------------------------------------------
    def _resolution_notes(self, call: Call, resolved: list[Any]) -> list[str]:
        notes = []
        for atom, term in zip(call.args, resolved):
            if (isinstance(term, Entity) and atom.value != term.id
                    and self.context.entity_for_mention(atom.value) == term.id):
                notes.append(f"{atom.value!r} was read as the linked entity {term.id}")
        return notes

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
        if isinstance(node, Literal):
            directions: tuple[str, ...] = ("backward",)
        elif self.max_relations is None:  # one query for both directions
            directions = ("both",)
        else:  # the bound holds per direction
            directions = ("forward", "backward")
        found: dict[str, set[str]] = {"forward": set(), "backward": set()}
        for direction in directions:
            rs = self.kb.select(
                compile_relations(self.query, node, direction, limit=self.max_relations),
                timeout=self.timeout)
            for row in rs.rows:
                cell = row[0]
                if isinstance(cell, Entity):
                    side = row[1].lexical if direction == "both" else direction
                    found[side].add(cell.iri)
        hidden = self.profile.hidden_relations
        compact = self.profile.compact
        drop = self.relation_filter
        forward, backward = (
            tuple(name for name in map(compact, sorted(found[side] - hidden))
                  if drop is None or not drop.hides(name))
            for side in ("forward", "backward"))
        labels = self._relation_labels((*forward, *backward)) if self.profile.labelled_ids else ()
        relations = Relations(forward=forward, backward=backward, labels=labels)
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
        new_var = query.aggregate.new_var if query.aggregate is not None else None
        unconstrained = tuple(str(v) for v in query.variables if v not in bound and v != new_var)
        if query.filters:
            pending = tuple(f for f in query.filters
                            if (isinstance(f.left, Var) and f.left not in bound)
                            or (isinstance(f.right, Var) and f.right not in bound))
            if pending:
                query = replace(query, filters=tuple(f for f in query.filters if f not in pending))
        if new_var is not None:
            shown: tuple[Var, ...] = (new_var,)
        elif query.answer is not None:
            shown = (query.answer,)
        else:
            shown = tuple(v for v in query.variables if v in bound)
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
            # a stable order, the same on every backend (engines return rows in any order);
            # only the shown values need it
            distinct = rs.distinct(i)
            kinds = set(map(type, distinct))
            labelled = self.display(_first(self.max_values, distinct, kinds), kinds)
            unnamed = self._count_unnamed(distinct, kinds)
            total = totals.get(var, len(distinct)) if totals else len(distinct)
            values[f"?{var}"] = VariableValues(values=tuple(labelled), total=total, unnamed=unnamed)
        return KBFeedback(status="ok", row_count=min(len(rs.rows), self.row_cap), values=values,
                          unconstrained=unconstrained, cells_cut=rs.cells_cut)

    def _totals(self, query: Sparql, shown: tuple[Var, ...]) -> dict[str, int]:
        rs = self.kb.select(compile_counts(query, shown), timeout=self.timeout)
        row = rs.rows[0] if rs.rows else ()
        return {v.name: int(c.lexical) for v, c in zip(shown, row) if isinstance(c, Literal)}

    def _execute(self, query: Sparql | None = None) -> KBFeedback:
        query = self.query if query is None else query
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
        distinct = rs.distinct(0) if rs.columns else []
        kinds = set(map(type, distinct))
        cells = _first(None, distinct, kinds)
        answers = tuple(self._answer_value(c) for c in cells)
        labels = tuple(self.display(cells[: self.max_values], kinds))
        values = {str(answer): VariableValues(values=labels, total=len(cells),
                                              unnamed=self._count_unnamed(cells, kinds))}
        return KBFeedback(status="ok" if answers else "empty", row_count=len(rs.rows),
                          answers=answers, values=values if answers else {},
                          truncated=rs.truncated, cells_cut=rs.cells_cut)

    # -- labels ---------------------------------------------------------------------------------
    @staticmethod
    def _answer_value(cell: Any) -> Any:
        if isinstance(cell, Entity):
            return cell.short
        if isinstance(cell, Literal):
            return cell.lexical
        return str(cell)

    def _count_unnamed(self, cells: list[Any], kinds: set[type] | None = None) -> int:
        """How many cells are compound nodes without a name (blank nodes; Freebase CVTs)."""
        blank = (sum(1 for c in cells if isinstance(c, BlankNode))
                 if kinds is None or BlankNode in kinds else 0)
        if self.profile.unnamed_label is None:
            return blank
        entities = [c for c in cells if isinstance(c, Entity)]
        labels = self._label_map(entities)  # one batched lookup
        return blank + sum(1 for e in entities if labels.get(e.iri) is None)

    @property
    def backend(self) -> KB:
        return self.kb

    def display(self, cells: Sequence[Any], kinds: set[type] | None = None) -> list[str]:
        """How ``cells`` (result terms) are shown: an entity by its label (looked up in one
        batch, cached), a literal by its lexical form, a nameless node by the profile's
        placeholder (``UnName_Entity``). ``kinds``: the cell types, when the caller knows them."""
        cells = list(cells)
        if kinds == {Entity} and self.profile.id_encoding == "label":
            return [c.short for c in cells]  # the id is the label (_label_map)
        labels = self._label_map([c for c in cells if isinstance(c, Entity)])
        labelled_ids = self.profile.labelled_ids
        out = []
        for cell in cells:
            if isinstance(cell, Entity) and labelled_ids and self.profile.is_entity_id(cell.short):
                out.append(f"{cell.short} ({labels.get(cell.iri) or 'no label'})")  # Q42 (label)
            elif isinstance(cell, Entity):
                label = labels.get(cell.iri)
                out.append(label if label is not None else (self.profile.unnamed_label or cell.short))
            elif isinstance(cell, Literal):
                out.append(cell.lexical)
            elif isinstance(cell, BlankNode):
                out.append(self.profile.unnamed_label or "UnName_Entity")  # blank node ids mean nothing
            else:
                out.append(str(cell))
        return out

    def _label_hint(self, hint: Hint, feedback: Feedback) -> Hint:
        """With opaque ids (Wikidata), the hint carries the labels of the entities and
        relations the step wrote (``P19: place of birth; Q42: Douglas Adams``)."""
        profile = self.profile
        if not profile.labelled_ids:
            return hint
        written: dict[str, str] = {}  # short id -> the IRI labelling it
        for term in feedback.args:
            parts = term.parts if isinstance(term, RelationPath) else (term,)
            for part in parts:
                if isinstance(part, (Entity, Relation)):
                    subject = profile.labelled_by(part.iri)
                    if subject is not None:
                        written.setdefault(part.short, subject)
        if not written:
            return hint
        try:
            labels = self._label_map([Entity(iri, profile.compact(iri))
                                      for iri in dict.fromkeys(written.values())])
        except PyqlError:  # the KB failed: the hint stands as the guideline wrote it
            return hint
        return replace(hint, labels=tuple((name, labels.get(iri) or "no label")
                                          for name, iri in written.items()))

    def labels(self, entities: Sequence[Entity]) -> dict[str, str | None]:
        """The label of each entity (by IRI; None without one) in the profile's language, read
        from the KB in one batch and cached for the Session."""
        return self._label_map(list(entities))

    def _relation_labels(self, names: Sequence[str]) -> tuple[tuple[str, str], ...]:
        """``(name, label)`` of relation names that are opaque ids (``P161``, ``pq:P453``), the
        labels of their property entities read in one batch (and cached); ``no label`` where
        the KB has none. A relation with no property id gets no entry."""
        profile = self.profile
        subjects: dict[str, str] = {}
        for name in names:
            try:
                subject = profile.labelled_by(profile.relation(name).iri)
            except PyqlError:
                subject = None
            if subject is not None:
                subjects[name] = subject
        labels = self._label_map([Entity(iri, profile.compact(iri))
                                  for iri in dict.fromkeys(subjects.values())])
        return tuple((name, labels.get(subject) or "no label")
                     for name, subject in subjects.items())

    def _label_map(self, entities: list[Entity]) -> dict[str, str | None]:
        profile = self.profile
        if profile.id_encoding == "label":
            return {e.iri: e.short for e in entities}
        missing = [e for e in dict.fromkeys(entities) if e.iri not in self._labels]
        if missing and profile.label_predicates:
            text = compile_labels(missing, profile)
            found: dict[str, str] = {}
            for e, label in self.kb.select(text, timeout=self.timeout, purpose="label").rows:
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


_ID = attrgetter("id")


def _refuse_repeat(name: str, call: Call, before: Sparql, after: Sparql) -> None:
    """A fact (or type) already in the query is not added again: the repeated pattern would
    change no answer, yet each copy multiplies the work of every later query (a model looping
    on one add_fact made a query of 250 copies). Raised before anything runs; the guideline
    ``kb.fact_already_in_query`` (RM210) turns it into a hint."""
    if name == "add_fact":
        repeated = after.triples[-1] in before.triples
    elif name == "add_type":
        repeated = after.types[-1] in before.types
    else:
        return
    if repeated:
        raise QueryError(f"{name}: {clip(str(call))} is already in the query; it was not added "
                         "again", code="already_in_query")


def _first(n: int | None, cells: list[Any], kinds: set[type]) -> list[Any]:
    """``sorted(cells, key=_sort_key)[:n]`` (all when ``n`` is None), without a Python key call
    per cell when every cell is an entity with its own id (the usual result: entities order by
    their short form, and the ids themselves sort in C)."""
    if kinds == {Entity}:
        by_id = dict(zip(map(_ID, cells), cells))
        if len(by_id) == len(cells) and None not in by_id:
            if n is None or len(by_id) <= 4 * n:  # a short list sorts faster than a heap selects
                ids = sorted(by_id)[:n]
            else:
                ids = nsmallest(n, by_id)
            return list(map(by_id.__getitem__, ids))
    return sorted(cells, key=_sort_key) if n is None else nsmallest(n, cells, key=_sort_key)


def _sort_key(cell: Any) -> tuple[int, float, str]:
    if isinstance(cell, Literal):
        value = cell.value
        if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return (0, float(value), cell.lexical)
        return (1, 0.0, cell.lexical)
    if isinstance(cell, Entity):
        return (2, 0.0, cell.short)
    return (3, 0.0, str(cell))
