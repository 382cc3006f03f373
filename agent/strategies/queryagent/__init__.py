"""QueryAgent (Huang et al., ACL 2024): ReAct over a pyql Session, one DSL call per step.

``strategy`` (the loop, Algorithm 1), ``prompts`` (prompt profiles, tool documents, observations,
reading a reply), ``presets`` (the papers' settings per dataset) and ``paper_request`` (the
original code's request format, byte for byte).
"""

from pyql.agent.strategies.queryagent.strategy import QueryAgent, SessionFactory

__all__ = ["QueryAgent", "SessionFactory"]
