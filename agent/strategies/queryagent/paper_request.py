"""The request the original QueryAgent sends (``--preset paper``), byte for byte.

The original code (GitHub ``cdhx/QueryAgent``, commit ``5364b3e``) asks the model with one user
message: the dataset's prompt, the question block, and the history as ``Thought n: ...`` /
``Action n: ...`` / ``Observation n: ...`` lines, ending in ``Thought N:``
(``ag_src/agent_utils/ag_utils.py:297-327``, ``get_dynamic_history``); stop
``\\nObservation N:``, ``max_tokens=256``, ``temperature=0`` (``ag_utils.py:128-146``, ``llm``).
A reply it cannot split into a thought and an action is followed, within the same step, by a
regeneration call: the prompt plus ``Thought N: <first line>\\nAction N:``, stop ``\\n``
(``GRAIL.py:59-84``; the other datasets' scripts alike).

Observations older than two steps are forgotten; the one two steps back is forgotten only when
it contains ``ERROR_IN_STEP`` and is longer than 250 characters — a marker no observation of the
original carries (its errors start ``ERROR_INFO:``), so as in the code it is always kept.

>>> head = paper_head("metaqa", "who directed [Kismet]", entities={"Kismet": "Kismet"},
...                   relations=["directed_by"])
>>> head.split("\\n")
['', 'Question: who directed [Kismet] ', 'Entity: Kismet', "Relation for the entity: ['directed_by']", '']
>>> from pyql.agent.trajectory import Step
>>> step = Step(n=1, thought="find him", action="relate(directed_by)", observation="['W']")
>>> paper_prompt("PROMPT", head, [step]).split("\\n")[-4:]
['Thought 1: find him', 'Action 1: relate(directed_by)', "Observation 1: ['W']", 'Thought 2:']
>>> parse_paper_reply(" the director\\nAction 2: execute()\\nmore", 2, "metaqa")
('the director', 'execute()\\nmore')
>>> parse_paper_reply("Thought 2 : x\\nAction 2 : execute()", 2, "grailqa") is None
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyql.agent.strategies.queryagent.presets import FORGOTTEN_OBSERVATION
from pyql.agent.trajectory import Step

__all__ = [
    "MAX_TOKENS",
    "PaperRequest",
    "first_line",
    "paper_head",
    "paper_prompt",
    "paper_request",
    "parse_paper_reply",
    "paper_step_number",
    "regeneration_request",
]

#: the original's ``max_tokens`` (ag_utils.py:141)
MAX_TOKENS = 256


@dataclass(frozen=True)
class PaperRequest:
    """What the original's ``llm()`` sends: one user message, the stop, max_tokens, temperature."""

    prompt: str
    stop: tuple[str, ...]
    temperature: float
    max_tokens: int = MAX_TOKENS

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [{"role": "user", "content": self.prompt}]

    def to_json(self) -> dict[str, Any]:
        """The request's fields as the fixtures keep them."""
        return {"messages": self.messages, "stop": list(self.stop),
                "max_tokens": self.max_tokens, "temperature": self.temperature}


def paper_head(family: str, question: str, *, entities: Mapping[str, str] | None = None,
               columns: Sequence[str] | None = None, relations: Sequence[str] = ()) -> str:
    """The question block after the prompt (ag_utils.py:299-310): MetaQA's ``Entity`` is the
    topic entity's name and ``Relation for the entity`` its relations; WikiSQL shows the table
    header; Freebase the entity linking as Python prints the dict."""
    if family == "metaqa":
        entity = next(iter(entities or {}), "")
        return (f"\nQuestion: {question} \nEntity: {entity}"
                f"\nRelation for the entity: {list(relations)!s}\n")
    if family == "wikisql":
        return f"\nQuestion: {question} \nTable Header: {list(columns or ())!s}\n"
    return f"\nQuestion: {question} \nEntity: {dict(entities or {})!s}\n"


def paper_prompt(base: str, head: str, turns: Sequence[Step]) -> str:
    """``get_dynamic_history``: the prompt, the question block, the steps taken as the
    original's history keeps them (``TAO_list``: thought, action, observation; older
    observations forgotten), then ``Thought N:``."""
    parts = [base, head]
    last = len(turns)
    for index, turn in enumerate(turns):
        obs = turn.observation
        if index < last - 2 or (index == last - 2 and "ERROR_IN_STEP" in obs and len(obs) > 250):
            obs = FORGOTTEN_OBSERVATION
        n = index + 1
        parts.append(f"Thought {n}: {turn.thought}\nAction {n}: {turn.action}\nObservation {n}: "
                     f"{obs}\n")
    parts.append(f"Thought {last + 1}:")
    return "".join(parts)


def paper_request(prompt: str, n: int, *, temperature: float) -> PaperRequest:
    """The step's call: stop before the model writes ``Observation n:`` itself."""
    return PaperRequest(prompt, (f"\nObservation {n}:",), temperature)


def regeneration_request(prompt: str, n: int, thought: str, *, temperature: float
                         ) -> PaperRequest:
    """The call that asks for the action again after a reply that did not parse."""
    return PaperRequest(f"{prompt}Thought {n}: {thought}\nAction {n}:", ("\n",), temperature)


def parse_paper_reply(text: str, n: int, family: str) -> tuple[str, str] | None:
    """(thought, action) as the original reads the reply of step ``n``, or None when it cannot
    (then it regenerates). ``text`` is the reply as the client returned it; the original strips
    it and folds blank lines first. WebQSP splits at any ``Action <digit>:``; the others at
    ``Action n:`` only; every dataset but MetaQA keeps the action's first line."""
    text = text.strip().replace("\n\n", "\n").strip()
    if family == "webqsp":
        parts = re.split(r"\nAction \d: ", text, maxsplit=1)
    else:
        parts = text.split(f"\nAction {n}: ")
    if len(parts) != 2:
        return None
    thought, action = parts
    if family != "metaqa":
        action = action.split("\n")[0]
    return thought, action


def first_line(text: str) -> str:
    """The thought the original keeps of a reply that did not parse."""
    return text.strip().replace("\n\n", "\n").strip().split("\n")[0]


_PAPER_TAIL = re.compile(r"\nThought (\d+):\Z")


def paper_step_number(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The step a request in the original's format asks for (its one message ends in
    ``Thought n:``), else None: how a stand-in (``--llm gold``) tells the two formats apart."""
    if len(messages) != 1:
        return None
    found = _PAPER_TAIL.search(str(messages[0].get("content") or ""))
    return int(found.group(1)) if found else None
