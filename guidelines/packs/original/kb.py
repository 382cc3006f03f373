"""The original QueryAgent environment's SPARQL checks that ERASER's built-in pack lacks.

Each follows the check of the original code (GitHub ``cdhx/QueryAgent``, files under
``ag_src/``, lines cited per guideline) in what it refuses; the messages keep the original's
advice without its prompt mechanics. Opt-in (see :mod:`pyql.guidelines.packs.original`): the
original applied them per dataset, and some refuse what gold programs of other datasets do.
"""

from __future__ import annotations

from typing import Any

from pyql.feedback import Feedback, Hint, Relations
from pyql.guidelines.base import Guideline, on
from pyql.guidelines.derive import bound_variables, fmt_list, is_linked, linked_targets, term_text
from pyql.guidelines.packs.kb._common import SPARQL, is_exclusion, used_before
from pyql.terms import Entity, Literal, Relation, Var

__all__ = [
    "FactUnlinkedId", "FilterVariableValue", "FactBothIds", "TypeTypeRelation",
    "FactOperatorRelation", "FactYearTail", "FactHeadIsTail", "TimeConstraintUnexplored",
    "TimeConstraintUnlistedRelation",
]

_OPERATORS = ("!=", "=", "<", "<=", ">", ">=")


def _is_id(term: object) -> bool:
    """A Freebase id (``m.``/``g.``), as the original tells ids apart."""
    return isinstance(term, Entity) and term.short.startswith(("m.", "g."))


class _OriginalKB(Guideline):
    """What the original SPARQL guidelines share: the SPARQL toolset, mostly the Python feedback."""

    needs = frozenset({"python"})
    toolsets = SPARQL


class _FactCheck(_OriginalKB):
    """The original's checks of an add_fact call, given its three (resolved) arguments."""

    triggers_on = on("add_fact")

    def check(self, feedback: Feedback) -> Hint | None:
        if len(feedback.args) != 3:
            return None
        head, relation, tail = feedback.args
        return self.check_fact(feedback, head, relation, tail)

    def check_fact(self, feedback: Feedback, head: Any, relation: Any, tail: Any) -> Hint | None:
        """The hint for ``add_fact(head, relation, tail)``, or None."""
        raise NotImplementedError


class FactUnlinkedId(_FactCheck):
    """add_fact with an entity id that is not one of the question's linked entities.

    The original refuses any ``m.``/``g.`` id outside the entity linking
    (``ag_src/graphq_src/wikienv_graphq.py`` lines 105-113, ``ag_src/webqsp_src/wikienv_webqsp.py``
    lines 91-97). Ids already used by an accepted call are allowed.

    Bad:
        add_fact(m.0ab12cd, sports.sports_team.arena_stadium, ?arena)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
    """

    code = "PY401"
    name = "original.fact_unlinked_id"
    needs = frozenset({"python", "memory"})
    groups = ("sparql", "original", "graphq", "webqsp")

    def check_fact(self, feedback: Feedback, head: Any, relation: Any, tail: Any) -> Hint | None:
        for term in (head, tail):
            if _is_id(term) and not is_linked(term, feedback.memory) \
                    and not used_before(feedback, term_text(term)):
                linked = linked_targets(feedback.memory)
                return self.hint(
                    f"You should not use {term_text(term)} because it is not related to our "
                    "question: it is not one of the linked entities"
                    + (f" ({fmt_list(linked)})." if linked else "."),
                    [f"get_relation({e})" for e in linked],
                )
        return None


class FilterVariableValue(_OriginalKB):
    """add_filter whose third argument is a variable (GraphQ's original forbids it).

    ``ag_src/graphq_src/wikienv_graphq.py`` lines 221-224: the value must be a constant. Unlike
    the original, ``add_filter(?x, !=, ?y)`` (the exclusion WebQSP's gold programs write) passes.

    Bad:
        add_filter(?height, >, ?other)

    Fixed:
        add_filter(?height, >, "2.0"^^xsd:float)
    """

    code = "PY402"
    name = "original.filter_variable_value"
    triggers_on = on("add_filter")
    groups = ("sparql", "original", "graphq")

    def check(self, feedback: Feedback) -> Hint | None:
        if len(feedback.args) != 3 or not isinstance(feedback.args[2], Var):
            return None
        if is_exclusion(feedback):
            return None  # ?x != ?y keeps one node out of the answers: WebQSP's gold programs do
        return self.hint(
            "The third argument of add_filter should not be a variable, while you use "
            f"{feedback.args[2]}. Check whether a comparison step is needed at all; if the result "
            "already meets the question, use set_answer() to choose the answer variable; if it "
            "is needed, compare with a value, not a variable."
        )


class FactBothIds(_FactCheck):
    """add_fact between two entity ids (GraphQ's original refuses it).

    ``ag_src/graphq_src/wikienv_graphq.py`` lines 125-128.

    Bad:
        add_fact(m.04rtjj, broadcast.distributor.distributes, m.0str1)

    Fixed:
        get_relation(m.04rtjj)
    """

    code = "PY403"
    name = "original.fact_both_ids"
    groups = ("sparql", "original", "graphq")

    def check_fact(self, feedback: Feedback, head: Any, relation: Any, tail: Any) -> Hint | None:
        if not (_is_id(head) and _is_id(tail)):
            return None
        ids = [term_text(head), term_text(tail)]
        return self.hint(f"Head and tail cannot both be ids. Use get_relation({ids[0]}) or "
                         f"get_relation({ids[1]}).", [f"get_relation({i})" for i in ids])


class TypeTypeRelation(_FactCheck):
    """add_fact with a ``type.type.*`` relation (GraphQ's original refuses them).

    ``ag_src/graphq_src/wikienv_graphq.py`` lines 264-266.

    Bad:
        add_fact(broadcast.distributor, type.type.instance, ?x)

    Fixed:
        add_fact(m.04rtjj, broadcast.distributor.distributes, ?x)
    """

    code = "PY404"
    name = "original.type_type_relation"
    groups = ("sparql", "original", "graphq")

    def check_fact(self, feedback: Feedback, head: Any, relation: Any, tail: Any) -> Hint | None:
        if not isinstance(relation, Relation) or not relation.short.startswith("type.type"):
            return None
        return self.hint(f"{relation.short} relates types, not the entities of the question: "
                         "try another approach to the question (a relation of a linked entity).")


class FactOperatorRelation(_OriginalKB):
    """add_fact with a comparison operator as the relation (WebQSP's original).

    ``ag_src/webqsp_src/wikienv_webqsp.py`` lines 116-118: no constraint is needed between the
    two ends. Numbered before PY202 (invalid relation) so its advice wins when enabled.

    Bad:
        add_fact(?x, !=, m.0d05w3)

    Fixed:
        set_answer(?x)
    """

    code = "PY200"
    name = "original.fact_operator_relation"
    triggers_on = on("add_fact", python="bad_term")
    groups = ("sparql", "original", "webqsp")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        if py.arg_index != 1 or (py.arg_text or "").strip() not in _OPERATORS:
            return None
        call = feedback.call
        ends = ([str(call.args[0]), str(call.args[2])]
                if call is not None and len(call.args) == 3 else ["the head", "the tail"])
        return self.hint(
            f"There is no need to set a constraint between {ends[0]} and {ends[1]}: the linked "
            "entity is filtered out of the answers already. Use set_answer if the answer is "
            "complete enough.")


class FactYearTail(_FactCheck):
    """add_fact whose tail is a plain number: a year for add_time_constrain (WebQSP's original).

    ``ag_src/webqsp_src/wikienv_webqsp.py`` lines 120-130.

    Bad:
        add_fact(?team, sports.sports_team_roster.from, 2010)

    Fixed:
        add_time_constrain(?team, sports.sports_team_roster.from, sports.sports_team_roster.to, 2010, 2010)
    """

    code = "PY405"
    name = "original.fact_year_tail"
    groups = ("sparql", "original", "webqsp")

    def check_fact(self, feedback: Feedback, head: Any, relation: Any, tail: Any) -> Hint | None:
        if not isinstance(tail, Literal):
            return None
        call = feedback.call
        written = call.args[2] if call is not None and len(call.args) == 3 else None
        text = tail.lexical.strip()
        if written is None or written.kind.name != "NUMBER" or not text.lstrip("+-").isdigit():
            return None
        return self.hint(
            f"The third parameter {text} is invalid in add_fact: it looks like a year. To keep "
            "the results of a time, use add_time_constrain on the node that has the start and "
            f"end relations (e.g. add_time_constrain({term_text(head)}, {term_text(relation)}, "
            f"..., {int(text)}, {int(text)})).")


class FactHeadIsTail(_FactCheck):
    """add_fact whose head and tail are the same (WebQSP's original).

    ``ag_src/webqsp_src/wikienv_webqsp.py`` lines 136-139.

    Bad:
        add_fact(?x, people.person.spouse_s, ?x)

    Fixed:
        add_fact(?x, people.person.spouse_s, ?spouse)
    """

    code = "PY406"
    name = "original.fact_head_is_tail"
    groups = ("sparql", "original", "webqsp")

    def check_fact(self, feedback: Feedback, head: Any, relation: Any, tail: Any) -> Hint | None:
        if head != tail:
            return None
        return self.hint("The third parameter should not be the same as the first parameter. "
                         "Consider naming a new variable.")


class _TimeConstraint(_OriginalKB):
    """WebQSP's original add_time_constrain checks: they judge the constrained variable by what
    get_relation listed for it."""

    needs = frozenset({"memory"})
    triggers_on = on("add_time_constrain")
    groups = ("sparql", "original", "webqsp")

    def check(self, feedback: Feedback) -> Hint | None:
        var = feedback.args[0] if feedback.args else None
        if not isinstance(var, Var):
            return None
        return self.check_listed(feedback, var, feedback.memory.relations.get(str(var)))

    def check_listed(self, feedback: Feedback, var: Var, listed: Relations | None) -> Hint | None:
        """The hint for constraining ``var``, whose relations get_relation listed (None: never)."""
        raise NotImplementedError


class TimeConstraintUnexplored(_TimeConstraint):
    """add_time_constrain on a variable whose relations were never listed (WebQSP's original).

    ``ag_src/webqsp_src/wikienv_webqsp.py`` lines 231-237: without get_relation on it, the
    variable (or the relation) is likely wrong.

    Bad:
        add_fact(m.0j8js, sports.sports_team.roster, ?roster)
        add_time_constrain(?roster, sports.sports_team_roster.from, sports.sports_team_roster.to, 2010, 2010)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.roster, ?roster)
        get_relation(?roster)
    """

    code = "RM401"
    name = "original.time_constraint_unexplored"

    def check_listed(self, feedback: Feedback, var: Var, listed: Relations | None) -> Hint | None:
        memory = feedback.memory
        if listed is not None or str(var) not in memory.bound_variables:
            return None
        others = [v for v in bound_variables(memory) if v != str(var)]
        return self.hint(
            f"You used {var} as the first parameter of add_time_constrain, but its relations "
            f"were never listed, so it may not be the right variable. Use get_relation({var}) "
            "to see its time relations"
            + (f", or choose another variable from {fmt_list(others)}." if others else "."),
            [f"get_relation({var})"],
        )


class TimeConstraintUnlistedRelation(_TimeConstraint):
    """add_time_constrain with a relation the variable's get_relation did not list (WebQSP).

    ``ag_src/webqsp_src/wikienv_webqsp.py`` lines 238-240.

    Bad:
        get_relation(?roster)
        add_time_constrain(?roster, sports.sports_team_roster.start, sports.sports_team_roster.to, 2010, 2010)

    Fixed:
        get_relation(?roster)
        add_time_constrain(?roster, sports.sports_team_roster.from, sports.sports_team_roster.to, 2010, 2010)
    """

    code = "RM402"
    name = "original.time_constraint_unlisted_relation"

    def check_listed(self, feedback: Feedback, var: Var, listed: Relations | None) -> Hint | None:
        if listed is None or not listed.all:
            return None  # never listed (RM401), or nothing listed: no list to judge by
        wrong = [term_text(r) for r in feedback.args[1:3]
                 if isinstance(r, Relation) and r.short not in listed]
        if not wrong:
            return None
        return self.hint(
            f"The relation {wrong[0]} that you chose may not be correct: it is not a relation of "
            f"{var}. Choose the relation that matches the question best from "
            f"{fmt_list(listed.all)}.",
            listed.all,
        )
