"""The original QueryAgent environment's checks that ERASER's built-in packs lack (opt-in).

The paper's code (GitHub ``cdhx/QueryAgent``) applied a different set of checks per dataset;
some refuse what other datasets' gold programs do (GraphQ's original refuses a fact between two
ids, WikiSQL's an ``add_condition`` before ``get_column``, which WikiSQL's gold programs never
call). They are therefore not in the default registry: add them for a dataset with
:func:`for_dataset`::

    from pyql.guidelines import Registry, builtin_registry
    from pyql.guidelines.packs.original import for_dataset

    registry = Registry.from_classes([*(type(g) for g in builtin_registry()),
                                      *for_dataset("webqsp")])

Codes ``PY4xx``/``RM4xx``/``DB4xx`` (and ``PY200``, which must win over ``PY202``), group
``original`` plus the dataset(s) whose original environment has the check.

Not a guideline: GraphQ's "It seems that ?x is CVT node" note, which the original appends to a
*successful* ``add_fact`` observation (``ag_src/graphq_src/wikienv_graphq.py`` lines 271-276);
a guideline's hint replaces the observation and rolls the step back, so a note on an accepted
step is the Session's observation's job.
"""

from __future__ import annotations

from pyql.guidelines.base import Guideline
from pyql.guidelines.packs.original.kb import (
    FactBothIds,
    FactHeadIsTail,
    FactOperatorRelation,
    FactUnlinkedId,
    FactYearTail,
    FilterVariableValue,
    TimeConstraintUnexplored,
    TimeConstraintUnlistedRelation,
    TypeTypeRelation,
)
from pyql.guidelines.packs.original.sql import (
    ConditionBeforeGetColumn,
    ConditionOperator,
    ConditionSameColumnTwice,
)

__all__ = ["GUIDELINES", "DATASETS", "for_dataset"]

GUIDELINES: list[type[Guideline]] = [
    FactOperatorRelation, FactUnlinkedId, FilterVariableValue, FactBothIds, TypeTypeRelation,
    FactYearTail, FactHeadIsTail, TimeConstraintUnexplored, TimeConstraintUnlistedRelation,
    ConditionOperator, ConditionBeforeGetColumn, ConditionSameColumnTwice,
]
#: the datasets whose original environment has checks here
DATASETS = ("graphq", "webqsp", "wikisql")


def for_dataset(dataset: str) -> list[type[Guideline]]:
    """The original checks of ``dataset`` (``graphq``, ``webqsp``, ``wikisql``).

    >>> [g.code for g in for_dataset("wikisql")]
    ['DB401', 'DB402', 'DB403']
    """
    if dataset not in DATASETS:
        raise ValueError(f"no original checks for {dataset!r}; choose one of {', '.join(DATASETS)}")
    return [g for g in GUIDELINES if dataset in g.groups]
