"""pyql as an MCP server (``pyql mcp``): see :mod:`pyql.apps.mcp.server`. Needs the ``mcp`` extra.

The names below load :mod:`pyql.apps.mcp.server` (and the MCP SDK) on first use: registering the
``pyql mcp`` command, which every ``pyql`` invocation does, must not cost the SDK's import.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "MAX_ARGUMENT_CHARS",
    "MAX_HISTORY",
    "MAX_PROGRAM_CALLS",
    "MAX_STRUCTURED_CHARS",
    "MAX_TEXT_CHARS",
    "SESSION_TOOLS",
    "LlmConfig",
    "PyqlMcp",
    "SessionStore",
    "observation_content",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'pyql.apps.mcp' has no attribute {name!r}")
    value = getattr(import_module("pyql.apps.mcp.server"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
