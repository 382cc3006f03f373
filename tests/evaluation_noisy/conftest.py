"""Fixtures of the noisy-gold tests: a tiny MetaQA KB, the Figure 7 Freebase KB (a CVT), a
WikiSQL-style table."""

from __future__ import annotations

import pytest

from pyql.db import SqlDB
from pyql.kb import OxigraphKB
from tests.agent.conftest import METAQA_LINES
from tests.guidelines.support import fixture_db, fixture_kb
from tests.support.metaqa import metaqa_kb


@pytest.fixture(scope="session")
def movies() -> OxigraphKB:
    return metaqa_kb(METAQA_LINES)


@pytest.fixture(scope="session")
def panthers() -> OxigraphKB:
    return fixture_kb("figure7")


@pytest.fixture(scope="session")
def players() -> SqlDB:
    return fixture_db("players")
