"""WebQSP end to end: references built from one part of the test split, questions of the other
part answered by SRP (gold stand-in) on a small Freebase-profile KB built from their gold
programs: the topic, the chain of relations (an unnamed compound node between two hops) and
the gold answers, plus a distracting relation per topic."""

from __future__ import annotations

import pytest

from pyql.agent.evaluation.datasets import get_dataset
from pyql.agent.evaluation.metrics import score_item
from pyql.agent.evaluation.standins import build_stand_in
from pyql.agent.grounding.paths import path_from_program
from pyql.agent.strategies.srp.labelled import id_part, labelled_items
from pyql.agent.strategies.srp.metrics import srp_measures
from pyql.agent.strategies.srp.references import build_reference_base
from pyql.agent.strategies.srp.strategy import SRP
from pyql.kb import OxigraphKB
from pyql.program import Program

FB = "http://rdf.freebase.com/ns/"


def _chain_items(items, hops: int, count: int):
    out = []
    for item in items:
        if not item.program or id_part(item.id, 0.5) or len(item.answers) > 5:
            continue
        program = Program.parse(item.program)
        if {c.name for c in program} - {"add_fact", "add_filter", "set_answer", "execute"}:
            continue
        path = path_from_program(program, item.entities)
        facts = [c for c in program if c.name == "add_fact"]
        if len(path.constraints) == 1 and len(path.constraints[0].relations) == len(facts) == hops:
            out.append((item, path.constraints[0]))
        if len(out) == count:
            break
    return out


def _kb(chains) -> OxigraphKB:
    lines = []

    def name(node: str, label: str) -> None:
        lines.append(f'<{FB}{node}> <{FB}type.object.name> "{label}"@en .')

    for k, (item, constraint) in enumerate(chains):
        mention = constraint.entity
        topic = item.entities[mention]
        name(topic, mention)
        lines.append(f"<{FB}{topic}> <{FB}common.topic.notable_types> <{FB}m.fixture_type> .")
        node = topic
        for i, relation in enumerate(constraint.relations):
            inverse = relation.startswith("^")
            relation = relation.lstrip("^")
            last = i == len(constraint.relations) - 1
            targets = list(item.answers) if last else [f"m.fixture_cvt_{k}_{i}"]
            for target in targets:
                head, tail = (target, node) if inverse else (node, target)
                lines.append(f"<{FB}{head}> <{FB}{relation}> <{FB}{tail}> .")
                if last:
                    name(target, target)
            node = targets[0]
    name("m.fixture_type", "Topic")
    kb = OxigraphKB(profile="freebase")
    kb.load_bytes("\n".join(lines).encode(), format="ntriples")
    return kb


@pytest.mark.slow
def test_webqsp_questions_run_end_to_end_with_references_from_the_other_part(pyql_data) -> None:
    dataset = get_dataset("webqsp", pyql_data)
    items = dataset.items("test")
    chains = _chain_items(items, 1, 4) + _chain_items(items, 2, 3)
    assert len(chains) == 7
    part = [item for item in items if id_part(item.id, 0.5)]  # reference_part's, read once
    base = build_reference_base(labelled_items(part, dataset="webqsp"), datasets=["webqsp"],
                                split="test", fraction=0.5, source_ids=[i.id for i in part],
                                embedding="bm25", size=40, clusters=8, pool=400)
    base.check_disjoint(item.id for item, _ in chains)
    kb = _kb(chains)
    for item, constraint in chains:
        srp = SRP(build_stand_in("srp", "gold", item), kb, references=base)
        result = srp.run(item.question, item.entities, meta={"id": item.id})
        assert score_item("kbqa", item, result.answers)["hit@1"] == 1.0, item.id
        assert result.stop_reason == "have_answer" and srp.profile == "freebase"
        refs = result.steps[0]
        assert refs.kind == "references" and len(refs.data["references"]) == 4
        check = next(s for s in result.steps if s.kind == "relation_check")
        assert check.data["checked"][0] == constraint.relations[0].lstrip("^")
        measures = srp_measures(result.steps, item)
        assert measures["judge_correct"] == measures["judged"] == 1
