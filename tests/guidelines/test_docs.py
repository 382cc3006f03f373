"""The generated guidelines page, the CLI helpers and the doctests of pyql.guidelines."""

from __future__ import annotations

import doctest
import importlib
import json

import pytest

from pyql.guidelines.docs import describe, list_rows, page
from tests.guidelines.support import REPO_ROOT, builtin

PAGE = REPO_ROOT / "docs" / "guidelines.md"


def test_committed_docs_page_is_up_to_date() -> None:
    assert PAGE.exists(), "run: python -m pyql.guidelines.docs > docs/guidelines.md"
    assert PAGE.read_text(encoding="utf-8") == page(), (
        "docs/guidelines.md is stale; regenerate with: "
        "python -m pyql.guidelines.docs > docs/guidelines.md"
    )


def test_list_rows_cover_every_guideline_and_serialise() -> None:
    rows = list_rows(builtin())
    assert [r["code"] for r in rows] == list(builtin().codes)
    json.dumps(rows)
    for r in rows:
        assert r["description"] and r["bad"] and r["fixed"] and r["triggers"]
        assert r["env"] in {"KB", "Python", "RM", "KB+RM", "Python+RM"}
        assert r["plugin"] in {"python", "kb", "sql"}


def test_describe_shows_everything_about_one_guideline() -> None:
    reg = builtin()
    text = describe(reg["KB201"], reg)
    assert text.startswith("KB201  kb.empty_fact_unlisted_relation\n")
    for part in ("environment: KB+RM", "triggers on: add_fact; kb: empty", "Bad:",
                 "    add_fact(m.04rtjj, broadcast.broadcast_on, ?stream)", "Fixed:",
                 "entry point 'kb'"):
        assert part in text


def test_every_guideline_has_a_unique_name() -> None:
    names = [g.name for g in builtin()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("module", ["pyql.guidelines", "pyql.guidelines.base",
                                    "pyql.guidelines.registry", "pyql.guidelines.derive",
                                    "pyql.guidelines.docs"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
