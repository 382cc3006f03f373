"""An example third-party guideline pack for pyql (entry-point group ``pyql.guidelines``)."""

from __future__ import annotations

from pyql.feedback import Feedback, Hint
from pyql.guidelines import Guideline, on

__all__ = ["RepeatedPath", "GUIDELINES"]


class RepeatedPath(Guideline):
    """add_fact follows a head and relation the query follows already, to a new variable.

    The new variable takes the values the earlier one has (pyql refuses an identical fact
    itself, built-in RM210; this is the near miss): the model is usually stuck and should go
    on from the variable it has.

    Bad:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena2)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)
        set_answer(?arena)
    """

    code = "RM901"
    name = "example.repeated_path"
    needs = frozenset({"memory"})
    triggers_on = on("add_fact")
    groups = ("example",)

    def check(self, feedback: Feedback) -> Hint | None:
        call = feedback.call
        if call is None or len(call.args) != 3:
            return None
        head, relation, tail = (str(a) for a in call.args)
        if not tail.startswith("?") or tail in feedback.memory.variables:
            return None
        for step, previous in enumerate(feedback.memory.calls, start=1):
            if previous.name != "add_fact" or len(previous.args) != 3:
                continue
            if (str(previous.args[0]), str(previous.args[1])) == (head, relation):
                earlier = str(previous.args[2])
                return self.hint(
                    f"{head} {relation} is already in the query (accepted call {step}), as "
                    f"{earlier}: {tail} would take the same values. Go on from {earlier} "
                    "instead: another fact, a constraint, or set_answer().",
                    [f"set_answer({earlier})"],
                )
        return None


GUIDELINES = [RepeatedPath]
