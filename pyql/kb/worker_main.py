"""The worker side of :class:`~pyql.kb.workers.QueryWorkers`: a process that opens a store
directory read-only and answers the queries its parent sends over stdin, until stdin closes.

Kept apart from :mod:`pyql.kb.workers` (the parent side, which :mod:`pyql.kb.oxigraph` uses) so
that the store's module and the workers' do not import each other.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

from pyql.kb.oxigraph import OxigraphKB
from pyql.orphans import die_with_parent
from pyql.results import Limits

__all__ = ["main"]


def _serve(path: str, parent: int, limits: Limits) -> None:
    """A worker's loop: open the store read-only, then answer
    ``(query, form)`` messages on stdin with :meth:`~pyql.kb.oxigraph.OxigraphKB._child_answer`
    on stdout until stdin closes. Anything else written to stdout goes to stderr."""
    die_with_parent(parent, watch_only=True)
    reader = Connection(os.dup(0), writable=False)
    writer = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    try:
        kb = OxigraphKB(path=path, read_only=True, limits=limits)
    except OSError as exc:
        writer.send(("store", f"cannot open the store: {exc}"))
        return
    writer.send(("ready",))
    while True:
        try:
            query, form = reader.recv()
        except (EOFError, OSError):  # the KB was closed, or its process is gone
            return
        writer.send(kb._child_answer(query, form))


def main(argv: list[str]) -> None:
    """A worker's entry point: ``PATH PARENT_PID MAX_ROWS MAX_CELL``."""
    path, parent, max_rows, max_cell = argv
    _serve(path, int(parent), Limits(max_rows=int(max_rows), max_cell=int(max_cell)))
