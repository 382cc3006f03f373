"""Reasoning paths as data, shared by the path strategies (Readi, SRP): the typed path and its
text format (:mod:`.path`), relation binding through the rankers (:mod:`.binding`), and
instantiation on a KB that yields a PyQL program or a structured stuck error
(:mod:`.instantiate`); the table variant (:mod:`.table`)."""

from __future__ import annotations

from pyql.agent.grounding.paths.binding import BINDING_TOP_K, RelationBinder, RelationVocabulary
from pyql.agent.grounding.paths.instantiate import (
    COMPOUND_NODE,
    MAX_CANDIDATES,
    ConstraintInstance,
    Hop,
    Instantiation,
    InstantiationBackendError,
    PathInstantiator,
    PathStuck,
    StuckReason,
    split_inverse,
)
from pyql.agent.grounding.paths.path import (
    ARROW,
    Constraint,
    PathFormatError,
    ReasoningPath,
    parse_chain,
    parse_path,
    path_from_program,
)

__all__ = [
    "ARROW",
    "BINDING_TOP_K",
    "COMPOUND_NODE",
    "MAX_CANDIDATES",
    "Constraint",
    "ConstraintInstance",
    "Hop",
    "Instantiation",
    "InstantiationBackendError",
    "PathFormatError",
    "PathInstantiator",
    "PathStuck",
    "ReasoningPath",
    "RelationBinder",
    "RelationVocabulary",
    "StuckReason",
    "parse_chain",
    "parse_path",
    "path_from_program",
    "split_inverse",
]
