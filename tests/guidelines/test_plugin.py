"""The example third-party plugin (``examples/guideline_plugin``): installed with pip from a temp
copy, discovered through the ``pyql.guidelines`` entry points, firing in
``Session(..., guidelines=True)``.

The plugin is installed for a subprocess only (``tests.support.plugin``): the shared virtualenv
is never modified (other test runs see no extra guideline). Without ``wheel`` in the venv and
without an index to fetch the build dependencies from, the test is skipped.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from tests.guidelines.support import FIXTURES
from tests.support.plugin import EXAMPLES, install_example

PLUGIN = EXAMPLES / "guideline_plugin"

SCRIPT = """
import json, sys
from pyql import Session
from pyql.kb import OxigraphKB
from pyql.guidelines import default_registry

kb = OxigraphKB.from_file(sys.argv[1], profile="freebase")
s = Session(kb, {"florida panthers": "m.0j8js"}, guidelines=True)
first = s.run("add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)")
again = s.run("add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena2)")
same = s.run("add_fact(m.0j8js, sports.sports_team.arena_stadium, ?arena)")
source = default_registry().source("RM901")
print(json.dumps({"first": first.hint.code if first.hint else None,
                  "again": again.hint.code if again.hint else None,
                  "message": again.hint.message if again.hint else "",
                  "same": same.hint.code if same.hint else None,
                  "plugin": source.name, "dist": source.dist,
                  "codes": list(default_registry().codes)}))
"""


def test_example_plugin_fires_through_session_guidelines_true(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    plugin = install_example("guideline_plugin", tmp_path, request)
    assert any(p.name.startswith("pyql_guideline_example") and p.suffix == ".dist-info"
               for p in plugin.site.iterdir())
    out = plugin.run(SCRIPT, str(FIXTURES / "figure7.ttl"), timeout=120)
    assert out["first"] is None
    assert out["again"] == "RM901"
    assert "already in the query (accepted call 1), as ?arena" in out["message"]
    assert out["same"] == "RM210"  # the identical fact: built in
    assert (out["plugin"], out["dist"]) == ("example", "pyql-guideline-example")
    assert {"KB201", "PY101", "DB101", "RM901"} <= set(out["codes"])


def test_example_plugin_is_a_valid_pack() -> None:
    """The plugin's module validates like any pack (without installing it)."""
    sys.path.insert(0, str(PLUGIN))
    try:
        from pyql.guidelines import Registry

        module = importlib.import_module("pyql_guideline_example")
        reg = Registry.from_classes(module.GUIDELINES, source="example")
        assert reg.codes == ("RM901",)
    finally:
        sys.path.remove(str(PLUGIN))
        sys.modules.pop("pyql_guideline_example", None)
