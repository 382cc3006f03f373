"""A megabyte argument is not echoed back whole in hints and error messages (issue 15 item 6)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pyql import Session
from pyql.demo import movies_path
from pyql.echo import ECHO_LIMIT, clip, clip_echoes
from pyql.guidelines import builtin_registry
from pyql.kb import OxigraphKB
from pyql.profiles import GENERIC
from pyql.sql.demo import demo_db
from pyql.sql.session import SqlSession

BIG = "a" * 1_000_000


def test_clip_keeps_short_text_and_marks_the_cut() -> None:
    assert clip("short") == "short"
    out = clip("b" * 10_000)
    assert len(out) < ECHO_LIMIT + 40 and "[9,800 characters cut]" in out
    assert clip_echoes("x" * 300, ["y" * 300]) == "x" * 300  # only the inputs are clipped


@pytest.fixture(scope="module")
def kb() -> OxigraphKB:
    profile = replace(GENERIC.with_prefixes(ex="http://example.org/movies/"), display_prefix="ex")
    return OxigraphKB.from_file(movies_path(), profile=profile)


@pytest.mark.parametrize("guidelines", [True, False])
@pytest.mark.parametrize("action", [
    f"get_relation({BIG})",
    f"add_fact(?film, {BIG}, ?x)",
    f"add_filter(?x, {BIG}, 3)",
    f"set_answer(?{BIG})",
])
def test_sparql_steps(kb: OxigraphKB, action: str, guidelines: bool) -> None:
    session = Session(kb, guidelines=builtin_registry() if guidelines else None)
    obs = session.run(action)
    assert not obs.ok
    assert len(obs.text) < 2_000 and "characters cut]" in obs.text
    if obs.hint is not None:
        assert all(len(s) < 2_000 for s in obs.hint.suggestions)


@pytest.mark.parametrize("action", [
    f"add_condition({BIG}, =, 3)",
    f"add_condition(name, =, {BIG})",
    f"add_condition(name, {BIG}, 3)",
])
def test_sql_steps(action: str) -> None:
    for guidelines in (builtin_registry(), None):
        session = SqlSession(demo_db(), table="players", guidelines=guidelines)
        obs = session.run(action)
        assert len(obs.text) < 2_000
        if not obs.ok:  # without guidelines, a long value that matches no row is a valid step
            assert "characters cut]" in obs.text
