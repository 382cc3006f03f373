"""QueryAgent's stand-ins (and its variants': self-correction, AgentBench).

``gold`` replays the item's gold program one call per step (:class:`~.gold.GoldLLM`);
``noisy-gold:RATE[:TYPES]`` replays it with the paper's hallucinations (of ``TYPES``, default
all) injected at ``RATE`` (:class:`~pyql.agent.evaluation.noisy.NoisyGoldLLM`), seeded with the
question's seed. An item without a program gets an LLM that fails when asked (the question's
error). Both read each step's record through their ``observe(step)``. Under ``preset="paper"``,
``gold`` replays the item's program in the original's own spelling when it has one
(``meta["paper_program"]``: MetaQA's ``relate`` walk).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyql.agent.evaluation.llm_spec import StandInSpec
from pyql.agent.evaluation.noisy import INJECTION_TYPES, PARAMETERS, NoisyGoldLLM
from pyql.agent.evaluation.standins import StandInFactory
from pyql.agent.evaluation.standins.gold import GoldLLM, no_program_reason

if TYPE_CHECKING:
    from pyql.agent.evaluation.records import EvalItem
    from pyql.agent.llm.clients import LLM

__all__ = ["QueryAgentStandIn"]


class QueryAgentStandIn(StandInFactory):
    """``gold`` and ``noisy-gold`` for QueryAgent (module docstring)."""

    injection_types = INJECTION_TYPES
    parameters = PARAMETERS
    gold_parameters = False

    def build(self, spec: StandInSpec, item: EvalItem, *, seed: int = 0,
              preset: str | None = None) -> LLM:
        if item.program is None:
            return GoldLLM(None, tools=item.tools, model=spec.kind,
                           reason=no_program_reason(item))
        if spec.kind == "gold":
            paper = item.meta.get("paper_program") if preset == "paper" else None
            return GoldLLM(paper or item.program, tools=item.tools)
        return NoisyGoldLLM(item.program, rate=spec.rate, seed=seed, tools=item.tools,
                            types=spec.types, **spec.values(PARAMETERS))
