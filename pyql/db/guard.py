"""The read-only guard: one SQL read statement in, a verified sqlglot tree out.

Every statement a :class:`~pyql.db.SqlDB` runs passes :func:`ensure_read_only_sql` first. It
parses the text with sqlglot in the backend's dialect and refuses, with a
:class:`GuardError` (a :class:`~pyql.errors.ReadOnlyError`), anything but exactly one read query:

- more than one statement (``SELECT 1; DROP TABLE t``), or none;
- a statement that is not a query (``INSERT``/``UPDATE``/``DELETE``/``MERGE``, DDL, ``PRAGMA``,
  ``ATTACH``/``DETACH``, ``COPY``, ``SET``, ``CALL``, ``EXPLAIN``, transactions, anything sqlglot
  only knows as an opaque command);
- a write hidden inside a query (``WITH x AS (DELETE ... RETURNING *) SELECT ...``), a
  ``SELECT ... INTO`` (creates a table), a row lock (``FOR UPDATE``);
- a call of a function known to write, load code or files, or reach other servers
  (``load_extension``, ``lo_import``, ``pg_read_file``, ``dblink``, DuckDB's ``read_csv``,
  MySQL's ``LOAD_FILE``, ...); harmless functions such as ``pg_sleep`` are fine;
- text that sqlglot cannot parse: what cannot be checked is not run.

The caller runs the *returned tree* (regenerated for the dialect), not the original text, so a
disagreement between sqlglot's tokenizer and the engine's cannot smuggle in a second statement.
Engines add their own protection underneath (read-only files and sessions), see :mod:`pyql.db.sqldb`.

>>> ensure_read_only_sql("SELECT name FROM singer WHERE age > 30", "sqlite").sql("sqlite")
'SELECT name FROM singer WHERE age > 30'
>>> ensure_read_only_sql("DELETE FROM singer", "sqlite")
Traceback (most recent call last):
pyql.db.guard.GuardError: refused: DELETE is a write; pyql databases are read-only (only one SELECT query is allowed)
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot import parse as sqlglot_parse
from sqlglot.errors import SqlglotError

from pyql.errors import ReadOnlyError
from pyql.sql.sqlglot_log import sqlglot_warnings_logged

__all__ = ["GuardError", "ensure_read_only_sql", "REFUSED_FUNCTIONS", "REFUSED_FUNCTION_PREFIXES"]

_SUFFIX = "pyql databases are read-only (only one SELECT query is allowed)"


class GuardError(ReadOnlyError):
    """A statement the read-only guard refused.

    ``kind`` says why, as a stable code: ``"empty"``, ``"unparseable"``, ``"multiple"``,
    ``"not_query"``, ``"write"``, ``"ddl"``, ``"pragma"``, ``"attach"``, ``"copy"``, ``"set"``,
    ``"command"``, ``"transaction"``, ``"select_into"``, ``"lock"`` or ``"function"``.
    ``what`` names the culprit (``"DELETE"``, ``"load_extension"``); ``statement`` is the text.
    """

    def __init__(self, message: str, *, kind: str, what: str = "", statement: str = "") -> None:
        self.kind = kind
        self.what = what
        self.statement = statement
        super().__init__(message)


def _classes(*names: str) -> tuple[type[exp.Expression], ...]:
    # sqlglot renames/adds node classes between versions; use the ones this version has.
    return tuple(getattr(exp, n) for n in names if isinstance(getattr(exp, n, None), type))


# (node classes, kind, label) checked against every node of the tree, in order.
_REFUSED_NODES: tuple[tuple[tuple[type[exp.Expression], ...], str], ...] = (
    (_classes("Insert", "Update", "Delete", "Merge", "LoadData"), "write"),
    (
        _classes(
            "Create",
            "Drop",
            "Alter",
            "AlterTable",
            "TruncateTable",
            "Comment",
            "Grant",
            "Revoke",
            "Analyze",
            "Refresh",
            "Cache",
            "Uncache",
            "Export",
            "Install",
        ),
        "ddl",
    ),
    (_classes("Pragma"), "pragma"),
    (_classes("Attach", "Detach", "Use"), "attach"),
    (_classes("Copy"), "copy"),
    (_classes("Set", "SetItem", "Declare"), "set"),
    (_classes("Transaction", "Commit", "Rollback"), "transaction"),
    (_classes("Command", "Execute", "Kill", "Describe", "Show", "Summarize", "Return"), "command"),
    (_classes("Into"), "select_into"),
    (_classes("Lock"), "lock"),
    (_classes("DML", "DDL"), "write"),
)

# Top-level statement forms that read.
_QUERY_FORMS = _classes(
    "Select", "Union", "Intersect", "Except", "SetOperation", "Subquery", "Values"
)

#: functions refused wherever they appear (lower case, as called; schema prefixes ignored)
REFUSED_FUNCTIONS: frozenset[str] = frozenset(
    {
        # SQLite (extension loading; the shell's file I/O functions; a known exploit vector)
        "load_extension",
        "readfile",
        "writefile",
        "edit",
        "fts3_tokenizer",
        "fsdir",
        "zipfile",
        "sqlar_compress",
        "sqlar_uncompress",
        # PostgreSQL: large objects, server files, other servers, settings, sequences, admin
        "lo_import",
        "lo_export",
        "lo_unlink",
        "lo_create",
        "lo_creat",
        "lo_from_bytea",
        "lo_put",
        "lo_open",
        "lo_truncate",
        "lowrite",
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_dir",
        "pg_stat_file",
        "pg_file_write",
        "pg_file_rename",
        "pg_file_unlink",
        "pg_file_sync",
        "pg_logdir_ls",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_promote",
        "pg_switch_wal",
        "pg_create_restore_point",
        "pg_backup_start",
        "pg_backup_stop",
        "pg_start_backup",
        "pg_stop_backup",
        "pg_import_system_collations",
        "pg_stat_reset",
        "set_config",
        "nextval",
        "setval",
        "query_to_xml",
        "query_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "cursor_to_xml",
        "cursor_to_xmlschema",
        # DuckDB: files, other databases, SQL given as a string
        "glob",
        "parquet_scan",
        "parquet_metadata",
        "parquet_schema",
        "sqlite_scan",
        "sqlite_attach",
        "postgres_scan",
        "postgres_attach",
        "postgres_query",
        "postgres_execute",
        "mysql_query",
        "mysql_execute",
        "iceberg_scan",
        "delta_scan",
        "query",
        "query_table",
        # MySQL / SQL Server / Oracle
        "load_file",
        "sys_exec",
        "sys_eval",
        "openrowset",
        "opendatasource",
        "openquery",
        "openxml",
    }
)

#: function name prefixes refused (families such as ``dblink_*``, ``lo_*``, DuckDB ``read_*``)
REFUSED_FUNCTION_PREFIXES: tuple[str, ...] = (
    "dblink",
    "lo_",
    "pg_read_",
    "pg_ls_",
    "pg_file_",
    "pg_advisory",
    "pg_try_advisory",
    "pg_replication_",
    "pg_create_",
    "pg_drop_",
    "pg_logical_",
    "read_",
    "xp_",
    "sp_",
    "utl_",
    "dbms_",
)


def _function_names(node: exp.Func) -> list[str]:
    if isinstance(node, exp.Anonymous):
        return [node.name.lower()]
    return [n.lower() for n in type(node).sql_names()]


def _refused_function(name: str) -> bool:
    return name in REFUSED_FUNCTIONS or name.startswith(REFUSED_FUNCTION_PREFIXES)


def _label(node: exp.Expression) -> str:
    key = type(node).__name__
    if isinstance(node, exp.Command):
        return str(node.this).upper() or "COMMAND"
    return {
        "Into": "SELECT ... INTO",
        "Lock": "FOR UPDATE/SHARE",
        "TruncateTable": "TRUNCATE",
        "SetItem": "SET",
    }.get(key, key.upper())


def _reason(kind: str, what: str) -> str:
    return {
        "write": f"{what} is a write",
        "select_into": "SELECT ... INTO creates a table",
        "lock": "FOR UPDATE/SHARE takes row locks",
    }.get(kind, f"{what} is not a read query")


def check_tree(tree: exp.Expression, statement: str = "") -> exp.Expression:
    """Verify an already-parsed tree is one read query; return it or raise :class:`GuardError`."""
    if not isinstance(tree, _QUERY_FORMS):
        kind = next((k for classes, k in _REFUSED_NODES if isinstance(tree, classes)), "not_query")
        what = _label(tree) if kind != "not_query" else ""
        reason = _reason(kind, what) if kind != "not_query" else "the statement is not a query"
        raise GuardError(f"refused: {reason}; {_SUFFIX}", kind=kind, what=what, statement=statement)
    for node in tree.walk():
        for classes, kind in _REFUSED_NODES:
            if isinstance(node, classes):
                what = _label(node)
                raise GuardError(
                    f"refused: {_reason(kind, what)}; {_SUFFIX}",
                    kind=kind,
                    what=what,
                    statement=statement,
                )
        if isinstance(node, exp.Func):
            for name in _function_names(node):
                if _refused_function(name):
                    raise GuardError(
                        f"refused: function {name}() can write, load code or read files; {_SUFFIX}",
                        kind="function",
                        what=name,
                        statement=statement,
                    )
    return tree


def ensure_read_only_sql(sql: str | exp.Expression, dialect: str | None = None) -> exp.Expression:
    """Parse ``sql`` (in ``dialect``) and return its tree if it is exactly one read query.

    An :class:`sqlglot.exp.Expression` is checked as it is. Raises :class:`GuardError`.

    >>> ensure_read_only_sql("WITH a AS (SELECT 1 AS x) SELECT x FROM a UNION SELECT 2").key
    'union'
    >>> ensure_read_only_sql("SELECT 1; SELECT 2").__class__
    Traceback (most recent call last):
    pyql.db.guard.GuardError: refused: found 2 statements; pyql databases are read-only (only one SELECT query is allowed)
    """
    if isinstance(sql, exp.Expression):
        try:
            text = sql.sql(dialect=dialect or None)
        except SqlglotError:
            text = repr(sql)
        return check_tree(sql, text)
    if not isinstance(sql, str):
        raise TypeError(f"expected SQL text or a sqlglot expression, got {type(sql).__name__}")
    try:
        with sqlglot_warnings_logged():
            trees = [t for t in sqlglot_parse(sql, read=dialect or None) if t is not None]
    except SqlglotError as exc:
        detail = str(exc).split("\n", 1)[0]
        raise GuardError(
            f"refused: the statement does not parse ({dialect or 'generic'} SQL), so it cannot be "
            f"checked as read-only: {detail}",
            kind="unparseable",
            statement=sql,
        ) from None
    if not trees:
        raise GuardError("refused: no SQL statement given", kind="empty", statement=sql)
    if len(trees) > 1:
        raise GuardError(
            f"refused: found {len(trees)} statements; {_SUFFIX}", kind="multiple", statement=sql
        )
    return check_tree(trees[0], sql)
