"""Readi's prompts (appendix F): generation, editing and answering, per profile.

The instructions and demonstrations are package data (``prompts/readi_*.md``); this module
builds the messages and reads the answers. Demonstrations are few-shot examples in the system
message; the user message repeats their layout for the question at hand and ends where the model
continues (``Thought:``, ``Corrected Path``, ``A:``), which is also how :func:`task_of` tells the
three requests apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, Literal

from pyql.registry import lookup

__all__ = [
    "PROFILES",
    "Task",
    "answer_messages",
    "edit_messages",
    "generation_messages",
    "parse_answers",
    "prompt_text",
    "task_of",
]

Task = Literal["generate", "edit", "answer"]

#: the prompt family of each profile (a KB profile name, or ``table``)
PROFILES = {"freebase": "freebase", "generic": "freebase", "metaqa": "metaqa", "table": "table",
            "wikisql": "table", "spider": "table"}

_ENDINGS: dict[str, Task] = {"Thought:": "generate", "Corrected Path": "edit", "A:": "answer"}


@cache
def prompt_text(task: Task, profile: str) -> str:
    """The system prompt of ``task`` for ``profile`` (``prompts/readi_{task}_{family}.md``)."""
    family = lookup(PROFILES, profile, "Readi prompt profile")
    if task == "answer":
        family = "table" if family == "table" else "kb"
    name = f"readi_{task}_{family}.md"
    return resources.files("pyql.prompts").joinpath(name).read_text(encoding="utf-8").strip()


def _messages(task: Task, profile: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": prompt_text(task, profile)},
            {"role": "user", "content": user}]


def generation_messages(profile: str, question: str, entities: Sequence[str] = (), *,
                        table: str | None = None, columns: Sequence[str] = (),
                        example_row: Sequence[Any] = ()) -> list[dict[str, Any]]:
    if PROFILES.get(profile) == "table":
        user = "\n".join([f"Question: {question}", f"Table: {table or ''}",
                          f"Columns: {_json(columns)}", f"Example row: {_json(example_row)}",
                          "Thought:"])
    else:
        user = "\n".join([f"Question: {question}", f"Topic Entities: {_json(entities)}",
                          "Thought:"])
    return _messages("generate", profile, user)


def edit_messages(profile: str, question: str, error: str, *,
                  columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """``error`` is the rendered stuck error (``PathStuck.render()``/``TableStuck.render()``)."""
    lines = [f"Question: {question}"]
    if columns is not None:
        lines.append(f"Columns: {_json(columns)}")
    lines += [error, "Corrected Path"]
    return _messages("edit", profile, "\n".join(lines))


def answer_messages(profile: str, question: str, *,
                    triples: Sequence[Sequence[str]] = (), columns: Sequence[str] = (),
                    rows: Sequence[Sequence[Any]] = ()) -> list[dict[str, Any]]:
    if PROFILES.get(profile) == "table":
        body = [f"Columns: {_json(columns)}", "Rows:", *(_json(r) for r in rows)]
    else:
        body = ["Knowledge Triplets:", ", ".join(f"({', '.join(map(str, t))})" for t in triples)]
    return _messages("answer", profile, "\n".join([f"Q: {question}", *body, "A:"]))


def task_of(messages: Sequence[Mapping[str, Any]]) -> Task:
    """Which Readi request ``messages`` are (by how the user message ends)."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    text = str(last.get("content") or "").rstrip() if last else ""
    for ending, task in _ENDINGS.items():
        if text.endswith(ending):
            return task
    raise ValueError("not a Readi request (the user message ends with none of "
                     f"{', '.join(_ENDINGS)})")


_BRACES = re.compile(r"\{([^{}]*)\}")


def parse_answers(text: str, *, unique: bool = True) -> tuple[str, ...]:
    """The answers enclosed in ``{}`` (the paper's format), in order, without duplicates (with
    ``unique=False`` as written: a table's answer is a list of cells, and two rows can hold the
    same one): each ``{...}`` is one answer (commas belong to names), ``|`` separates several in
    one pair.

    >>> parse_answers("So, the answer is {De Smet}.")
    ('De Smet',)
    >>> parse_answers("{Paris, Texas} and {Lyon | Nice}")
    ('Paris, Texas', 'Lyon', 'Nice')
    >>> parse_answers("{n/a} {n/a}"), parse_answers("{n/a} {n/a}", unique=False)
    (('n/a',), ('n/a', 'n/a'))
    """
    found = [m.group(1).strip() for m in _BRACES.finditer(text)]
    out: list[str] = []
    for value in found:
        parts = [p.strip() for p in value.split("|")] if "|" in value else [value]
        out += [p for p in parts if p]
    return tuple(dict.fromkeys(out)) if unique else tuple(out)


def _json(value: Sequence[Any]) -> str:
    return json.dumps([v if isinstance(v, (str, int, float)) or v is None else str(v)
                       for v in value], ensure_ascii=False)
