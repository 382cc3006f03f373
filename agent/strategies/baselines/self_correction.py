"""The self-correction baselines of the QueryAgent paper's Table 3: QueryAgent without ERASER,
with every action corrected by the model itself, the same prompt each time.

- ``queryagent-sc0`` (*zero-shot SC*): the "generic" self-correction prompt of DIN-SQL (Pourreza
  and Rafiei, 2023): check the action for any issue, fix it if there is one, else return it as is.
- ``queryagent-sc-few`` (*few-shot SC*): the "explanation feedback" prompt of Self-Debug (Chen et
  al., 2023): explain what the action does, judge whether it serves the question, then give the
  final action — with demonstrations (one kept, one fixed).

The paper "follow[s] and implement[s] their ideas in our tasks" without publishing the prompts;
these are that idea on the PyQL tool set, written down in ``prompts/sc_zero_shot.md`` and
``prompts/sc_few_shot_*.md``. The contrast the table draws is the point: ERASER corrects only
when the environment shows an error, with a guideline for that error; SC asks the model to
re-check every action, blind to the environment.

The correction is one extra LLM call per step: the step's reply and the correction prompt are
sent after the step's messages, and the corrected action (if the model gave one) replaces the
original. Usage counts both calls (``llm_calls``, tokens and cost), and each step records the
original and corrected action in ``Step.data["self_correction"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyql.agent.llm.accounting import TokenUsage
from pyql.agent.llm.clients import LLM, LLMReply, Message, Stop, Tools
from pyql.agent.strategies.queryagent.prompts import parse_reply, read_prompt
from pyql.agent.strategies.queryagent.strategy import QueryAgent
from pyql.agent.strategy import Result, StrategyConfig

__all__ = ["Correction", "SelfCorrectingLLM", "ZeroShotSC", "FewShotSC", "sc_prompt"]


def sc_prompt(kind: str, tools: str) -> str:
    """The correction prompt: ``zero`` (DIN-SQL's generic) or ``few`` (Self-Debug's explanation
    feedback, with demonstrations for the ``sparql`` or ``sql`` tool set)."""
    if kind == "zero":
        return read_prompt("sc_zero_shot.md").strip()
    if kind == "few":
        return read_prompt(f"sc_few_shot_{'sql' if tools == 'sql' else 'sparql'}.md").strip()
    raise ValueError(f"self-correction kind must be 'zero' or 'few', not {kind!r}")


@dataclass(frozen=True)
class Correction:
    """One step's self-correction: the action before and after, and the model's reply."""

    original: str
    corrected: str
    reply: str

    @property
    def changed(self) -> bool:
        return self.original.strip() != self.corrected.strip()


def _sum_usage(a: TokenUsage | None, b: TokenUsage | None) -> TokenUsage | None:
    if a is None or b is None:
        return None
    return TokenUsage(prompt_tokens=a.prompt_tokens + b.prompt_tokens,
                      completion_tokens=a.completion_tokens + b.completion_tokens,
                      cached_tokens=a.cached_tokens + b.cached_tokens,
                      estimated=a.estimated or b.estimated)


class SelfCorrectingLLM:
    """Wraps a model so that each reply is followed by a self-correction call (module doc).

    ``corrections`` lists this question's corrections in order (one per step); the agent resets
    it per question."""

    def __init__(self, base: LLM, prompt: str, functions: Sequence[str]) -> None:
        self.base = base
        self.prompt = prompt
        self.functions = tuple(functions)
        self.model = getattr(base, "model", "")
        self.corrections: list[Correction] = []

    def __repr__(self) -> str:
        return f"SelfCorrectingLLM({self.base!r})"

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None
                 ) -> LLMReply:
        first = self.base.complete(messages, stop=stop, tools=tools)
        parsed = parse_reply(first.text, self.functions)
        check = [*messages, {"role": "assistant", "content": first.text},
                 {"role": "user", "content": self.prompt}]
        second = self.base.complete(check, stop=None, tools=None)
        fixed = parse_reply(second.text, self.functions)
        corrected = fixed.action_text if fixed.action_text and fixed.issue is None else ""
        original = parsed.action_text
        final = corrected or original
        self.corrections.append(Correction(original=original, corrected=final, reply=second.text))
        text = f"Thought : {parsed.thought}\nAction : {final}" if final else first.text
        cost = (None if first.cost is None or second.cost is None
                else first.cost + second.cost)
        return LLMReply(text=text, tool_calls=first.tool_calls,
                        usage=_sum_usage(first.usage, second.usage),
                        latency=first.latency + second.latency,
                        model=first.model or second.model, finish_reason=first.finish_reason,
                        cost=cost, retries=first.retries + second.retries)


class _SelfCorrection(QueryAgent):
    """QueryAgent, ERASER off, each action self-corrected (module doc)."""

    kind = "zero"

    def __init__(self, llm: LLM, backend: Any, **kwargs: Any) -> None:
        kwargs.setdefault("guidelines", None)
        if kwargs.get("mode", "text") != "text":
            raise ValueError(f"{self.name} corrects text actions; it has no tools mode")
        super().__init__(llm, backend, **kwargs)
        self.llm = SelfCorrectingLLM(llm, sc_prompt(self.kind, self.profile.tools),
                                     self.profile.functions)

    @classmethod
    def from_config(cls, llm: LLM, backend: Any, config: StrategyConfig) -> QueryAgent:
        """As QueryAgent's, except that ERASER stays off unless ``options`` turn it on (the
        table's rows replace ERASER by SC)."""
        agent = super().from_config(llm, backend, config)
        if "guidelines" not in config.options:
            agent.guidelines = None
        return agent

    def run(self, question: str, entities: Mapping[str, str] | None = None,
            **context: Any) -> Result:
        wrapper: SelfCorrectingLLM = self.llm  # type: ignore[assignment]
        wrapper.corrections = []
        result = super().run(question, entities, **context)
        corrections = wrapper.corrections
        steps = tuple(
            step.model_copy(update={"data": {**step.data, "self_correction": {
                "original": c.original, "corrected": c.corrected, "changed": c.changed}}})
            if i < len(corrections) and (c := corrections[i]) is not None else step
            for i, step in enumerate(result.trajectory.steps))
        usage = result.usage.model_copy(
            update={"llm_calls": result.usage.llm_calls + len(corrections)})
        trajectory = result.trajectory.model_copy(update={"steps": steps, "usage": usage})
        return Result(trajectory=trajectory, program=result.program)


class ZeroShotSC(_SelfCorrection):
    """Table 3's "w/ zero-shot SC" (DIN-SQL's generic self-correction prompt)."""

    name = "queryagent-sc0"
    kind = "zero"


class FewShotSC(_SelfCorrection):
    """Table 3's "w/ few-shot SC" (Self-Debug's explanation feedback, with demonstrations)."""

    name = "queryagent-sc-few"
    kind = "few"
