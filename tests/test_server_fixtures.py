"""The throw-away servers start at most once per test worker: their session fixtures come from the
plugins ``tests.support.virtuoso`` and ``tests.support.postgres`` (tests/conftest.py) and no test
module imports them. An imported fixture is a second fixture definition, cached on its own: a
second PostgreSQL cluster in the same worker (tests/test_sqldb.py did that)."""

from __future__ import annotations

import ast

from tests.conftest import REPO

#: session fixtures that start a server, by the plugin module that defines them
SERVER_FIXTURES = {"tests.support.postgres": {"postgres", "postgres_url"},
                   "tests.support.virtuoso": {"virtuoso"}}


def _imported_fixtures(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in SERVER_FIXTURES:
            found |= {alias.name for alias in node.names} & SERVER_FIXTURES[node.module]
    return found


def test_no_test_module_imports_a_server_fixture() -> None:
    offenders = {}
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.parent.name == "support":
            continue
        names = _imported_fixtures(path.read_text(encoding="utf-8"))
        if names:
            offenders[str(path.relative_to(REPO))] = sorted(names)
    assert offenders == {}


def test_the_check_sees_an_import() -> None:
    assert _imported_fixtures(
        "from tests.support.postgres import postgres, postgres_url, find_postgres_bin\n"
    ) == {"postgres", "postgres_url"}
    assert _imported_fixtures("from tests.support.virtuoso import free_port\n") == set()

