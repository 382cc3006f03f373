"""Third-party libraries' log records, while pyql calls them, go to pyql's log instead of stderr.

Libraries pyql drives log what is no news to a pyql user: sqlglot's "... contains unsupported
syntax. Falling back to parsing as a 'Command'" when the read-only guard parses hostile text by
design, or the features a target dialect lacks; rdflib's tracebacks for every ``xsd:dateTime``
literal written as a bare year (``"1961"^^xsd:dateTime``, everywhere in Freebase's gold
queries) that it cannot turn into a Python value. With no logging configured, Python's
last-resort handler prints those to stderr, in the middle of a CLI's output.

Inside :func:`rerouted` (a context variable: thread- and task-safe) the named library logger's
records are re-emitted on a pyql logger at DEBUG level and not passed on; the library called by
anything else logs as it always does.

>>> import logging
>>> from sqlglot import parse
>>> with rerouted("sqlglot", "pyql.sql"):
...     trees = parse("SHOW TABLES", read="sqlite")   # nothing on stderr
>>> trees[0].key
'command'
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["rerouted"]

#: the library loggers rerouted in the current context
_ACTIVE: ContextVar[frozenset[str]] = ContextVar("pyql_rerouted_loggers", default=frozenset())
_INSTALLED: dict[str, logging.Filter] = {}
_LOCK = threading.Lock()


class _Reroute(logging.Filter):
    """Drops ``source``'s records inside :func:`rerouted`, logging them on ``into`` instead."""

    def __init__(self, source: str, into: str) -> None:
        super().__init__()
        self.source = source
        self.into = logging.getLogger(into)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.source not in _ACTIVE.get():
            return True
        self.into.debug("%s %s: %s", self.source, record.levelname.lower(), record.getMessage())
        return False


@contextmanager
def rerouted(source: str, into: str) -> Iterator[None]:
    """Within this block, the records logged on the ``source`` logger become DEBUG records of
    ``into``. (A logger's filters see the records logged on it, not its children's: name the
    logger the library logs on, e.g. ``rdflib.term``.)"""
    with _LOCK:
        if source not in _INSTALLED:
            _INSTALLED[source] = _Reroute(source, into)
            logging.getLogger(source).addFilter(_INSTALLED[source])
    token = _ACTIVE.set(_ACTIVE.get() | {source})
    try:
        yield
    finally:
        _ACTIVE.reset(token)
