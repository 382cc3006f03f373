"""WikiWebQuestions and the QALD JSON sets for ``pyql eval``, over the loaders of
:mod:`pyql.datasets.wikidata`; registered through the ``pyql.eval_datasets`` entry points.

- ``wwq`` (split ``train``: WikiWebQuestions train, 2,431 questions; the dev and test splits
  are held out of the shipped data): gold programs from the gold SPARQL
  (:func:`pyql.datasets.wikidata.gold_program`; meta ``unsupported`` names the construct where
  it does not convert), topic entities the gold query's ``Q`` ids. The shipped file has no gold
  answers, so they are **the gold query's results on the run's KB** (meta ``gold_from_kb``),
  computed once per question when it is scored: on a Wikidata endpoint, that is how WWQ is
  scored; on a synthesized slice (``pyql fidelity sparql wwq --slice DIR``) it is the answer
  set the converted program must reproduce.
- ``qald`` (split = the name of a QALD JSON file in ``wikidata/qald/`` of the data directory,
  ``qald_10_test`` for ``qald_10_test.json``): the English questions with their gold SPARQL and
  answers (booleans and counts included). QALD-10 is a test set: never tune on it.

Both score with the ``qald`` metric (:func:`pyql.agent.evaluation.metrics.qald_scores`: F1 over
answer sets, numbers by value, booleans as ``true``/``false``) and run on a Wikidata KB given
with ``--kb`` (``https://query.wikidata.org/sparql``, a mirror, a ``pyql kb load`` store, an RDF
file), opened with the ``wikidata`` profile.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from pyql.agent.evaluation.datasets import Backend, DatasetError, KBQuestionsDataset
from pyql.agent.evaluation.records import EvalItem
from pyql.datasets.wikidata import (
    WWQ_FILE,
    WikidataDataError,
    WikidataQuestion,
    gold_program,
    load_qald,
    load_wwq,
    topic_entities,
)
from pyql.errors import PyqlError

__all__ = ["WWQDataset", "QALDDataset", "WIKIDATA_KB"]

log = logging.getLogger(__name__)

WIKIDATA_KB = ("--kb: a Wikidata SPARQL endpoint (https://query.wikidata.org/sparql or a mirror), "
               "a 'pyql kb load' store of a Wikidata dump, or a synthesized slice "
               "('pyql fidelity sparql wwq --slice DIR')")


class _WikidataDataset(KBQuestionsDataset):
    profile = "wikidata"
    metric = "qald"
    primary = "f1"
    kb_needed = WIKIDATA_KB

    def _item(self, question: Any) -> EvalItem:
        q: WikidataQuestion = question
        program, construct = gold_program(q)
        meta: dict[str, Any] = {"gold_sparql": q.sparql}
        if construct is not None:
            meta["unsupported"] = construct
        if q.gold_from_kb:
            meta["gold_from_kb"] = True
        if q.boolean:
            meta["qtype"] = "boolean"
        return EvalItem(id=q.id, question=q.question, entities=topic_entities(program),
                        answers=q.answers, program=program, tools="sparql", meta=meta)

    def backend(self, *, split: str | None = None, kb: str | None = None,
                db: str | None = None) -> Backend:
        self._gold: dict[str, tuple[str, ...]] = {}
        return super().backend(split=split, kb=kb, db=db)

    def entities_for(self, item: EvalItem) -> EvalItem:
        """The topic entities named by their labels in the run's KB, read in one batch:
        ``{"Justin Bieber": "Q34086"}``, so that the entity list of a prompt shows each id with
        its label; an id the KB has no label for is named ``Q34086 (no label)``."""
        kb = getattr(self, "_kb", None)
        if kb is None or not item.entities or any(m != i for m, i in item.entities.items()):
            return item
        from pyql.session import Session

        profile = kb.profile
        try:
            entities = {kb_id: profile.entity(kb_id) for kb_id in item.entities.values()}
            labels = Session(kb).labels(list(entities.values()))  # one batched lookup
        except PyqlError as exc:
            log.info("%s: no labels for its entities: %s", item.id, exc)
            return item
        named: dict[str, str] = {}
        for kb_id, entity in entities.items():
            label = labels.get(entity.iri)
            if not label:
                named[f"{kb_id} (no label)"] = kb_id
            else:  # two entities of one label keep their ids apart
                named[label if label not in named else f"{label} ({kb_id})"] = kb_id
        return item.model_copy(update={"entities": named})

    def gold_answers(self, item: EvalItem) -> tuple[Any, ...]:
        """The item's gold answers: the file's, or the gold query's results on the run's KB
        (``gold_from_kb``), read once."""
        if not item.meta.get("gold_from_kb"):
            return item.answers
        kb = getattr(self, "_kb", None)
        if kb is None:
            raise DatasetError(f"{self.name}: the gold answers are read from the KB: open its "
                               "backend first")
        found = self._gold.get(item.id)
        if found is None:
            found = self._gold[item.id] = _run_gold(kb, str(item.meta["gold_sparql"]))
        return found

    def score(self, item: EvalItem, predicted: Iterable[Any]) -> dict[str, float]:
        from pyql.agent.evaluation.metrics import qald_scores

        return qald_scores(predicted, self.gold_answers(item))


def _run_gold(kb: Any, sparql: str) -> tuple[str, ...]:
    """The answers of a gold query on ``kb``, written as a Session writes answers (ids for
    entities, lexical forms for literals); ``true``/``false`` for an ASK."""
    from pyql.sparql.from_sparql import standardize
    from pyql.terms import Entity, Literal

    text = standardize(sparql)
    try:
        if _is_ask(text):
            return ("true" if kb.ask(text) else "false",)
        rows = kb.select(text).rows
    except PyqlError as exc:
        raise DatasetError(f"the gold query failed on the KB: {exc}") from None
    out: dict[str, None] = {}
    for row in rows:
        cell = row[0] if row else None
        if isinstance(cell, Entity):
            out[cell.short] = None
        elif isinstance(cell, Literal):
            out[cell.lexical] = None
    return tuple(out)


def _is_ask(text: str) -> bool:
    from pyql.sparql.from_sparql import parse_algebra

    try:
        return getattr(parse_algebra(text), "name", "") == "AskQuery"
    except PyqlError:
        return False


class WWQDataset(_WikidataDataset):
    name = "wwq"
    default_split = "train"
    description = ("WikiWebQuestions train over Wikidata; gold answers are the gold query's "
                   "results on --kb")

    def splits(self) -> list[str]:
        return ["train"] if (self.data_dir / WWQ_FILE).exists() else []

    def _questions(self, split: str | None) -> list[WikidataQuestion]:
        self.split(split)
        try:
            return load_wwq(self.data_dir)
        except (OSError, WikidataDataError) as exc:
            raise DatasetError(f"{self.name}: {exc}") from None


class QALDDataset(_WikidataDataset):
    name = "qald"
    default_split = "qald_10_test"
    description = "a QALD JSON file (QALD-10, QALD-9-plus, QALD-7) over Wikidata, English"
    FOLDER: ClassVar[Path] = Path("wikidata") / "qald"

    def splits(self) -> list[str]:
        folder = self.data_dir / self.FOLDER
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    def _questions(self, split: str | None) -> list[WikidataQuestion]:
        split = self.split(split)
        try:
            return load_qald(self.data_dir / self.FOLDER / f"{split}.json")
        except (OSError, WikidataDataError) as exc:
            raise DatasetError(f"{self.name}: {exc}") from None
