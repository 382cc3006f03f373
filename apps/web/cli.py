"""``pyql serve``: the web app on a KB or a database (registered through the ``pyql.commands``
entry point ``serve``).

::

    pyql serve --kb "$(pyql demo --kb-path)"                 # http://127.0.0.1:8780
    pyql serve --db "$(pyql demo --db-path)" --runs runs/    # and the run directories in runs/
    pyql serve --kb kb.ttl --host 0.0.0.0 --allow-remote --token "$(openssl rand -hex 16)"

It binds 127.0.0.1 unless told otherwise; any other address needs ``--allow-remote`` and a
``--token`` (each request then carries it: the printed URL sets it as a cookie).
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import Annotated

import typer

from pyql.cli import CliError, check_one_backend, open_kb, pairs, reported
from pyql.cli.options import (
    DbOpt,
    KbOpt,
    PrefixOpt,
    ProfileOpt,
    QueryTimeoutOpt,
    TableOpt,
)

__all__ = ["register", "serve_command", "DEFAULT_PORT", "BindError", "check_bind"]

log = logging.getLogger(__name__)

DEFAULT_PORT = 8780


def register(app: typer.Typer) -> None:
    """Add ``pyql serve`` to the ``pyql`` app."""
    app.command("serve")(serve_command)


class BindError(CliError):
    """A non-loopback ``--host`` without what it needs: ``missing`` is ``allow_remote`` or
    ``token`` (exit code 2)."""

    def __init__(self, message: str, *, missing: str, hint: str) -> None:
        super().__init__(message, hint=hint, code=2)
        self.missing = missing


def check_bind(host: str, allow_remote: bool, token: str | None) -> bool:
    """Whether ``host`` is the loopback; :class:`BindError` when it is not and
    ``--allow-remote`` or a ``--token`` (16 characters at least) is missing."""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if local:
        return True
    if not allow_remote:
        raise BindError(f"--host {host} would serve other machines", missing="allow_remote",
                        hint="add --allow-remote and --token TOKEN to do so")
    if not token or len(token) < 16:
        raise BindError("a remote bind needs --token of at least 16 characters",
                        missing="token", hint="e.g. --token \"$(openssl rand -hex 16)\"")
    return False


def serve_command(
    kb: KbOpt = None,
    db: DbOpt = None,
    table: TableOpt = None,
    profile: ProfileOpt = None,
    prefix: PrefixOpt = None,
    runs: Annotated[
        list[Path] | None,
        typer.Option("--runs", metavar="DIR", help="A run directory, or a folder of them, to "
                     "browse and compare (repeatable)."),
    ] = None,
    out: Annotated[
        Path,
        typer.Option("--out", metavar="DIR", help="Where the Ask page saves its runs."),
    ] = Path("pyql-serve-runs"),
    host: Annotated[str, typer.Option("--host", metavar="HOST",
                                      help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="N", min=0, max=65535,
                                      help="Port (0: any free one).")] = DEFAULT_PORT,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow a non-loopback --host (needs --token).")
    ] = False,
    token: Annotated[
        str | None,
        typer.Option("--token", metavar="TOKEN", envvar="PYQL_SERVE_TOKEN",
                     help="Every request must carry it (needed with --allow-remote)."),
    ] = None,
    timeout: QueryTimeoutOpt = None,
) -> None:
    """A local web app: ask questions and watch each step live, browse and compare evaluation
    runs, and type DSL calls by hand (the Playground)."""
    with reported():
        check_one_backend(kb, db)
        local = check_bind(host, allow_remote, token)
        try:
            import uvicorn

            from pyql.apps.web.app import LOCAL_HOSTS, ServeConfig, create_app
            from pyql.apps.web.workspace import Workspace
        except ImportError as exc:
            raise CliError(f"pyql serve cannot be loaded: {exc}",
                           hint="pip install 'pyql-kbqa[web]'") from None
        prefixes = pairs(prefix, "--prefix", "NAME=IRI")
        if kb is not None:
            backend = open_kb(kb, profile, prefixes, timeout)
            workspace = Workspace(kb=kb, backend=backend, language="sparql", table=table)
        else:
            workspace = Workspace(db=db, table=table, timeout=timeout)
        for path in runs or ():
            if not path.is_dir():
                raise CliError(f"--runs {path}: no such folder")
        out.mkdir(parents=True, exist_ok=True)
        config = ServeConfig(workspace=workspace, out=out, runs=list(runs or ()), token=token,
                             allowed_hosts=LOCAL_HOSTS if local else None)
        app = create_app(config)
    if port == 0:  # a free port, chosen here so the address printed is the one served
        import socket

        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    suffix = f"/?token={token}" if token else "/"
    typer.echo(f"pyql serve: {workspace.describe()} on http://{shown}:{port}{suffix}  "
               "(Ctrl-C to stop)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
