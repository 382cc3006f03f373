"""The one-call baseline's stand-in (``vanilla``): the gold program compiled, ``gold`` only."""

from __future__ import annotations

import pytest

from pyql.agent.errors import LLMScriptExhaustedError
from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.evaluation.records import EvalItem
from pyql.agent.evaluation.standins import build_stand_in
from pyql.agent.strategies.baselines.vanilla import Vanilla
from pyql.kb import OxigraphKB
from tests.agent.conftest import ENTITIES, GOLD, QUESTION


def test_gold_stand_in_compiles_the_gold_program(kb: OxigraphKB) -> None:
    program = ("get_relation(John Godey)\nadd_fact(?m, written_by, John Godey)\n"
               "add_fact(?m, directed_by, ?d)\nset_answer(?d)\nexecute()")
    item = EvalItem(id="1", question=QUESTION, entities=ENTITIES, answers=tuple(GOLD),
                    program=program)
    llm = build_stand_in("vanilla", "gold", item)
    result = Vanilla(llm, kb).run(QUESTION, ENTITIES)
    assert set(result.answers) == GOLD and "SELECT" in result.query
    with pytest.raises(LLMSpecError) as info:
        build_stand_in("vanilla", "noisy-gold:0.3", item)
    assert info.value.parameter == "kind" and info.value.strategy == "vanilla"
    none = build_stand_in("vanilla", "gold", item.model_copy(update={"program": None}))
    with pytest.raises(LLMScriptExhaustedError):
        Vanilla(none, kb).run(QUESTION, ENTITIES)
