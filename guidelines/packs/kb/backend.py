"""Backend failures (KB errors and timeouts), told apart from empty results.

When the server fails, the step was not applied and nothing is known about the action: the hint
says so and never advises changing a relation.
"""

from __future__ import annotations

from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import Guideline, on
from pyql.guidelines.packs.kb._common import SPARQL

__all__ = [
    "BackendError", "BackendTimeout", "QueryRejected", "backend_error_message", "timeout_message",
    "query_rejected_message", "is_query_rejection",
]

#: the error type (``KBFeedback.error_type``) of an engine that rejected the query it was sent
_REJECTED = "BackendQueryError"


def is_query_rejection(feedback: Feedback) -> bool:
    """The engine rejected the query the step built: a query error, not a server fault."""
    return feedback.kb.status == "backend_error" and feedback.kb.error_type == _REJECTED


def query_rejected_message(feedback: Feedback, what: str = "KB") -> str:
    detail = feedback.kb.message.strip().rstrip(".")
    return (f"The {what} rejected the query this step builds ({detail or 'query error'}). This "
            "is an error in the query, not a server fault: the step was not applied, and the "
            "same action would be rejected again. Change the action: check its arguments and "
            "whether the calls before it allow it.")


def backend_error_message(feedback: Feedback, what: str = "KB") -> str:
    detail = feedback.kb.message.strip().rstrip(".")
    return (f"The {what} could not run this step ({detail or 'backend error'}). This is a problem "
            f"of the {what} server, not an empty result and not a sign that the action is wrong: "
            "the step was not applied. Repeat the same action; if the error persists, the "
            f"{what} is unavailable and the question cannot be answered now.")


def timeout_message(feedback: Feedback, what: str = "KB") -> str:
    detail = feedback.kb.message.strip().rstrip(".")
    return (f"The {what} did not answer in time{f' ({detail})' if detail else ''}. This does not "
            "mean the result is empty: the step was not applied. Queries are slow when they "
            "start from variables only or match very many rows; prefer starting from a linked "
            "entity or adding a more specific constraint first, or repeat the action.")


class BackendError(Guideline):
    """The KB failed to run the step (server down, query rejected): not an empty result.

    Bad:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)   # KB unreachable

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)   # same action, repeated
    """

    code = "KB301"
    name = "kb.backend_error"
    needs = frozenset({"kb"})
    triggers_on = on(kb="backend_error")
    toolsets = SPARQL
    groups = ("sparql", "backend")

    def check(self, feedback: Feedback) -> Hint | None:
        if is_query_rejection(feedback):
            return None  # KB303's case
        return self.hint(backend_error_message(feedback), [feedback.action_text])


class QueryRejected(Guideline):
    """The KB engine rejected the query the step built: a query error, not a server fault.

    The engine's own message is in the hint; repeating the action would fail the same way.

    Bad:
        add_fact(?x, film.film.directed_by, m.0darabont)   # the engine refuses the query

    Fixed:
        get_relation(m.0darabont)   # a different action, not the same one repeated
    """

    code = "KB303"
    name = "kb.query_rejected"
    needs = frozenset({"kb"})
    triggers_on = on(kb="backend_error")
    toolsets = SPARQL
    groups = ("sparql", "backend")

    def check(self, feedback: Feedback) -> Hint | None:
        if not is_query_rejection(feedback):
            return None
        return self.hint(query_rejected_message(feedback))


class BackendTimeout(Guideline):
    """The KB timed out on the step: not an empty result.

    Bad:
        add_fact(?x, common.topic.alias, ?alias)   # times out: nothing anchors the pattern

    Fixed:
        add_fact(m.0j8js, common.topic.alias, ?alias)
    """

    code = "KB302"
    name = "kb.backend_timeout"
    needs = frozenset({"kb"})
    triggers_on = on(kb="timeout")
    toolsets = SPARQL
    groups = ("sparql", "backend")

    def check(self, feedback: Feedback) -> Hint | None:
        return self.hint(timeout_message(feedback))
