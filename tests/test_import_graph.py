"""The package's import graph keeps its layers and has no cycle.

Every module of the ``pyql`` distribution is parsed with :mod:`ast` (nothing is imported), and
every ``import`` is collected, those inside functions too (an import deferred into a function is
still a dependency; only ``if TYPE_CHECKING:`` blocks, which never run, are left out). An edge
goes to the module named (``from pyql.x import y`` to ``pyql.x.y`` when that is a module).

The layers, bottom up: the core (``pyql/``), the guidelines (``pyql.guidelines``), the agent's
strategies and their parts (``pyql.agent``), the evaluation (``pyql.agent.evaluation``), and the
top: the commands (``pyql.agent.commands`` and the modules the ``pyql.commands`` entry points
name) and the applications (``pyql.apps``: the MCP server), which may import anything.

- the core imports neither ``pyql.agent`` nor ``pyql.guidelines``;
- the guidelines do not import ``pyql.agent``;
- nothing in ``pyql.agent`` outside the evaluation imports the evaluation;
- nothing below the top imports the top;
- no cycle, at module or function level.

What cannot be removed yet is in :data:`UPWARD` and :data:`CYCLES`, each with its reason; an
entry that is no longer needed fails the test, so the lists only shrink.

And what a KB run imports, in a fresh interpreter: a MetaQA question, from ``import pyql``
through an agent's run, loads neither SQLAlchemy nor sqlglot (each spawned worker process of
``pyql eval`` would pay for them); ``pyql.db`` loads them when a database is used.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: package -> directory (``[tool.setuptools] package-dir`` of pyproject.toml)
PACKAGE_DIRS = {"pyql": "pyql", "pyql.guidelines": "guidelines", "pyql.agent": "agent",
                "pyql.apps": "apps", "pyql.prompts": "prompts"}

#: (importer, imported) prefix pairs allowed to go up a layer, and why
UPWARD: dict[tuple[str, str], str] = {}
#: import cycles allowed for now (the modules of each), and why
CYCLES: dict[frozenset[str], str] = {}


def _modules() -> dict[str, Path]:
    found = {}
    for package, directory in PACKAGE_DIRS.items():
        for path in sorted((ROOT / directory).rglob("*.py")):
            parts = list(path.relative_to(ROOT / directory).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                hidden.update(id(n) for n in ast.walk(inner))
    return hidden


def _named(name: str, path: Path) -> Iterator[str]:
    """The modules the imports of ``name`` (at ``path``) name, deferred imports included."""
    tree = ast.parse(path.read_text(), str(path))
    hidden = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges = set()
        for target in _named(name, path):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


GRAPH = _graph()


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _commands() -> set[str]:
    """The modules the ``pyql.commands`` entry points of pyproject.toml name."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."pyql.commands"]', 1)[1].split("\n[", 1)[0]
    return set(re.findall(r'^\s*[\w-]+\s*=\s*"([\w.]+):', section, re.MULTILINE))


COMMANDS = _commands()


def _top(name: str) -> bool:
    """The top layer: the command modules and the applications (pyql.apps), which may import
    anything."""
    return (name in COMMANDS or _within(name, "pyql.agent.commands")
            or _within(name, "pyql.apps"))


def _layer_violations() -> dict[tuple[str, str], set[str]]:
    """``(importer, imported) -> {allow-list keys that cover it}`` for every upward edge."""
    out: dict[tuple[str, str], set[str]] = {}
    for source, targets in GRAPH.items():
        if _top(source):
            continue
        for target in targets:
            core = not any(_within(source, p) for p in ("pyql.agent", "pyql.guidelines",
                                                         "pyql.prompts", "pyql.apps"))
            up = (
                _top(target)
                or (core and any(_within(target, p) for p in ("pyql.agent", "pyql.guidelines")))
                or (_within(source, "pyql.guidelines") and _within(target, "pyql.agent"))
                or (_within(source, "pyql.agent") and not _within(source, "pyql.agent.evaluation")
                    and _within(target, "pyql.agent.evaluation"))
            )
            if up:
                out[(source, target)] = {key for key in UPWARD
                                         if _within(source, key[0]) and _within(target, key[1])}
    return out


def _cycles() -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(GRAPH):
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_walk_sees_every_module_and_deferred_imports() -> None:
    assert {"pyql.session", "pyql.guidelines.registry", "pyql.agent.strategy",
            "pyql.agent.evaluation.runner", "pyql.cli.kb"} <= set(GRAPH)
    # imported inside a function (DB.session_class), and only there
    assert "pyql.sql.session" in GRAPH["pyql.db.base"]
    # an `if TYPE_CHECKING:` import is not an edge
    assert "pyql.db.base" not in GRAPH["pyql.sql.session"]
    assert COMMANDS >= {"pyql.agent.commands.ask", "pyql.agent.commands.eval", "pyql.cli.kb"}


def test_no_upward_import() -> None:
    violations = _layer_violations()
    unexplained = sorted(edge for edge, reasons in violations.items() if not reasons)
    assert unexplained == [], "upward imports: " + ", ".join(f"{a} -> {b}" for a, b in unexplained)


def test_every_allowed_upward_import_is_still_needed() -> None:
    used = set().union(*_layer_violations().values())
    assert sorted(set(UPWARD) - used) == [], "drop these entries from UPWARD"


def test_no_import_cycle() -> None:
    cycles = _cycles()
    unexplained = [sorted(c) for c in cycles if c not in CYCLES]
    assert unexplained == [], f"import cycles: {unexplained}"
    assert sorted(map(sorted, set(CYCLES) - set(cycles))) == [], "drop these entries from CYCLES"



# -- what a KB run loads ------------------------------------------------------------------------

_KB_RUN = """
import json, sys
import pyql, pyql.agent
from pyql.agent.evaluation import runner
from pyql import Session
from pyql.agent import QueryAgent, ScriptedLLM, TokenCounter
from tests.support.metaqa import metaqa_kb

kb = metaqa_kb("Pelham|written_by|John Godey\\nPelham|directed_by|Joseph Sargent")
session = Session(kb, entities={"John Godey": "John Godey"})
session.run("add_fact(?movie, written_by, John Godey)")
session.run("add_fact(?movie, directed_by, ?director)")
session.run("set_answer(?director)")
answers = list(session.run("execute()").answers)
agent = QueryAgent(ScriptedLLM(["Action 1 : get_relation(John Godey)",
                                "Action 2 : add_fact(?movie, written_by, John Godey)",
                                "Action 3 : add_fact(?movie, directed_by, ?director)",
                                "Action 4 : set_answer(?director)",
                                "Action 5 : execute()"]),
                   kb, token_counter=TokenCounter(estimates=False))
result = agent.run("who directed the movies written by [John Godey]", {"John Godey": "John Godey"})
answers += list(result.answers)
kb_run = {name: name in sys.modules for name in ("sqlalchemy", "sqlglot")}

import pyql.db
missing = not hasattr(pyql.db, "no_such_name")
from pyql.db import SqlDB, open_db
from pyql.db.sqldb import SqlDB as Loaded
db = SqlDB.sqlite_memory(lambda c: c.execute("CREATE TABLE t(x INT)"))
print(json.dumps({"answers": answers, "kb_run": kb_run, "db": "sqlalchemy" in sys.modules,
                  "same": SqlDB is Loaded and open_db is pyql.db.open_db, "missing": missing,
                  "tables": db.table_names()}))
"""


def test_a_kb_run_loads_neither_sqlalchemy_nor_sqlglot() -> None:
    done = subprocess.run([sys.executable, "-c", _KB_RUN], capture_output=True, text=True,
                          check=True, timeout=120, cwd=ROOT)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["answers"] == ["Joseph Sargent", "Joseph Sargent"]
    assert seen["kb_run"] == {"sqlalchemy": False, "sqlglot": False}
    # and a database still loads them, through the same names as ever
    assert seen["db"] and seen["same"] and seen["missing"] and seen["tables"] == ["t"]


_CLI_START = """
import contextlib, io, sys
from pyql.cli import main
sys.argv = ["pyql", "eval", "--help"]
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
    main()
assert "--dataset" in out.getvalue(), out.getvalue()
print("mcp" in sys.modules, "pyql.apps.mcp.cli" in sys.modules)
"""


def test_a_command_other_than_mcp_does_not_load_the_mcp_sdk() -> None:
    """Every ``pyql`` invocation registers ``pyql mcp``; the package loads its server (and the
    MCP SDK, half a second of each process's start) only when a name of it is used."""
    done = subprocess.run([sys.executable, "-c", _CLI_START], capture_output=True, text=True,
                          check=True, timeout=120, cwd=ROOT)
    assert done.stdout.split() == ["False", "True"]
    from pyql.apps.mcp import MAX_ARGUMENT_CHARS, PyqlMcp
    from pyql.apps.mcp.server import PyqlMcp as Loaded

    assert PyqlMcp is Loaded and MAX_ARGUMENT_CHARS == 2000
    with pytest.raises(AttributeError):
        import pyql.apps.mcp

        pyql.apps.mcp.no_such_name  # noqa: B018
