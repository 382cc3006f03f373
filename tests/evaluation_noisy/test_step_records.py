"""What a strategy's step record carries for stand-ins, outages and reports: the hint's code and
suggestions (structured, never the wording), the backend's own status and the raw error."""

from __future__ import annotations

from typing import Any

from pyql.agent import QueryAgent
from pyql.agent.llm.clients import ScriptedLLM


def test_a_hint_step_carries_code_and_suggestions(panthers: Any) -> None:
    llm = ScriptedLLM([
        "Thought 1 : the arena.\nAction 1 : add_fact(Florida Panthers FC, "
        "sports.sports_team.arena_stadium, ?arena)",
        "Thought 2 : stop.\nAction 2 : execute()",
    ])
    seen: list[Any] = []
    observed: list[Any] = []
    llm.observe = observed.append  # type: ignore[attr-defined] - a stand-in's step hook
    result = QueryAgent(llm, panthers, max_steps=2).run(
        "which arena", {"florida panthers": "m.0j8js"}, on_step=seen.append)
    first = result.steps[0]
    assert first.hint == "PY201" and "m.0j8js" in first.suggestions and not first.accepted
    assert first.error is not None and first.env_status == ""  # refused before the KB ran
    assert observed == seen == list(result.steps)  # the LLM's hook sees every step


def test_an_accepted_step_has_the_backends_status(panthers: Any) -> None:
    llm = ScriptedLLM(["Thought 1 : look.\nAction 1 : get_relation(m.0j8js)"])
    result = QueryAgent(llm, panthers, max_steps=1).run("which arena",
                                                        {"florida panthers": "m.0j8js"})
    step = result.steps[0]
    assert step.accepted and step.env_status == "ok" and step.error is None
