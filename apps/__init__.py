"""The applications above the agent and the evaluation: ``mcp`` (the Session as an MCP server).
They may import anything below them; nothing below imports them."""
