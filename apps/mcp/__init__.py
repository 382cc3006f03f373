"""pyql as an MCP server (``pyql mcp``): see :mod:`pyql.apps.mcp.server`. Needs the ``mcp`` extra."""

from __future__ import annotations

from pyql.apps.mcp.server import (
    DEFAULT_IDLE_TIMEOUT,
    MAX_ARGUMENT_CHARS,
    MAX_HISTORY,
    MAX_PROGRAM_CALLS,
    MAX_STRUCTURED_CHARS,
    MAX_TEXT_CHARS,
    SESSION_TOOLS,
    LlmConfig,
    PyqlMcp,
    SessionStore,
    observation_content,
)

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
