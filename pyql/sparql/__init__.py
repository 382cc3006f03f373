"""SPARQL query trees and their compiler."""

from pyql.sparql.apply import apply_call, replay
from pyql.sparql.compile import compile_query, render_term
from pyql.sparql.query import (
    Aggregate,
    Extremum,
    Filter,
    Sparql,
    TimeConstraint,
    Triple,
    TypeConstraint,
)

__all__ = [
    "Sparql",
    "Triple",
    "TypeConstraint",
    "Filter",
    "TimeConstraint",
    "Extremum",
    "Aggregate",
    "compile_query",
    "apply_call",
    "replay",
    "render_term",
]
