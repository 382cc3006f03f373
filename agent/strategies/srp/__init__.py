"""SRP — Self-Reflective Planning (reference search, relation check, path planning, knowledge
retrieval along the path, judge and edit, chain-of-thought answer) over a pyql KB.

- :mod:`pyql.agent.strategies.srp.strategy`: :class:`SRP`, the strategy (``srp`` in ``pyql.strategies``);
- :mod:`pyql.agent.strategies.srp.labelled`: solved questions with their gold relation paths;
- :mod:`pyql.agent.strategies.srp.references`: the reference base (build, save, open, retrieve);
- :mod:`pyql.agent.strategies.srp.prompts`: the paper's prompts and the parsers of their replies;
- :mod:`pyql.agent.strategies.srp.pruning`: how far the judge's kept triples go along a path;
- its ``gold`` / ``noisy-gold:R`` stand-ins are the evaluation's
  (:mod:`pyql.agent.evaluation.standins.srp`);
- :mod:`pyql.agent.strategies.srp.metrics`: measures (strategies side by side on held-out questions:
  :mod:`pyql.agent.evaluation.compare`);
- :mod:`pyql.agent.commands.references`: ``pyql references build|show``.

``SRP`` and ``ReferenceBase`` are importable from here (loaded on first use, so that the CLI,
which imports :mod:`pyql.agent.commands.references`, stays light).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SRP", "ReferenceBase"]


def __getattr__(name: str) -> Any:
    if name == "SRP":
        from pyql.agent.strategies.srp.strategy import SRP

        return SRP
    if name == "ReferenceBase":
        from pyql.agent.strategies.srp.references import ReferenceBase

        return ReferenceBase
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
