"""Freebase dataset loaders (pyql.datasets.freebase) and their ``pyql eval`` registrations."""

from __future__ import annotations

import pytest

from pyql.agent.evaluation.datasets import DatasetError, dataset_names, get_dataset
from pyql.agent.evaluation.records import EvalItem
from pyql.datasets.freebase import (
    answer_names,
    gold_program,
    label_scores,
    load_cwq,
    load_grailqa,
    load_questions,
    load_webqsp,
    normalise_label,
)
from pyql.kb.oxigraph import OxigraphKB


def test_grailqa_fields(pyql_data) -> None:
    questions = load_grailqa(pyql_data)
    assert len(questions) == 500
    q = questions[0]
    assert q.answers == ("m.01lp8", "m.03_gx")
    assert q.answer_names == ("Christianity", "Judaism")
    assert q.entities == {"Abrahamic religions": "m.0f_h6", "Protestantism": "m.05sfs"}
    assert q.group == "i.i.d." and q.s_expression.startswith("(AND religion.religion")
    assert {x.group for x in questions} == {"i.i.d.", "compositional", "zero-shot"}


def test_grailqa_predicted_links(pyql_data) -> None:
    q = load_grailqa(pyql_data, entity_links="predicted")[0]
    assert q.entities["abrahamic faiths"] == "m.0f_h6"


def test_cwq_fields(pyql_data) -> None:
    q = load_cwq(pyql_data)[0]
    assert q.answers == () and q.answer_names == ("2014 World Series",)
    assert q.entities == {"Lou Seal": "m.03_dwn"}  # parsed from the Python-dict string
    assert q.group == "composition"
    with pytest.raises(ValueError):
        load_questions("cwq", pyql_data, entity_links="predicted")


def test_webqsp_gold_and_predicted_links(pyql_data) -> None:
    gold = next(q for q in load_webqsp(pyql_data) if q.id == "WebQTest-3")
    predicted = next(q for q in load_webqsp(pyql_data, entity_links="predicted")
                     if q.id == "WebQTest-3")
    assert predicted.entities == {"ken barlow": "m.015lwh", "coronation street": "m.01_2n"}
    assert gold.entities != predicted.entities
    assert gold.answer_sets


def test_gold_program_or_construct(pyql_data) -> None:
    programs = [gold_program(q) for q in load_webqsp(pyql_data)[:60]]
    assert any(p is not None for p, _ in programs)
    assert all((p is None) != (c is None) for p, c in programs)


def test_label_matching() -> None:
    assert normalise_label("Belmont  University!") == "belmontuniversity"
    assert label_scores([["Belmont University"]], "belmont university")["hit@1"] == 1.0
    wrong = label_scores([["Belmont University"], ["Vanderbilt"]], "Belmont University")
    assert wrong["hit@1"] == 1.0 and wrong["f1"] == pytest.approx(2 / 3) and wrong["em"] == 0.0
    assert label_scores([["2014 World Series"]], "World Series")["hit@1"] == 0.0
    assert label_scores([["2014 World Series"]], "World Series", loose=True)["hit@1"] == 1.0
    assert label_scores([], "x") == {"hit@1": 0.0, "f1": 0.0, "em": 0.0, "hit@1_top1": 0.0}
    # the first prediction wrong: any-answer Hit@1 1, top-1 Hit@1 0
    first_wrong = label_scores([["Vanderbilt"], ["Belmont University"]], "Belmont University")
    assert (first_wrong["hit@1"], first_wrong["hit@1_top1"]) == (1.0, 0.0)


FB = "http://rdf.freebase.com/ns/"
NAMES = f"""
<{FB}m.01> <{FB}type.object.name> "Belmont University"@en .
<{FB}m.01> <{FB}common.topic.alias> "Belmont"@en .
<{FB}m.01> <{FB}type.object.name> "Université Belmont"@fr .
<{FB}m.02> <{FB}type.object.name> "Vanderbilt University"@en .
"""


def test_answer_names_reads_names_and_aliases() -> None:
    kb = OxigraphKB(profile="freebase")
    kb.load_bytes(NAMES.encode(), format="ntriples")
    names = answer_names(kb, ["m.01", "m.03", "1961"])
    assert sorted(names[0]) == ["Belmont", "Belmont University"]
    assert names[1:] == [["m.03"], ["1961"]]


def test_registered_for_eval(pyql_data) -> None:
    assert {"grailqa", "grailqa-el", "cwq", "webqsp-el"} <= set(dataset_names())
    grail = get_dataset("grailqa", pyql_data).items(limit=3)
    assert all(isinstance(i, EvalItem) and i.program for i in grail)
    assert grail[0].meta["qtype"] == "i.i.d."
    linked = get_dataset("webqsp-el", pyql_data).items(limit=10)
    ken = next(i for i in linked if i.id == "WebQTest-3")
    assert ken.entities == {"ken barlow": "m.015lwh", "coronation street": "m.01_2n"}
    with pytest.raises(DatasetError):
        get_dataset("cwq", pyql_data).backend()


def test_cwq_scores_by_the_kbs_names(pyql_data, tmp_path) -> None:
    path = tmp_path / "names.nt"
    path.write_text(NAMES)
    cwq = get_dataset("cwq", pyql_data)
    cwq.backend(kb=str(path))
    item = EvalItem(id="q", question="?", answers=("belmont",))
    assert cwq.score(item, ["m.01"])["hit@1"] == 1.0
    assert cwq.score(item, ["m.02"])["hit@1"] == 0.0
    assert cwq.score(item, [])["f1"] == 0.0
