"""``pyql mcp``: serve a KB or a database to MCP hosts (:mod:`pyql.apps.mcp.server`).

::

    pyql mcp --kb ../shared/data/metaqa/kb.txt                 # stdio, for a desktop host
    pyql mcp --db pyql/data/demo.sqlite --transport http --port 8765
    PYQL_MCP_TOKEN=... pyql mcp --kb KB --transport http --host 0.0.0.0 --allow-host kb.example

Registered through the ``pyql.commands`` entry point ``mcp`` (:mod:`pyql.cli.plugins`); needs
the ``mcp`` extra (``pip install 'pyql-kbqa[mcp]'``). Logs go to stderr: over stdio, stdout is
the protocol's.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from typing import Annotated, Any

import typer

from pyql.agent.commands import options as opts
from pyql.cli import CliError, check_one_backend, open_db, open_kb, pairs, reported, warnings_shown
from pyql.cli.options import DbOpt, KbOpt, PrefixOpt, ProfileOpt, QueryTimeoutOpt, TableOpt

__all__ = ["register", "mcp_command"]


#: the packages of the ``mcp`` extra that :mod:`pyql.apps.mcp.server` imports
SDK_MODULES = ("mcp", "mcp_types")


def register(app: typer.Typer) -> None:
    """Add ``pyql mcp`` to the ``pyql`` app. The SDK is looked for, not imported (every ``pyql``
    invocation registers the command); without it, :class:`ModuleNotFoundError`, which
    :mod:`pyql.cli.plugins` turns into the extra's install command in ``pyql --help``."""
    for name in SDK_MODULES:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    app.command("mcp")(mcp_command)


def mcp_command(
    kb: KbOpt = None,
    db: DbOpt = None,
    table: TableOpt = None,
    profile: ProfileOpt = None,
    prefix: PrefixOpt = None,
    prompt: Annotated[
        str | None,
        typer.Option("--prompt", metavar="NAME",
                     help="Prompt profile whose DSL calls are the tools (default: metaqa or "
                     "freebase by the KB profile, else generic; wikisql with --table, else "
                     "spider)."),
    ] = None,
    guidelines: Annotated[
        str, typer.Option("--guidelines", metavar="on|off",
                          help="ERASER guidelines on each step (hints carry their code).")
    ] = "on",
    transport: Annotated[
        str, typer.Option("--transport", metavar="stdio|http",
                          help="stdio (a host starts the server) or Streamable HTTP.")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", metavar="ADDRESS",
                                      help="HTTP: the address to listen on (one "
                                      "that is not loopback needs a bearer token).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="HTTP: the port.")
                    ] = 8765,
    idle_timeout: Annotated[
        float, typer.Option("--idle-timeout", min=1.0, metavar="SECONDS",
                            help="Drop a session's state after this long without a call.")
    ] = 1800.0,
    token_env: Annotated[
        str, typer.Option("--token-env", metavar="VAR",
                          help="HTTP: the environment variable holding the bearer token that "
                          "every request must send (Authorization: Bearer TOKEN); when it is "
                          "set, auth is on for every bind.")
    ] = "PYQL_MCP_TOKEN",
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", metavar="NAME",
                     help="HTTP: a host name clients reach the server by, accepted in the Host "
                     "and Origin headers besides loopback and the bound address (repeatable).")
    ] = None,
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", min=1, metavar="N",
                          help="HTTP: sessions open at once; at the cap the oldest idle one is "
                          "evicted for a new one.")
    ] = 1000,
    timeout: QueryTimeoutOpt = None,
    llm: Annotated[
        str | None,
        typer.Option("--llm", metavar="SPEC",
                     help="Offer an `ask` tool that answers end to end with this model, the "
                     "same spec as `pyql ask`/`pyql eval`: openai:MODEL (with --base-url or "
                     "$OPENAI_BASE_URL), local[:PATH.gguf], gold, noisy-gold:RATE, ...")
    ] = None,
    base_url: opts.BaseUrlOpt = None,
    strategy: opts.StrategyOpt = None,
) -> None:
    """Serve a KB (--kb) or a database (--db) to MCP hosts: the DSL calls as tools, one
    pyql session per MCP session, ERASER hints as results, read-only."""
    check_one_backend(kb, db)
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("expected stdio or http", param_hint="--transport")
    if guidelines not in ("on", "off"):
        raise typer.BadParameter("expected on or off", param_hint="--guidelines")
    logging.basicConfig(level=logging.WARNING, format="pyql mcp: %(levelname)s %(message)s")
    token = os.environ.get(token_env) or None
    with warnings_shown(), reported():
        try:
            from pyql.apps.mcp.server import LlmConfig, PyqlMcp
        except ModuleNotFoundError as exc:
            if exc.name is None or not exc.name.startswith("mcp"):
                raise
            raise CliError("the mcp package is not installed: pip install 'pyql-kbqa[mcp]'"
                           ) from None
        from pyql.agent.evaluation.llm_spec import LLMSpecError
        from pyql.apps.mcp.serve import BindError, check_bind

        if transport == "http":
            try:
                check_bind(host, token)
            except BindError as exc:  # bad usage, like any option that cannot be served
                raise typer.BadParameter(str(exc), param_hint="--host") from None
        backend: Any = (open_kb(kb, profile, pairs(prefix, "--prefix", "NAME=IRI"))
                        if kb is not None else open_db(db, timeout))  # type: ignore[arg-type]
        try:
            face = PyqlMcp(backend, table=table, prompt_profile=prompt,
                           guidelines=guidelines == "on", timeout=timeout,
                           idle_timeout=idle_timeout,
                           llm=LlmConfig(llm, base_url=base_url,
                                         strategy=strategy or "queryagent") if llm else None)
        except (LLMSpecError, ValueError) as exc:
            raise CliError(str(exc)) from None
    from pyql.apps.mcp.serve import serve_http, serve_stdio

    if transport == "stdio":
        serve_stdio(face)
    else:
        serve_http(face, host=host, port=port, token=token, allowed_hosts=allow_host or (),
                   max_sessions=max_sessions,
                   ready=lambda url: print(f"pyql mcp: serving {url}", file=sys.stderr,
                                           flush=True))
