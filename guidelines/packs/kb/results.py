"""SPARQL-toolset guidelines on what the KB returned (``KB`` codes, often with the memory).

Empty results are blamed on a step only when the step could cause them: when the query still has
variables that no triple pattern binds (``KBFeedback.unconstrained``, e.g. an exclusion filter
written before its facts, as the WebQSP gold programs do), an empty intermediate result is
expected and no guideline fires.
"""

from __future__ import annotations

from pyql.feedback import Feedback, Hint, Relations
from pyql.guidelines.base import Guideline, on
from pyql.guidelines.derive import (
    fmt_list,
    fmt_relations,
    get_relation_calls,
    node_key,
    term_text,
)
from pyql.guidelines.packs.kb._common import SPARQL, capped_relations, cut_note
from pyql.terms import Entity, Literal, Relation, Var

__all__ = [
    "EmptyFactUnlistedRelation",
    "EmptyFactListedRelation",
    "EmptyFactUnexplored",
    "GetRelationEmpty",
    "EmptyAfterFilter",
    "EmptyAfterConstraint",
    "AnswerIsCvt",
    "EmptyAnswer",
]


#: (role, node, its fetched relations or None) of a node of an add_fact
EmptyFactNode = tuple[str, str, Relations | None]


def _empty_fact(feedback: Feedback) -> tuple[str, list[EmptyFactNode]] | None:
    """(relation, [(role, node, fetched relations or None), ...]) of an add_fact; None when it
    has no relation to judge."""
    if len(feedback.args) != 3:
        return None
    head, relation, tail = feedback.args
    if not isinstance(relation, Relation):
        return None
    memory = feedback.memory
    nodes = []
    for role, term in (("head", head), ("tail", tail)):
        if isinstance(term, Var) and str(term) not in memory.bound_variables:
            continue  # a new variable: nothing to know about it
        key = node_key(term)
        nodes.append((role, key, memory.relations.get(key)))
    return relation.short, nodes


def _direction_note(relation: str, role: str, node: str, other: str, rels: Relations) -> str:
    if role == "head" and relation in rels.backward and relation not in rels.forward:
        return (f" {relation} is a backward relation of {node} (it points to {node}): write "
                f"add_fact({other}, {relation}, {node}) instead.")
    if role == "tail" and relation in rels.forward and relation not in rels.backward:
        return (f" {relation} is a forward relation of {node} (it starts from {node}): write "
                f"add_fact({node}, {relation}, {other}) instead.")
    return ""


def _bound_other_note(feedback: Feedback, other: object) -> str:
    """When the other end is a variable that already has values, the new fact must hold for them."""
    if not isinstance(other, Var) or str(other) not in feedback.memory.bound_variables:
        return ""
    shown = feedback.memory.last_values.get(str(other))
    values = f" ({fmt_list(shown.values)})" if shown is not None and shown.values else ""
    return (f" {other} already has values from earlier facts{values}, and this triple must hold "
            "for those same values; if it is about something else, use a new variable.")


class _ResultGuideline(Guideline):
    """What the KB-result guidelines share: they read what the KB returned (some the memory too)."""

    needs = frozenset({"kb"})
    toolsets = SPARQL


class _EmptyResult(_ResultGuideline):
    """The guidelines of an empty result: silent when the step need not have caused it (the
    query still has variables that no triple pattern binds, see the module docstring)."""

    def check(self, feedback: Feedback) -> Hint | None:
        return None if feedback.kb.unconstrained else self.check_empty(feedback)

    def check_empty(self, feedback: Feedback) -> Hint | None:
        """The hint for an empty result that this step caused."""
        raise NotImplementedError


class _EmptyFact(_EmptyResult):
    """The add_fact guidelines of an empty result that the step caused (see ``_empty_fact``)."""

    needs = frozenset({"kb", "memory"})
    triggers_on = on("add_fact", kb="empty")
    groups = ("sparql", "fact", "empty", "paper")

    def check_empty(self, feedback: Feedback) -> Hint | None:
        found = _empty_fact(feedback)
        return None if found is None else self.check_fact(feedback, *found)

    def check_fact(self, feedback: Feedback, relation: str, nodes: list[EmptyFactNode]
                   ) -> Hint | None:
        """The hint for an add_fact of ``relation`` whose known ``nodes`` gave no result."""
        raise NotImplementedError


class EmptyFactUnlistedRelation(_EmptyFact):
    """add_fact yields an empty result and its relation is not among its nodes' fetched relations.

    get_relation has been invoked for the head/tail, but the chosen relation is not one of
    those listed: it was likely made up. The paper's Figure 6, step 2 (and Section 3.3); the hint
    shows the node's relation list.

    Bad:
        get_relation(m.04rtjj)
        add_fact(m.04rtjj, broadcast.broadcast_on, ?stream)

    Fixed:
        get_relation(m.04rtjj)
        add_fact(m.04rtjj, broadcast.distributor.distributes, ?stream)
    """

    code = "KB201"
    name = "kb.empty_fact_unlisted_relation"

    def check_fact(self, feedback: Feedback, relation: str, nodes: list[EmptyFactNode]
                   ) -> Hint | None:
        fetched = [(n, rels) for _, n, rels in nodes if rels is not None]
        if not fetched or any(relation in rels for _, rels in fetched):
            return None
        capped = [(n, *capped_relations(rels, relation)) for n, rels in fetched]
        listing = " ".join(f"The relations of {n} includes: {fmt_relations(shown)}"
                           f"{cut_note(shown, total, relation)}."
                           for n, shown, total in capped)
        elsewhere = [n for n in feedback.memory.nodes_listing(relation)
                     if n not in {k for k, _ in fetched}]
        note = f" ({relation} was listed for {', '.join(elsewhere)}.)" if elsewhere else ""
        return self.hint(
            f"The relation {relation} that you choose leads to an empty result.{note} {listing} "
            "Try to change a relation that matches the question best. If it still doesn't work, "
            "you may use other approach to solve the question.",
            list(dict.fromkeys(r for _, shown, _ in capped for r in shown.all)),
        )


class EmptyFactListedRelation(_EmptyFact):
    """add_fact yields an empty result although its relation was listed by get_relation.

    The relation exists for the node, but the triple cannot match together with the rest of the
    query (wrong direction, wrong other end, or an unneeded triple). The paper's Table 11 and
    Figure 7, step 5.

    Bad:
        get_relation(?place)
        add_fact(?place, sports.team_venue_relationship.venue, m.0j8js)

    Fixed:
        get_relation(m.0j8js)
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
    """

    code = "KB202"
    name = "kb.empty_fact_listed_relation"

    def check_fact(self, feedback: Feedback, relation: str, nodes: list[EmptyFactNode]
                   ) -> Hint | None:
        listed = [(role, n, rels) for role, n, rels in nodes
                  if rels is not None and relation in rels]
        if not listed:
            return None
        role, node, rels = listed[0]
        head, _, tail = feedback.args
        other = tail if role == "head" else head
        shown, total = capped_relations(rels, relation)
        return self.hint(
            f"The relation {relation} that you choose leads to an empty result. Re-think the "
            f"question again and choose another relation from {fmt_list(shown.all)}"
            f"{cut_note(shown, total, relation)}."
            + _direction_note(relation, role, node, term_text(other), rels)
            + _bound_other_note(feedback, other)
            + " Also check whether this triple is needed: it may not match any graph on the KB "
            "together with the facts already added.",
            shown.all,
        )


class EmptyFactUnexplored(_EmptyFact):
    """add_fact yields an empty result and get_relation has not been invoked for its nodes.

    The relation was not chosen from a relation list: query the relations first.

    Bad:
        add_fact(m.04rtjj, broadcast.broadcast_on, ?stream)

    Fixed:
        get_relation(m.04rtjj)
    """

    code = "KB203"
    name = "kb.empty_fact_unexplored"

    def check_fact(self, feedback: Feedback, relation: str, nodes: list[EmptyFactNode]
                   ) -> Hint | None:
        if any(rels is not None for _, _, rels in nodes):
            return None
        names = [n for _, n, _ in nodes]
        calls = [f"get_relation({n})" for n in names] or get_relation_calls(feedback.memory)
        about = (f"the relations of {' and '.join(names)} have not been queried yet"
                 if names else "no relations have been queried for this fact")
        return self.hint_options(
            f"Got an empty result after adding this triple pattern, and {about}: {relation} was "
            "not chosen from a list of valid relations. Use get_relation() first and choose a "
            "relation from its result.", calls, "Suggestion:")


class GetRelationEmpty(_ResultGuideline):
    """get_relation yields an empty result: the node has no relations in the KB.

    Bad:
        get_relation("1.0"^^xsd:float)

    Fixed:
        get_relation(1.0)
    """

    code = "KB204"
    name = "kb.get_relation_empty"
    needs = frozenset({"kb", "memory"})
    triggers_on = on("get_relation", kb="empty")
    groups = ("sparql", "relation", "empty", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        node = feedback.args[0] if feedback.args else None
        text = term_text(node) if node is not None else "this node"
        calls = get_relation_calls(feedback.memory, exclude=[text])
        what = ("This literal does not occur in the KB with this exact form (check its datatype "
                "and format)." if isinstance(node, Literal)
                else "It may be a wrong id." if isinstance(node, Entity) else "")
        return self.hint_options(
            f"get_relation({text}) returned no relations: {text} has no relations in the KB. "
            f"{what}".rstrip(), calls, "Choose another node:")


class EmptyAfterFilter(_EmptyResult):
    """The result of add_filter is empty, all parameters being valid.

    The paper's Table 11.

    Bad:
        add_fact(m.0j8js, sports.sports_team.founded, ?year)
        add_filter(?year, <, 1900)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.founded, ?year)
        set_answer(?year)
    """

    code = "KB205"
    name = "kb.empty_after_filter"
    triggers_on = on("add_filter", kb="empty")
    groups = ("sparql", "filter", "empty", "paper")

    def check_empty(self, feedback: Feedback) -> Hint | None:
        return self.hint(
            "You choose add_filter as the action in this step. However, we get an empty result. "
            "I strongly suggest you carefully check if a comparison step is needed. If not "
            "needed and the result already meets our expectations, you can use set_answer() to "
            "determine which variable to return. If there is a need for a filter constraint, "
            "please carefully check the two comparison objects and the operator."
        )


class EmptyAfterConstraint(_EmptyResult):
    """add_type, add_time_constrain, add_max/add_min or add_sum/add_avg makes the result empty.

    Bad:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        add_type(?arena, film.film)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        set_answer(?arena)
    """

    code = "KB206"
    name = "kb.empty_after_constraint"
    triggers_on = on("add_type", "add_time_constrain", "add_max", "add_min", "add_sum", "add_avg",
                     kb="empty")
    groups = ("sparql", "constraint", "empty")

    def check_empty(self, feedback: Feedback) -> Hint | None:
        function = feedback.function
        numeric = (f" {function} needs a variable whose values are numbers."
                   if function in ("add_sum", "add_avg") else "")
        return self.hint(
            f"You choose {function} as the action in this step. However, we get an empty result."
            f"{numeric} Check whether this step is needed and whether its arguments (variable, "
            "type, relations, dates) are right. If the result before it already meets our "
            "expectations, use set_answer() to determine which variable to return."
        )


class AnswerIsCvt(_ResultGuideline):
    """The answer variable holds only unnamed compound nodes (CVT): not an answer.

    The paper's Table 11 ("setting a CVT node as the answer").

    Bad:
        add_fact(m.0j8js, sports.sports_team.venue, ?place)
        set_answer(?place)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.venue, ?place)
        get_relation(?place)
    """

    code = "KB207"
    name = "kb.answer_is_cvt"
    triggers_on = on("set_answer", "execute", kb="ok")
    groups = ("sparql", "answer", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        values = feedback.kb.values
        if feedback.function == "set_answer":
            var = str(feedback.args[0]) if feedback.args else None
        else:
            var = feedback.memory.answer or (next(iter(values)) if len(values) == 1 else None)
        vv = values.get(var) if var else None
        if var is None or vv is None or not vv.all_unnamed:
            return None
        shown = vv.values[0] if vv.values else "unnamed"
        return self.hint(
            f'You should not set {var} as the answer, because its value is "{shown}" (a node '
            f"without a name). Please check again: query its relations with get_relation({var}) "
            "and follow one to the named value the question asks for.",
            [f"get_relation({var})"],
        )


class EmptyAnswer(_EmptyResult):
    """set_answer or execute() returns no answer.

    Answers keep only literals in the question's language (English on Freebase), so an answer
    variable holding only other-language strings comes out empty.

    Bad:
        add_fact(m.0j8js, common.topic.alias, ?alias)
        set_answer(?alias)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        set_answer(?arena)
    """

    code = "KB208"
    name = "kb.empty_answer"
    triggers_on = on("set_answer", "execute", kb="empty")
    groups = ("sparql", "answer", "empty")

    def check_empty(self, feedback: Feedback) -> Hint | None:
        return self.hint(
            f"{feedback.function}() gives no answer. Check the steps again: a fact or a "
            "constraint that does not match the question, or an answer variable without values "
            "in the question's language. Choose the variable that holds the answer."
        )
