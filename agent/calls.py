"""A function call a model asked for: what a reply carries and a trajectory step records.

It sits below both the LLM clients (:mod:`pyql.agent.llm.clients`, which re-exports it) and the records
(:mod:`pyql.agent.trajectory`), so neither has to import the other to name it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["ToolCall"]


class ToolCall(BaseModel):
    """One function call requested by the model; ``arguments`` is the raw JSON text as sent."""

    model_config = ConfigDict(frozen=True)

    id: str = ""
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError when they are not a JSON object."""
        try:
            value = json.loads(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments of {self.name} are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(f"the arguments of {self.name} are not a JSON object: {self.arguments}")
        return value

    def to_message(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry of an assistant message."""
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}
