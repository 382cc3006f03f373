"""SPARQL-toolset guidelines that detect errors from the reasoning memory (``RM`` codes)."""

from __future__ import annotations

from pyql.echo import clip
from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import Guideline, on
from pyql.guidelines.derive import (
    bad_arg_text,
    bound_variables,
    fmt_list,
    get_relation_calls,
    is_linked,
    linked_targets,
    new_variables,
    term_text,
    value_owner,
)
from pyql.guidelines.packs.kb._common import SPARQL, is_exclusion, used_before
from pyql.syntax import AtomKind
from pyql.terms import Entity, Literal, Var

__all__ = [
    "GetRelationUnknownNode",
    "GetRelationUnboundVariable",
    "FactTwoNewVariables",
    "FactTwoNewVariablesUnexplored",
    "FilterBeforeGetRelation",
    "SetAnswerUnknownVariable",
    "SetAnswerNoVariables",
    "TimeConstraintUnboundVariable",
    "ExecuteMidPath",
    "FactAlreadyInQuery",
]


class _MemoryGuideline(Guideline):
    """What the reasoning-memory guidelines share: they read the memory only."""

    needs = frozenset({"memory"})
    toolsets = SPARQL


class GetRelationUnknownNode(_MemoryGuideline):
    """get_relation of an entity or literal that is not a linked entity or created variable.

    Hallucinated ids, labels copied from results (``UnName_Entity``, ``BB&T Center``) and other
    text. The paper's Table 13 and Figure 7, step 3; the hint lists the valid calls.

    Bad:
        get_relation(g.1233lk8r)

    Fixed:
        get_relation(m.01663r)
    """

    code = "RM201"
    name = "kb.get_relation_unknown_node"
    triggers_on = on("get_relation", python=("ok", "bad_term"))
    groups = ("sparql", "relation", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        memory = feedback.memory
        if feedback.python.status == "bad_term":
            text = bad_arg_text(feedback)
        else:
            node = feedback.args[0] if feedback.args else None
            if not isinstance(node, (Entity, Literal)) or is_linked(node, memory):
                return None
            text = term_text(node)
            if used_before(feedback, text) or used_before(feedback, node.short):
                return None
        calls = get_relation_calls(memory)
        owner = value_owner(memory, text)
        if owner:
            calls = [f"get_relation({owner})", *[c for c in calls if c != f"get_relation({owner})"]]
            lead = (f"{text} is invalid in get_relation: it is a value shown for {owner}, not an "
                    "id.")
        else:
            lead = (f"The parameter of get_relation, {text}, is not a linked entity or created "
                    "variable.")
        bound = bound_variables(memory)
        targets = linked_targets(memory)
        options = []
        if bound:
            options.append(f"an existing variable, such as {fmt_list(bound)}")
        if targets:
            options.append(f"an id from the entity list, such as {fmt_list(targets)}")
        message = lead
        if options:
            message += f" It must be {', or '.join(options)}."
        return self.hint_options(message, calls, "Suggestion: choose from:")


class GetRelationUnboundVariable(_MemoryGuideline):
    """get_relation of a variable that has no values (never created, or only used in a filter).

    The paper's Figure 6, step 4.

    Bad:
        get_relation(?stream)

    Fixed:
        get_relation(m.04rtjj)
    """

    code = "RM202"
    name = "kb.get_relation_unbound_variable"
    triggers_on = on("get_relation", python=("ok", "query_error"))
    groups = ("sparql", "relation", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        node = feedback.args[0] if feedback.args else None
        if not isinstance(node, Var) or str(node) in feedback.memory.bound_variables:
            return None
        if feedback.python.status == "query_error" and feedback.python.error_code not in (
            None, "unbound_variable"
        ):
            return None
        return self.hint_options(
            f"You cannot query for the relations of {node} because it hasn't been bound to "
            "anything.", get_relation_calls(feedback.memory), "You need to first query for")


def _two_new(feedback: Feedback) -> list[str] | None:
    new = new_variables(feedback, (0, 2))
    return new if len(new) == 2 else None


class FactTwoNewVariables(_MemoryGuideline):
    """add_fact introduces two new variables (and get_relation has been invoked).

    Neither the head nor the tail is connected to what the query knows. The paper's Table 13
    and Figure 2 (guideline A): reconsider the head and the tail.

    Bad:
        get_relation(m.0bj4p9h)
        add_fact(?exhibition, exhibition.exhibition_subject.subject, ?subject)

    Fixed:
        get_relation(m.0bj4p9h)
        add_fact(?exhibition, exhibition.exhibition_subject.subject, m.0bj4p9h)
    """

    code = "RM203"
    name = "kb.fact_two_new_variables"
    triggers_on = on("add_fact")
    groups = ("sparql", "fact", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        new = _two_new(feedback)
        if new is None or not feedback.memory.called("get_relation"):
            return None
        memory = feedback.memory
        anchors = [*bound_variables(memory), *linked_targets(memory)]
        return self.hint(
            f"You introduced unexisting variable in add_fact(): both {new[0]} and {new[1]} are "
            "new, which is invalid. You should find another approach to solve the question: "
            "reconsider the head and the tail, one of them must be a linked entity or an "
            "existing variable"
            + (f", such as {fmt_list(anchors)}." if anchors else "."),
            anchors,
        )


class FactTwoNewVariablesUnexplored(_MemoryGuideline):
    """add_fact introduces two new variables and get_relation has not been invoked.

    Bad:
        add_fact(?team, sports.sports_team.arena_stadium, ?arena)

    Fixed:
        get_relation(m.0j8js)
    """

    code = "RM204"
    name = "kb.fact_two_new_variables_unexplored"
    triggers_on = on("add_fact")
    groups = ("sparql", "fact", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        new = _two_new(feedback)
        if new is None or feedback.memory.called("get_relation"):
            return None
        return self.hint_options(
            f"You introduced unexisting variable in add_fact(): both {new[0]} and {new[1]} are "
            "new, which is invalid. Start from a linked entity: use get_relation() first.",
            get_relation_calls(feedback.memory), "Suggestion:")


class FilterBeforeGetRelation(_MemoryGuideline):
    """get_relation has not been invoked before add_filter (and nothing is known yet).

    The paper's Figure 5, step 1. Exclusion filters (``add_filter(?x, !=, m.0x)``, written first
    in the WebQSP gold programs) are not flagged.

    Bad:
        add_filter(?angular_frequency, =, 1.0)

    Fixed:
        get_relation(1.0)
    """

    code = "RM205"
    name = "kb.filter_before_get_relation"
    triggers_on = on("add_filter")
    groups = ("sparql", "filter", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        memory = feedback.memory
        if memory.called("get_relation") or memory.bound_variables or is_exclusion(feedback):
            return None
        targets = linked_targets(memory)
        return self.hint(
            "You should use get_relation() first."
            + (f" Choose a parameter from {fmt_list(targets)}." if targets else ""),
            [f"get_relation({t})" for t in targets],
        )


class SetAnswerUnknownVariable(_MemoryGuideline):
    """set_answer of a variable that is not a created variable (others exist).

    The paper's Table 13.

    Bad:
        set_answer(?boat)

    Fixed:
        set_answer(?car)
    """

    code = "RM206"
    name = "kb.set_answer_unknown_variable"
    triggers_on = on("set_answer", python=("ok", "query_error"))
    groups = ("sparql", "answer", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        var = feedback.args[0] if feedback.args else None
        bound = bound_variables(feedback.memory)
        if not isinstance(var, Var) or not bound or str(var) in feedback.memory.bound_variables:
            return None
        return self.hint(
            f"{var} is not a created variable. You must set an existing variable as the answer. "
            f"Existing variables include: {', '.join(bound)}. Please choose the proper variable "
            "and set it again.",
            [f"set_answer({v})" for v in bound],
        )


class SetAnswerNoVariables(_MemoryGuideline):
    """set_answer before any variable has values.

    Bad:
        set_answer(?arena)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        set_answer(?arena)
    """

    code = "RM207"
    name = "kb.set_answer_no_variables"
    triggers_on = on("set_answer", python=("ok", "query_error"))
    groups = ("sparql", "answer")

    def check(self, feedback: Feedback) -> Hint | None:
        var = feedback.args[0] if feedback.args else None
        if not isinstance(var, Var) or feedback.memory.bound_variables:
            return None
        return self.hint_options(
            f"{var} is not a created variable, and there are no variables yet: build the query "
            "first with get_relation() and add_fact().",
            get_relation_calls(feedback.memory), "Start with")


class TimeConstraintUnboundVariable(_MemoryGuideline):
    """add_time_constrain on a variable that has no values.

    The constrained variable is the node that has the start and end relations (often a CVT),
    bound by an earlier fact; on an unbound variable the constraint is meaningless.

    Bad:
        add_time_constrain(?x1, people.marriage.from, people.marriage.to, 2015-08-10, 2015-08-10)

    Fixed:
        add_fact(m.033mkn, people.person.spouse_s, ?x1)
    """

    code = "RM208"
    name = "kb.time_constraint_unbound_variable"
    triggers_on = on("add_time_constrain")
    groups = ("sparql", "constraint")

    def check(self, feedback: Feedback) -> Hint | None:
        var = feedback.args[0] if feedback.args else None
        if not isinstance(var, Var) or str(var) in feedback.memory.bound_variables:
            return None
        bound = bound_variables(feedback.memory)
        return self.hint(
            f"{var} has no values, so add_time_constrain() cannot constrain it: its first "
            "parameter must be an existing variable whose values have the start and end "
            "relations (often a compound node bound by add_fact)."
            + (f" Existing variables include: {fmt_list(bound)}." if bound
               else " There are no variables yet: add a fact with add_fact() first."),
            bound,
        )


def _mentions(call: object, var: str) -> bool:
    name = var[1:]  # "?x" -> "x", the atom's value
    return any(a.kind is AtomKind.VAR and a.value == name for a in call.args)  # type: ignore[attr-defined]


class ExecuteMidPath(_MemoryGuideline):
    """execute() whose answer is a variable the path was about to leave: a premature execute.

    The answer variable (set_answer's, else the only variable with values) had its relations
    listed with get_relation, and no later call used it: the next hop was being looked for, so
    the variable is a middle node of the path, not what the question asks for. Silent once
    set_answer names that variable after its get_relation (the model says it is the answer).

    Bad:
        add_fact(Kismet, directed_by, ?director)
        get_relation(?director)
        execute()

    Fixed:
        add_fact(Kismet, directed_by, ?director)
        get_relation(?director)
        add_fact(?film, directed_by, ?director)
    """

    code = "RM209"
    name = "kb.execute_mid_path"
    triggers_on = on("execute")
    groups = ("sparql", "answer")

    def check(self, feedback: Feedback) -> Hint | None:
        memory = feedback.memory
        answer = memory.answer
        if answer is None:
            bound = bound_variables(memory)
            if len(bound) != 1:
                return None  # PY208/the Session's no_answer error
            answer = bound[0]
        # the last call that mentions the answer listed its relations: nothing used it since
        last = next((c for c in reversed(memory.calls) if _mentions(c, answer)), None)
        if last is None or last.name != "get_relation":
            return None
        rels = memory.relations.get(answer)
        listed = ""
        if rels is not None and rels.all:
            more = ", ..." if len(rels.all) > 10 else ""
            listed = f" (its relations: {fmt_list(rels.all[:10])}{more})"
        return self.hint(
            f"You execute the query with {answer} as the answer, but you listed the relations of "
            f"{answer}{listed} and added nothing from it: {answer} looks like a middle node of the "
            "path, not what the question asks for. Add the fact that goes from "
            f"{answer} to the answer (add_fact with a relation of {answer} and a new variable), "
            f"then set_answer on the new variable. If {answer} is the answer, call "
            f"set_answer({answer}) before execute().",
            [f"set_answer({answer})"],
        )


class FactAlreadyInQuery(_MemoryGuideline):
    """add_fact (or add_type) repeats a pattern the query has already.

    The Session does not add it again (each copy would multiply the work of every later
    query); a model that repeats one action is stuck, so the hint says to move on from the
    values the fact gave.

    Bad:
        add_fact(m.0j8js, sports.sports_team.venue, ?place)
        add_fact(m.0j8js, sports.sports_team.venue, ?place)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.venue, ?place)
        get_relation(?place)
    """

    code = "RM210"
    name = "kb.fact_already_in_query"
    triggers_on = on("add_fact", "add_type", python="query_error")
    groups = ("sparql", "fact")

    def check(self, feedback: Feedback) -> Hint | None:
        if feedback.python.error_code != "already_in_query":
            return None
        memory = feedback.memory
        action = clip(feedback.action_text)
        unexplored = [f"get_relation({v})" for v in bound_variables(memory)
                      if v not in memory.relations]
        finish = ["execute()"] if memory.answer else [
            f"set_answer({v})" for v in bound_variables(memory)]
        return self.hint_options(
            f"{action} is already in the query: adding it again changes nothing. Do not repeat "
            "an action; go on from the values it gave.", [*unexplored, *finish], "Next, try")
