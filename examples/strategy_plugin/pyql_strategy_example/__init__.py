"""``onefact``: a one-call strategy — the LLM writes the one fact that answers the question."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pyql import Session
from pyql.agent.accounting import Usage
from pyql.agent.llm import LLM, ScriptedLLM
from pyql.agent.strategy import Result, StrategyConfig
from pyql.agent.trajectory import Step, Trajectory
from pyql.program import Call, Program
from pyql.syntax import AtomKind

__all__ = ["OneFact"]

PROMPT = ("Write the one add_fact(head, relation, tail) call, with one variable, whose values "
          "answer the question.\nQuestion: {question}\nEntities: {entities}")


class OneFact:
    """Asks the LLM once for ``add_fact(...)``, then ``set_answer`` of its variable and
    ``execute()``, on a :class:`pyql.Session` over the backend (a KB)."""

    name = "onefact"

    def __init__(self, llm: LLM, backend: Any, config: StrategyConfig) -> None:
        self.llm = llm
        self.backend = backend
        self.config = config

    @classmethod
    def from_config(cls, llm: LLM, backend: Any, config: StrategyConfig) -> OneFact:
        return cls(llm, backend, config)

    @classmethod
    def stand_in(cls, spec: str, item: Any, *, seed: int = 0) -> LLM:
        """``--llm gold``: an LLM that answers with the gold program's first fact."""
        if spec != "gold":
            raise ValueError(f"onefact has no stand-in for --llm {spec}")
        facts = [c for c in Program.parse(item.program or "", item.tools) if c.name == "add_fact"]
        return ScriptedLLM([str(facts[0]) if facts else "no fact"], model="gold")

    def run(self, question: str, entities: Mapping[str, str] | None = None,
            **context: Any) -> Result:
        started = time.perf_counter()
        entities = dict(entities or {})
        on_step = context.get("on_step")
        session = Session(self.backend, entities, guidelines=self.config.guidelines or None)
        prompt = PROMPT.format(question=question, entities=", ".join(entities))
        reply = self.llm.complete([{"role": "user", "content": prompt}])
        usage = Usage(llm_calls=1, llm_seconds=reply.latency)
        fact = reply.text.strip()
        actions = [fact]
        try:
            variables = [a for a in Program.parse(fact).calls[0].args if a.kind is AtomKind.VAR]
        except Exception:  # noqa: BLE001 - an unreadable reply: the Session reports it
            variables = []
        if variables:
            actions += [str(Call(name="set_answer", args=(variables[0],))), "execute()"]
        steps: list[Step] = []
        answers: tuple[Any, ...] = ()
        finished = False
        for n, action in enumerate(actions, 1):
            obs = session.run(action)
            step = Step(n=n, kind="fact" if n == 1 else "action", action=action,
                        observation=obs.text, hint=obs.hint.code if obs.hint else None,
                        status=obs.status, accepted=obs.ok, error=obs.error, query=obs.query,
                        reply_text=reply.text if n == 1 else "")
            steps.append(step)
            if on_step is not None:
                on_step(step)
            if not obs.ok:
                break
            if action == "execute()":
                answers, finished = tuple(obs.answers or ()), True
        usage = usage.model_copy(update={"seconds": time.perf_counter() - started})
        trajectory = Trajectory(
            question=question, entities=entities, strategy=self.name, model=reply.model,
            steps=tuple(steps), answers=answers, query=steps[-1].query if steps else "",
            program=str(session.program), finished=finished,
            stop_reason="execute" if finished else "rejected", usage=usage,
            meta=dict(context.get("meta") or {}))
        return Result(trajectory=trajectory, program=session.program)
