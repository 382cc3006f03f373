"""The Starlette app of ``pyql serve``: pages, JSON endpoints, the Ask event stream, and the
safety rules every request goes through.

**Safety.**

- *Read-only*: nothing here writes to the KB or the database (the Session refuses to); the app
  writes only its own Ask run directories (under ``ServeConfig.out``).
- *Escaping*: every template is autoescaped; the pages' scripts set text with ``textContent``;
  the only HTML built outside a template is Pygments' highlighting, which escapes each token.
  The Content-Security-Policy allows scripts from the app's own ``/static`` only, so an
  injected ``<script>`` would not run even if it got through.
- *Requests that change state* (every ``POST``) need the page's CSRF token in the
  ``X-CSRF-Token`` header and an ``Origin`` (or ``Referer``) of the app itself: another site's
  page cannot start or cancel a run (:class:`CsrfError`, 403).
- *Hosts*: bound to 127.0.0.1, only ``127.0.0.1``/``localhost`` Host headers are answered (no
  DNS rebinding); any other bind needs ``--allow-remote`` and ``--token``: every request then
  carries the token (``?token=`` once, then a cookie).
- *Isolation*: each Ask run is a thread of its own; the event loop only relays its events, so a
  slow or hung run blocks no other request; a closed tab (its event stream dropped) cancels its
  run.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from pyql.agent.evaluation.llm_spec import LLMSpecError
from pyql.agent.evaluation.report import RunView
from pyql.apps.web import runs as run_pages
from pyql.apps.web.asks import AskManager
from pyql.apps.web.playground import PadNotFound, Playground
from pyql.apps.web.render import guideline_info, templates
from pyql.apps.web.workspace import Workspace, WorkspaceError, parse_entities
from pyql.errors import PyqlError

__all__ = ["ServeConfig", "create_app", "CsrfError", "LOCAL_HOSTS", "TOKEN_COOKIE"]

log = logging.getLogger(__name__)

#: the Host headers a server bound to the loopback answers
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
#: the cookie that carries ``--token`` after the first request
TOKEN_COOKIE = "pyql_serve_token"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
       "form-action 'self'; object-src 'none'")
_LLM_SPECS = ("gold", "noisy-gold:0.3", "local", "openai:gpt-4o-mini")


class CsrfError(PyqlError):
    """A state-changing request without the page's token or from another origin (``why``)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"refused: {why}")
        self.why = why


@dataclass
class ServeConfig:
    """What ``pyql serve`` was started with: the workspace, the run folders it may open
    (``runs``), where Ask runs are saved (``out``), the token of a non-local bind and the
    allowed Host headers (None: any, for a remote bind with a token)."""

    workspace: Workspace
    out: Path
    runs: list[Path] = field(default_factory=list)
    token: str | None = None
    allowed_hosts: tuple[str, ...] | None = LOCAL_HOSTS
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))


# -- safety ---------------------------------------------------------------------------------------
class _Guard:
    """Token and CSRF/Origin checks, and the security headers of every response (pure ASGI, so
    the event stream is not buffered)."""

    def __init__(self, app: ASGIApp, config: ServeConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        token = self.config.token
        set_cookie = False
        if token is not None:
            given = request.cookies.get(TOKEN_COOKIE) or request.query_params.get("token") or ""
            auth = request.headers.get("authorization", "")
            if auth.lower().startswith("bearer "):
                given = auth[7:]
            if not hmac.compare_digest(given.encode(), token.encode()):
                await _error(401, "TokenRequired", "this server needs its token: open the URL "
                             "pyql serve printed (…?token=…)")(scope, receive, send)
                return
            set_cookie = request.cookies.get(TOKEN_COOKIE) != token
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            why = _csrf_problem(request, self.config.csrf_token)
            if why is not None:
                await _error(403, "CsrfError", str(CsrfError(why)))(scope, receive, send)
                return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()),
                            (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"same-origin"),
                            (b"x-frame-options", b"DENY")]
                if set_cookie and token is not None:
                    headers.append((b"set-cookie", (
                        f"{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict").encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _csrf_problem(request: Request, csrf_token: str) -> str | None:
    """Why a state-changing request is refused (None: it is not)."""
    own = f"{request.url.scheme}://{request.url.netloc}"
    origin = request.headers.get("origin")
    if origin is None:
        referer = request.headers.get("referer")
        if referer is None:
            return "no Origin or Referer header"
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    if origin != own:
        return f"the request comes from {origin}, not {own}"
    given = request.headers.get("x-csrf-token", "")
    if not hmac.compare_digest(given.encode(), csrf_token.encode()):
        return "the X-CSRF-Token header is missing or wrong (reload the page)"
    return None


def _error(status: int, kind: str, message: str, field_name: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, "field": field_name}},
                        status_code=status)


def _problem(exc: Exception, status: int = 400) -> JSONResponse:
    field_name = getattr(exc, "field", None) or getattr(exc, "parameter", None)
    if field_name is None and hasattr(exc, "option"):
        field_name = "options"
    return _error(status, type(exc).__name__, str(exc), field_name)


# -- pages ----------------------------------------------------------------------------------------
def create_app(config: ServeConfig) -> Starlette:
    """The app (module docstring). Ask runs are saved under ``config.out``, which is also the
    first run folder the Runs page lists."""
    workspace = config.workspace
    asks = AskManager(workspace, config.out)
    pad = Playground(workspace)
    index = run_pages.RunIndex([config.out, *config.runs])
    env = templates()

    def page(template: str, request: Request, http_status: int = 200, **context: Any
             ) -> HTMLResponse:
        html = env.get_template(template).render(
            csrf=config.csrf_token, workspace=workspace, nav=template.split(".")[0], **context)
        return HTMLResponse(html, status_code=http_status)

    def not_found(request: Request, exc: Exception) -> HTMLResponse:
        return page("error.html.j2", request, 404, title="Not found", message=str(exc))

    def keyed_run(request: Request) -> run_pages.RunRef:
        """The run the ``key`` query parameter names (:class:`~run_pages.RunNotFound`: none)."""
        return index.get(request.query_params.get("key", ""))

    def opened_run(request: Request) -> tuple[run_pages.RunRef, RunView]:
        """The run the ``key`` query parameter names, and its files read."""
        ref = keyed_run(request)
        return ref, run_pages.read(ref)

    # -- ask --------------------------------------------------------------------------------------
    def ask_page(request: Request) -> HTMLResponse:
        return page("ask.html.j2", request, title="Ask",
                    form={"strategies": asks.strategies(), "llms": list(_LLM_SPECS),
                          "examples": [e.to_json() for e in workspace.examples],
                          "language": workspace.language, "table": workspace.table,
                          "tables": workspace.tables()})

    async def ask_create(request: Request) -> JSONResponse:
        try:
            form = await request.json()
        except ValueError:
            return _error(400, "BadRequest", "the body is not JSON")
        if not isinstance(form, dict):
            return _error(400, "BadRequest", "the body is a JSON object")
        try:  # linking may read the KB's labels: off the event loop
            ask = await run_in_threadpool(asks.check, form)
        except (PyqlError, LLMSpecError, ValueError) as exc:
            return _problem(exc)
        run = asks.create(ask)
        key = f"0/{run.out.name}"
        return JSONResponse({"id": run.id, "events": f"/api/ask/{run.id}/events",
                             "cancel": f"/api/ask/{run.id}/cancel",
                             "permalink": f"/question?key={key}&id=ask-{run.id}",
                             "entities": dict(ask.entities), "linked": ask.linked})

    async def ask_events(request: Request) -> Response:
        run = asks.get(request.path_params["run_id"])
        if run is None:
            return _error(404, "RunNotFound", "no such run (the server may have restarted)")
        asks.start(run)  # the run starts when its page listens: it sees every step live

        async def events() -> Any:
            try:
                async for event in run.stream():
                    yield {"event": event["type"], "id": str(event["seq"]),
                           "data": json.dumps(event, ensure_ascii=False, default=str)}
            finally:
                if not run.finished:  # the tab was closed (or navigated away): stop the run
                    log.info("ask run %s: its page went away; cancelling", run.id)
                    run.cancel()

        return EventSourceResponse(events(), ping=15)

    def ask_cancel(request: Request) -> JSONResponse:
        run = asks.get(request.path_params["run_id"])
        if run is None:
            return _error(404, "RunNotFound", "no such run")
        return JSONResponse({"cancelled": run.cancel(), "state": run.state})

    # -- runs -------------------------------------------------------------------------------------
    def runs_page(request: Request) -> HTMLResponse:
        refs = index.runs()
        listed = []
        for ref in refs:
            try:
                cfg = json.loads((ref.path / "config.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                cfg = {}
            listed.append({"ref": ref, "config": cfg if isinstance(cfg, dict) else {},
                           "live": run_pages.is_live(ref.path),
                           "headline": run_pages.headline(ref.path)})
        return page("runs.html.j2", request, title="Runs", runs=listed, roots=index.roots)

    async def runs_open(request: Request) -> JSONResponse:
        try:
            body = await _body(request)
            ref = index.add(str(body.get("path") or "").strip() or ".")
        except run_pages.RunNotFound as exc:
            return _error(400, "RunNotFound", str(exc), "path")
        except PyqlError as exc:
            return _problem(exc)
        return JSONResponse({"key": ref.key, "url": f"/run?key={ref.key}"})

    def run_page(request: Request) -> HTMLResponse:
        try:
            ref, view = opened_run(request)
        except run_pages.RunNotFound as exc:
            return not_found(request, exc)
        primary = view.metrics.get("primary")
        primary = primary if isinstance(primary, str) else None
        rows = [run_pages.row_json(row, primary) for row in view.rows]
        return page("run.html.j2", request, title=f"Run {ref.name}", ref=ref, view=view,
                    summary=view.summary, guidelines=view.guidelines, rows=rows,
                    primary=primary, live=run_pages.is_live(ref.path),
                    last=max((r["line"] for r in rows), default=0),
                    others=[r for r in index.runs() if r.key != ref.key])

    def run_rows(request: Request) -> JSONResponse:
        try:
            ref = keyed_run(request)
            after = int(request.query_params.get("after", "0"))
            return JSONResponse(run_pages.rows_after(ref, after))
        except run_pages.RunNotFound as exc:
            return _problem(exc, 404)
        except ValueError as exc:
            return _problem(exc)

    def run_summary(request: Request) -> HTMLResponse:
        try:
            ref, view = opened_run(request)
        except run_pages.RunNotFound as exc:
            return not_found(request, exc)
        html = env.get_template("summary_part.html.j2").render(
            summary=view.summary, guidelines=view.guidelines)
        return HTMLResponse(html)

    def question(request: Request) -> HTMLResponse:
        try:
            ref = keyed_run(request)
            data = run_pages.question_page(ref, request.query_params.get("id", ""))
        except run_pages.RunNotFound as exc:
            qid = request.query_params.get("id", "")
            live = asks.get(qid.removeprefix("ask-")) if qid.startswith("ask-") else None
            if live is not None and not live.finished:  # an Ask run's permalink, too early
                return page("error.html.j2", request, 404, title="Still running",
                            message=f"{live.request.question!r} is still being answered: its "
                            "run directory is written when it ends; reload this page then.")
            return not_found(request, exc)
        return page("question.html.j2", request, title=f"Question {data['result'].id}",
                    hint_names={k: v["name"] for k, v in guideline_info().items()}, **data)

    def compare(request: Request) -> HTMLResponse:
        try:
            a = index.get(request.query_params.get("a", ""))
            b = index.get(request.query_params.get("b", ""))
        except run_pages.RunNotFound as exc:
            return not_found(request, exc)
        return page("compare.html.j2", request, title="Compare",
                    **run_pages.compare_runs(a, b))

    # -- playground -------------------------------------------------------------------------------
    def playground_page(request: Request) -> HTMLResponse:
        return page("playground.html.j2", request, title="Playground",
                    form={"examples": [e.to_json() for e in workspace.examples],
                          "language": workspace.language, "table": workspace.table,
                          "tables": workspace.tables()})

    async def _body(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise WorkspaceError("the body is a JSON object", field="body")
        return body

    async def pad_open(request: Request) -> JSONResponse:
        try:
            body = await _body(request)
            entities = parse_entities(str(body.get("entities") or ""))
            table = str(body.get("table") or "").strip() or workspace.table
            opened = await run_in_threadpool(pad.open, entities, table,
                                             bool(body.get("guidelines", True)))
            return JSONResponse(await run_in_threadpool(opened.state))
        except PyqlError as exc:
            return _problem(exc)

    async def pad_run(request: Request) -> JSONResponse:
        try:
            body = await _body(request)
            one = pad.get(request.path_params["pad_id"])
            action = str(body.get("action") or "").strip()
            if not action:
                raise WorkspaceError("type a call, e.g. get_relation(...)", field="action")
            return JSONResponse(await run_in_threadpool(one.run, action))
        except PadNotFound as exc:
            return _problem(exc, 404)
        except PyqlError as exc:
            return _problem(exc)

    async def pad_undo(request: Request) -> JSONResponse:
        try:
            one = pad.get(request.path_params["pad_id"])
        except PadNotFound as exc:
            return _problem(exc, 404)
        return JSONResponse(await run_in_threadpool(one.undo))

    def pad_complete(request: Request) -> JSONResponse:
        try:
            return JSONResponse(pad.get(request.path_params["pad_id"]).complete())
        except PadNotFound as exc:
            return _problem(exc, 404)

    # -- guidelines -------------------------------------------------------------------------------
    def guideline(request: Request) -> HTMLResponse:
        code = request.path_params["code"]
        info = guideline_info().get(code)
        if info is None:
            return not_found(request, PyqlError(f"no guideline {code!r} is installed"))
        return page("guideline.html.j2", request, title=f"{code} {info['name']}", g=info)

    def report_css(request: Request) -> Response:
        from importlib import resources

        css = resources.files("pyql.agent.evaluation").joinpath("report.css").read_text("utf-8")
        return Response(css, media_type="text/css")

    def pygments_css(request: Request) -> Response:
        from pygments.formatters import HtmlFormatter

        return Response(HtmlFormatter().get_style_defs(".hl"), media_type="text/css")

    def favicon(request: Request) -> Response:
        return Response(status_code=204)

    routes = [
        Route("/", ask_page),
        Route("/api/ask", ask_create, methods=["POST"]),
        Route("/api/ask/{run_id}/events", ask_events),
        Route("/api/ask/{run_id}/cancel", ask_cancel, methods=["POST"]),
        Route("/runs", runs_page),
        Route("/api/runs/open", runs_open, methods=["POST"]),
        Route("/run", run_page),
        Route("/api/run/rows", run_rows),
        Route("/api/run/summary", run_summary),
        Route("/question", question),
        Route("/compare", compare),
        Route("/playground", playground_page),
        Route("/api/playground", pad_open, methods=["POST"]),
        Route("/api/playground/{pad_id}/run", pad_run, methods=["POST"]),
        Route("/api/playground/{pad_id}/undo", pad_undo, methods=["POST"]),
        Route("/api/playground/{pad_id}/complete", pad_complete),
        Route("/guidelines/{code}", guideline),
        Route("/static/report.css", report_css),
        Route("/static/pygments.css", pygments_css),
        Route("/favicon.ico", favicon),
        Mount("/static", StaticFiles(packages=[("pyql.apps.web", "static")]), name="static"),
    ]
    middleware = [Middleware(_Guard, config=config)]
    if config.allowed_hosts is not None:
        middleware.insert(0, Middleware(TrustedHostMiddleware,
                                        allowed_hosts=list(config.allowed_hosts)))
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        asks.shutdown()  # the runs still going stop at their next step

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.asks = asks
    app.state.playground = pad
    app.state.config = config
    return app

