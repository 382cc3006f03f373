"""Grounding: what the next call of a step may be, computed from the Session's state.

The KB is the grammar (issue 37): a step's options are not "any string" but what the
environment knows now. :func:`ground_step` reads a KB or SQL session and returns a
:class:`Grounding`: the functions legal now and, per argument slot, the :class:`Candidates`
the environment offers —

- **functions**: the offered toolset, less what cannot succeed yet (no ``add_fact`` before a
  ``get_relation`` listed relations, no ``set_answer``/aggregation before a variable has values,
  no ``execute`` before there is an answer: ``set_answer`` or an aggregation);
- **entity/node slots**: the linked entities, the variables with values and one fresh variable
  (``get_relation`` only the nodes whose relations were not listed yet: a repeat lists nothing
  new);
- **relation slots**: per node, the relations the KB returned for it (the node's
  ``get_relation``, kept in the memory: fetched once per node), forward and backward apart, so
  a fact's relation is always one the KB has at its head (forward) or tail (backward);
- **SQL**: table and column names from the schema, and a condition's values from the column's
  distinct values when a ``get_column`` showed them all (few enough).

Lists are bounded (``limit``, 40 by default: :data:`~pyql.agent.grounding.ranking.TOP_K`): a longer list
keeps the ``limit`` best by the relation ranker, as the observation shows them (the same
:func:`~pyql.agent.grounding.ranking.select_relations` cut, so the enum and the ``...``-marked list the
model read agree), and says so (``truncated``, ``total``).

Candidates come in a stable, documented order: relations best first by the ranker (ties and
``ranker=None`` by name), ``set_answer``'s variables newest first (a walk answers with the node
it reached last), everything else in the order the session met it (linked entities as linked,
variables as they appeared, then the fresh one; columns as the schema lists them).

This module holds no prompt wording: strategies turn a grounding into a reply format
(:func:`pyql.agent.llm.structured.grounded_action_format`) or into calls to score (choose mode,
:func:`call_options`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyql.agent.grounding.ranking import TOP_K, RelationRanker, select_relations
from pyql.program import Call
from pyql.syntax import Atom, AtomKind

__all__ = [
    "CandidateKind",
    "Candidates",
    "FactOption",
    "Grounding",
    "CallOption",
    "call_options",
    "check_choose",
    "combine",
    "fresh_variable",
    "named_variable",
    "ground_step",
    "rank_candidates",
]

CandidateKind = Literal["relation", "entity", "type", "column", "table", "value", "function"]

#: the functions that aggregate a variable into a new one
_AGGREGATES = ("add_count", "add_sum", "add_avg")
#: SPARQL functions whose every argument is a variable with values
_ON_VARIABLES = ("add_max", "add_min", *_AGGREGATES, "set_answer")


@dataclass(frozen=True)
class Candidates:
    """The options of one slot: ``items`` in a stable order, ``total`` before the cut,
    ``truncated`` when the list was cut to its bound."""

    kind: CandidateKind
    items: tuple[str, ...] = ()
    total: int = 0
    truncated: bool = False

    @classmethod
    def of(cls, kind: CandidateKind, items: Sequence[str], *, limit: int | None = None,
           total: int | None = None) -> Candidates:
        unique = tuple(dict.fromkeys(items))
        kept = unique if limit is None else unique[:limit]
        whole = len(unique) if total is None else max(total, len(unique))
        return cls(kind, kept, whole, whole > len(kept))

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class FactOption:
    """One way to write ``add_fact`` now: from ``node`` (its ``get_relation`` listed
    ``relations``) forward (``node`` is the head) or backward (``node`` is the tail); the other
    end is one of ``others`` (variables, a fresh one, linked entities)."""

    node: str
    direction: Literal["forward", "backward"]
    relations: Candidates
    others: Candidates


@dataclass(frozen=True)
class Grounding:
    """What the next call may be (see the module docstring).

    ``slots`` maps ``(function, parameter)`` to its candidates where the environment has some;
    a slot without candidates is free (its schema stays a bounded string). ``facts`` are the
    ``add_fact`` options per fetched node and direction.
    """

    tools: str
    functions: Candidates
    slots: Mapping[tuple[str, str], Candidates] = field(default_factory=dict)
    facts: tuple[FactOption, ...] = ()
    #: per column: its values, when a ``get_column`` showed all of them (SQL)
    values: Mapping[str, Candidates] = field(default_factory=dict)
    #: the fresh variable a new node gets (KB)
    fresh: str = ""
    #: the query's variables (a new one is named apart from them: :func:`named_variable`)
    variables: tuple[str, ...] = ()
    #: the answer variable set so far ("" before ``set_answer``)
    answer: str = ""

    def slot(self, function: str, parameter: str) -> Candidates | None:
        return self.slots.get((function, parameter))

    @property
    def truncated(self) -> bool:
        """Some list was cut to its bound."""
        return (self.functions.truncated or any(c.truncated for c in self.slots.values())
                or any(f.relations.truncated for f in self.facts))


def rank_candidates(question: str, items: Sequence[str], ranker: RelationRanker | None
                    ) -> list[str]:
    """``items`` best first by ``ranker`` (ties by name); by name without a ranker."""
    unique = list(dict.fromkeys(items))
    if ranker is None or len(unique) < 2:
        return sorted(unique)
    scores = ranker.scores(question, unique)
    order = sorted(range(len(unique)), key=lambda i: (-scores[i], unique[i]))
    return [unique[i] for i in order]


def named_variable(relation: str, taken: Sequence[str]) -> str:
    """The variable a forward fact along ``relation`` reaches, named after the relation: its
    last segment (``film.film.directed_by`` -> ``?directed_by``, ``wdt:P57`` -> ``?P57``),
    every character that cannot be in a variable name made ``_``, then ``2``, ``3`` ... until
    it is not in ``taken``; ``?x``-style (:func:`fresh_variable`) when nothing is left.

    A name says what the node is (``add_fact(Heat, release_year, ?release_year)``), as the
    demonstrations' ``?director`` does: a model reads it, and so does the word-overlap prior
    (``set_answer(?has_genre)`` shares "genre" with "what genres ...", ``set_answer(?x)``
    nothing).

    >>> named_variable("film.film.directed_by", ["?directed_by"])
    '?directed_by2'
    """
    base = re.sub(r"\W", "_", re.split(r"[./:#]", relation.strip())[-1]).strip("_")
    if not base:
        return fresh_variable(taken)
    used = set(taken)
    name, n = f"?{base}", 1
    while name in used:
        n += 1
        name = f"?{base}{n}"
    return name


def fresh_variable(taken: Sequence[str]) -> str:
    """The first of ``?x``, ``?y``, ``?z``, ``?x1``, ``?y1`` ... not in ``taken``."""
    used = set(taken)
    n = 0
    while True:
        for base in ("x", "y", "z"):
            name = f"?{base}{n or ''}"
            if name not in used:
                return name
        n += 1


def ground_step(session: Any, question: str = "", *, ranker: RelationRanker | None = None,
                limit: int = TOP_K, seed: int = 0,
                functions: Sequence[str] | None = None) -> Grounding:
    """The grounding of ``session``'s next step (a KB or SQL session; see the module
    docstring). ``functions``: the functions the strategy offers (default: the session's)."""
    offered = tuple(functions or getattr(session, "functions", ()) or session.toolset)
    if session.tools == "sql":
        return _ground_sql(session, offered, limit)
    return _ground_kb(session, question, offered, ranker, limit, seed)


# -- KB ------------------------------------------------------------------------------------------


def _ground_kb(session: Any, question: str, offered: Sequence[str],
               ranker: RelationRanker | None, limit: int, seed: int) -> Grounding:
    memory = session.memory
    entities = tuple(dict.fromkeys(memory.entities.values()))
    bound = tuple(memory.bound_variables)
    fresh = fresh_variable(memory.variables)
    # a node whose relations were listed gives nothing new: get_relation asks the others
    nodes = Candidates.of("entity", [n for n in (*entities, *bound) if n not in memory.relations],
                          limit=limit)
    variables = Candidates.of("entity", bound, limit=limit)
    others = Candidates.of("entity", [*bound, fresh, *entities], limit=limit)

    facts: list[FactOption] = []
    known: list[str] = []
    for node, relations in memory.relations.items():
        if node.startswith("?") and node not in bound:
            continue  # a variable the query no longer has
        forward, backward = select_relations(question, relations.forward, relations.backward,
                                             ranker, top_k=limit, seed=seed)
        total = len(relations.forward) + len(relations.backward)
        for direction, kept in (("forward", forward), ("backward", backward)):
            # the same relation from the same end again only names its values twice
            used = _used(memory.calls, node, direction)
            kept = [r for r in kept if r not in used]
            if not kept:
                continue
            ranked = rank_candidates(question, kept, ranker)
            known += ranked
            side = Candidates("relation", tuple(ranked), total, total > len(forward) + len(backward))
            linked = _linked(memory.calls, node)  # a second fact between them: a repeat
            facts.append(FactOption(node, direction, side,  # type: ignore[arg-type]
                                    Candidates.of("entity", [o for o in others.items
                                                             if o != node and o not in linked])))
    relations = Candidates.of("relation", rank_candidates(question, known, ranker), limit=limit)

    legal: list[str] = []
    aggregated = any(c.name in (*_AGGREGATES,) for c in memory.calls)
    for name in offered:
        if name == "add_fact" and not facts:
            continue
        if name in (*_ON_VARIABLES, "add_type", "add_filter", "add_time_constrain") and not bound:
            continue
        if name == "add_time_constrain" and not relations:
            continue
        if name == "execute" and memory.answer is None and not aggregated:
            continue
        if name == "get_relation" and not nodes:
            continue
        if name == "set_answer" and not [v for v in bound if v != memory.answer]:
            continue
        legal.append(name)

    slots: dict[tuple[str, str], Candidates] = {}
    if nodes:
        slots["get_relation", "node"] = nodes
    for name in _ON_VARIABLES:
        first = "answer_var" if name == "set_answer" else f"{name.removeprefix('add_')}_var"
        slots[name, first] = variables
    # the answer set again is no step: set_answer offers the other variables, the newest
    # first: a walk's answer is the node it reached last (``add_fact(?x, release_year, ?y)``
    # asks for ``?y``), and a tie in choose mode goes to the earlier candidate
    slots["set_answer", "answer_var"] = Candidates.of(
        "entity", [v for v in reversed(variables.items) if v != memory.answer])
    slots["add_type", "var"] = variables
    slots["add_filter", "ob1"] = variables
    slots["add_time_constrain", "var"] = variables
    slots["add_time_constrain", "start_relation"] = relations
    slots["add_time_constrain", "end_relation"] = relations
    for name in _AGGREGATES:  # the new variable: a fresh one
        slots[name, "new_var"] = Candidates.of("entity", [fresh_variable(
            [*memory.variables, *variables.items])])
    return Grounding("sparql", Candidates.of("function", legal),
                     {k: v for k, v in slots.items() if v}, tuple(facts), fresh=fresh,
                     variables=tuple(memory.variables), answer=memory.answer or "")


def _used(calls: Sequence[Any], node: str, direction: str) -> set[str]:
    """The relations a fact of ``calls`` already follows from ``node`` in ``direction``."""
    at = 0 if direction == "forward" else 2
    out: set[str] = set()
    for call in calls:
        if call.name != "add_fact" or len(call.args) != 3:
            continue
        end = call.args[at]
        if (str(end) if end.kind.value == "var" else end.value) == node:
            out.add(call.args[1].value)
    return out


def _linked(calls: Sequence[Any], node: str) -> set[str]:
    """The variables a fact of ``calls`` already ties to ``node``."""
    out: set[str] = set()
    for call in calls:
        if call.name != "add_fact" or len(call.args) != 3:
            continue
        ends = [str(a) if a.kind.value == "var" else a.value for a in (call.args[0], call.args[2])]
        if node in ends:
            out.update(e for e in ends if e.startswith("?") and e != node)
    return out


# -- SQL -----------------------------------------------------------------------------------------


def _ground_sql(session: Any, offered: Sequence[str], limit: int) -> Grounding:
    columns = Candidates.of("column", session.memory.columns)
    tables = Candidates.of("table", session.schema.table_names)
    values: dict[str, Candidates] = {}
    for obs in session.observations:  # the last get_column of each column that showed all
        call = obs.call
        if call is None or call.name != "get_column" or not obs.ok:
            continue
        column = call.args[0].value
        shown = next(iter(obs.values.values()), None)
        if shown is None or not shown.values:
            continue
        if shown.total <= len(shown.values) and len(shown.values) <= limit:
            values[column] = Candidates.of("value", shown.values)
        else:
            values.pop(column, None)
    legal = [n for n in offered
             if not (n == "execute" and not session.memory.answer and not _answered(session))]
    slots: dict[tuple[str, str], Candidates] = {}
    for sig in session.toolset.values():
        for param in sig.params:
            if param.kind.value == "column" and columns:
                slots[sig.name, param.name] = columns
            elif param.kind.value == "table" and tables:
                slots[sig.name, param.name] = tables
    return Grounding("sql", Candidates.of("function", legal), slots, (), values)


def _answered(session: Any) -> bool:
    """A SQL query has an answer column (``set_answer`` was called)."""
    return any(c.name == "set_answer" for c in session.memory.calls)


# -- choose mode ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallOption:
    """One enumerable call of a step: ``text`` as the strategy's parser reads it, and
    ``words``, what the call is about, which choose mode's prior compares with the question:
    a fact's relation (its new node is named after it), the node of ``get_relation`` and of
    ``set_answer``, the answer variable of ``execute``. So ``get_relation(?directed_by)``,
    ``set_answer(?directed_by)`` and, once it is the answer, ``execute()`` share their words:
    whether to go on or to stop is not the prior's to say (the model breaks the tie), while
    ``set_answer(?has_genre)`` names "genre" where ``set_answer(?x)`` names nothing."""

    text: str
    words: str = ""


def call_options(grounding: Grounding) -> list[CallOption] | None:
    """The calls of a step, when the step's options are enumerable: every legal function
    whose every required argument has candidates (``get_relation`` of a node not fetched yet,
    ``add_fact`` along an offered relation to a new variable — forward: named after the
    relation, :func:`named_variable`; backward: the fresh ``?x``-style one —, ``set_answer``
    of a variable with values, ``execute``); None when some legal function takes a free
    argument and nothing else is offered (the step is not enumerable: generate it).

    The order is stable: functions in toolset order, relations best first, the newest
    variable first."""
    if grounding.tools != "sparql":
        return None
    out: list[CallOption] = []
    for name in grounding.functions.items:
        if name == "get_relation":
            nodes = grounding.slot("get_relation", "node")
            out += [CallOption(_call("get_relation", n), n.lstrip("?"))
                    for n in (nodes.items if nodes else ())]
        elif name == "add_fact":
            taken = (*grounding.variables, grounding.fresh)
            for fact in grounding.facts:
                for relation in fact.relations.items:
                    # the walk's next node: named after the relation that reaches it (forward);
                    # a backward fact's head is what the relation starts from, so it has no
                    # name of its own here: the fresh ?x
                    ends = ((fact.node, named_variable(relation, taken))
                            if fact.direction == "forward" else (grounding.fresh, fact.node))
                    out.append(CallOption(_call("add_fact", ends[0], relation, ends[1]),
                                          relation))
        elif name == "set_answer":
            variables = grounding.slot("set_answer", "answer_var")
            out += [CallOption(_call("set_answer", v), v.lstrip("?"))
                    for v in (variables.items if variables else ())]
        elif name == "execute":
            out.append(CallOption(_call("execute"), grounding.answer.lstrip("?")))
    return out or None


def _call(name: str, *arguments: str) -> str:
    """A call's text as the DSL prints it: a variable as ``?name``, anything else a name, quoted
    when the bare text would not read back as one argument (``"Black Cat, White Cat"``)."""
    return str(Call.of(name, *(Atom(AtomKind.VAR, a[1:]) if a.startswith("?")
                               else Atom(AtomKind.NAME, a) for a in arguments)))


def check_choose(llm: Any) -> None:
    """Choose mode needs a client that scores candidates (``scores_candidates``): else
    :class:`~pyql.agent.errors.ScoringUnsupportedError`, before the run starts."""
    from pyql.agent.errors import ScoringUnsupportedError

    if not getattr(llm, "scores_candidates", False) or not callable(getattr(llm, "score", None)):
        model = str(getattr(llm, "model", ""))
        raise ScoringUnsupportedError(
            f"choose mode: {type(llm).__name__} ({model or 'no model'}) cannot score candidates "
            "(it needs log-probabilities: --llm local, a server that returns them, or --llm "
            "ranker)", model=model, reason="no scores_candidates")


def combine(scores: Sequence[float], prior: Sequence[float] | None = None,
            weight: float = 0.0) -> list[float]:
    """Choose mode's rule: ``score + weight * prior`` per candidate, where ``score`` is the
    model's total log-likelihood of the candidate (natural log) and ``prior`` the environment's
    score of it: the no-model baseline's word overlap with the question
    (:func:`~pyql.agent.llm.ranker.overlap_priors`: one per question word, less 0.001 per word
    the question does not have) of what the candidate is about (QueryAgent:
    :attr:`CallOption.words`; Readi: the path); ``weight`` 0 (the default) is the model alone.
    With a weight well above the model's spread (30 for SmolLM2-135M, chosen on questions that
    are not measured: ``benchmarks/README.md``) a shared word decides and the model breaks the
    rule's ties: going on or stopping, and relations the question names no word of."""
    if prior is None or not weight:
        return [float(s) for s in scores]
    return [float(s) + weight * float(p) for s, p in zip(scores, prior, strict=True)]


# -- paths (Readi, SRP) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PathOptions:
    """The relation paths the KB has from one topic entity, hop by hop: ``first`` the relations
    at the entity, ``second`` per first relation the relations at the nodes it reaches (for the
    ``expand`` best first relations), ``vocabulary`` all of them (ranked, bounded)."""

    mention: str
    first: Candidates
    second: Mapping[str, Candidates]
    vocabulary: Candidates

    def paths(self, limit: int = TOP_K) -> list[tuple[str, ...]]:
        """The 1-hop and 2-hop paths, best first relation first (each followed by its
        extensions), at most ``limit``."""
        out: list[tuple[str, ...]] = []
        for first in self.first.items:
            out.append((first,))
            out += [(first, second) for second in self.second.get(first, Candidates("relation"))
                    .items]
        return out[:limit]


def kb_path_options(session: Any, mention: str, question: str = "", *,
                    ranker: RelationRanker | None = None, hops: int = 2, expand: int = 5,
                    limit: int = TOP_K) -> PathOptions:
    """The KB's vocabulary around ``mention`` (a linked entity of ``session``, a fresh KB
    session): ``get_relation`` at the entity, then, for the ``expand`` best relations, at the
    nodes one hop along them (``hops`` 2), each node's relations fetched once."""
    topic = Atom(AtomKind.STRING, mention)
    obs = session.run(Call.of("get_relation", topic))
    found = obs.relations if obs.ok and obs.relations is not None else None
    first_all = rank_candidates(question, found.all if found else (), ranker)
    first = Candidates.of("relation", first_all, limit=limit)
    second: dict[str, Candidates] = {}
    vocabulary = list(first.items)
    if hops >= 2 and found is not None:
        for relation in first.items[:expand]:
            session.reset()
            session.run(Call.of("get_relation", topic))
            var = Atom(AtomKind.VAR, "x")
            step = session.run(Call.of(
                "add_fact", *((topic, Atom(AtomKind.NAME, relation), var)
                              if relation in found.forward
                              else (var, Atom(AtomKind.NAME, relation), topic))))
            if not step.ok:
                continue
            at = session.run(Call.of("get_relation", var))
            if not at.ok or at.relations is None:
                continue
            ranked = rank_candidates(question, [r for r in at.relations.all], ranker)
            second[relation] = Candidates.of("relation", ranked, limit=limit)
            vocabulary += ranked
    session.reset()
    return PathOptions(mention, first, second,
                       Candidates.of("relation", rank_candidates(question, vocabulary, ranker),
                                     limit=limit))
