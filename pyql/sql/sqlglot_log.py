"""sqlglot's warnings, while pyql calls sqlglot, go to pyql's log instead of stderr.

sqlglot logs through the ``"sqlglot"`` logger: "... contains unsupported syntax. Falling back to
parsing as a 'Command'" when it parses text it does not know (the read-only guard parses hostile
text by design), and the features a target dialect lacks when it generates SQL. With no logging
configured, Python's last-resort handler prints those to stderr, in the middle of a CLI's output.

Inside :func:`sqlglot_warnings_logged` (a context variable: thread- and task-safe) such records are
re-emitted on pyql's ``"pyql.sql"`` logger at DEBUG level and not passed on; sqlglot called by
anything else logs as it always does.

>>> import logging
>>> from sqlglot import parse
>>> with sqlglot_warnings_logged():
...     trees = parse("SHOW TABLES", read="sqlite")   # nothing on stderr
>>> trees[0].key
'command'
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["sqlglot_warnings_logged"]

log = logging.getLogger("pyql.sql")
_ACTIVE: ContextVar[bool] = ContextVar("pyql_sqlglot_warnings_logged", default=False)


class _Reroute(logging.Filter):
    """Drops sqlglot's records inside :func:`sqlglot_warnings_logged`, logging them as pyql's."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _ACTIVE.get():
            return True
        log.debug("sqlglot %s: %s", record.levelname.lower(), record.getMessage())
        return False


_FILTER = _Reroute()
logging.getLogger("sqlglot").addFilter(_FILTER)  # addFilter ignores a filter already there


@contextmanager
def sqlglot_warnings_logged() -> Iterator[None]:
    """Within this block, sqlglot's log records become DEBUG records of ``pyql.sql``."""
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
