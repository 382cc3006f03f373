"""Path instantiation on a KB (Readi §4.3, appendix B.1): path-connecting, hop by hop, from each
topic entity, through a :class:`pyql.Session` (every query comes from the compiler).

At each hop the relations around the current node (the topic entity, then the variable the
previous hops bound) are asked with ``get_relation``; the first candidate of the NL relation's
binding that is one of them (forward before backward) is followed with ``add_fact``, which binds
the next variable. When no candidate connects, the constraint is *stuck*
(:class:`PathStuck`, reason ``irrelevant_relation``); a constraint without relations is stuck
with ``empty_path``; a path whose last node is a compound (CVT) node, all of its values unnamed,
with ``cvt_end``. The structured error carries the position, the half-way instances and the
relations around the stuck node, ranked against the question and capped (35, as the paper).

**Directions.** An NL relation has no direction: a candidate may connect forward (the node is
the head) or backward (the node is the tail), forward first, and the other options are tried when
the rest of the path gets stuck. ``^relation`` (SPARQL's inverse path) asks for backward only —
what a gold path from a dataset's relation chain writes, where labels are ambiguous (MetaQA's
*Harry Brown* is a writer and a film).

**The frontier cap** (the paper's threshold for "big" entities): each hop fetches at most
``max_frontier`` rows of instances (the Session's ``row_cap``); the count shown is exact and the
program that results is exact (the engine joins the whole chain).

**The result is a PyQL program**: the fully instantiated constraints become one ``add_fact``
chain each, joined on the answer variable (so the program's answers are the intersection of
the constraints' instances), with ``add_filter(?v, !=, topic)`` on every hop variable (a path
does not come back to its own topic entity), ``set_answer`` and ``execute()``. The program is run
on a fresh Session: its answers and SPARQL are part of the :class:`Instantiation`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyql.agent.grounding.paths.binding import RelationBinder
from pyql.agent.grounding.paths.path import (
    ARROW,
    Constraint,
    PathFormatError,
    ReasoningPath,
    error_block,
)
from pyql.errors import PyqlError
from pyql.kb.base import KB
from pyql.program import Call, Program
from pyql.session import KBSession, Observation
from pyql.syntax import Atom, AtomKind

__all__ = [
    "COMPOUND_NODE",
    "MAX_CANDIDATES",
    "ConstraintInstance",
    "Hop",
    "Instantiation",
    "InstantiationBackendError",
    "PathInstantiator",
    "PathStuck",
    "StuckReason",
    "node_id",
]

#: how many relations around a stuck node the error lists (appendix B.2)
MAX_CANDIDATES = 35
#: how the paper writes a CVT node in messages
COMPOUND_NODE = "<compound node>"

StuckReason = Literal["irrelevant_relation", "empty_path", "cvt_end"]


class InstantiationBackendError(PyqlError):
    """The KB failed while a path was instantiated (never reported as a stuck path)."""

    def __init__(self, action: str, status: str, message: str) -> None:
        self.action = action
        self.status = status
        super().__init__(f"{action}: {status}: {message}")


@dataclass(frozen=True)
class Hop:
    """One NL relation instantiated: the KB relation it was bound to and the values reached."""

    relation: str
    bound: str
    forward: bool
    var: str
    total: int
    sample: tuple[str, ...] = ()
    unnamed: int = 0

    @property
    def compound(self) -> bool:
        """Every value reached is an unnamed compound node (Freebase CVT, blank node)."""
        return self.total > 0 and self.unnamed == self.total

    def end(self) -> str:
        if self.compound:
            return COMPOUND_NODE
        shown = self.sample[0] if self.sample else "?"
        return shown if self.total <= 1 else f"{shown} (and {self.total - 1} more)"

    def to_dict(self) -> dict[str, Any]:
        return {"relation": self.relation, "bound": self.bound, "forward": self.forward,
                "var": self.var, "total": self.total, "sample": list(self.sample),
                "unnamed": self.unnamed}


@dataclass(frozen=True)
class PathStuck:
    """Why and where a constraint could not be instantiated (the paper's error message, as data).

    ``position`` is the index of the first relation not instantiated (``len(relations)`` for
    ``cvt_end``); ``relation`` is that NL relation (None for ``empty_path``/``cvt_end``);
    ``tried`` its bound candidates; ``hops`` the half-way instances; ``candidates`` the relations
    around the stuck node, ranked against the question, at most :data:`MAX_CANDIDATES`;
    ``at_compound`` says the stuck node is a compound node.
    """

    reason: StuckReason
    constraint: Constraint
    position: int
    relation: str | None
    tried: tuple[str, ...]
    hops: tuple[Hop, ...]
    candidates: tuple[str, ...]
    at_compound: bool = False

    @property
    def entity(self) -> str:
        return self.constraint.entity

    def instantiated_chain(self) -> str:
        """``Miley Cyrus → film.actor.film → <compound node>``."""
        parts = [self.entity]
        for hop in self.hops:
            parts += [hop.bound, hop.end()]
        return f" {ARROW} ".join(parts)

    def messages(self) -> list[str]:
        """The numbered lines of the paper's "Error Message"."""
        out = []
        if self.at_compound:
            out.append(f"{COMPOUND_NODE} in the end.")
        if self.reason == "irrelevant_relation":
            out.append(f'relation "{self.relation}" not instantiated.')
        elif self.reason == "empty_path":
            out.append("empty reasoning path.")
        return out

    def render(self) -> str:
        """The error block of the edit prompt (appendix F)."""
        return error_block(f"Initial Path: {self.constraint.chain()}", self.messages(),
                           [f"Instantiate Paths: {self.instantiated_chain()}",
                            "Candidate Relations", _json_list(self.candidates)])

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "entity": self.entity,
                "relations": list(self.constraint.relations), "position": self.position,
                "relation": self.relation, "tried": list(self.tried),
                "hops": [h.to_dict() for h in self.hops], "candidates": list(self.candidates),
                "at_compound": self.at_compound}


def _json_list(items: Sequence[str]) -> str:
    import json

    return json.dumps(list(items), ensure_ascii=False)


@dataclass(frozen=True)
class ConstraintInstance:
    """One constraint on the KB: the hops instantiated (all of them, or a prefix when stuck)."""

    constraint: Constraint
    entity_id: str
    hops: tuple[Hop, ...]
    stuck: PathStuck | None = None
    #: (head, relation, tail) labels of sampled instances, hop by hop
    triples: tuple[tuple[str, str, str], ...] = ()

    @property
    def complete(self) -> bool:
        return self.stuck is None

    def calls(self, topic: Atom, vars_: Sequence[str]) -> list[Call]:
        """The ``add_fact`` chain of the hops, with the given variable names (``?`` omitted)."""
        calls: list[Call] = []
        node = topic
        for hop, name in zip(self.hops, vars_, strict=False):
            var = Atom(AtomKind.VAR, name)
            rel = _relation_atom(hop.bound)
            calls.append(Call.of("add_fact", node, rel, var) if hop.forward
                         else Call.of("add_fact", var, rel, node))
            node = var
        return calls

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.constraint.entity, "entity_id": self.entity_id,
                "relations": list(self.constraint.relations),
                "hops": [h.to_dict() for h in self.hops],
                "stuck": self.stuck.to_dict() if self.stuck else None}


@dataclass(frozen=True)
class Instantiation:
    """A whole path on the KB: each constraint, the program joining what was instantiated, its
    answers and SPARQL, and the retrieved knowledge (sampled triples)."""

    path: ReasoningPath
    constraints: tuple[ConstraintInstance, ...]
    program: Program
    query: str = ""
    answers: tuple[Any, ...] = ()
    kb_queries: int = 0
    #: the program joins every constraint, each fully instantiated (no CVT end)
    complete: bool = False
    triples: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)

    @property
    def stuck(self) -> tuple[PathStuck, ...]:
        return tuple(c.stuck for c in self.constraints if c.stuck is not None)

    @property
    def instantiated_length(self) -> int:
        return sum(len(c.hops) for c in self.constraints)

    def features(self) -> dict[str, float]:
        """The reasoning-path features of the Readi paper's Table 8 (Appendix E) for this
        instantiation: ``lpp`` (relations of the path), ``lip`` (relations instantiated),
        ``aip`` (their ratio, the instantiation progress) and ``cer`` (1 when an instantiation
        ends at a compound node, the paper's "ending with intermediate nodes"); averaged over
        questions by evaluation. (ISR, the instantiation success rate, is :attr:`complete`.)"""
        lpp = self.path.length
        lip = self.instantiated_length
        ends_compound = any(c.hops and c.hops[-1].compound for c in self.constraints)
        return {"lpp": float(lpp), "lip": float(lip), "aip": lip / lpp if lpp else 0.0,
                "cer": float(ends_compound)}

    @property
    def instances(self) -> tuple[str, ...]:
        """What the instantiation retrieved: the program's answers and the entities of the
        sampled triples (the paper's answer coverage asks whether a gold answer is here)."""
        found = {str(a) for a in self.answers} | {x for t in self.triples for x in (t[0], t[2])}
        return tuple(sorted(found - {COMPOUND_NODE}))

    def to_dict(self) -> dict[str, Any]:
        instances = self.instances
        return {"path": str(self.path), "complete": self.complete,
                "instances": list(instances[:500]), "instance_count": len(instances),
                "constraints": [c.to_dict() for c in self.constraints],
                "program": str(self.program), "query": self.query,
                "answers": [str(a) for a in self.answers[:50]], "answer_count": len(self.answers),
                "triples": len(self.triples), "kb_queries": self.kb_queries}


def split_inverse(relation: str) -> tuple[str, bool]:
    """``("directed_by", True)`` for ``^directed_by``: a relation followed backward only (from
    the tail to the head, SPARQL's inverse path); without ``^`` both directions may connect,
    forward first."""
    text = relation.strip()
    if text.startswith("^"):
        return text[1:].strip(), True
    return text, False


def _relation_atom(name: str) -> Atom:
    if name.startswith("http://") or name.startswith("https://"):
        return Atom(AtomKind.IRI, name)
    return Atom(AtomKind.NAME, name)


def _entity_atom(mention: str) -> Atom:
    return Atom(AtomKind.STRING, mention)


class PathInstantiator:
    """Instantiates reasoning paths on ``kb`` with a :class:`RelationBinder` (see the module
    docstring). ``max_frontier`` caps the instances fetched per hop, ``max_candidates`` the
    relations an error lists, ``max_triples`` the sampled triples kept per constraint;
    ``exclude_topic`` adds ``add_filter(?v, !=, topic)`` on every hop variable of the program;
    ``max_attempts`` bounds the walks of one constraint (backtracking over connecting
    candidates). ``cvt_ids``: a compound node of the retrieved triples shows its id
    (``m.0k0p0c``, as the Readi paper's answering demos write them), so the triples through one
    node stay apart; off, every one is :data:`COMPOUND_NODE`. ``intersection``: when several
    constraints are instantiated, the retrieved triples are those of the joined program's
    solutions (what the constraints agree on); off, the union of each constraint's sample."""

    def __init__(self, kb: KB, binder: RelationBinder, *, max_frontier: int = 2000,
                 max_candidates: int = MAX_CANDIDATES, max_triples: int = 50,
                 exclude_topic: bool = True, max_attempts: int = 8,
                 timeout: float | None = None, cvt_ids: bool = False,
                 intersection: bool = False) -> None:
        if max_frontier < 1:
            raise ValueError("max_frontier must be at least 1")
        self.kb = kb
        self.binder = binder
        self.max_frontier = max_frontier
        self.max_candidates = max_candidates
        self.max_triples = max_triples
        self.exclude_topic = exclude_topic
        self.max_attempts = max(1, max_attempts)
        self.timeout = timeout
        self.cvt_ids = cvt_ids
        self.intersection = intersection

    def session(self, entities: Mapping[str, str]) -> KBSession:
        return KBSession(self.kb, dict(entities), row_cap=self.max_frontier, timeout=self.timeout)

    # -- one constraint ---------------------------------------------------------------------------
    def instantiate_constraint(self, constraint: Constraint, entities: Mapping[str, str],
                               question: str = "", *, prefix: str = "x") -> ConstraintInstance:
        """Connect ``constraint`` hop by hop; variables are ``?{prefix}1``, ``?{prefix}2``, ...

        When several bound candidates (or both directions) connect at a hop, the best-ranked is
        followed first; if the rest of the path then gets stuck, the next one is tried
        (depth-first, at most ``max_attempts`` walks). The stuck error reported is that of the
        walk that got furthest (the first of those)."""
        mention = _mention(constraint.entity, entities)
        choices: list[int] = []
        best: ConstraintInstance | None = None
        for _ in range(self.max_attempts):
            result, options, used = self._walk(constraint, mention, entities, question, prefix,
                                               choices)
            if result.complete:
                return result
            if best is None or len(result.hops) > len(best.hops):
                best = result
            # backtrack: the deepest hop with an option left
            hop = next((h for h in range(len(used) - 1, -1, -1)
                        if used[h] + 1 < options[h]), None)
            if hop is None:
                break
            choices = [*used[:hop], used[hop] + 1]
        assert best is not None
        return best

    def _walk(self, constraint: Constraint, mention: str, entities: Mapping[str, str],
              question: str, prefix: str, choices: Sequence[int]
              ) -> tuple[ConstraintInstance, list[int], list[int]]:
        """One walk: option ``choices[i]`` at hop ``i`` (0 beyond); returns the result, how many
        options each hop had and which one was taken."""
        session = self.session(entities)
        node = _entity_atom(mention)
        hops: list[Hop] = []
        options_count: list[int] = []
        used: list[int] = []
        for i, relation in enumerate(constraint.relations):
            around = checked(session.run(Call.of("get_relation", node))).relations
            forward = around.forward if around else ()
            backward = around.backward if around else ()
            name, inverse = split_inverse(relation)
            tried = self.binder.bind(name)
            options = [] if inverse else [(b, True) for b in tried if b in forward]
            options += [(b, False) for b in tried if b in backward]
            if not options:
                stuck = self._stuck(session, constraint, mention, entities, hops, question,
                                    "irrelevant_relation", i, relation, tried,
                                    (*forward, *(r for r in backward if r not in forward)))
                return stuck, options_count, used
            pick = choices[i] if i < len(choices) and choices[i] < len(options) else 0
            options_count.append(len(options))
            used.append(pick)
            bound, is_forward = options[pick]
            var = Atom(AtomKind.VAR, f"{prefix}{i + 1}")
            rel = _relation_atom(bound)
            obs = checked(session.run(Call.of("add_fact", node, rel, var) if is_forward
                                      else Call.of("add_fact", var, rel, node)))
            values = obs.values.get(str(var))
            hops.append(Hop(relation=relation, bound=bound, forward=is_forward, var=str(var),
                            total=values.total if values else 0,
                            sample=tuple(values.values) if values else (),
                            unnamed=values.unnamed if values else 0))
            node = var
        if not hops or hops[-1].compound:
            around = checked(session.run(Call.of("get_relation", node))).relations
            reason: StuckReason = "cvt_end" if hops else "empty_path"
            stuck = self._stuck(session, constraint, mention, entities, hops, question, reason,
                                len(hops), None, (), around.all if around else ())
            return stuck, options_count, used
        done = ConstraintInstance(constraint, entities[mention], tuple(hops),
                                  triples=self._triples(session, mention, hops))
        return done, options_count, used

    def _stuck(self, session: KBSession, constraint: Constraint, mention: str,
               entities: Mapping[str, str], hops: list[Hop], question: str, reason: StuckReason,
               position: int, relation: str | None, tried: tuple[str, ...],
               around: Sequence[str]) -> ConstraintInstance:
        ranked = self.binder.rank(question or " ".join(constraint.relations), list(around),
                                  limit=self.max_candidates)
        stuck = PathStuck(reason=reason, constraint=constraint, position=position,
                          relation=relation, tried=tried, hops=tuple(hops),
                          candidates=tuple(ranked), at_compound=bool(hops) and hops[-1].compound)
        return ConstraintInstance(constraint, entities[mention], tuple(hops), stuck,
                                  triples=self._triples(session, mention, hops))

    def _triples(self, session: KBSession, mention: str, hops: Sequence[Hop]
                 ) -> tuple[tuple[str, str, str], ...]:
        """Sampled instances of the chain, as labelled (head, relation, tail) triples."""
        return self._labelled(session, [(mention, hops, [h.var[1:] for h in hops])])

    def _labelled(self, session: KBSession,
                  chains: Sequence[tuple[str, Sequence[Hop], Sequence[str]]]
                  ) -> tuple[tuple[str, str, str], ...]:
        """The solutions of the session's query (at most ``max_triples``) as labelled triples
        of each chain: (topic mention, its hops, the variable name of each hop)."""
        chains = [c for c in chains if c[1]]
        if not chains:
            return ()
        from pyql.terms import Var

        names = list(dict.fromkeys(n for _, _, vs in chains for n in vs))
        rs = self.kb.select(session.query.to_sparql(select=tuple(Var(n) for n in names),
                                                    limit=self.max_triples),
                            timeout=self.timeout)
        cells = [c for row in rs.rows for c in row if c is not None]
        labels = dict(zip(map(str, cells), session.display(cells), strict=True))
        out: dict[tuple[str, str, str], None] = {}
        for row in rs.rows:
            by_name = dict(zip(names, row, strict=False))
            for mention, hops, variables in chains:
                head = mention
                for hop, name in zip(hops, variables, strict=False):
                    cell = by_name.get(name)
                    tail = labels.get(str(cell), str(cell)) if cell is not None else "?"
                    if hop.compound or tail == session.profile.unnamed_label:
                        tail_shown = (node_id(cell) if self.cvt_ids and cell is not None
                                      else COMPOUND_NODE)
                    else:
                        tail_shown = tail
                    out.setdefault((head, hop.bound, tail_shown) if hop.forward
                                   else (tail_shown, hop.bound, head), None)
                    head = tail_shown
        return tuple(out)

    def _joined_triples(self, joined: Sequence[ConstraintInstance],
                        entities: Mapping[str, str]) -> tuple[tuple[str, str, str], ...]:
        """The triples of the joined program's solutions: what every constraint agrees on (the
        intersection the paper's reader sees), not each constraint's own sample."""
        session = KBSession(self.kb, dict(entities), timeout=self.timeout)
        chains = []
        for k, inst in enumerate(joined, 1):
            names = [f"c{k}x{i}" for i in range(1, len(inst.hops) + 1)]
            names[-1] = "x"
            for call in inst.calls(_entity_atom(inst.constraint.entity), names):
                checked(session.run(call))
            chains.append((_mention(inst.constraint.entity, entities), inst.hops, names))
        return self._labelled(session, chains)

    # -- a whole path -----------------------------------------------------------------------------
    def instantiate(self, path: ReasoningPath, entities: Mapping[str, str],
                    question: str = "") -> Instantiation:
        """Every constraint, then the program that joins the instantiated ones (see the module
        docstring); when none is complete, the program follows the longest instantiated prefix
        (the paper's "w/o edit": the longest path is kept)."""
        before = self.kb.query_count
        many = len(path.constraints) > 1
        instances = tuple(
            self.instantiate_constraint(c, entities, question, prefix=f"c{k}x" if many else "x")
            for k, c in enumerate(path.constraints, 1))
        complete = bool(instances) and all(c.complete for c in instances)
        joined = [c for c in instances if c.complete]
        if not joined:
            longest = max(instances, key=lambda c: len(c.hops), default=None)
            joined = [longest] if longest is not None and longest.hops else []
        program, answers, query = self._run(joined, entities)
        if self.intersection and complete and len(joined) > 1:
            triples = self._joined_triples(joined, entities)
        else:
            triples = tuple(dict.fromkeys(t for c in instances for t in c.triples))
        return Instantiation(path=path, constraints=instances, program=program, query=query,
                             answers=answers, kb_queries=self.kb.query_count - before,
                             complete=complete, triples=triples)

    def program(self, joined: Sequence[ConstraintInstance]) -> Program:
        """The PyQL program of instantiated constraints, joined on the answer variable."""
        if not joined:
            return Program(tools="sparql")
        many = len(joined) > 1
        calls: list[Call] = []
        answer = "x" if many else joined[0].hops[-1].var[1:]
        for k, inst in enumerate(joined, 1):
            n = len(inst.hops)
            names = [f"c{k}x{i}" if many else f"x{i}" for i in range(1, n + 1)]
            if many:
                names[-1] = answer
            topic = _entity_atom(inst.constraint.entity)
            calls += inst.calls(topic, names)
            if self.exclude_topic:
                calls += [Call.of("add_filter", Atom(AtomKind.VAR, v), Atom(AtomKind.NAME, "!="),
                                  topic) for v in names]
        calls += [Call.of("set_answer", Atom(AtomKind.VAR, answer)), Call.of("execute")]
        return Program(calls=tuple(calls), tools="sparql")

    def _run(self, joined: Sequence[ConstraintInstance], entities: Mapping[str, str]
             ) -> tuple[Program, tuple[Any, ...], str]:
        program = self.program(joined)
        if not program.calls:
            return program, (), ""
        session = KBSession(self.kb, dict(entities), timeout=self.timeout)
        observations = session.run_program(program)
        last = observations[-1]
        for obs in observations:
            checked(obs)
        return program, tuple(last.answers or ()), last.query


def node_id(term: Any) -> str:
    """The local id of a node (``m.0k0p0c`` of ``<http://rdf.freebase.com/ns/m.0k0p0c>``, a blank
    node's label).

    >>> node_id("http://rdf.freebase.com/ns/m.0k0p0c"), node_id("_:b12")
    ('m.0k0p0c', 'b12')
    """
    text = str(term).strip("<>")
    if text.startswith("_:"):
        return text[2:]
    return text.rsplit("/", 1)[-1].rsplit("#", 1)[-1]


def _mention(written: str, entities: Mapping[str, str]) -> str:
    """The entity-table mention a constraint starts from (case-insensitive; an id works too)."""
    if written in entities:
        return written
    folded = written.casefold()
    for mention, kb_id in entities.items():
        if mention.casefold() == folded or kb_id == written:
            return mention
    raise PathFormatError("unknown_entity", f"{written!r} is not a topic entity of the question "
                          f"(topic entities: {', '.join(entities) or 'none'})", written, 0)


def checked(obs: Observation) -> Observation:
    """The observation, unless the KB failed or the call was refused (framework errors)."""
    if obs.status in ("backend_error", "timeout", "error"):
        raise InstantiationBackendError(obs.action, obs.status, obs.error or "")
    return obs
