"""sqlglot's fallback warnings never reach stderr from pyql's calls (issue 15 item 6)."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from sqlglot import parse

from pyql.db.guard import GuardError, ensure_read_only_sql
from pyql.sql.sqlglot_log import sqlglot_warnings_logged

_SCRIPT = """
from pyql.db.guard import GuardError, ensure_read_only_sql
from pyql.sql.from_sql import to_program
try:
    ensure_read_only_sql("SHOW TABLES", "sqlite")
except GuardError:
    print("refused")
from pyql.sql.schema import Schema
print(type(to_program("SHOW TABLES", Schema(()))).__name__)
"""


def test_no_sqlglot_warning_on_stderr_without_logging_configured() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.split() == ["refused", "Unsupported"]
    assert done.stderr == ""


def test_the_warning_becomes_a_debug_record_of_pyql(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(GuardError):
        ensure_read_only_sql("SHOW TABLES", "sqlite")
    ours = [r for r in caplog.records if r.name == "pyql.sql"]
    assert ours and ours[0].levelno == logging.DEBUG and "Falling back" in ours[0].getMessage()
    assert not [r for r in caplog.records if r.name == "sqlglot"]


def test_sqlglot_called_by_others_logs_as_always(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    parse("SHOW TABLES", read="sqlite")
    assert [r for r in caplog.records if r.name == "sqlglot"]
    with sqlglot_warnings_logged():
        parse("SHOW TABLES", read="sqlite")
    assert len([r for r in caplog.records if r.name == "sqlglot"]) == 1
