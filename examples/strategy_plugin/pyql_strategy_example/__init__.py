"""``onefact``: a one-call strategy — the LLM writes the one fact that answers the question.

The strategy (:class:`OneFact`) knows nothing of evaluation; its stand-in for runs without a
model (``--llm gold``), :class:`OneFactGold` in :mod:`pyql_strategy_example.stand_in`, is
registered apart, under the same name, in the ``pyql.standins`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyql import Session
from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.clients import LLM
from pyql.agent.recorder import Recorder
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

    def run(self, question: str, entities: Mapping[str, str] | None = None,
            **context: Any) -> Result:
        entities = dict(entities or {})
        # the Recorder accounts the LLM call (tokens as the server reports them, else counted),
        # counts the KB queries, and calls the step callbacks (a live view, a stand-in's hook)
        rec = Recorder(self.llm, question, counter=TokenCounter.for_llm(self.llm),
                       price_table=PriceTable.of(self.config.price_table),
                       constrain=self.config.constrain, on_step=context.get("on_step"))
        session = Session(self.backend, entities, guidelines=self.config.guidelines or None)
        prompt = PROMPT.format(question=question, entities=", ".join(entities))
        call = rec.llm([{"role": "user", "content": prompt}])
        fact = call.text.strip()
        actions = [fact]
        try:
            variables = [a for a in Program.parse(fact).calls[0].args if a.kind is AtomKind.VAR]
        except Exception:  # noqa: BLE001 - an unreadable reply: the Session reports it
            variables = []
        if variables:
            actions += [str(Call(name="set_answer", args=(variables[0],))), "execute()"]
        answers: tuple[Any, ...] = ()
        finished = False
        for n, action in enumerate(actions, 1):
            obs, seconds, queries = rec.env(lambda a=action: session.run(a), backend=self.backend)
            llm_fields = call.step_fields() if n == 1 else {}
            rec.add(Step(n=n, kind="fact" if n == 1 else "action", action=action,
                         observation=obs.text, hint=obs.hint.code if obs.hint else None,
                         status=obs.status, accepted=obs.ok, error=obs.error, query=obs.query,
                         env_latency=seconds, kb_queries=queries, **llm_fields))
            if not obs.ok:
                break
            if action == "execute()":
                answers, finished = tuple(obs.answers or ()), True
        steps = tuple(rec.steps)
        trajectory = Trajectory(
            question=question, entities=entities, strategy=self.name, model=call.model,
            steps=steps, answers=answers, query=steps[-1].query if steps else "",
            program=str(session.program), finished=finished,
            stop_reason="execute" if finished else "rejected", usage=rec.finish_usage(),
            meta=dict(context.get("meta") or {}))
        return Result(trajectory=trajectory, program=session.program)
