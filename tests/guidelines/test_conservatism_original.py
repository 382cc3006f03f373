"""Conservatism of the opt-in original checks (pyql.guidelines.packs.original) on gold programs.

- WebQSP, the authors' 1,597 programs (Python/memory guidelines, as in
  ``test_conservatism.py``: the fixture KB holds only a few questions' triples), with every
  SPARQL original check: no hint, once each ``add_time_constrain`` variable is explored with
  ``get_relation`` first, as the original environment requires (RM401). Without that step RM401
  fires on each of the 99 programs with a time constraint: the authors' programs never list the
  variable's relations.
- MetaQA dev gold programs (a sample of every hop count) on the full KB: no hint.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from pyql import Program, Session
from pyql.guidelines import Registry
from pyql.guidelines.packs.original import GUIDELINES
from tests.guidelines.support import builtin, run_steps

SPARQL_ORIGINAL = [g for g in GUIDELINES if "sparql" in g.groups]


def _webqsp(data: Path) -> list[dict[str, Any]]:
    path = data / "freebase_questions" / "WebQSP_test_processed.json.gz"
    if not path.exists():
        pytest.skip(f"{path} not found")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [q for q in json.load(fh) if q.get("PyQL") not in (None, "", "null")]


def _explored(program: list[str]) -> tuple[list[str], int]:
    """The program with get_relation(var) before each add_time_constrain(var, ...)."""
    out: list[str] = []
    added = 0
    for text in program:
        call = Program.parse(text).calls[0]
        if call.name == "add_time_constrain":
            out.append(f"get_relation({call.args[0]})")
            added += 1
        out.append(text)
    return out, added


def test_webqsp_author_programs_with_the_original_checks(pyql_data: Path) -> None:
    questions = _webqsp(pyql_data)
    assert len(questions) > 1500
    registry = Registry.from_classes(
        [type(g) for g in builtin() if "kb" not in g.needs] + SPARQL_ORIGINAL)
    fired: dict[str, tuple[str, str]] = {}
    unexplored: dict[str, set[str]] = {}
    constrained = 0
    for q in questions:
        gold = [str(c) for c in Program.parse(q["PyQL"])]
        program, added = _explored(gold)
        constrained += bool(added)
        for o in run_steps(program, kb="webqsp", entities=q["entity_linking"],
                           registry=registry):
            if o.hint is not None:
                fired.setdefault(o.hint.code, (q["qid"], o.action))
        if added:  # as the authors wrote it: RM401 and nothing else
            for o in run_steps(gold, kb="webqsp", entities=q["entity_linking"],
                               registry=registry):
                if o.hint is not None:
                    unexplored.setdefault(o.hint.code, set()).add(q["qid"])
    assert fired == {}
    assert constrained == 99 and {k: len(v) for k, v in unexplored.items()} == {"RM401": 99}
    print(f"WebQSP: {len(questions)} author programs, no hint from the original checks "
          f"({constrained} explored before add_time_constrain)")


def test_metaqa_gold_programs_with_the_original_checks(pyql_data: Path) -> None:
    from pyql.datasets import metaqa

    folder = pyql_data / "metaqa"
    if not (folder / "kb.txt").exists():
        pytest.skip("MetaQA data not found")
    kb = metaqa.load_kb(folder / "kb.txt")
    registry = Registry.from_classes([*(type(g) for g in builtin()), *SPARQL_ORIGINAL])
    steps = 0
    for hops in (1, 2, 3):
        qa = folder / f"{hops}-hop"
        items = metaqa.load_questions(qa / "qa_dev.txt", qa / "qa_dev_qtype.txt")
        for item in itertools.islice(items, 0, 4000, 100):
            session = Session(kb, {item.topic: item.topic}, guidelines=registry)
            for obs in session.run_program(metaqa.gold_program(item)):
                assert obs.hint is None, (item.question, obs.action, obs.hint.message)
                steps += 1
    assert registry.stats.total == 0 and steps > 400
