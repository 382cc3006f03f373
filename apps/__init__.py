"""The applications above the agent and the evaluation: ``mcp`` (the Session as an MCP server)
and ``web`` (``pyql serve``: live steps in the browser, the playground, runs and comparisons).
They may import anything below them; nothing below imports them."""
