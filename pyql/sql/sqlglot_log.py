"""sqlglot's warnings, while pyql calls sqlglot, go to pyql's ``pyql.sql`` log instead of stderr
(:func:`pyql.logs.rerouted` on the ``sqlglot`` logger).

>>> from sqlglot import parse
>>> with sqlglot_warnings_logged():
...     trees = parse("SHOW TABLES", read="sqlite")   # nothing on stderr
>>> trees[0].key
'command'
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyql.logs import rerouted

__all__ = ["sqlglot_warnings_logged"]


@contextmanager
def sqlglot_warnings_logged() -> Iterator[None]:
    """Within this block, sqlglot's log records become DEBUG records of ``pyql.sql``."""
    with rerouted("sqlglot", "pyql.sql"):
        yield
