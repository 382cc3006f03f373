"""An example third-party guideline pack for pyql (entry-point group ``pyql.guidelines``)."""

from __future__ import annotations

from pyql.feedback import Feedback, Hint
from pyql.guidelines import Guideline, on

__all__ = ["DuplicateFact", "GUIDELINES"]


class DuplicateFact(Guideline):
    """add_fact repeats a triple pattern the query already has.

    The repeated pattern changes nothing; the model is usually stuck and should take the next
    step (another fact, a constraint, or set_answer).

    Bad:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        set_answer(?arena)
    """

    code = "RM901"
    name = "example.duplicate_fact"
    needs = frozenset({"memory"})
    triggers_on = on("add_fact")
    groups = ("example",)

    def check(self, feedback: Feedback) -> Hint | None:
        call = feedback.call
        if call is None:
            return None
        for step, previous in enumerate(feedback.memory.calls, start=1):
            if previous == call:
                return self.hint(
                    f"{call} is already in the query (accepted call {step}); adding it again "
                    "changes nothing. Take the next step instead: another fact, a constraint, "
                    "or set_answer().",
                    ["set_answer()"],
                )
        return None


GUIDELINES = [DuplicateFact]
