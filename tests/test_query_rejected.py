"""An engine's rejection of the query a step built is a query error, not a server fault
(issue 15 item 5): the feedback says which (``feedback.backend.error_type``), the observation gives the
engine's words, and DB303/KB303 (not DB301/KB301's "repeat the action") explain it."""

from __future__ import annotations

import pytest

from tests.guidelines.support import builtin, run_steps


@pytest.mark.parametrize(("tools", "kb", "steps", "code"), [
    ("sql", "players", ["add_condition(Player, =, Terrence Ross)"], "DB303"),
    ("sparql", "figure6", ["get_relation(m.04rtjj)"], "KB303"),
])
def test_rejection_is_a_query_error(tools: str, kb: str, steps: list[str], code: str) -> None:
    table = "players" if tools == "sql" else None
    entities = {"live365": "m.04rtjj"}
    for registry in (builtin(), builtin().select(enable=[])):
        obs = run_steps([{"run": steps[0], "kb": "rejected"}], kb=kb, tools=tools, table=table,
                        registry=registry, entities=entities)[-1]
        assert obs.feedback.backend.status == "backend_error"
        assert obs.feedback.backend.rejected and obs.feedback.backend.error_type == "BackendQueryError"
        assert not obs.ok
        if obs.hint is None:
            assert "failed" not in obs.text and "rejected the query" in obs.text
        else:
            assert obs.hint.code == code and "not a server fault" in obs.text
    down = run_steps([{"run": steps[0], "kb": "backend_error"}], kb=kb, tools=tools, table=table,
                     entities=entities)
    assert down[-1].feedback.backend.error_type == "BackendUnavailableError"
    assert not down[-1].feedback.backend.rejected
    assert down[-1].hint is not None and down[-1].hint.code == code.replace("303", "301")
