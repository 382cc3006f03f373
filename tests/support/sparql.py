"""SPARQL text around a term, for tests that check pyql writes valid SPARQL."""

from __future__ import annotations

from pyql.terms import Relation, Var


def embed(term: object) -> str:
    """A query with ``term`` in a position where its kind is allowed."""
    if isinstance(term, Relation):
        return f"SELECT * WHERE {{ ?s {term} ?o }}"
    if isinstance(term, Var):
        return f"SELECT * WHERE {{ ?s ?p {term} }}"
    return f"SELECT * WHERE {{ ?s ?p {term} . FILTER (?s != {term}) }}"
