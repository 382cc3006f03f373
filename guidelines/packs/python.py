"""Python-feedback guidelines shared by both toolsets: the shape of the action itself.

These fire when the action does not parse or does not match a DSL signature (the paper's
Table 12). Such a step is never applied anyway; the hint replaces the raw interpreter error with
what went wrong and what a valid action looks like.
"""

from __future__ import annotations

import re

from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import ANY, Guideline, on
from pyql.guidelines.derive import (
    bad_arg_text,
    bound_variables,
    closest,
    fmt_list,
    linked_targets,
    signature_of,
    value_owner,
)
from pyql.program import TOOLSETS

__all__ = [
    "MultipleActions",
    "InvalidAction",
    "MalformedCall",
    "WrongArity",
    "InvalidArgument",
    "InvalidStep",
    "GUIDELINES",
    "action_list",
]

_BOTH = frozenset({"sparql", "sql"})
#: a Thought/Observation line: the model went on writing the next step itself
_MARKERS = re.compile(r"(?im)^\s*(thought|observation)\s*\d*\s*:")


def action_list(tools: str, functions: tuple[str, ...] = ()) -> str:
    """``get_relation(), add_fact(), ...``: the valid actions: ``functions`` (the tool set the
    agent was offered) when given, else the whole toolset."""
    return ", ".join(f"{name}()" for name in (functions or TOOLSETS[tools]))


def _mentioned_functions(feedback: Feedback) -> list[str]:
    """Known function names written as calls (``name(``) in the action text."""
    names = "|".join(re.escape(n) for n in TOOLSETS[feedback.tools])
    return re.findall(rf"\b({names})\s*\(", feedback.action_text)


class _PythonGuideline(Guideline):
    """What the Python-feedback guidelines share: both toolsets, the Python feedback (one reads the
    memory too)."""

    needs = frozenset({"python"})
    toolsets = _BOTH


class MultipleActions(_PythonGuideline):
    """Several actions (or thoughts) in one output.

    One step is one action. When the model writes two calls, or continues with the next Thought
    and Action itself, nothing is run and it is asked for one action.

    Bad:
        get_relation(m.0j8js)
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?place)

    Fixed:
        get_relation(m.0j8js)
    """

    code = "PY101"
    name = "python.multiple_actions"
    triggers_on = on(python=("multiple_actions", "parse_error"))
    groups = ("python", "action")

    def check(self, feedback: Feedback) -> Hint | None:
        mentioned = _mentioned_functions(feedback)
        more_steps = _MARKERS.search(feedback.action_text) is not None
        if not (feedback.python.status == "multiple_actions" or len(mentioned) > 1
                or (mentioned and more_steps)):
            return None
        first = mentioned[0] if mentioned else None
        what = (f"You wrote {len(mentioned)} actions in one output" if len(mentioned) > 1
                else "You wrote more than one action (or the next Thought) in one output")
        return self.hint(
            f"{what}, but each step takes exactly one action. Write only the next action"
            + (f" (here the first one, {first}()), then wait for its observation." if first
               else ", then wait for its observation."),
            [f"{first}()"] if first else [],
        )


class InvalidAction(_PythonGuideline):
    """The output action is not one of the available valid functions.

    Free text, a made-up function or a misspelt one. The hint lists the valid actions (the
    paper's Table 12 and Figure 6, step 3): the tool set the agent was offered
    (``Feedback.functions``, its prompt profile's), else the whole toolset.

    Bad:
        Since we couldn't find a suitable relation, we need to use a different approach.

    Fixed:
        get_relation(m.04rtjj)
    """

    code = "PY102"
    name = "python.invalid_action"
    triggers_on = on(python=("no_action", "unknown_function", "parse_error"))
    groups = ("python", "action")

    def check(self, feedback: Feedback) -> Hint | None:
        status = feedback.python.status
        if status == "parse_error" and _mentioned_functions(feedback):
            return None  # a known function written wrongly: MalformedCall
        offered = feedback.functions or TOOLSETS[feedback.tools]
        valid = action_list(feedback.tools, feedback.functions)
        lead = ""
        suggestions: list[str] = []
        if status == "unknown_function" and feedback.python.function:
            wrong = feedback.python.function
            near = closest(wrong, offered)
            lead = f"{wrong}() is not an available action"
            lead += f" (did you mean {near[0]}()?). " if near else ". "
            suggestions = [f"{n}()" for n in near]
        return self.hint(f"{lead}Invalid action, next time you must choose an action from: "
                         f"{valid}.", suggestions)


class MalformedCall(_PythonGuideline):
    """A call of a valid function that does not parse (quotes, parentheses, extra text).

    Bad:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, "?place)

    Fixed:
        add_fact(m.0j8js, sports.sports_team.arena_stadium, ?place)
    """

    code = "PY103"
    name = "python.malformed_call"
    triggers_on = on(python="parse_error")
    groups = ("python", "action")

    def check(self, feedback: Feedback) -> Hint | None:
        mentioned = _mentioned_functions(feedback)
        if len(mentioned) != 1:
            return None
        sig = signature_of(feedback, mentioned[0])
        shape = f" Write exactly one call of the form {sig}." if sig else ""
        problem = feedback.python.message.rstrip(".") or "it does not parse"
        return self.hint(f"The action could not be read: {problem}.{shape} Quote an argument "
                         "only when it is a string value.", [str(sig)] if sig else [])


class WrongArity(_PythonGuideline):
    """The parameter list does not match the function's signature (too few or too many).

    Bad:
        add_fact(?x, ?y)

    Fixed:
        add_fact(?x, people.person.spouse_s, ?y)
    """

    code = "PY104"
    name = "python.wrong_arity"
    triggers_on = on(python="arity")
    groups = ("python", "action")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        sig = signature_of(feedback, py.function)
        if sig is None:
            return None
        lo, hi = py.expected_arity or sig.arity
        want = f"{lo}" if lo == hi else f"{lo} to {hi}"
        got = py.got_arity if py.got_arity is not None else "a different number of"
        params = "; ".join(f"{p.name}: {p.doc}" for p in sig.params if p.doc)
        return self.hint(
            f"{sig} should have {want} parameter{'s' if hi != 1 else ''}. You have {got} "
            f"parameter{'s' if got != 1 else ''}. Please check again."
            + (f" ({params})" if params else ""),
            [str(sig)],
        )


class InvalidArgument(_PythonGuideline):
    """An argument is not valid for its position (fallback when no specific guideline applies).

    Bad:
        add_type(?film, "a film")

    Fixed:
        add_type(?film, film.film)
    """

    code = "PY290"
    name = "python.invalid_argument"
    needs = frozenset({"python", "memory"})
    triggers_on = on(python="bad_term")
    groups = ("python", "argument", "fallback")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        function = feedback.function or "the action"
        where = (f"Argument {py.arg_index + 1} of {function}()" if py.arg_index is not None
                 else f"An argument of {function}()")
        written = bad_arg_text(feedback)
        text = f" ({written})" if written != "?" else ""
        expected = f": it must be {py.expected}" if py.expected else ""
        message = f"{where}{text} is invalid{expected}."
        suggestions: list[str] = []
        memory = feedback.memory
        owner = value_owner(memory, written) if written != "?" else None
        if owner:
            message += (f" {written} is a value shown for {owner}, not an id: use the "
                        f"variable {owner} instead.")
            suggestions.append(owner)
        if py.expected and "variable" in py.expected and bound_variables(memory):
            message += f" Existing variables include: {fmt_list(bound_variables(memory))}."
            suggestions += bound_variables(memory)
        if py.expected and "entity" in py.expected and memory.entities:
            message += f" Linked entities: {fmt_list(linked_targets(memory))}."
            suggestions += linked_targets(memory)
        sig = signature_of(feedback)
        if sig is not None:
            message += f" The signature is {sig}."
        return self.hint(message, suggestions)


class InvalidStep(_PythonGuideline):
    """A well-formed call that cannot apply to the current query (fallback).

    Bad:
        add_count(?film, ?film)

    Fixed:
        add_count(?film, ?number)
    """

    code = "PY291"
    name = "python.invalid_step"
    triggers_on = on(python="query_error", kb=ANY)
    groups = ("python", "fallback")

    def check(self, feedback: Feedback) -> Hint | None:
        py = feedback.python
        function = feedback.function or "The action"
        message = f"{function}() cannot be applied here: {py.message.rstrip('.')}."
        if py.suggestions:
            message += f" Valid options: {fmt_list(py.suggestions)}."
        return self.hint(message, py.suggestions)


GUIDELINES: list[type[Guideline]] = [
    MultipleActions,
    InvalidAction,
    MalformedCall,
    WrongArity,
    InvalidArgument,
    InvalidStep,
]
