"""Backend failures (KB errors and timeouts), told apart from empty results.

When the server fails, the step was not applied and nothing is known about the action: the hint
says so and never advises changing a relation. The SQL pack's DB301-DB303 are these guidelines
with the database as the backend.
"""

from __future__ import annotations

from typing import ClassVar

from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import Guideline, on
from pyql.guidelines.packs.kb._common import SPARQL

__all__ = ["BackendError", "BackendTimeout", "QueryRejected", "is_query_rejection"]

def is_query_rejection(feedback: Feedback) -> bool:
    """The engine rejected the query the step built: a query error, not a server fault."""
    return feedback.backend.status == "backend_error" and feedback.backend.rejected


def _detail(feedback: Feedback) -> str:
    """The backend's own error message, as a hint quotes it (no final period)."""
    return feedback.backend.message.strip().rstrip(".")


class _BackendFailure(Guideline):
    """What the backend guidelines share; ``backend`` names the failing server in the hint."""

    needs = frozenset({"kb"})
    toolsets = SPARQL
    groups = ("sparql", "backend")
    backend: ClassVar[str] = "KB"


class BackendError(_BackendFailure):
    """The KB failed to run the step (server down, query rejected): not an empty result.

    Bad:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)   # KB unreachable

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)   # same action, repeated
    """

    code = "KB301"
    name = "kb.backend_error"
    triggers_on = on(kb="backend_error")

    def check(self, feedback: Feedback) -> Hint | None:
        if is_query_rejection(feedback):
            return None  # the query-rejected guideline's case (KB303, DB303)
        what = self.backend
        return self.hint(
            f"The {what} could not run this step ({_detail(feedback) or 'backend error'}). This is "
            f"a problem of the {what} server, not an empty result and not a sign that the action "
            "is wrong: the step was not applied. Repeat the same action; if the error persists, "
            f"the {what} is unavailable and the question cannot be answered now.",
            [feedback.action_text],
        )


class QueryRejected(_BackendFailure):
    """The KB engine rejected the query the step built: a query error, not a server fault.

    The engine's own message is in the hint; repeating the action would fail the same way.

    Bad:
        add_fact(?x, film.film.directed_by, m.0darabont)   # the engine refuses the query

    Fixed:
        get_relation(m.0darabont)   # a different action, not the same one repeated
    """

    code = "KB303"
    name = "kb.query_rejected"
    triggers_on = on(kb="backend_error")

    def check(self, feedback: Feedback) -> Hint | None:
        if not is_query_rejection(feedback):
            return None
        return self.hint(
            f"The {self.backend} rejected the query this step builds "
            f"({_detail(feedback) or 'query error'}). This is an error in the query, not a server "
            "fault: the step was not applied, and the same action would be rejected again. Change "
            "the action: check its arguments and whether the calls before it allow it.")


class BackendTimeout(_BackendFailure):
    """The KB timed out on the step: not an empty result.

    Bad:
        add_fact(?x, common.topic.alias, ?alias)   # times out: nothing anchors the pattern

    Fixed:
        add_fact(m.0j8js, common.topic.alias, ?alias)
    """

    code = "KB302"
    name = "kb.backend_timeout"
    triggers_on = on(kb="timeout")

    def check(self, feedback: Feedback) -> Hint | None:
        detail = _detail(feedback)
        return self.hint(
            f"The {self.backend} did not answer in time{f' ({detail})' if detail else ''}. This "
            "does not mean the result is empty: the step was not applied. Queries are slow when "
            "they start from variables only or match very many rows; prefer starting from a "
            "linked entity or adding a more specific constraint first, or repeat the action.")
