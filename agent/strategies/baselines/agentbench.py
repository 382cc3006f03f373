"""The AgentBench baseline of the QueryAgent paper (Table 6): function calling over the KB,
without and with ERASER.

AgentBench (Liu et al., ICLR 2024; GitHub ``THUDM/AgentBench``, task ``knowledgegraph``) models
KBQA as a multi-turn conversation in which the model calls one KB tool per turn, sees its result
and calls the next, until it names the variable that answers (at most 15 actions). The QueryAgent
paper reproduces it "with the same entity linking result as ours" and adds ERASER to it
(Table 6: 30.5 -> 38.5 F1 on GrailQA, 25.1 -> 35.6 on GraphQ, 26.4 -> 32.0 on WebQSP), but gives
neither its prompt nor its code.

That loop is QueryAgent's ``tools`` mode, so the baseline is a configuration of
:class:`~pyql.agent.strategies.queryagent.strategy.QueryAgent`, not a copy of it:

- ``agentbench``: native tool calls (``mode="tools"``), ERASER off, 15 steps;
- ``agentbench-eraser``: the same with ERASER on (Table 6's "w ERASER");
- the prompt (``prompts/agentbench_task.md``) is AgentBench's instruction (``task.py``
  ``INSTRUCTIONS``) in its own words — the agent framing, "ONE action at a time!!", "at most 15
  actions", judging whether a variable is the final answer — with its seven-tool catalogue
  replaced by the tool schemas, and ``Final Answer: #id`` by ``set_answer`` and ``execute()``;
  the one-shot example is the dataset profile's (in the ``Thought``/``Action`` layout
  AgentBench's example also uses).

What differs from AgentBench itself, and stays so: the tools are PyQL's (``get_relation``,
``add_fact``, ``add_max``/``add_min``, ``add_count``, ``add_filter``, ``set_answer``,
``execute``), not AgentBench's ``get_relations``/``get_neighbors``/``intersection``/
``get_attributes``/``argmax``/``argmin``/``count`` over numbered variables; the instruction is
a system message, not AgentBench's first user turn answered by "I've understood your
instruction, start please."; the relation lists are ranked and cut at ``top_k`` like QueryAgent's.
The options of ``queryagent`` apply (``--option max_steps=...``, ``--ranker``);
``--option mode=text`` gives the text-mode variant.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

import jinja2

from pyql.agent.llm.clients import LLM
from pyql.agent.strategies.queryagent.prompts import PromptProfile, read_prompt, system_prompt
from pyql.agent.strategies.queryagent.strategy import QueryAgent
from pyql.agent.strategy import StrategyConfig
from pyql.schemas import tool_schemas

__all__ = ["AGENTBENCH_ROUNDS", "AgentBench", "AgentBenchEraser", "agentbench_profile"]

#: AgentBench's cap on actions per question (knowledgegraph ``task.py``: ``round=15``)
AGENTBENCH_ROUNDS = 15

_WORDS = {
    "sparql": {"store": "knowledge base", "short": "KB",
               "guide": "Start from the topic entities: look up the relations connected to an "
                        "entity or a variable before you use one, then add the facts that lead "
                        "to the answer, one at a time; each result tells you which values the "
                        "variables hold so far.",
               "finish": "set that variable as the answer with set_answer, then call execute() "
                         "to return it."},
    "sql": {"store": "database table", "short": "table",
            "guide": "Look at the values of a column before you constrain it, then add the "
                     "conditions that select the rows of the answer, one at a time.",
            "finish": "set the answer column with set_answer, then call execute() to return "
                      "it."},
}


@cache
def _task(tools: str, max_steps: int) -> str:
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False  # noqa: S701
                                  ).from_string(read_prompt("agentbench_task.md"))
    return template.render(max_steps=max_steps, **_WORDS[tools]).strip()


def agentbench_profile(base: PromptProfile, max_steps: int = AGENTBENCH_ROUNDS) -> PromptProfile:
    """``base`` (a dataset's prompt profile: its tools and one-shot example) with AgentBench's
    instruction as the task. A verbatim paper prompt has no example of its own to reuse."""
    if base.verbatim:
        raise ValueError(f"the {base.name!r} prompt is an original paper prompt; AgentBench "
                         "needs a profile with a task and an example (freebase, metaqa, ...)")
    return replace(base, name=f"agentbench-{base.name}", task=_task(base.tools, max_steps),
                   description=f"AgentBench's instruction over the {base.name} tools",
                   verbatim="")


class AgentBench(QueryAgent):
    """Table 6's "AgentBench" row: tool calling, ERASER off (module docstring)."""

    name = "agentbench"
    #: ERASER on by default (``agentbench-eraser``)
    eraser = False

    def __init__(self, llm: LLM, backend: Any, **kwargs: Any) -> None:
        kwargs.setdefault("mode", "tools")
        kwargs.setdefault("guidelines", True if self.eraser else None)
        if kwargs.get("max_steps") is None:
            kwargs["max_steps"] = AGENTBENCH_ROUNDS
        if kwargs.get("preset") not in (None, "default"):
            raise ValueError(f"{self.name} is its own setting; it has no {kwargs['preset']!r} "
                             "preset")
        super().__init__(llm, backend, **kwargs)
        self.profile = agentbench_profile(self.profile, self.max_steps)
        self.system = system_prompt(self.profile, self.mode)
        self.tools = (tool_schemas(self.profile.signatures, self.profile)
                      if self.mode == "tools" else None)

    @classmethod
    def from_config(cls, llm: LLM, backend: Any, config: StrategyConfig) -> QueryAgent:
        """As QueryAgent's, except: tools mode and ERASER as the class says (and only when
        ``config.guidelines`` is on) unless ``options`` say otherwise (``mode``,
        ``guidelines``), AgentBench's 15 steps unless ``max_steps`` is given, and no preset (the
        baseline is its own setting)."""
        options = dict(config.typed_options(ints=("max_steps", "top_k"), flags=("guidelines",)))
        options.setdefault("mode", "tools")
        # ``config.guidelines`` is off on the ERASER-off side of ``--ablation``: there
        # ``agentbench-eraser`` is Table 6's first row, so one ablation gives both rows
        options.setdefault("guidelines", True if cls.eraser and config.guidelines else None)
        options["guidelines"] = True if options["guidelines"] else None
        config = replace(config, preset=None, options=options)
        return super().from_config(llm, backend, config)


class AgentBenchEraser(AgentBench):
    """Table 6's "w ERASER" row: :class:`AgentBench` with ERASER's guidelines on every step."""

    name = "agentbench-eraser"
    eraser = True
