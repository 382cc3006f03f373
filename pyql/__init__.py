"""pyql: build SPARQL and SQL step by step, the way a semantic-parsing agent does.

>>> from pyql import Sparql
>>> q = Sparql().add_fact("m.0crbvqz", "meteorology.tropical_cyclone.category", "?c")
>>> q.set_answer("?c").answer
Var(name='c')
"""

from pyql.errors import PyqlError
from pyql.program import Call, Program
from pyql.session import Observation, Session
from pyql.sparql import Sparql
from pyql.terms import Entity, Literal, Relation, Var

__version__ = "0.2.0"

__all__ = [
    "Session",
    "Observation",
    "Program",
    "Call",
    "Sparql",
    "Sql",
    "Var",
    "Entity",
    "Literal",
    "Relation",
    "PyqlError",
    "__version__",
]


def __getattr__(name: str):
    if name == "Sql":  # the SQL side imports sqlglot; load it on first use
        from pyql.sql import Sql

        return Sql
    raise AttributeError(f"module 'pyql' has no attribute {name!r}")
