"""``onefact``'s stand-in for runs without a model (``--llm gold``): it belongs to the
evaluation, so it lives apart from the strategy and is registered under the strategy's name in
the ``pyql.standins`` entry-point group (``pyproject.toml``)."""

from __future__ import annotations

from typing import Any

from pyql.agent.evaluation.llm_spec import StandInSpec
from pyql.agent.evaluation.standins import StandInFactory
from pyql.agent.llm.clients import LLM, ScriptedLLM
from pyql.program import Program

__all__ = ["OneFactGold"]


class OneFactGold(StandInFactory):
    """``--llm gold``: an LLM that answers with the gold program's first fact. It plays
    ``gold`` only and declares no parameter, so ``noisy-gold`` or ``gold:K=V`` is refused
    before a run starts."""

    kinds = frozenset({"gold"})

    def build(self, spec: StandInSpec, item: Any, *, seed: int = 0,
              preset: str | None = None) -> LLM:
        facts = [c for c in Program.parse(item.program or "", item.tools) if c.name == "add_fact"]
        return ScriptedLLM([str(facts[0]) if facts else "no fact"], model="gold")
