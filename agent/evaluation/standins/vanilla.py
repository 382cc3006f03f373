"""The one-call baseline's stand-in (``vanilla``, ``vanilla-few``): ``--llm gold`` only.

:class:`VanillaGoldLLM` answers with the item's gold program compiled to the target language
(:mod:`pyql.agent.strategies.baselines.vanilla`'s docstring): it reads the ``prompt`` step's record, never the
prompt. There is no noisy-gold for one-call generation: ``noisy-gold`` is refused before the
run (:class:`~pyql.agent.evaluation.llm_spec.LLMSpecError`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.evaluation.llm_spec import StandInSpec
from pyql.agent.evaluation.standins import StandInFactory
from pyql.agent.evaluation.standins.gold import no_program_reason
from pyql.agent.llm.clients import LLMReply
from pyql.program import Program

if TYPE_CHECKING:
    from pyql.agent.evaluation.records import EvalItem

__all__ = ["VanillaGoldLLM", "VanillaStandIn"]


class VanillaStandIn(StandInFactory):
    """``gold`` for the one-call baseline (module docstring)."""

    kinds = frozenset({"gold"})

    def build(self, spec: StandInSpec, item: EvalItem, *, seed: int = 0,
              preset: str | None = None) -> VanillaGoldLLM:
        reason = "" if item.program else no_program_reason(item)
        return VanillaGoldLLM(item.program, entities=item.entities, tools=item.tools,
                              reason=reason)


class VanillaGoldLLM:
    """The gold stand-in of one-call generation: it reads the ``prompt`` step's record (the
    target language, the KB profile, the table, the dialect) and answers with the gold program
    compiled for it (module docstring). Without a gold program, asking it is the question's
    error (:class:`~pyql.agent.errors.LLMScriptExhaustedError`)."""

    prompts_matter = False

    def __init__(self, program: str | None, *, entities: Mapping[str, str] | None = None,
                 tools: str = "sparql", reason: str = "", model: str = "gold") -> None:
        self.program = program
        self.entities = dict(entities or {})
        self.tools = tools
        self.reason = reason or "no gold program"
        self.model = model
        self._record: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"VanillaGoldLLM({self.tools!r})"

    def observe(self, step: Any) -> None:
        if step.kind == "prompt":
            self._record = dict(step.data)

    def complete(self, messages: Sequence[Mapping[str, Any]], *, stop: Sequence[str] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> LLMReply:
        if not self.program:
            raise LLMScriptExhaustedError(f"{self.reason}; the query was asked for",
                                          model=self.model)
        record = self._record
        if record.get("language", self.tools) == "sql":
            from pyql.sql.apply import program_to_sql

            text = program_to_sql(_without_env_calls(self.program, "sql"),
                                  record.get("dialect") or "sqlite", table=record.get("table"))
        else:
            program = _without_env_calls(self.program, "sparql")
            text = program.to_sparql(profile=record.get("profile") or "freebase",
                                     entities=self.entities)
        language = record.get("language", self.tools)
        return LLMReply(text=f"```{language}\n{text}\n```", model=self.model,
                        finish_reason="stop", cost=0.0)


def _without_env_calls(text: str, tools: str) -> Program:
    """The gold program without the calls that only look at the environment."""
    program = Program.parse(text, tools)
    keep = [c for c in program.calls if c.name not in ("get_relation", "get_column", "execute")]
    return Program(calls=tuple(keep), tools=program.tools)
