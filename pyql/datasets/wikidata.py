"""Wikidata KBQA question sets: WikiWebQuestions (WWQ) and the QALD JSON format (QALD-10,
QALD-9-plus, QALD-7), with their gold SPARQL and gold answers.

Every loader returns :class:`WikidataQuestion` values:

- :func:`load_wwq`: WikiWebQuestions (``wikidata/wwq/train.json`` of the data directory, see its
  SOURCE.md): ``id``, ``utterance``, ``sparql`` and, where the file has them, ``results`` (the
  gold query's bindings in the SPARQL JSON results format). The shipped train file has no
  ``results``: its questions' gold answers are the gold query's results on the KB a run uses
  (:attr:`WikidataQuestion.answers` is then empty and ``gold_from_kb`` is True).
- :func:`load_qald`: a QALD JSON file (``{"questions": [{"id", "question": [{"language",
  "string"}], "query": {"sparql"}, "answers": [SPARQL JSON results]}]}``): the question in the
  requested language (English by default; every language in ``questions``), the gold SPARQL
  and the gold answers: bindings of the first variable, or the ``boolean`` of an ASK.

Gold answers are written as pyql's answers are (:func:`answers_from_results`): a Wikidata IRI
by its short id (``Q42``), any other IRI in full, a literal by its lexical form, a boolean as
``true``/``false``. Their comparison (numbers by value, F1 over the sets) is
:func:`pyql.agent.evaluation.metrics.qald_scores`.

QALD-10 is a test set: read its format, never tune prompts, rules or conversions on it.

>>> answers_from_results({"head": {"vars": ["x"]}, "results": {"bindings": [
...     {"x": {"type": "uri", "value": "http://www.wikidata.org/entity/Q42"}},
...     {"x": {"type": "literal", "value": "42", "datatype":
...            "http://www.w3.org/2001/XMLSchema#integer"}}]}})
('Q42', '42')
>>> answers_from_results({"head": {}, "boolean": False})
('false',)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pyql.datasets.paths import default_data_dir
from pyql.errors import InputError
from pyql.profiles import WIKIDATA

__all__ = [
    "WikidataQuestion",
    "WikidataDataError",
    "WWQ_FILE",
    "load_wwq",
    "load_qald",
    "answers_from_results",
    "gold_program",
    "topic_entities",
]

#: WikiWebQuestions train, under the data directory
WWQ_FILE = Path("wikidata") / "wwq" / "train.json"


class WikidataDataError(InputError):
    """A question file that is not in the format its loader reads (``path`` says which)."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(message)


class WikidataQuestion(BaseModel):
    """One question over Wikidata."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    sparql: str
    #: gold answers (short ids, lexical forms, ``true``/``false``); empty with ``gold_from_kb``
    answers: tuple[str, ...] = ()
    #: the file has no gold answers: they are the gold query's results on the run's KB
    gold_from_kb: bool = False
    #: the gold is an ASK's boolean
    boolean: bool = False
    #: the question in every language the file gives (QALD), language -> text
    translations: dict[str, str] = Field(default_factory=dict)


def _term_text(binding: Mapping[str, Any]) -> str:
    value = str(binding.get("value", ""))
    if binding.get("type") == "uri":
        short = WIKIDATA.compact(value)
        return value if short.startswith("<") else short
    return value


def answers_from_results(results: Mapping[str, Any]) -> tuple[str, ...]:
    """The gold answers of a SPARQL JSON results object: the values of its first variable
    (the head's first, else the first of each row), or ``true``/``false`` for an ASK."""
    if "boolean" in results:
        return ("true" if results["boolean"] else "false",)
    head = (results.get("head") or {}).get("vars") or []
    rows = (results.get("results") or {}).get("bindings") or []
    out: dict[str, None] = {}
    for row in rows:
        if not isinstance(row, Mapping) or not row:
            continue
        var = head[0] if head and head[0] in row else next(iter(row))
        out[_term_text(row[var])] = None
    return tuple(out)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise WikidataDataError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})",
                                path=str(path)) from None


def load_wwq(data_dir: str | Path | None = None, *, path: str | Path | None = None
             ) -> list[WikidataQuestion]:
    """WikiWebQuestions train (or the WWQ-format file ``path``)."""
    file = Path(path) if path is not None else (
        Path(data_dir) if data_dir is not None else default_data_dir()) / WWQ_FILE
    rows = _read_json(file)
    if not isinstance(rows, list):
        raise WikidataDataError(f"{file}: expected a JSON array of questions", path=str(file))
    out = []
    for raw in rows:
        try:
            results = raw.get("results")
            if isinstance(results, list):  # rows alone
                results = {"results": {"bindings": results}}
            answers = answers_from_results(results) if isinstance(results, Mapping) else ()
            out.append(WikidataQuestion(
                id=str(raw["id"]), question=str(raw["utterance"]), sparql=str(raw["sparql"]),
                answers=answers, gold_from_kb=results is None,
                translations={"en": str(raw["utterance"])}))
        except (KeyError, AttributeError, TypeError) as exc:
            raise WikidataDataError(f"{file}: a question without {exc}", path=str(file)) from None
    return out


def load_qald(path: str | Path, *, language: str = "en") -> list[WikidataQuestion]:
    """The questions of a QALD JSON file (QALD-10, QALD-9-plus, QALD-7), in ``language``."""
    file = Path(path)
    data = _read_json(file)
    questions = data.get("questions") if isinstance(data, Mapping) else None
    if not isinstance(questions, list):
        raise WikidataDataError(f"{file}: expected a QALD object with a 'questions' array",
                                path=str(file))
    out = []
    for raw in questions:
        try:
            texts = {str(q["language"]): str(q["string"]) for q in raw.get("question") or ()
                     if q.get("string")}
            query = raw.get("query") or {}
            sparql = str(query.get("sparql") or "")
            answers: tuple[str, ...] = ()
            boolean = False
            for results in raw.get("answers") or ():
                boolean = boolean or "boolean" in results
                answers += tuple(a for a in answers_from_results(results) if a not in answers)
        except (AttributeError, TypeError, KeyError) as exc:
            raise WikidataDataError(f"{file}: question {raw.get('id')!r} is malformed ({exc})",
                                    path=str(file)) from None
        text = texts.get(language)
        if text is None:
            continue  # not asked in this language
        out.append(WikidataQuestion(id=str(raw.get("id")), question=text, sparql=sparql,
                                    answers=answers, boolean=boolean, translations=texts))
    return out


def gold_program(question: WikidataQuestion) -> tuple[str | None, str | None]:
    """The gold program text of a question (``from_sparql`` with the ``wikidata`` profile) and,
    when it does not convert, the construct in the way."""
    from pyql.sparql.from_sparql import UnsupportedQuery, from_sparql

    try:
        return str(from_sparql(question.sparql, WIKIDATA)), None
    except UnsupportedQuery as exc:
        return None, exc.construct


_ID = re.compile(r"[QP][1-9][0-9]*")


def topic_entities(program: str | None) -> dict[str, str]:
    """The entities a gold program starts from (its ``Q`` ids in node positions), id -> id:
    the gold topic entities of a question whose file gives none (WWQ)."""
    if program is None:
        return {}
    from pyql.program import Program

    out: dict[str, str] = {}
    for call in Program.parse(program):
        if call.name != "add_fact":
            continue
        for arg in (call.args[0], call.args[2]):
            text = str(arg)
            if _ID.fullmatch(text) and text.startswith("Q"):
                out.setdefault(text, text)
    return out
