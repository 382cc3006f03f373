"""What the server works on: the KB or database ``pyql serve`` was started with, opened once.

A :class:`Workspace` holds the backend (a :class:`~pyql.kb.KB` for ``--kb``, a
:class:`~pyql.db.SqlDB` for ``--db``), its query language, the default table, the entity
linker of a KB (built on first use) and the example questions shown on the Ask page: the
``pyql demo`` tours when the backend is the bundled movie KB or basketball database (each with
its linked entities and its gold program, so ``--llm gold`` answers it with no model).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyql.errors import PyqlError

__all__ = ["Example", "Workspace", "WorkspaceError", "parse_entities"]

log = logging.getLogger(__name__)


class WorkspaceError(PyqlError):
    """The server cannot open or use its KB/DB (``field``: the setting at fault)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Example:
    """A question the Ask page offers: its entities (or table) and a gold program."""

    title: str
    question: str
    entities: Mapping[str, str] = field(default_factory=dict)
    table: str | None = None
    program: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "question": self.question, "entities": dict(self.entities),
                "table": self.table, "program": self.program}


def parse_entities(text: str) -> dict[str, str]:
    """``MENTION=ID`` lines (or ``;``-separated pairs) as a dict; :class:`WorkspaceError`
    (``field="entities"``) for a pair without ``=``.

    >>> parse_entities("Christopher Nolan=ex:Christopher_Nolan; Inception = ex:Inception")
    {'Christopher Nolan': 'ex:Christopher_Nolan', 'Inception': 'ex:Inception'}
    """
    out: dict[str, str] = {}
    for part in text.replace(";", "\n").splitlines():
        if not part.strip():
            continue
        mention, sep, kb_id = part.partition("=")
        if not sep or not mention.strip() or not kb_id.strip():
            raise WorkspaceError(f"an entity is MENTION=ID, not {part.strip()!r}",
                                 field="entities")
        out[mention.strip()] = kb_id.strip()
    return out


class Workspace:
    """The opened KB or DB (module docstring). ``kb``/``db``: the locations given to
    ``pyql serve``; ``backend`` is given directly by tests and embedders."""

    def __init__(self, *, kb: str | None = None, db: str | None = None, table: str | None = None,
                 profile: str | None = None, prefixes: Mapping[str, str] | None = None,
                 timeout: float | None = None, backend: Any = None,
                 language: Literal["sparql", "sql"] | None = None) -> None:
        if backend is None and (kb is None) == (db is None):
            raise WorkspaceError("give exactly one of --kb PATH_OR_URL or --db URL", field="kb")
        self.location = kb or db or ""
        self.table = table
        self._linker: Any = None
        self._lock = threading.Lock()
        if backend is not None:
            self.backend = backend
            self.language = language or ("sql" if db is not None else "sparql")
        elif kb is not None:
            from pyql.cli.backends import open_kb

            self.backend = open_kb(kb, profile, prefixes, timeout)
            self.language = "sparql"
        else:
            from pyql.cli.backends import open_sql_session

            assert db is not None
            self.backend = open_sql_session(db, table, timeout=timeout).db
            self.language = "sql"
        self.examples = self._examples()

    @property
    def tools(self) -> Literal["sparql", "sql"]:
        return "sql" if self.language == "sql" else "sparql"

    def describe(self) -> str:
        kind = "DB" if self.language == "sql" else "KB"
        return f"{kind} {self.location or type(self.backend).__name__}"

    # -- sessions -------------------------------------------------------------------------------
    def session(self, *, entities: Mapping[str, str] | None = None, table: str | None = None,
                guidelines: bool = True) -> Any:
        """A fresh Session on the backend (the Playground's)."""
        from pyql.session import Session

        if self.language == "sql":
            return Session(self.backend, table=table or self.table, guidelines=guidelines)
        return Session(self.backend, entities=dict(entities or {}), guidelines=guidelines)

    def tables(self) -> list[str]:
        """The database's tables (none for a KB)."""
        if self.language != "sql":
            return []
        names = getattr(self.backend, "table_names", None)
        try:
            return sorted(names()) if callable(names) else []
        except PyqlError as exc:
            log.warning("cannot list the tables of %s: %s", self.location, exc)
            return []

    # -- entity linking -------------------------------------------------------------------------
    def link(self, question: str) -> dict[str, str]:
        """The question's entities linked from the KB's labels (``pyql ask``'s linker); none
        for a database."""
        if self.language == "sql":
            return {}
        with self._lock:
            if self._linker is None:
                from pyql.agent.grounding.linking import LabelIndex, LabelLinker
                from pyql.kb.oxigraph import OxigraphKB

                limit = None if isinstance(self.backend, OxigraphKB) else 200_000
                self._linker = LabelLinker(LabelIndex.from_kb(self.backend, limit=limit))
        return dict(self._linker.candidates(question).entities)

    # -- examples -------------------------------------------------------------------------------
    def _examples(self) -> tuple[Example, ...]:
        """The demo tours of the bundled KB (or database) this workspace is on, if it is."""
        from pyql import demo

        name = None
        location = Path(self.location).expanduser() if self.location else None
        try:
            if location is not None and location.exists():
                if self.language == "sparql" and location.resolve() == demo.movies_path().resolve():
                    name = "kb"
                elif self.language == "sql":
                    from importlib import resources

                    bundled = Path(str(resources.files("pyql").joinpath("data/demo.sqlite")))
                    if location.resolve() == bundled.resolve():
                        name = "sql"
        except (OSError, PyqlError, ImportError) as exc:
            log.debug("no demo examples: %s", exc)
        if name is None:
            return ()
        try:
            tours = demo.get_tour_set(name).tours
        except LookupError:
            return ()
        return tuple(Example(t.title, t.question, dict(t.entities), t.table,
                             "\n".join(t.steps)) for t in tours)
