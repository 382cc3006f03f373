"""The guideline protocol and registry: validation, plugin loading, precedence, selection,
statistics, and the Session integration."""

from __future__ import annotations

import random
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pyql import Session
from pyql.feedback import DBFeedback, Feedback, Hint, KBFeedback, PythonFeedback
from pyql.guidelines import (
    ANY,
    Guideline,
    GuidelineCheckError,
    GuidelineLoadError,
    Registry,
    builtin_registry,
    default_registry,
    on,
)
from pyql.guidelines.base import env_class, parse_docstring
from pyql.guidelines.registry import BUILTIN_PACKS, GROUP, PluginSource, validate_guideline
from pyql.memory import Memory
from pyql.program import Call
from tests.guidelines.support import REPO_ROOT, builtin, fixture_kb


def _fb(action: str = "get_relation(m.0x)", *, python: str = "ok", kb: str = "ok",
        tools: str = "sparql") -> Feedback:
    try:
        call: Call | None = Call.parse(action, tools)
    except Exception:
        call = None
    return Feedback(step=1, action_text=action, call=call, tools=tools,
                    python=PythonFeedback(status=python),
                    backend=(DBFeedback if tools == "sql" else KBFeedback)(status=kb),
                    memory=Memory())


def make(code: str, *, name: str | None = None, needs: frozenset[str] | None = None,
         trig: Any = None, fires: bool = True, groups: tuple[str, ...] = (),
         toolsets: frozenset[str] = frozenset({"sparql"}), doc: str | None = None,
         log: list[str] | None = None,
         check: Callable[[Guideline, Feedback], Hint | None] | None = None) -> type[Guideline]:
    """A test guideline class; ``check`` replaces its check (default: fire, or not, and log)."""
    prefix = code[:2]
    default_needs = {"PY": "python", "KB": "kb", "RM": "memory"}.get(prefix, "kb")

    def fire(self: Guideline, feedback: Feedback) -> Hint | None:
        if log is not None:
            log.append(code)
        return self.hint(f"{code} fired") if fires else None

    attrs = {
        "__doc__": (doc if doc is not None
                    else f"Test guideline {code}.\n\nBad:\n    x\n\nFixed:\n    y\n"),
        "code": code,
        "name": name or f"test.g_{code.lower()}",
        "needs": needs if needs is not None else frozenset({default_needs}),
        "triggers_on": trig if trig is not None else on(python=ANY),
        "toolsets": toolsets,
        "groups": groups,
        "check": check if check is not None else fire,
    }
    return types.new_class(f"G{code}", (Guideline,), {}, lambda ns: ns.update(attrs))


# -- protocol ------------------------------------------------------------------------------------
def test_parse_docstring_sections() -> None:
    doc = parse_docstring(
        """First line.

        More words.

        Bad:
            add_fact(?a, r, ?b)
            get_relation(?a)

        Fixed:
            add_fact(m.0x, r, ?b)

        Trailing prose.
        """
    )
    assert doc["description"] == "First line."
    assert doc["bad"] == "add_fact(?a, r, ?b)\nget_relation(?a)"
    assert doc["fixed"] == "add_fact(m.0x, r, ?b)"
    assert "More words." in doc["details"] and "Trailing prose." in doc["details"]


def test_env_classes_match_table8() -> None:
    assert env_class({"kb"}) == "KB"
    assert env_class({"kb", "memory"}) == "KB+RM"
    assert env_class({"python", "memory"}) == "Python+RM"
    assert builtin().class_counts().keys() <= {"KB", "Python", "RM", "KB+RM", "Python+RM"}


def test_builtin_packs_cover_the_papers_environment_classes() -> None:
    counts = builtin().class_counts()
    assert {"KB", "Python", "RM", "KB+RM", "Python+RM"} <= set(counts)


# -- validation -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"code": "XX101"}, "bad code"),
        ({"code": "KB1"}, "bad code"),
        ({"code": "KB101", "name": "NoDots"}, "bad name"),
        ({"code": "KB101", "needs": frozenset({"kb", "llm"})}, "needs must be"),
        ({"code": "KB101", "needs": frozenset()}, "needs must be"),
        ({"code": "KB101", "needs": frozenset({"memory"})}, "code prefix KB"),
        ({"code": "RM101", "needs": frozenset({"kb"})}, "code prefix RM"),
        ({"code": "DB101", "toolsets": frozenset({"sparql"})}, "DB codes are for the SQL"),
        ({"code": "KB101", "toolsets": frozenset({"sql"})}, "KB codes are for the SPARQL"),
        ({"code": "KB101", "toolsets": frozenset({"cypher"})}, "toolsets must be"),
        ({"code": "KB101", "trig": on("add_fakt")}, "unknown functions ['add_fakt']"),
        ({"code": "KB101", "trig": on("add_condition")}, "unknown functions"),
        ({"code": "KB101", "trig": on(kb="emptyish")}, "unknown kb statuses"),
        ({"code": "KB101", "trig": on(python="broken")}, "unknown python statuses"),
        ({"code": "KB101", "trig": "add_fact"}, "triggers_on must be declared"),
        ({"code": "KB101", "doc": ""}, "no docstring"),
        ({"code": "KB101", "doc": "Only a description."}, "'Bad:' and a 'Fixed:'"),
    ],
)
def test_malformed_guidelines_fail_at_load(kwargs: dict[str, Any], message: str) -> None:
    cls = make(**kwargs)
    with pytest.raises(GuidelineLoadError, match="plug") as err:
        Registry.from_classes([cls], source="plug")
    assert message in str(err.value)


def test_missing_check_and_non_guidelines_fail() -> None:
    cls = make("KB101")
    del cls.check
    with pytest.raises(GuidelineLoadError, match="no check"):
        validate_guideline(cls)

    class NotAGuideline:
        code = "KB101"

    with pytest.raises(GuidelineLoadError, match="not a subclass"):
        validate_guideline(NotAGuideline)


# -- plugins --------------------------------------------------------------------------------------
@dataclass
class FakeDist:
    name: str


@dataclass
class FakeEntryPoint:
    """What importlib.metadata.EntryPoint offers the loader: name, value, dist, load()."""

    name: str
    obj: Any
    dist_name: str = "some-dist"
    value: str = "some.module:GUIDELINES"

    @property
    def dist(self) -> FakeDist:
        return FakeDist(self.dist_name)

    def load(self) -> Any:
        if isinstance(self.obj, Exception):
            raise self.obj
        return self.obj


def test_duplicate_codes_name_both_plugins() -> None:
    eps = [FakeEntryPoint("alpha", [make("KB901")], "alpha-dist", "alpha.pack:GUIDELINES"),
           FakeEntryPoint("beta", [make("KB901")], "beta-dist", "beta.pack:GUIDELINES")]
    with pytest.raises(GuidelineLoadError) as err:
        Registry.from_entry_points(entry_points=eps)
    text = str(err.value)
    assert "duplicate guideline code KB901" in text
    assert "'alpha'" in text and "alpha-dist" in text and "'beta'" in text and "beta-dist" in text
    assert {s.name for s in err.value.sources} == {"alpha", "beta"}
    assert err.value.code == "KB901"


def test_duplicate_of_a_builtin_code_names_pyql_and_the_plugin() -> None:
    eps = [FakeEntryPoint("kb", builtin()["KB201"].__class__, "pyql-kbqa",
                          BUILTIN_PACKS["kb"]),
           FakeEntryPoint("mine", [make("KB201")], "my-guidelines")]
    with pytest.raises(GuidelineLoadError, match="pyql-kbqa.*my-guidelines"):
        Registry.from_entry_points(entry_points=eps)


def test_malformed_plugin_names_the_entry_point_and_distribution() -> None:
    eps = [FakeEntryPoint("broken", [make("KB101", doc="no examples")], "broken-dist")]
    with pytest.raises(GuidelineLoadError) as err:
        Registry.from_entry_points(entry_points=eps)
    assert "entry point 'broken'" in str(err.value) and "broken-dist" in str(err.value)
    assert err.value.sources[0].dist == "broken-dist"


def test_plugin_import_errors_and_bad_objects_are_load_errors() -> None:
    with pytest.raises(GuidelineLoadError, match="'gone'.*ModuleNotFoundError"):
        Registry.from_entry_points(
            entry_points=[FakeEntryPoint("gone", ModuleNotFoundError("No module named 'x'"))])
    with pytest.raises(GuidelineLoadError, match="expected a module, a guideline class"):
        Registry.from_entry_points(entry_points=[FakeEntryPoint("num", 42)])
    with pytest.raises(GuidelineLoadError, match="not a guideline class"):
        Registry.from_entry_points(entry_points=[FakeEntryPoint("mixed", [make("KB901"), 3])])


def test_entry_points_resolve_modules_classes_and_lists() -> None:
    mod = types.ModuleType("fake_pack")
    a, b = make("KB901"), make("RM901")
    a.__module__ = b.__module__ = "fake_pack"
    mod.A, mod.B, mod.Guideline = a, b, Guideline  # imported names are not collected
    listed = types.ModuleType("listed_pack")
    listed.GUIDELINES = [make("PY901")]
    eps = [FakeEntryPoint("module", mod), FakeEntryPoint("cls", make("KB902")),
           FakeEntryPoint("listed", listed), FakeEntryPoint("tuple", (make("KB903"),))]
    reg = Registry.from_entry_points(entry_points=eps)
    assert set(reg.codes) == {"KB901", "RM901", "KB902", "PY901", "KB903"}
    assert reg.source("KB902").name == "cls"
    empty = types.ModuleType("empty_pack")
    with pytest.raises(GuidelineLoadError, match="defines no guidelines"):
        Registry.from_entry_points(entry_points=[FakeEntryPoint("empty", empty)])


def test_builtin_packs_are_the_pyproject_entry_points() -> None:
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        project = tomllib.load(fh)["project"]
    assert project["entry-points"][GROUP] == BUILTIN_PACKS


def test_default_registry_loads_the_builtins_through_entry_points() -> None:
    reg = default_registry()
    assert reg is default_registry()
    assert set(builtin().codes) <= set(reg.codes)
    assert reg.source("KB201").name == "kb"
    assert reg.source("PY101").name == "python" and reg.source("DB101").name == "sql"


# -- evaluation -----------------------------------------------------------------------------------
def test_precedence_python_then_memory_then_kb_then_fallbacks() -> None:
    classes = [make("KB101"), make("DB102", toolsets=frozenset({"sql"})), make("RM102"),
               make("RM101"), make("PY102"), make("PY101"),
               make("PY001", groups=("fallback",))]
    random.Random(7).shuffle(classes)
    reg = Registry.from_classes(classes)
    assert reg.codes == ("PY101", "PY102", "RM101", "RM102", "DB102", "KB101", "PY001")
    assert reg.evaluate(_fb()).code == "PY101"  # first that fires wins
    quiet = Registry.from_classes([make("PY101", fires=False), make("RM101"), make("KB101")])
    assert quiet.evaluate(_fb()).code == "RM101"


def test_only_matching_guidelines_are_asked() -> None:
    log: list[str] = []
    reg = Registry.from_classes([
        make("KB101", trig=on("add_fact", kb="empty"), log=log),
        make("KB102", trig=on("get_relation"), log=log),
        make("PY101", trig=on(python="arity"), log=log),
        make("DB101", trig=on("add_condition"), toolsets=frozenset({"sql"}), log=log),
    ])
    assert reg.evaluate(_fb("get_relation(m.0x)")).code == "KB102"
    assert log == ["KB102"]
    log.clear()
    assert reg.evaluate(_fb("add_fact(m.0x, a.b, ?y)", kb="ok")) is None
    assert log == []
    assert reg.evaluate(_fb("add_fact(m.0x, a.b, ?y)", kb="empty")).code == "KB101"
    log.clear()
    assert reg.evaluate(_fb("add_condition(a, =, 1)", tools="sql")).code == "DB101"
    assert log == ["DB101"]
    assert [g.code for g in reg.candidates(_fb("add_fact(?a)", python="arity"))] == ["PY101"]


def test_hints_carry_the_guidelines_code_and_name() -> None:
    def sloppy(self: Guideline, feedback: Feedback) -> Hint | None:
        return Hint(code="OTHER", message="m")

    Sloppy = make("KB901", name="test.sloppy", needs=frozenset({"kb"}), trig=on(), check=sloppy)
    hint = Registry.from_classes([Sloppy]).evaluate(_fb())
    assert (hint.code, hint.name) == ("KB901", "test.sloppy")


def test_a_crashing_guideline_is_a_framework_error_naming_it() -> None:
    def crash(self: Guideline, feedback: Feedback) -> Hint | None:
        raise KeyError("oops")

    Crash = make("KB902", name="test.crash", needs=frozenset({"kb"}), trig=on(), check=crash)

    with pytest.raises(GuidelineCheckError, match="KB902.*KeyError") as err:
        Registry.from_classes([Crash], source="crashy").evaluate(_fb())
    assert err.value.code == "KB902" and err.value.source == PluginSource("crashy")


def test_select_by_code_prefix_name_and_group() -> None:
    reg = builtin()
    assert reg.select(enable=["KB201"]).codes == ("KB201",)
    assert set(reg.select(enable=["sql"]).codes) == {g.code for g in reg if "sql" in g.groups}
    assert all(c.startswith("RM") for c in reg.select(enable=["RM"]).codes)
    assert reg.select(enable=["kb.empty_after_filter"]).codes == ("KB205",)
    without = reg.select(disable=["fallback", "PY101"])
    assert "PY290" not in without and "PY101" not in without and "PY102" in without
    both = reg.select(enable=["paper"], disable=["RM"])
    assert both.codes and all("paper" in reg[c].groups and not c.startswith("RM")
                              for c in both.codes)
    assert len(reg) == len(builtin())  # the original is unchanged
    with pytest.raises(ValueError, match="no guideline matches 'KB999'"):
        reg.select(enable=["KB999"])


def test_stats_by_code_and_class_are_thread_safe() -> None:
    reg = Registry.from_classes([make("KB101", trig=on("add_fact")),
                                 make("RM101", trig=on("get_relation"),
                                      needs=frozenset({"memory", "kb"}))])
    fact, rel = _fb("add_fact(m.0x, a.b, ?y)"), _fb("get_relation(m.0x)")

    def work() -> None:
        for _ in range(500):
            reg.evaluate(fact)
            reg.evaluate(rel)
            reg.evaluate(rel)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reg.stats.by_code == {"RM101": 8000, "KB101": 4000}
    assert reg.stats.by_class == {"KB+RM": 8000, "KB": 4000}
    assert reg.stats.steps == 12000 and reg.stats.total == 12000
    assert reg.stats.top(1) == [("RM101", 8000)]
    assert reg.select(enable=["KB101"]).stats.total == 0  # a selection starts fresh
    reg.stats.reset()
    assert reg.stats.snapshot() == {"steps": 0, "total": 0, "by_code": {}, "by_class": {}}


# -- the Session ----------------------------------------------------------------------------------
def test_session_with_guidelines_true_uses_the_default_registry_and_rolls_back() -> None:
    s = Session(fixture_kb("figure6"), {"live365": "m.04rtjj"}, guidelines=True)
    assert s.guidelines is default_registry()
    s.run("get_relation(m.04rtjj)")
    memory, program = s.memory, s.program
    obs = s.run("add_fact(m.04rtjj, broadcast.broadcast_on, ?stream)")
    assert obs.hint is not None and obs.hint.code == "KB201" and not obs.ok
    assert obs.text == obs.hint.message
    assert s.memory is memory and s.program == program  # rolled back
    assert s.run("add_fact(m.04rtjj, broadcast.distributor.distributes, ?stream)").ok


def test_session_without_guidelines_shows_the_raw_result() -> None:
    s = Session(fixture_kb("figure6"), {"live365": "m.04rtjj"})
    obs = s.run("add_fact(m.04rtjj, broadcast.broadcast_on, ?stream)")
    assert obs.hint is None and obs.status == "empty"


def test_a_resolved_mention_passes_with_a_note() -> None:
    s = Session(fixture_kb("figure7"), {"florida panthers": "m.0j8js"}, guidelines=builtin())
    obs = s.run("add_fact(florida panthers, sports.sports_team.arena_stadium, ?arena)")
    assert obs.ok
    assert obs.feedback.notes == ("'florida panthers' was read as the linked entity m.0j8js",)


def test_builtin_registry_ignores_installed_plugins() -> None:
    assert builtin_registry().codes == builtin().codes
    assert all(builtin().source(c).dist == "builtin" for c in builtin().codes)
    assert "pyql_guideline_example" not in sys.modules


def test_default_registry_falls_back_to_the_builtin_packs(monkeypatch, caplog) -> None:
    """From a checkout that was never installed (no entry points), the built-ins still load."""
    import pyql.guidelines.registry as registry_module

    monkeypatch.setattr(registry_module, "load_entry_points", lambda group=GROUP: [])
    try:
        with caplog.at_level("WARNING", logger="pyql.guidelines.registry"):
            reg = default_registry(reload=True)
        assert reg.codes == builtin().codes
        assert "loading the built-in packs directly" in caplog.text
    finally:
        monkeypatch.undo()
        default_registry(reload=True)
