"""GrailQA, CWQ and WebQSP-with-predicted-links for ``pyql eval``, over the loaders of
:mod:`pyql.datasets.freebase`; registered through the ``pyql.eval_datasets`` entry points.

- ``grailqa`` (split ``dev``: ToG's 500-question sample) and ``grailqa-el`` (the same questions
  with the Pangu/TIARA entity links): answers are mids (F1, Hit@1), meta ``qtype`` = the level
  (``i.i.d.``, ``compositional``, ``zero-shot``: the per-level breakdown of ``metrics.json``),
  ``function``;
- ``cwq`` (split ``test``: ToG's 1,500-question sample): the gold is an answer *label*; predicted
  mids are matched by their names and aliases in the run's KB
  (:func:`pyql.datasets.freebase.label_scores`); meta ``qtype`` = the compositionality type;
- ``webqsp-el``: ``webqsp`` with the linker's entities instead of the gold ones;
- ``graphq`` (split ``test``: GraphQuestions in Gu and Su's processed version, as the QueryAgent
  paper evaluates it; gold topic entities from the query graph) and ``graphq-el`` (Pangu's entity
  links, ``graphq_test.json``: the paper's setting); answers are mids (F1, the paper's metric),
  meta ``qtype`` = the function (``none``, ``count``, ``argmax``, ...). The question file is not
  in the shipped data (SOURCE.md); without it the split is absent and loading names the file.
  ``--preset paper`` runs QueryAgent with the original GraphQ prompt and settings
  (``paper-graphq``).

Gold programs come from the gold SPARQL (:func:`pyql.sparql.from_sparql.from_sparql`); where it
cannot be converted the item's ``program`` is None and meta ``unsupported`` names the construct.
All run on a Freebase KB given with ``--kb`` (a SPARQL endpoint, a ``pyql kb load`` store, an
RDF file).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from pyql.agent.evaluation.datasets import (
    FREEBASE_KB,
    DatasetError,
    KBQuestionsDataset,
    WebQSPDataset,
)
from pyql.agent.evaluation.records import EvalItem
from pyql.datasets.freebase import (
    FILES,
    FreebaseQuestion,
    answer_names,
    gold_program,
    label_scores,
    load_entity_links,
    load_questions,
)
from pyql.datasets.gold import answer_order

__all__ = ["GrailQADataset", "GrailQALinkedDataset", "CWQDataset", "WebQSPLinkedDataset",
           "GraphQDataset", "GraphQLinkedDataset"]


class _FreebaseDataset(KBQuestionsDataset):
    profile = "freebase"
    metric = "kbqa"
    primary = "f1"
    kb_needed = FREEBASE_KB
    source: ClassVar[str] = ""
    entity_links: ClassVar[str] = "gold"

    def splits(self) -> list[str]:
        path = self.data_dir / "freebase_questions" / FILES[self.source]
        return [self.default_split] if path.exists() else []

    def _questions(self, split: str | None) -> list[FreebaseQuestion]:
        self.split(split)
        try:
            return load_questions(self.source, self.data_dir,
                                  entity_links=self.entity_links)  # type: ignore[arg-type]
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"{self.name}: {exc}") from None

    def _item(self, question: Any) -> EvalItem:
        q: FreebaseQuestion = question
        program, construct = gold_program(q)
        meta: dict[str, Any] = {"qtype": q.group, **{k: v for k, v in q.meta.items()
                                                      if isinstance(v, (str, int, float))}}
        if construct is not None:
            meta["unsupported"] = construct
        if q.answer_sets:
            meta["answer_sets"] = [list(s) for s in q.answer_sets]
        return EvalItem(id=q.id, question=q.question, entities=q.entities,
                        answers=self._gold(q), program=program, tools="sparql", meta=meta)

    def _gold(self, q: FreebaseQuestion) -> tuple[Any, ...]:
        return q.answers


class GrailQADataset(_FreebaseDataset):
    name = "grailqa"
    source = "grailqa"
    default_split = "dev"
    description = "GrailQA (ToG's 500-question sample) over Freebase, gold topic entities"


class GrailQALinkedDataset(GrailQADataset):
    name = "grailqa-el"
    entity_links = "predicted"
    description = "GrailQA sample with the Pangu/TIARA entity links"


class GraphQDataset(_FreebaseDataset):
    name = "graphq"
    source = "graphq"
    default_split = "test"
    description = "GraphQuestions test (Gu and Su 2022's processed version), gold topic entities"

    def _questions(self, split: str | None) -> list[FreebaseQuestion]:
        folder = self.data_dir / "freebase_questions"
        if not (folder / FILES["graphq"]).exists():
            raise DatasetError(
                f"{self.name}: the question file {FILES['graphq']} is not in {folder}; only its "
                f"entity links ({FILES['graphq_el']}) ship with the data (SOURCE.md). Add the "
                "processed GraphQuestions test set (Gu and Su 2022) there")
        return super()._questions(split)

    def items(self, split: str | None = None, *, limit: int | None = None,
              sample: int | None = None, seed: int = 0) -> list[EvalItem]:
        items = super().items(split, limit=limit, sample=sample, seed=seed)
        # GraphQ has no level: its breakdown is by function (the question's aggregation)
        return [item.model_copy(update={"meta": {**item.meta,
                                                 "qtype": item.meta.get("function") or "none"}})
                for item in items]


class GraphQLinkedDataset(GraphQDataset):
    name = "graphq-el"
    entity_links = "predicted"
    description = "GraphQuestions test with Pangu's entity links (the QueryAgent paper's setting)"


class CWQDataset(_FreebaseDataset):
    name = "cwq"
    source = "cwq"
    default_split = "test"
    primary = "hit@1"
    description = "ComplexWebQuestions (ToG's 1,500-question sample); answers matched by label"

    def _gold(self, q: FreebaseQuestion) -> tuple[Any, ...]:
        return q.answer_names

    def score(self, item: EvalItem, predicted: Iterable[Any]) -> dict[str, float]:
        """Label matching: the predicted mids' names and aliases in the run's KB against the
        gold label (:func:`pyql.datasets.freebase.label_scores`)."""
        predicted = answer_order(predicted)  # the rank hit@1_top1 reads, as for mids
        kb = getattr(self, "_kb", None)
        if predicted and kb is None:
            raise DatasetError("cwq scores by the answers' names: open its backend first")
        names = answer_names(kb, predicted) if predicted else []
        return label_scores(names, [str(a) for a in item.answers])


class WebQSPLinkedDataset(WebQSPDataset):
    name = "webqsp-el"
    description = "WebQSP test with the Pangu/TIARA entity links (needs --kb)"

    def items(self, split: str | None = None, *, limit: int | None = None,
              sample: int | None = None, seed: int = 0) -> list[EvalItem]:
        links = load_entity_links(self.data_dir / "freebase_questions" / FILES["webqsp_el"])
        return [item.model_copy(update={"entities": links.get(item.id, {})})
                for item in super().items(split, limit=limit, sample=sample, seed=seed)]

