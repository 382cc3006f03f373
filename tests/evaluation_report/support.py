"""Helpers of the report tests: a copy of the fixture run, its results and trajectories as JSON to
edit, and an HTML parser that records what the tests look at (ids, tags, classes, text)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pyql.agent.trajectory import trajectory_records

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "runs" / "metaqa_small"


def copy_run(tmp_path: Path, name: str = "run") -> Path:
    """A writable copy of the fixture run directory."""
    target = tmp_path / name
    shutil.copytree(FIXTURE, target)
    return target


def results(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def write_results(run_dir: Path, rows: Iterable[dict[str, Any]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (run_dir / "results.jsonl").write_text(text, encoding="utf-8")


def trajectories(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The records of each question's trajectory (question, steps, result), by question id."""
    return {records[0]["meta"]["id"]: records
            for _, records in trajectory_records(run_dir / "trajectories.jsonl")}


def steps(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The step records of one trajectory (edit them in place)."""
    return [r for r in records if r["record"] == "step"]


def write_trajectories(run_dir: Path, groups: Iterable[list[dict[str, Any]]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for group in groups for r in group)
    (run_dir / "trajectories.jsonl").write_text(text, encoding="utf-8")


def renamed(records: list[dict[str, Any]], qid: str) -> list[dict[str, Any]]:
    """A copy of a trajectory's records with the question id ``qid``."""
    head = dict(records[0], meta={**records[0]["meta"], "id": qid})
    return [head, *records[1:]]


def edit_config(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = run_dir / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    change(config)
    path.write_text(json.dumps(config), encoding="utf-8")


class Page(HTMLParser):
    """A parsed page: every element's tag and attributes, ids, classes and the text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.ids: Counter[str] = Counter()
        self.tags: Counter[str] = Counter()
        self.text_parts: list[str] = []
        self._in_script = False
        self.scripts: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        self.tags[tag] += 1
        if attributes.get("id"):
            self.ids[str(attributes["id"])] += 1
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag == "script":
            self._in_script = False

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text_parts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def find(self, tag: str | None = None, *, cls: str | None = None,
             **attrs: str) -> list[dict[str, str | None]]:
        """Elements by tag, a class among their classes, and attribute values."""
        out = []
        for name, attributes in self.elements:
            if tag is not None and name != tag:
                continue
            if cls is not None and cls not in (attributes.get("class") or "").split():
                continue
            if any(attributes.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(attributes)
        return out
