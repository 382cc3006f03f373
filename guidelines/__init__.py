"""ERASER: environmental-feedback-based self-correction for pyql Sessions.

A guideline (:class:`Guideline`) reads the :class:`~pyql.feedback.Feedback` of one step (Python
interpreter, KB/DB result, reasoning memory) and returns a :class:`Hint` when the step is wrong.
The :class:`Registry` evaluates the installed guidelines in a documented order; the first hint
wins, becomes the observation, and the Session rolls the step back.

>>> from pyql import Session
>>> from pyql.kb import OxigraphKB
>>> s = Session(OxigraphKB(profile="freebase"), {"live365": "m.04rtjj"}, guidelines=True)
>>> obs = s.run("get_relation(?stream)")
>>> obs.hint.code, obs.hint.suggestions
('RM202', ('get_relation(m.04rtjj)',))

Guidelines are plugins: pyql's own packs and third-party ones register in the entry-point group
``pyql.guidelines``; see :mod:`pyql.guidelines.registry` and ``docs/guidelines.md``.
"""

from __future__ import annotations

from pyql.feedback import Hint
from pyql.guidelines.base import ANY, Guideline, Triggers, on
from pyql.guidelines.registry import (
    GuidelineCheckError,
    GuidelineLoadError,
    Registry,
    builtin_registry,
    default_registry,
)

__all__ = [
    "ANY",
    "Guideline",
    "GuidelineCheckError",
    "GuidelineLoadError",
    "Hint",
    "Registry",
    "Triggers",
    "builtin_registry",
    "default_registry",
    "on",
]
