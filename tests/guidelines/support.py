"""Shared helpers of the guideline tests: fixture KBs, a KB that fails on demand, running
Session step sequences and building Feedback from case-file descriptions."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from pyql.db import SqlDB
from pyql.errors import (
    BackendQueryError,
    BackendTimeoutError,
    BackendUnavailableError,
    InputError,
)
from pyql.feedback import (
    DBFeedback,
    Feedback,
    KBFeedback,
    PythonFeedback,
    Relations,
    VariableValues,
)
from pyql.guidelines import Registry, builtin_registry
from pyql.kb import KB, OxigraphKB
from pyql.memory import Memory
from pyql.program import Call
from pyql.results import ResultSet
from pyql.session import Observation, Session
from pyql.sql.session import SqlSession
from tests.conftest import require_data

__all__ = [
    "HERE",
    "REPO_ROOT",
    "FIXTURES",
    "CASES",
    "FlakyKB",
    "FlakyDB",
    "fixture_kb",
    "fixture_db",
    "builtin",
    "run_steps",
    "build_feedback",
    "webqsp_with_programs",
]

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
FIXTURES = HERE / "fixtures"
CASES = HERE / "cases"
#: KB profile of each fixture (Freebase unless listed)
FIXTURE_PROFILES = {"metaqa": "metaqa"}


def webqsp_with_programs() -> list[dict[str, Any]]:
    """The WebQSP test questions that have a PyQL program (the test is skipped without data)."""
    path = require_data("freebase_questions", "WebQSP_test_processed.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [q for q in json.load(fh) if q.get("PyQL") not in (None, "", "null")]


@cache
def fixture_kb(name: str) -> OxigraphKB:
    """The fixture KB ``fixtures/<name>.ttl`` (``empty``: an empty Freebase KB); read-only use."""
    profile = FIXTURE_PROFILES.get(name, "freebase")
    if name == "empty":
        return OxigraphKB(profile=profile)
    return OxigraphKB.from_file(FIXTURES / f"{name}.ttl", profile=profile)


@cache
def fixture_db(name: str) -> SqlDB:
    """The SQLite fixture database ``fixtures/<name>.sql`` (in memory, read-only)."""
    script = (FIXTURES / f"{name}.sql").read_text(encoding="utf-8")
    return SqlDB.sqlite_memory(lambda conn: conn.executescript(script))


@lru_cache(maxsize=1)
def builtin() -> Registry:
    """pyql's own guidelines (never third-party plugins installed in the environment)."""
    return builtin_registry()


@lru_cache(maxsize=1)
def with_original() -> Registry:
    """The built-ins plus the original environment's opt-in checks (packs.original)."""
    from pyql.guidelines.packs.original import GUIDELINES

    return Registry.from_classes([*(type(g) for g in builtin()), *GUIDELINES])


def registry_for(code: str) -> Registry:
    """The registry a case file of ``code`` runs against (built-ins, plus the opt-in pack)."""
    return builtin() if code in builtin() else with_original()


class FlakyKB(KB):
    """Wraps a KB; while ``failure`` is ``"timeout"`` or ``"backend_error"`` every query fails
    (the server), while it is ``"rejected"`` the engine refuses the query (a query error)."""

    def __init__(self, inner: KB) -> None:
        super().__init__(inner.profile)
        self.inner = inner
        self.failure: str | None = None

    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        if self.failure == "timeout":
            raise BackendTimeoutError("query timed out after 30 s", backend="flaky")
        if self.failure == "backend_error":
            raise BackendUnavailableError("connection refused (localhost:8890)", backend="flaky")
        if self.failure == "rejected":
            raise BackendQueryError("the endpoint rejected the query (SP031: Unsupported "
                                    "feature)", backend="flaky", query=query)
        return self.inner.select(query, timeout=timeout)

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        return self.inner.ask(query, timeout=timeout)


class FlakyDB:
    """Wraps a SqlDB; while ``failure`` is set every query fails (like :class:`FlakyKB`)."""

    def __init__(self, inner: SqlDB) -> None:
        self.inner = inner
        self.failure: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        if self.failure == "timeout":
            raise BackendTimeoutError("statement timeout", backend="flaky")
        if self.failure == "backend_error":
            raise BackendUnavailableError("could not connect to server: Connection refused",
                                          backend="flaky")
        if self.failure == "rejected":
            raise BackendQueryError("sqlite rejected the query: HAVING clause on a non-aggregate "
                                    "query", backend="flaky")
        return self.inner.execute(*args, **kwargs)


def run_steps(
    steps: Iterable[str | Mapping[str, Any]],
    *,
    kb: str = "empty",
    entities: Mapping[str, str] | None = None,
    registry: Registry | None = None,
    tools: str = "sparql",
    table: str | None = None,
) -> list[Observation]:
    """Run DSL steps in a fresh Session on a fixture KB with ``registry`` (default: built-ins).

    With ``tools="sql"``, ``kb`` names a fixture database and the steps run in a
    :class:`~pyql.sql.session.SqlSession` (starting from ``table``). A step is a string, or
    ``{"run": text, "kb": "timeout" | "backend_error" | "rejected"}`` to make the KB/DB fail
    (or the engine reject the query) during that step.
    """
    flaky: FlakyKB | FlakyDB
    session: Session | SqlSession
    if tools == "sql":
        flaky = FlakyDB(fixture_db(kb))
        session = SqlSession(flaky, table=table, guidelines=registry or builtin())  # type: ignore[arg-type]
    else:
        flaky = FlakyKB(fixture_kb(kb))
        session = Session(flaky, dict(entities or {}), guidelines=registry or builtin())
    out = []
    for step in steps:
        if isinstance(step, Mapping):
            flaky.failure = step.get("kb")
            out.append(session.run(step["run"]))
            flaky.failure = None
        else:
            out.append(session.run(step))
    return out


def _relations(value: Mapping[str, Any]) -> Relations:
    return Relations(forward=tuple(value.get("forward", ())),
                     backward=tuple(value.get("backward", ())))


def _values(value: Mapping[str, Any]) -> VariableValues:
    values = tuple(str(v) for v in value.get("values", ()))
    return VariableValues(values=values, total=value.get("total", len(values)),
                          unnamed=value.get("unnamed", 0))


def build_feedback(spec: Mapping[str, Any], *, tools: str = "sparql",
                   entities: Mapping[str, str] | None = None) -> Feedback:
    """A Feedback from a case file's ``feedback:`` mapping (for situations a Session step cannot
    produce yet, e.g. the SQL toolset): ``action``, ``python``, ``kb`` (``db`` on the SQL
    toolset), ``memory``, ``step``,
    ``functions`` (the tool set offered to the agent)."""
    tools = spec.get("tools", tools)
    action = spec["action"]
    try:
        call: Call | None = Call.parse(action, tools)
    except InputError:
        call = None
    mem = dict(spec.get("memory", {}))
    memory = Memory(
        calls=tuple(Call.parse(c, tools) for c in mem.get("calls", ())),
        variables=tuple(mem.get("variables", ())),
        bound_variables=tuple(mem.get("bound_variables", mem.get("variables", ()))),
        relations={k: _relations(v) for k, v in mem.get("relations", {}).items()},
        entities=dict(mem.get("entities", entities or {})),
        last_values={k: _values(v) for k, v in mem.get("last_values", {}).items()},
        answer=mem.get("answer"),
        columns=tuple(mem.get("columns", ())),
    )
    # what the backend returned: ``kb:`` on a KB, ``db:`` on a database (its own fields)
    kind, feedback_type = ("db", DBFeedback) if tools == "sql" else ("kb", KBFeedback)
    if ("db" if kind == "kb" else "kb") in spec:
        raise ValueError(f"a {tools} step's backend feedback is written {kind}:, not "
                         f"{'db' if kind == 'kb' else 'kb'}:")
    backend = dict(spec.get(kind, {}))
    for key in ("column_values",):
        if key in backend:
            backend[key] = {c: tuple(str(v) for v in vs) for c, vs in backend[key].items()}
    if "values" in backend:
        backend["values"] = {k: _values(v) for k, v in backend["values"].items()}
    python = dict(spec.get("python", {}))
    if "expected_arity" in python:
        python["expected_arity"] = tuple(python["expected_arity"])
    if "suggestions" in python:
        python["suggestions"] = tuple(python["suggestions"])
    python.setdefault("function", call.name if call else None)
    return Feedback(step=spec.get("step", len(memory.calls) + 1), action_text=action, call=call,
                    tools=tools, functions=tuple(spec.get("functions", ())),
                    python=PythonFeedback(**python), backend=feedback_type(**backend),
                    memory=memory, args=(), notes=())
