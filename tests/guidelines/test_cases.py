"""One case file per guideline (``cases/<CODE>.yaml``), sqlfluff-style.

A case file names the guideline (``code``), a default fixture KB (``kb``), entity table
(``entities``) and toolset (``tools``), then two lists of cases:

- ``fail``: situations that must fire the guideline. A case is a Session step sequence
  (``steps``; the step ``at`` — default the last — must get a hint with this code from the full
  built-in registry, i.e. the guideline also wins the precedence), or a ``feedback`` description
  for situations no Session can produce yet (the SQL toolset). ``message_has`` /
  ``message_lacks`` / ``suggestions_has`` check the hint's content.
- ``pass``: situations that must not fire it. Steps run with *only* this guideline enabled, and
  no step may get its code.

A case may override ``kb``, ``entities``, ``tools`` and ``table`` (SQL: the table the
:class:`~pyql.sql.session.SqlSession` starts from; ``kb`` then names ``fixtures/<kb>.sql``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pyql.feedback import Hint
from tests.guidelines.support import (
    CASES,
    build_feedback,
    registry_for,
    run_steps,
    with_original,
)


def _load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


FILES = sorted(CASES.glob("*.yaml"))


def _cases() -> list[Any]:
    out = []
    for path in FILES:
        spec = _load(path)
        for kind in ("fail", "pass"):
            for i, case in enumerate(spec.get(kind) or ()):
                name = case.get("name", str(i))
                out.append(pytest.param(spec, kind, case, id=f"{spec['code']}-{kind}-{name}"))
    return out


def _hint_for(spec: dict[str, Any], case: dict[str, Any], kind: str) -> tuple[Hint | None, list]:
    """Run a case; return (the hint at the checked step, all hint codes) for fail cases, or
    (None, all hint codes) for pass cases."""
    code = spec["code"]
    full = registry_for(code)
    registry = full if kind == "fail" else full.select(enable=[code])
    tools = case.get("tools", spec.get("tools", "sparql"))
    entities = case.get("entities", spec.get("entities", {}))
    if "feedback" in case:
        hint = registry.evaluate(build_feedback(case["feedback"], tools=tools, entities=entities))
        return hint, [hint.code if hint else None]
    obs = run_steps(case["steps"], kb=case.get("kb", spec.get("kb", "empty")),
                    entities=entities, registry=registry, tools=tools,
                    table=case.get("table", spec.get("table")))
    codes = [o.hint.code if o.hint else None for o in obs]
    at = case.get("at", len(obs))
    return obs[at - 1].hint, codes


@pytest.mark.parametrize(("spec", "kind", "case"), _cases())
def test_case(spec: dict[str, Any], kind: str, case: dict[str, Any]) -> None:
    code = spec["code"]
    hint, codes = _hint_for(spec, case, kind)
    if kind == "pass":
        assert code not in codes, f"{code} fired on a pass case: {codes}"
        return
    assert hint is not None and hint.code == code, f"expected {code}, step hints were {codes}"
    assert hint.name == registry_for(code)[code].name
    for text in case.get("message_has", ()):
        assert text in hint.message, f"{text!r} not in: {hint.message}"
    for text in case.get("message_lacks", ()):
        assert text not in hint.message, f"{text!r} in: {hint.message}"
    for text in case.get("suggestions_has", ()):
        assert text in hint.suggestions, f"{text!r} not in {hint.suggestions}"
    assert "re-generate" not in hint.message.lower()  # prompt mechanics belong to the renderer


def test_every_builtin_guideline_has_a_case_file() -> None:
    codes = {g.code for g in with_original()}  # the opt-in original checks too
    files = {p.stem: _load(p) for p in FILES}
    assert set(files) == codes
    for stem, spec in files.items():
        assert spec["code"] == stem
        assert spec.get("fail"), f"{stem}: no fail case"
        assert spec.get("pass"), f"{stem}: no pass case"
