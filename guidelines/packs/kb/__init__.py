"""The built-in SPARQL/KB pack: ERASER's guidelines for the SPARQL toolset.

Covers every trigger the paper names (Table 9's ten, Tables 11-13, Figures 5-7) plus argument
and backend checks. Codes: ``PY2xx`` invalid arguments (Python feedback, often with the memory),
``RM2xx`` inconsistencies with the reasoning memory, ``KB2xx`` KB results, ``KB3xx`` backend
failures.
"""

from __future__ import annotations

from pyql.guidelines.base import Guideline
from pyql.guidelines.packs.kb.backend import BackendError, BackendTimeout, QueryRejected
from pyql.guidelines.packs.kb.calls import (
    AggregateArgument,
    ExecuteWithoutAnswer,
    FactInvalidNode,
    FactInvalidRelation,
    FilterFirstArgument,
    FilterOperator,
    FilterValue,
    SetAnswerNotVariable,
)
from pyql.guidelines.packs.kb.reasoning import (
    ExecuteMidPath,
    FactAlreadyInQuery,
    FactTwoNewVariables,
    FactTwoNewVariablesUnexplored,
    FilterBeforeGetRelation,
    GetRelationUnboundVariable,
    GetRelationUnknownNode,
    SetAnswerNoVariables,
    SetAnswerUnknownVariable,
    TimeConstraintUnboundVariable,
)
from pyql.guidelines.packs.kb.results import (
    AnswerIsCvt,
    EmptyAfterConstraint,
    EmptyAfterFilter,
    EmptyAnswer,
    EmptyFactListedRelation,
    EmptyFactUnexplored,
    EmptyFactUnlistedRelation,
    GetRelationEmpty,
)

__all__ = ["GUIDELINES"]

GUIDELINES: list[type[Guideline]] = [
    # Python feedback (with the memory for the options)
    FactInvalidNode,
    FactInvalidRelation,
    FilterOperator,
    FilterFirstArgument,
    FilterValue,
    AggregateArgument,
    SetAnswerNotVariable,
    ExecuteWithoutAnswer,
    # reasoning memory
    GetRelationUnknownNode,
    GetRelationUnboundVariable,
    FactTwoNewVariables,
    FactTwoNewVariablesUnexplored,
    FilterBeforeGetRelation,
    SetAnswerUnknownVariable,
    SetAnswerNoVariables,
    TimeConstraintUnboundVariable,
    ExecuteMidPath,
    FactAlreadyInQuery,
    # KB results
    EmptyFactUnlistedRelation,
    EmptyFactListedRelation,
    EmptyFactUnexplored,
    GetRelationEmpty,
    EmptyAfterFilter,
    EmptyAfterConstraint,
    AnswerIsCvt,
    EmptyAnswer,
    BackendError,
    BackendTimeout,
    QueryRejected,
]
