"""The Playground: DSL calls typed by hand against the server's KB/DB, one Session per page.

Each page opens a :class:`Pad` (a fresh :class:`~pyql.session.Session` with the entities or
table it names); a call runs through the Session as an agent's would (guidelines and all) and
the page shows the observation, the program of accepted calls and the compiled query. **Undo**
drops the last accepted call: the Session is reset and the rest of the program replayed (the
query is an immutable value, so nothing is patched). **Completion** comes from what the
environment knows: the toolset's functions (with their signatures), the variables and entities
of the query so far, the relations at the node the walk stands on (``relations_of``: no step
is taken) and, for SQL, the columns of the table.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pyql.apps.web.render import highlight, hint_info
from pyql.apps.web.workspace import Workspace
from pyql.errors import PyqlError

__all__ = ["Pad", "Playground", "PadNotFound"]

#: pads kept at most (the oldest unused goes first)
MAX_PADS = 64


class PadNotFound(PyqlError):
    """No playground of that id (it expired, or the server restarted)."""


class Pad:
    """One page's Session (module docstring)."""

    def __init__(self, workspace: Workspace, entities: Mapping[str, str],
                 table: str | None, guidelines: bool) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.workspace = workspace
        self.entities = dict(entities)
        self.table = table
        self.session = workspace.session(entities=entities, table=table, guidelines=guidelines)
        self.lock = threading.Lock()
        self.used = time.monotonic()

    def state(self) -> dict[str, Any]:
        """The program so far and the compiled query (highlighted)."""
        query = self.session.to_query() if len(self.session.program) else ""
        return {"id": self.id, "program": [str(c) for c in self.session.program],
                "query": query,
                "query_html": str(highlight(query, self.workspace.language)) if query else "",
                "entities": self.entities, "table": self.table}

    def run(self, action: str) -> dict[str, Any]:
        with self.lock:
            self.used = time.monotonic()
            obs = self.session.run(action)
            return {"observation": {
                "step": obs.step, "action": obs.action, "status": obs.status, "ok": obs.ok,
                "text": obs.text, "error": obs.error,
                "hint": hint_info(obs.hint.code) if obs.hint is not None else None,
                "answers": [str(a) for a in obs.answers] if obs.answers is not None else None,
            }, **self.state()}

    def undo(self) -> dict[str, Any]:
        with self.lock:
            self.used = time.monotonic()
            calls = list(self.session.program)
            self.session.reset()
            for call in calls[:-1]:
                self.session.run(call)
            return {"undone": str(calls[-1]) if calls else None, **self.state()}

    def complete(self) -> dict[str, Any]:
        """What the page may complete with (module docstring)."""
        with self.lock:
            session = self.session
            toolset = session.toolset
            functions = [{"name": name, "signature": str(toolset[name]),
                          "doc": toolset[name].doc.strip().splitlines()[0]
                          if toolset[name].doc.strip() else ""}
                         for name in toolset]
            memory = session.memory
            relations: list[str] = []
            node = None
            if self.workspace.language == "sparql":
                current = getattr(session, "current_node", None)
                node = current() if callable(current) else None
                if node is not None:
                    try:
                        relations = list(session.relations_of(node).all)
                    except PyqlError:
                        relations = []
            return {"functions": functions, "variables": list(memory.variables),
                    "entities": list(memory.entities), "relations": relations,
                    "node": str(node) if node is not None else None,
                    "columns": list(memory.columns)}


class Playground:
    """The pads of the server, by id."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.pads: dict[str, Pad] = {}
        self._lock = threading.Lock()

    def open(self, entities: Mapping[str, str], table: str | None, guidelines: bool) -> Pad:
        pad = Pad(self.workspace, entities, table, guidelines)
        with self._lock:
            if len(self.pads) >= MAX_PADS:
                oldest = min(self.pads.values(), key=lambda p: p.used)
                del self.pads[oldest.id]
            self.pads[pad.id] = pad
        return pad

    def get(self, pad_id: str) -> Pad:
        pad = self.pads.get(pad_id)
        if pad is None:
            raise PadNotFound(f"no playground {pad_id!r} (it expired): open a new one")
        return pad
