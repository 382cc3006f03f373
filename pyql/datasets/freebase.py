"""Freebase KBQA question sets: GrailQA, ComplexWebQuestions (CWQ) and WebQSP, with gold or
predicted entity links, and their answer matching.

The files are in ``freebase_questions`` of the data directory (its SOURCE.md says where each
comes from). Every loader returns :class:`FreebaseQuestion` values:

- :func:`load_grailqa`: ToG's GrailQA sample (``grailqa_sample.json.gz``): answers are mids (or
  values for the few ``Value`` answers) with their names, topic entities, gold SPARQL,
  s-expression, ``group`` = the generalization level (``i.i.d.``, ``compositional``,
  ``zero-shot``), meta ``function`` (``none``, ``count``, ``argmax``, ``<=`` ...);
- :func:`load_cwq`: ToG's CWQ sample (``cwq_sample.json.gz``): one answer *label*, the topic
  entities, gold SPARQL, ``group`` = the compositionality type (``composition``,
  ``conjunction``, ``comparative``, ``superlative``);
- :func:`load_webqsp`: WebQSP test (``WebQSP_test_processed.json.gz``): answers are mids,
  ``answer_sets`` the alternative gold sets (``different_answer``), gold SPARQL;
- :func:`load_graphq`: GraphQuestions test in the processed version of Gu and Su (2022) that the
  QueryAgent paper evaluates (``graphquestions_v1_fb15_test_091420.json``, GrailQA's format:
  answers are mids or values, gold SPARQL and topic entities in ``graph_query``), meta
  ``function`` and ``num_edge``. The data directory has only its entity links
  (``graphq_test.json``, Pangu's); the question file must be added to ``freebase_questions``
  (SOURCE.md: it is absent from the QueryAgent snapshot), else loading it is a
  ``FileNotFoundError`` naming it.

``entity_links="gold"`` gives each question the dataset's own topic entities (label -> mid);
``"predicted"`` the links of the entity linker the papers used (Pangu/TIARA:
``webqsp_test_el.json``, ``grail_pangu_tiara.json.gz``; mention -> the linker's first mid).
CWQ has gold links only.

**Metrics** as the papers report them: over mids, :func:`pyql.agent.evaluation.metrics.kbqa_scores`
(F1 and Hit@1, all answers of a set tied first). CWQ's gold is a label, so predicted mids are
matched by name (:func:`label_scores`): each predicted mid's English ``type.object.name`` and
``common.topic.alias`` values are read from the KB (:func:`answer_names`), and a prediction is
correct when one of them equals the gold label after :func:`normalise_label` (case-folded,
whitespace and punctuation removed). That is ToG's and Readi's ``exact_match`` made strict:
they also accept a gold label *contained in* the answer text (``loose=True`` does the same),
which credits "2014 World Series" for "World Series"; literal answers are matched by their text.

>>> normalise_label("  The 2014 World-Series ")
'the2014worldseries'
>>> label_scores([["Belmont University", "Belmont"]], "belmont university")
{'hit@1': 1.0, 'f1': 1.0, 'em': 1.0, 'hit@1_top1': 1.0}
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pyql.datasets.files import question
from pyql.datasets.paths import default_data_dir
from pyql.registry import UnknownNameError

__all__ = [
    "FreebaseQuestion",
    "EntityLinks",
    "FILES",
    "load_grailqa",
    "load_cwq",
    "load_webqsp",
    "load_graphq",
    "load_questions",
    "load_entity_links",
    "gold_program",
    "normalise_label",
    "answer_names",
    "label_scores",
]

EntityLinks = Literal["gold", "predicted"]

#: the files of ``freebase_questions`` each loader reads
FILES: dict[str, str] = {
    "grailqa": "grailqa_sample.json.gz",
    "cwq": "cwq_sample.json.gz",
    "webqsp": "WebQSP_test_processed.json.gz",
    "webqsp_el": "webqsp_test_el.json",
    "grailqa_el": "grail_pangu_tiara.json.gz",
    "graphq": "graphquestions_v1_fb15_test_091420.json",
    "graphq_el": "graphq_test.json",
}

_NAME = "http://rdf.freebase.com/ns/type.object.name"
_ALIAS = "http://rdf.freebase.com/ns/common.topic.alias"


class FreebaseQuestion(BaseModel):
    """One question of a Freebase dataset."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    id: str
    question: str
    #: gold answers: mids (or values) for GrailQA and WebQSP; empty for CWQ (see ``answer_names``)
    answers: tuple[str, ...] = ()
    #: the answers' names (GrailQA), or CWQ's gold answer label
    answer_names: tuple[str, ...] = ()
    #: alternative gold answer sets (WebQSP's ``different_answer``)
    answer_sets: tuple[tuple[str, ...], ...] = ()
    #: mention or label -> mid (gold topic entities, or the linker's links)
    entities: dict[str, str] = Field(default_factory=dict)
    sparql: str = ""
    s_expression: str | None = None
    #: GrailQA level / CWQ compositionality type ("" for WebQSP)
    group: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)


def _folder(data_dir: str | Path | None) -> Path:
    return (Path(data_dir) if data_dir is not None else default_data_dir()) / "freebase_questions"


def _json(path: Path) -> Any:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def load_entity_links(path: str | Path) -> dict[str, dict[str, str]]:
    """An entity-linking file ``{qid: {mention: [mid, ...]}}`` as ``{qid: {mention: mid}}`` (the
    linker's first candidate; mentions without one are dropped)."""
    raw = _json(Path(path))
    return {str(qid): {str(m): str(mids[0]) for m, mids in links.items() if mids}
            for qid, links in raw.items()}


def _links(
    dataset: str, data_dir: str | Path | None, entity_links: EntityLinks
) -> dict[str, dict[str, str]] | None:
    if entity_links == "gold":
        return None
    if entity_links != "predicted":
        raise ValueError(f"entity_links must be 'gold' or 'predicted', not {entity_links!r}")
    key = {"grailqa": "grailqa_el", "webqsp": "webqsp_el", "graphq": "graphq_el"}.get(dataset)
    if key is None:
        raise ValueError(f"{dataset} has no predicted entity links")
    return load_entity_links(_folder(data_dir) / FILES[key])


def _linked_records(
    dataset: str, data_dir: str | Path | None, entity_links: EntityLinks,
    gold: Callable[[dict[str, Any]], dict[str, str]],
) -> Iterator[tuple[dict[str, Any], str, dict[str, str]]]:
    """Each record of ``dataset`` (GrailQA or WebQSP) with its id and its entity links: the gold
    ones (``gold(record)``) or the linker's."""
    links = _links(dataset, data_dir, entity_links)
    for raw in _json(_folder(data_dir) / FILES[dataset]):
        qid = str(raw["qid"])
        yield raw, qid, gold(raw) if links is None else links.get(qid, {})


def _grailqa_topic(raw: dict[str, Any]) -> dict[str, str]:
    return {str(name): str(mid) for mid, name in (raw.get("topic_entity") or {}).items()}


def _graphq_topic(raw: dict[str, Any]) -> dict[str, str]:
    """The entity nodes of the gold query graph, friendly name -> mid (as the original reads
    them: GRAPHQ.py ``golden_el``)."""
    nodes = (raw.get("graph_query") or {}).get("nodes") or ()
    return {str(n["friendly_name"]).strip(): str(n["id"]) for n in nodes
            if n.get("node_type") == "entity"}


def _webqsp_topic(raw: dict[str, Any]) -> dict[str, str]:
    return {str(label): str(mid) for label, mid in (raw.get("entity_linking") or {}).items()}


def load_grailqa(
    data_dir: str | Path | None = None, *, entity_links: EntityLinks = "gold"
) -> list[FreebaseQuestion]:
    """GrailQA questions (see the module docstring)."""
    out = []
    for raw, qid, linked in _linked_records("grailqa", data_dir, entity_links, _grailqa_topic):
        answers = tuple(str(a["answer_argument"]) for a in raw.get("answer") or ())
        names = tuple(str(a.get("entity_name") or a["answer_argument"]) for a in raw.get("answer") or ())
        out.append(FreebaseQuestion(
            dataset="grailqa", id=qid, question=question(raw["question"], FILES["grailqa"], None), answers=answers,
            answer_names=names, entities=linked,
            sparql=raw.get("sparql_query") or "", s_expression=raw.get("s_expression"),
            group=raw.get("level") or "",
            meta={"function": raw.get("function"), "domains": list(raw.get("domains") or ()),
                  "num_edge": raw.get("num_edge")},
        ))
    return out


def load_graphq(
    data_dir: str | Path | None = None, *, entity_links: EntityLinks = "gold"
) -> list[FreebaseQuestion]:
    """GraphQuestions test questions (see the module docstring)."""
    path = _folder(data_dir) / FILES["graphq"]
    if not path.exists():
        raise FileNotFoundError(
            f"the GraphQuestions question file {FILES['graphq']} is not in {path.parent} (only "
            f"its entity links, {FILES['graphq_el']}, ship with the data); put the processed "
            "test set of Gu and Su (2022) there")
    out = []
    for raw, qid, linked in _linked_records("graphq", data_dir, entity_links, _graphq_topic):
        answers = tuple(str(a["answer_argument"]) for a in raw.get("answer") or ())
        names = tuple(str(a.get("entity_name") or a["answer_argument"])
                      for a in raw.get("answer") or ())
        out.append(FreebaseQuestion(
            dataset="graphq", id=qid, question=question(raw["question"], FILES["graphq"], None), answers=answers,
            answer_names=names, entities=linked, sparql=raw.get("sparql_query") or "",
            s_expression=raw.get("s_expression"),
            meta={"function": raw.get("function"), "num_edge": raw.get("num_edge")},
        ))
    return out


def _topic(raw: Any) -> dict[str, str]:
    """CWQ's ``topic_entity``: a Python-dict *string* ``"{'m.x': 'label'}"``, as label -> mid."""
    value = ast.literal_eval(raw) if isinstance(raw, str) else (raw or {})
    if not isinstance(value, dict):
        raise ValueError(f"topic_entity is not a mapping: {raw!r}")
    return {str(label): str(mid) for mid, label in value.items()}


def load_cwq(data_dir: str | Path | None = None) -> list[FreebaseQuestion]:
    """CWQ questions (see the module docstring); gold entity links only."""
    out = []
    for raw in _json(_folder(data_dir) / FILES["cwq"]):
        label = raw.get("answer")
        out.append(FreebaseQuestion(
            dataset="cwq", id=str(raw["ID"]), question=question(raw["question"], FILES["cwq"], None),
            answer_names=(str(label),) if label not in (None, "") else (),
            entities=_topic(raw.get("topic_entity")), sparql=raw.get("sparql") or "",
            group=raw.get("compositionality_type") or "",
            meta={"webqsp_id": raw.get("webqsp_ID")},
        ))
    return out


def load_webqsp(
    data_dir: str | Path | None = None, *, entity_links: EntityLinks = "gold"
) -> list[FreebaseQuestion]:
    """WebQSP test questions (see the module docstring)."""
    out = []
    for raw, qid, linked in _linked_records("webqsp", data_dir, entity_links, _webqsp_topic):
        out.append(FreebaseQuestion(
            dataset="webqsp", id=qid, question=question(raw["question"], FILES["webqsp"], None),
            answers=tuple(str(a) for a in raw.get("answer") or ()),
            answer_sets=tuple(tuple(str(a) for a in s) for s in raw.get("different_answer") or ()),
            entities=linked,
            sparql=raw.get("sparql_query") or "",
            meta={"pyql": raw.get("PyQL") if raw.get("PyQL") not in (None, "null") else None},
        ))
    return out


def load_questions(
    dataset: str, data_dir: str | Path | None = None, *, entity_links: EntityLinks = "gold"
) -> list[FreebaseQuestion]:
    """The questions of ``grailqa``, ``cwq``, ``webqsp`` or ``graphq``."""
    if dataset == "grailqa":
        return load_grailqa(data_dir, entity_links=entity_links)
    if dataset == "webqsp":
        return load_webqsp(data_dir, entity_links=entity_links)
    if dataset == "graphq":
        return load_graphq(data_dir, entity_links=entity_links)
    if dataset == "cwq":
        if entity_links != "gold":
            raise ValueError("cwq has no predicted entity links")
        return load_cwq(data_dir)
    raise UnknownNameError("Freebase dataset", dataset, ("grailqa", "cwq", "webqsp", "graphq"))


def gold_program(question: FreebaseQuestion) -> tuple[str | None, str | None]:
    """The gold program (text, ending in ``execute()``) from the gold SPARQL, or None and the
    construct in the way (:func:`pyql.sparql.from_sparql.from_sparql`)."""
    from pyql.sparql.from_sparql import UnsupportedQuery, from_sparql

    try:
        return str(from_sparql(question.sparql)), None
    except UnsupportedQuery as exc:
        return None, exc.construct


# -- label matching (CWQ) ------------------------------------------------------------------------
def normalise_label(text: str) -> str:
    """Case-folded, accents kept, whitespace and punctuation removed."""
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def answer_names(kb: Any, answers: Iterable[str]) -> list[list[str]]:
    """For each predicted answer: its English names and aliases in ``kb`` (a mid), or itself
    (a literal value, or a mid without a name)."""
    from pyql.profiles import get_profile
    from pyql.sparql import Sparql

    profile = get_profile("freebase")
    out = []
    for answer in answers:
        names: list[str] = []
        if re.fullmatch(profile.entity_id_pattern or "", str(answer)):
            for relation in (_NAME, _ALIAS):
                query = Sparql(profile=profile).add_fact(str(answer), f"<{relation}>", "?name")
                rows = kb.select(query.set_answer("?name").to_sparql()).rows
                names += [getattr(row[0], "lexical", str(row[0])) for row in rows]
        out.append(names or [str(answer)])
    return out


def label_scores(
    predicted_names: Sequence[Sequence[str]], gold: str | Sequence[str], *, loose: bool = False
) -> dict[str, float]:
    """Hit@1 (any answer; ``hit@1_top1``: the first one), F1 and exact match of predicted
    answers (each given by its names, in rank order) against gold labels: a prediction is right
    when one of its names matches a gold label
    (:func:`normalise_label` equal; with ``loose``, also one containing the other, as ToG)."""
    golds = [normalise_label(g) for g in ([gold] if isinstance(gold, str) else gold)]
    golds = [g for g in golds if g]

    def match(name: str) -> str | None:
        n = normalise_label(name)
        for g in golds:
            if n == g or (loose and n and (g in n or n in g)):
                return g
        return None

    hits = [next((m for m in map(match, names) if m is not None), None) for names in predicted_names]
    right = [h for h in hits if h is not None]
    if not predicted_names or not golds:
        f1 = 1.0 if not predicted_names and not golds else 0.0
        return {"hit@1": f1, "f1": f1, "em": f1, "hit@1_top1": f1}
    precision = len(right) / len(predicted_names)
    recall = len(set(right)) / len(golds)
    f1 = 2 * precision * recall / (precision + recall) if right else 0.0
    return {"hit@1": 1.0 if right else 0.0, "f1": f1, "em": 1.0 if precision == recall == 1 else 0.0,
            "hit@1_top1": 1.0 if hits[0] is not None else 0.0}
