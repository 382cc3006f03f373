"""SPARQL query trees and their compiler."""

from pyql.sparql import query
from pyql.sparql.apply import apply_call, replay
from pyql.sparql.compile import compile_query, render_term
from pyql.sparql.query import *  # noqa: F403 - its __all__ is part of ours

__all__ = [
    *query.__all__,
    "compile_query",
    "apply_call",
    "replay",
    "render_term",
]
