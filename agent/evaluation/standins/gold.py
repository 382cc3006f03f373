"""The gold stand-in: a question's gold program replayed in QueryAgent's reply format.

:class:`GoldLLM` is QueryAgent's ``--llm gold`` (:mod:`pyql.agent.evaluation.standins.queryagent`)
and the LLM of a question a replay has no recording of (it fails when asked).

**Test hook.** ``$PYQL_EVAL_TEST_DELAY`` (seconds, for tests only) makes :class:`GoldLLM` sleep
that long before each reply, so a run lasts long enough to be killed half-way.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.llm.clients import LLMReply, Message, Stop, ToolCall, Tools
from pyql.agent.strategies.queryagent.paper_request import paper_step_number
from pyql.program import TOOLSETS, Call, Program

__all__ = ["GoldLLM", "TEST_DELAY_ENV", "no_program_reason"]

#: test-only: seconds GoldLLM sleeps before each reply
TEST_DELAY_ENV = "PYQL_EVAL_TEST_DELAY"

Sleep = Callable[[float], None]

def _test_delay() -> float:
    raw = os.environ.get(TEST_DELAY_ENV, "")
    if not raw:
        return 0.0
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise LLMSpecError(f"${TEST_DELAY_ENV} must be a number of seconds, not {raw!r}") from None


class GoldLLM:
    """Replays a gold program in the agent's reply format: one call per LLM call.

    The ``i``-th request gets the program's ``i``-th call, as ``Thought n : ...`` /
    ``Action n : call`` text (``mode="text"``) or as one tool call (``mode="tools"``; the default,
    ``None``, answers with a tool call when the request offers tools), where
    ``n`` is the step the agent is at. A call that gets a guideline hint is repeated once (a
    result-based hint is accepted when the action is repeated, see
    :class:`pyql.session.HintPolicy`); if the repeat is refused too, the next request gets the
    next call. A program that does not end with ``execute()`` gets one. When the program is
    exhausted (or there is none) the request raises
    :class:`~pyql.agent.errors.LLMScriptExhaustedError`. Replies carry no token usage (the agent's
    recorder estimates it with a counter that estimates: ``pyql eval --token-estimates``) and
    cost 0. Whether the last step got a hint is read from its record
    (:meth:`observe`, called by the agent after every step), never from the prompt's wording.

    >>> llm = GoldLLM("add_fact(Kismet, directed_by, ?d)\\nset_answer(?d)")
    >>> print(llm.complete([{"role": "user", "content": "q"}]).text)
    Thought 1 : Step 1 of 3 of the gold program.
    Action 1 : add_fact(Kismet, directed_by, ?d)
    """

    #: the agent need not fingerprint its prompts (see ``QueryAgent.run``)
    prompts_matter = False

    def __init__(
        self,
        program: str | Program | None,
        *,
        tools: str = "sparql",
        mode: str | None = None,
        delay: float | None = None,
        sleep: Sleep = time.sleep,
        model: str = "gold",
        reason: str = "",
    ) -> None:
        self.model = model
        self.tools = tools
        self.mode = mode
        self.reason = reason
        #: the program's calls as the agent writes them (text mode needs no parse: a gold
        #: program prints one call per line); parsed on the first tool-call reply
        self._text: list[str] = []
        self._calls: list[Call] | None = None
        if isinstance(program, Program) or (program is not None and mode == "tools"):
            parsed = program if isinstance(program, Program) else Program.parse(program, tools)
            self._set_calls(list(parsed))
        elif program is not None:
            self._text = [line.strip() for line in program.splitlines() if line.strip()]
            if not self._text or not self._text[-1].startswith("execute("):
                self._text.append("execute()")
        self.delay = _test_delay() if delay is None else delay
        self._sleep = sleep
        self._next = 0
        self._insisted = -1
        self._hinted = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GoldLLM({len(self._text)} calls, mode={self.mode!r})"

    def _set_calls(self, calls: list[Call]) -> None:
        if not calls or calls[-1].name != "execute":
            calls.append(Call(name="execute"))
        self._calls = calls
        self._text = [str(c) for c in calls]

    @property
    def calls(self) -> list[Call]:
        """The program's calls (``execute()`` added when it has none at the end)."""
        if self._calls is None:
            self._calls = [Program.parse(line, self.tools).calls[0] for line in self._text]
        return self._calls

    @property
    def remaining(self) -> int:
        return len(self._text) - self._next

    def observe(self, step: Any) -> None:
        """Read the record of the step just taken (:class:`~pyql.agent.trajectory.Step`)."""
        self._hinted = step.hint is not None

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None
                 ) -> LLMReply:
        if self.delay:
            self._sleep(self.delay)
        with self._lock:
            index = self._next
            if index > 0 and index - 1 != self._insisted and self._hinted:
                # the previous call got a hint: insist once, as a model sure of its step would
                # (a result-based hint is given once: pyql.session.HintPolicy)
                self._insisted = index - 1
                index -= 1
            elif index >= len(self._text):
                if self._text:
                    what = f"the gold program has {len(self._text)} calls"
                else:
                    what = self.reason or "there is no gold program"
                raise LLMScriptExhaustedError(f"{what}; call {index + 1} was asked",
                                              model=self.model)
            else:
                self._next += 1
        thought = f"Step {index + 1} of {len(self._text)} of the gold program."
        paper = paper_step_number(messages)
        if paper is not None and not tools:  # the original's request: continue "Thought n:"
            return LLMReply(text=f" {thought}\nAction {paper}: {self._text[index]}",
                            model=self.model, finish_reason="stop", cost=0.0)
        n = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        if tools and self.mode != "text":
            return LLMReply(text=f"Thought {n} : {thought}",
                            tool_calls=(self._tool_call(self.calls[index], n),),
                            model=self.model, finish_reason="tool_calls", cost=0.0)
        text = f"Thought {n} : {thought}\nAction {n} : {self._text[index]}"
        return LLMReply(text=text, model=self.model, finish_reason="stop", cost=0.0)

    def _tool_call(self, call: Call, n: int) -> ToolCall:
        toolset = TOOLSETS[self.tools]
        params = toolset[call.name].params if call.name in toolset else ()
        names = [p.name for p in params]
        names += [f"arg{i}" for i in range(len(names), len(call.args))]
        arguments = {name: str(arg) for name, arg in zip(names, call.args, strict=False)}
        return ToolCall(id=f"call_{n}", name=call.name,
                        arguments=json.dumps(arguments, ensure_ascii=False))


def no_program_reason(item: Any) -> str:
    """Why a stand-in has nothing to replay for ``item`` (its dataset's ``unsupported``)."""
    why = item.meta.get("unsupported")
    if isinstance(why, (list, tuple)):
        why = ", ".join(map(str, why))
    return "no gold program" + (f" (unsupported: {why})" if why else "")
