"""SPARQL-toolset guidelines on invalid arguments (Python feedback, with the memory for options)."""

from __future__ import annotations

from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import ANY, Guideline, on
from pyql.guidelines.derive import (
    arg_text,
    bad_arg_text,
    bound_variables,
    fmt_list,
    fmt_relations,
    get_relation_calls,
    linked_targets,
    term_text,
    value_owner,
)
from pyql.guidelines.packs.kb._common import (
    SPARQL,
    atom_key,
    existing_text,
    is_exclusion,
    linked_text,
)
from pyql.program import COMPARISON_OPS
from pyql.terms import Var

__all__ = [
    "FactInvalidNode",
    "FactInvalidRelation",
    "FilterOperator",
    "FilterFirstArgument",
    "FilterValue",
    "AggregateArgument",
    "SetAnswerNotVariable",
    "ExecuteWithoutAnswer",
]

_OPS = fmt_list(COMPARISON_OPS).replace("'", "")
_AGGREGATES = ("add_max", "add_min", "add_count", "add_sum", "add_avg")


class _ArgumentGuideline(Guideline):
    """What the argument guidelines share: they read the Python feedback, and the memory for the
    options they suggest."""

    needs = frozenset({"python", "memory"})
    toolsets = SPARQL


class FactInvalidNode(_ArgumentGuideline):
    """The head or tail of add_fact is neither an entity id, a literal nor a variable.

    Typically a label written where an id is needed. A mention of the entity table is resolved
    to its id by the Session (with a note) and is *not* an error; other labels are.

    Bad:
        add_fact(Florida Panthers FC, sports.sports_team.arena_stadium, ?arena)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
    """

    code = "PY201"
    name = "kb.fact_invalid_node"
    triggers_on = on("add_fact", python="bad_term")
    groups = ("sparql", "fact", "argument")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        if py.arg_index not in (0, 2):
            return None
        slot = "head" if py.arg_index == 0 else "tail"
        text = bad_arg_text(feedback)
        memory = feedback.memory
        message = (f"The {slot} of add_fact(head, relation, tail), {text}, is invalid: it must "
                   "be an entity id from the entity list, a literal or a variable.")
        suggestions: list[str] = []
        owner = value_owner(memory, text)
        if owner:
            message += (f" {text} is a value shown for {owner}, not an id: use the variable "
                        f"{owner} instead.")
            suggestions.append(owner)
        if memory.entities:
            message += " " + linked_text(feedback)
            suggestions += linked_targets(memory)
        if bound_variables(memory):
            message += " " + existing_text(feedback)
            suggestions += bound_variables(memory)
        return self.hint(message, suggestions)


class FactInvalidRelation(_ArgumentGuideline):
    """The relation of add_fact is not a relation (a variable, a phrase); get_relation first.

    The paper's Table 13 ("add_fact is used but no relations have been queried"): relations must
    be chosen from what get_relation() listed.

    Bad:
        add_fact(m.0bj4p9h, ?relation, ?newspaper)

    Fixed:
        get_relation(m.0bj4p9h)
    """

    code = "PY202"
    name = "kb.fact_invalid_relation"
    triggers_on = on("add_fact", python="bad_term")
    groups = ("sparql", "fact", "argument", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        if feedback.python.arg_index != 1:
            return None
        memory = feedback.memory
        nodes = [k for k in (atom_key(feedback, 0), atom_key(feedback, 2))
                 if k is not None and (not k.startswith("?") or k in memory.bound_variables
                                       or k in memory.relations)]
        fetched = [n for n in nodes if n in memory.relations]
        text = bad_arg_text(feedback)
        if fetched:
            listing = " ".join(
                f"The relations of {n} include: {fmt_relations(memory.relations[n])}."
                for n in fetched)
            return self.hint(f"{text} is not a valid relation for add_fact(). Choose a relation "
                             f"from the results of get_relation(). {listing}")
        targets = [n for n in nodes if not n.startswith("?") or n in memory.bound_variables]
        calls = [f"get_relation({n})" for n in targets] or get_relation_calls(memory)
        return self.hint_options(
            f"{text} is not a valid relation for add_fact(). You should use get_relation() first.",
            calls, "Suggestion: choose valid options from")


class FilterOperator(_ArgumentGuideline):
    """The operator of add_filter is used incorrectly (e.g. a relation in the operator slot).

    The paper's Table 12 and Figure 5, step 3. When the "operator" is a relation, the constraint
    is a fact, not a comparison.

    Bad:
        add_filter(?engine, aviation.aircraft_model.part_of_line, m.031vqw)

    Fixed:
        add_fact(?engine, aviation.aircraft_model.part_of_line, m.031vqw)
    """

    code = "PY203"
    name = "kb.filter_operator"
    triggers_on = on("add_filter", python=("query_error", "bad_term"))
    groups = ("sparql", "filter", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        call = feedback.call
        if call is None or len(call.args) != 3:
            return None
        op = call.args[1].value
        if op.strip() in COMPARISON_OPS or op.strip() == "<>":
            return None
        if feedback.python.status == "bad_term" and feedback.python.arg_index != 1:
            return None
        message = (f"You used {op} as operator in add_filter, which is invalid. I strongly "
                   "suggest you carefully check whether a comparison step and add_filter() is "
                   "needed. If not needed and the result already meets our expectation, use "
                   "set_answer() to determine which variable to return as the answer. If a "
                   "comparison step is indeed needed, make sure the second argument is one of "
                   f"{_OPS}.")
        suggestions: list[str] = []
        if op in feedback.memory.known_relations() or "." in op:
            left, right = (str(a) for a in call.args[0::2])
            fact = f"add_fact({left}, {op}, {right})"
            message += f" {op} looks like a relation: to constrain by it, use {fact}."
            suggestions.append(fact)
        return self.hint(message, suggestions)


class FilterFirstArgument(_ArgumentGuideline):
    """The first parameter of add_filter is invalid: it must be an existing variable.

    Exclusion filters on a variable that later facts bind (``add_filter(?x, !=, m.0x)`` first,
    as in the WebQSP gold programs) are accepted. A filter before anything is known is
    ``RM205``'s case.

    Bad:
        add_fact(m.0j8js, sports.sports_team.founded, ?year)
        add_filter(?founded, <, 1995)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.founded, ?year)
        add_filter(?year, <, 1995)
    """

    code = "PY204"
    name = "kb.filter_first_argument"
    triggers_on = on("add_filter", python=("ok", "query_error", "bad_term"))
    groups = ("sparql", "filter", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        memory = feedback.memory
        if py.status == "bad_term" and py.arg_index != 0:
            return None
        if py.status == "query_error" and py.error_code != "no_variable":
            return None
        first = feedback.args[0] if feedback.args else None
        text = bad_arg_text(feedback) if py.status == "bad_term" else term_text(first)
        suggestions = bound_variables(memory)
        if py.status == "ok":
            if isinstance(first, Var):
                if str(first) in memory.variables or is_exclusion(feedback):
                    return None
                if not memory.bound_variables and not memory.called("get_relation"):
                    return None  # nothing known yet: RM205
            elif len(feedback.args) == 3 and isinstance(feedback.args[2], Var):
                op = str(feedback.args[1])
                flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
                written = str(feedback.call.args[0]) if feedback.call is not None else text
                suggestions = [f"add_filter({feedback.args[2]}, {flipped}, {written})"]
        return self.hint(
            f"The first parameter of add_filter, {text}, is invalid: it must be an existing "
            f"variable of the query. {existing_text(feedback)}",
            suggestions,
        )


class FilterValue(_ArgumentGuideline):
    """The third parameter of add_filter is not a value (an unknown term, an unbound variable).

    A variable compared with must already have values (``add_filter(?x0, !=, ?x1)`` after both
    are bound is fine); an unbound one makes every comparison fail.

    Bad:
        add_filter(?year, <, ?founded)

    Fixed:
        add_filter(?year, <, 1995)
    """

    code = "PY205"
    name = "kb.filter_value"
    triggers_on = on("add_filter", python=("ok", "bad_term"))
    groups = ("sparql", "filter")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        memory = feedback.memory
        if py.status == "bad_term":
            if py.arg_index != 2:
                return None
            return self.hint(
                f"The third parameter of add_filter, {bad_arg_text(feedback)}, is invalid: it must "
                "be a "
                "number, a date, a quoted string, an entity id or an existing variable. "
                + existing_text(feedback),
                bound_variables(memory),
            )
        if len(feedback.args) != 3:
            return None
        value = feedback.args[2]
        if not isinstance(value, Var) or str(value) in memory.bound_variables:
            return None
        if not memory.bound_variables and not memory.called("get_relation"):
            return None  # nothing known yet: RM205
        return self.hint(
            f"The third parameter of add_filter, {value}, is a variable without values, so the "
            "comparison can never hold. Compare with a number, a date or an entity, or with a "
            f"variable that already has values. {existing_text(feedback)}",
            bound_variables(memory),
        )


class AggregateArgument(_ArgumentGuideline):
    """add_max/add_min/add_count (and add_sum/add_avg) need an existing variable with values.

    Bad:
        add_count(?films)

    Fixed:
        add_count(?film)
    """

    code = "PY206"
    name = "kb.aggregate_argument"
    triggers_on = on(*_AGGREGATES, python=("bad_term", "query_error"))
    groups = ("sparql", "aggregate")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        if py.status == "bad_term" and py.arg_index != 0:
            return None
        if py.status == "query_error" and py.error_code != "unknown_variable":
            return None
        text = bad_arg_text(feedback) if py.status == "bad_term" else term_text(
            feedback.args[0] if feedback.args else "")
        function = feedback.function
        return self.hint(
            f"The parameter of {function}(), {text}, is invalid: it must be an existing variable "
            f"with values. {existing_text(feedback)}",
            [f"{function}({v})" for v in bound_variables(feedback.memory)],
        )


class SetAnswerNotVariable(_ArgumentGuideline):
    """set_answer of something that is not a variable (a literal answer like "yes").

    The paper's Figure 5, step 6: the answer is always a variable of the query.

    Bad:
        set_answer("yes")

    Fixed:
        set_answer(?angular_frequency)
    """

    code = "PY207"
    name = "kb.set_answer_not_variable"
    triggers_on = on("set_answer", python="bad_term")
    groups = ("sparql", "answer", "paper")

    def check(self, feedback: Feedback) -> Hint | None:
        text = arg_text(feedback, 0) or feedback.python.arg_text or "The parameter"
        bound = bound_variables(feedback.memory)
        if bound:
            return self.hint(
                f"{text} is invalid. You must set an existing variable as answer. Existing "
                f"variables includes: {fmt_list(bound)}. Please choose proper variable and set "
                "again.",
                [f"set_answer({v})" for v in bound],
            )
        return self.hint(f"{text} is invalid. You must set an existing variable as answer, and "
                         "there are no variables yet: build the query with add_fact() first.")


class ExecuteWithoutAnswer(_ArgumentGuideline):
    """execute() with no answer variable chosen among several, or with an empty query.

    Bad:
        add_fact(m.0j8js, sports.sports_team.venue, ?place)
        add_fact(?place, sports.team_venue_relationship.venue, ?arena)
        execute()

    Fixed:
        set_answer(?arena)
        execute()
    """

    code = "PY208"
    name = "kb.execute_without_answer"
    triggers_on = on("execute", python="query_error", kb=ANY)
    groups = ("sparql", "answer")

    def check(self, feedback: Feedback) -> Hint | None:
        code = feedback.python.error_code
        if code == "empty_query":
            return self.hint_options("The query is empty, so there is nothing to execute. Build "
                                     "it first with get_relation() and add_fact().",
                                     get_relation_calls(feedback.memory), "Suggestion:")
        if code != "no_answer":
            return None
        bound = bound_variables(feedback.memory)
        return self.hint(
            f"The query has several variables ({', '.join(bound)}), so execute() does not know "
            "which one is the answer. Use set_answer() on the variable the question asks for "
            "first.",
            [f"set_answer({v})" for v in bound],
        )
