"""Readi: reasoning-path generation, instantiation and editing (see :mod:`.strategy`)."""

from __future__ import annotations

from pyql.agent.strategies.readi.strategy import InitialPath, Readi

__all__ = ["InitialPath", "Readi"]
