"""Backend failures (KB errors and timeouts), told apart from empty results.

When the server fails, the step was not applied and nothing is known about the action: the hint
says so and never advises changing a relation.
"""

from __future__ import annotations

from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import Guideline, on
from pyql.guidelines.packs.kb._common import SPARQL

__all__ = ["BackendError", "BackendTimeout", "backend_error_message", "timeout_message"]


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
        return self.hint(backend_error_message(feedback), [feedback.action_text])


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
