"""pyql as an MCP server: the Session's DSL calls as tools, one Session per MCP session.

:class:`PyqlMcp` binds one backend (a KB or a database) and one prompt profile, and builds a
low-level ``mcp`` :class:`~mcp.server.lowlevel.Server` (:meth:`PyqlMcp.server`) serving:

- **tools**: the prompt profile's DSL calls, with the JSON schemas of
  :func:`pyql.agent.strategies.queryagent.prompts.tool_schemas` (the ones native tool-calling uses), and the
  session tools ``start_question``, ``show_query``, ``show_program``, ``undo``, ``reset``
  (and ``ask`` when an LLM is configured). Every DSL call is one :meth:`Session.run` step;
  its result is the observation's text beside structured content (:func:`observation_content`).
  A guideline's hint is a normal result carrying its code; a call the Python side refused
  (malformed arguments, an unknown tool, a term that is not one, an over-long argument) is a
  tool error (``isError``) with the typed error's message and fields;
- **resources**: the KB's relation vocabulary (ranked for the session's question once one is
  started, or for any question through ``pyql://relations/{question}``) or the database schema,
  and the session's program and query;
- **prompts**: QueryAgent's task description and one-shot demo for the profile.

Sessions are kept per MCP session (a stdio connection, a Streamable HTTP session) and expire
after ``idle_timeout`` seconds without a call; each keeps its last :data:`MAX_HISTORY`
observations and at most :data:`MAX_PROGRAM_CALLS` calls, and runs its threaded calls on its
own worker (one session's hung calls never hold the pool). Results are bounded: text to
:data:`MAX_TEXT_CHARS`, structured content by :func:`bounded`; a failing backend (in a step,
while linking) is a tool error. Over HTTP, the 2026 per-request protocol era has
no session to keep a Session in, so the server answers an HTTP ``server/discover`` with "method
not found" (clients fall back to the initialize handshake, which has sessions) and refuses
per-request HTTP calls with one clear error; over stdio both eras serve (the connection is the
session).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from pyql import __version__
from pyql.agent.strategies.queryagent.prompts import (
    PromptProfile,
    format_schema,
    get_prompt_profile,
    question_message,
    render_observation,
    system_prompt,
)
from pyql.environment import Environment, GuidelineChecker, Observation, resolve_guidelines
from pyql.errors import (
    BackendError,
    InputError,
    ParseError,
    QueryError,
    TermError,
    UnknownFunctionError,
)
from pyql.feedback import Feedback, Hint
from pyql.kb.base import KB
from pyql.schemas import call_from_arguments, tool_schemas

if TYPE_CHECKING:
    from pyql.agent.grounding.linking import LabelLinker

__all__ = [
    "PyqlMcp",
    "LlmConfig",
    "SessionStore",
    "SESSION_TOOLS",
    "MAX_ARGUMENT_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_STRUCTURED_CHARS",
    "MAX_HISTORY",
    "MAX_PROGRAM_CALLS",
    "DEFAULT_IDLE_TIMEOUT",
    "observation_content",
]

log = logging.getLogger(__name__)

#: the longest argument a tool call may carry (a KB id, a label or a value is far shorter)
MAX_ARGUMENT_CHARS = 2000
#: the longest text a tool result or resource holds (observations are bounded the same way
#: for a model in :func:`pyql.agent.strategies.queryagent.prompts.render_observation`)
MAX_TEXT_CHARS = 3000
#: relations listed in a tool result / the vocabulary resource
TOP_RELATIONS = 40
VOCABULARY_SHOWN = 200
#: seconds without a call after which an MCP session's Session is dropped
DEFAULT_IDLE_TIMEOUT = 30 * 60.0
#: the longest text a string of a result's structured content holds, and the most items a list
#: of it holds (both shrink until the whole fits :data:`MAX_STRUCTURED_CHARS`)
MAX_VALUE_CHARS = 1000
MAX_LIST_ITEMS = 100
#: the most characters a result's structured content takes as JSON
MAX_STRUCTURED_CHARS = 100_000
#: the observations an MCP session keeps (the older ones are dropped: only the program and
#: the query carry state from step to step)
MAX_HISTORY = 20
#: the most calls an MCP session's program holds; a longer one is refused (``reset`` it)
MAX_PROGRAM_CALLS = 500

#: the tools that drive the session rather than the query (name -> description)
SESSION_TOOLS = {
    "start_question": "Start a new question: forget the query so far and link the question's "
                      "entities (given, else from the KB labels). Returns the linked entities.",
    "show_query": "The SPARQL/SQL query the program so far compiles to.",
    "show_program": "The program of accepted calls so far, one call a line.",
    "undo": "Drop the last accepted call (the query is rebuilt from the calls before it).",
    "reset": "Forget the query and program; keep the question and its entities.",
    "ask": "Answer the question end to end with a reasoning strategy (runs its own LLM); "
           "returns the answers, the query and the trajectory.",
}


class _Guidelines:
    """ERASER for one MCP session, muted while ``undo`` replays calls it already accepted (a
    call accepted only because the model insisted after a result hint would be rolled back
    again, and the replayed program would silently lose it)."""

    def __init__(self, checker: GuidelineChecker) -> None:
        self.checker = checker
        self.muted = False

    def evaluate(self, feedback: Feedback) -> Hint | None:
        return None if self.muted else self.checker.evaluate(feedback)


@dataclass
class _Entry:
    """One MCP session's state: its Session, question and entities."""

    session: Environment
    question: str = ""
    entities: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)
    #: the session's worker thread: its calls wait here (not in a thread) for the one before
    #: to end, so a session whose calls hang holds one thread, never the pool other sessions use
    limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(1))


class SessionStore:
    """One :class:`_Entry` per MCP session key, dropped after ``idle_timeout`` seconds without
    use (the HTTP transport forgets its sessions after the same time)."""

    def __init__(self, factory: Callable[[], _Entry], idle_timeout: float) -> None:
        self._factory = factory
        self.idle_timeout = idle_timeout
        self._entries: dict[Any, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> _Entry:
        now = time.monotonic()
        with self._lock:
            for other, entry in list(self._entries.items()):
                if now - entry.used > self.idle_timeout and not entry.lock.locked():
                    log.info("MCP session idle for %.0fs: its pyql session expires",
                             now - entry.used)
                    del self._entries[other]
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = self._factory()
            entry.used = now
            return entry

    def drop(self, key: Any) -> bool:
        """Forget the state of ``key`` now (its MCP session ended); whether there was one."""
        with self._lock:
            return self._entries.pop(key, None) is not None

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class LlmConfig:
    """What the ``ask`` tool runs: a strategy over the model of an ``--llm`` spec, read as
    ``pyql ask``/``pyql eval`` read it (:func:`~pyql.agent.evaluation.llm_spec.parse_llm_spec`:
    ``openai:MODEL``, ``local[:PATH.gguf]``, ``gold``, ``noisy-gold:RATE``, ...); ``base_url``
    and ``api_key`` for ``openai:``."""

    spec: str
    base_url: str | None = None
    api_key: str | None = None
    strategy: str = "queryagent"
    options: Mapping[str, Any] = field(default_factory=dict)
    max_steps: int | None = None


class PyqlMcp:
    """The MCP face of pyql over one backend (see the module docstring)."""

    def __init__(
        self,
        backend: Any,
        *,
        table: str | None = None,
        prompt_profile: str | None = None,
        guidelines: bool = True,
        max_values: int = 10,
        timeout: float | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        llm: LlmConfig | None = None,
        linker: LabelLinker | None = None,
    ) -> None:
        self.backend = backend
        self.is_kb = isinstance(backend, KB)
        self.table = table
        self.profile: PromptProfile = get_prompt_profile(
            prompt_profile or _default_prompt_profile(backend, table))
        if self.profile.tools != ("sparql" if self.is_kb else "sql"):
            raise ValueError(f"the prompt profile {self.profile.name!r} is for "
                             f"{self.profile.tools.upper()}, not this backend")
        self.guidelines = guidelines
        self.max_values = max_values
        self.timeout = timeout
        self.llm = llm
        self._provider = _llm_provider(llm) if llm is not None else None
        self._asked = 0
        self._linker = linker
        self._linker_lock = threading.Lock()
        self._signatures = {s.name: s for s in self.profile.signatures}
        self._schemas = {t["function"]["name"]: t["function"]
                         for t in tool_schemas(self.profile.signatures, self.profile)}
        self.sessions = SessionStore(self._new_entry, idle_timeout)
        self._stdio_key = _StdioConnection()

    # -- sessions -------------------------------------------------------------------------------
    def new_session(self, entities: Mapping[str, str] | None = None) -> Environment:
        from pyql.session import Session

        checker = resolve_guidelines(self.guidelines)
        options: dict[str, Any] = {"guidelines": _Guidelines(checker) if checker else None,
                                   "max_values": self.max_values,
                                   "functions": self.profile.functions}
        if self.is_kb:
            options["timeout"] = self.timeout
            session = Session(self.backend, entities=dict(entities or {}), **options)
        else:
            session = Session(self.backend, table=self.table, **options)
        return session  # type: ignore[no-any-return]

    def _new_entry(self) -> _Entry:
        return _Entry(self.new_session())

    def link(self, question: str) -> dict[str, str]:
        """The question's entities linked from the KB labels, as ``pyql ask`` links them."""
        with self._linker_lock:
            if self._linker is None:
                from pyql.agent.commands.ask import ENDPOINT_LABEL_LIMIT
                from pyql.agent.grounding.linking import LabelIndex, LabelLinker
                from pyql.kb.oxigraph import OxigraphKB

                limit = None if isinstance(self.backend, OxigraphKB) else ENDPOINT_LABEL_LIMIT
                self._linker = LabelLinker(LabelIndex.from_kb(self.backend, limit=limit,
                                                              timeout=self.timeout))
            linker = self._linker
        return linker.candidates(question).entities

    # -- tools ----------------------------------------------------------------------------------
    def tools(self) -> list[types.Tool]:
        out = [types.Tool(name=name, description=schema["description"],
                          input_schema=schema["parameters"])
               for name, schema in self._schemas.items()]
        for name, description in SESSION_TOOLS.items():
            if name == "ask" and self.llm is None:
                continue
            out.append(types.Tool(name=name, description=description,
                                  input_schema=self._session_tool_schema(name)))
        return out

    def _session_tool_schema(self, name: str) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        if name in ("start_question", "ask"):
            properties["question"] = {"type": "string", "description": "The question."}
            required.append("question")
            if self.is_kb:
                properties["entities"] = {
                    "type": "object", "additionalProperties": {"type": "string"},
                    "description": "mention -> KB id as calls write it (optional: linked from "
                                   "the KB labels when not given)"}
        return {"type": "object", "properties": properties, "required": required,
                "additionalProperties": False}

    def call(self, key: Any, name: str, arguments: Mapping[str, Any] | None
             ) -> types.CallToolResult:
        """Run the tool ``name`` in the session of ``key`` (blocking: the Session queries)."""
        entry = self.sessions.get(key)
        arguments = dict(arguments or {})
        session_tool = name in SESSION_TOOLS and (name != "ask" or self.llm is not None)
        with entry.lock:
            try:
                _check_lengths(name, arguments)
                if session_tool:
                    return self._session_tool(entry, name, arguments)
                if name in self._signatures:
                    call = call_from_arguments(name, arguments, self._signatures,
                                               _arguments_text(arguments))
                    if len(entry.session.program) >= MAX_PROGRAM_CALLS:
                        call = QueryError(
                            f"the program has {MAX_PROGRAM_CALLS} calls, the most a session "
                            "keeps: reset or start a question", code="program_too_long")
                else:
                    call = UnknownFunctionError(name, [t.name for t in self.tools()])
            except InputError as exc:
                if session_tool:  # not a DSL step: the session's record is left alone
                    return error_result(exc)
                call = exc
            except BackendError as exc:  # linking or a replay hit a failing KB/DB
                return backend_error_result(exc)
            if isinstance(call, InputError):
                obs = entry.session.reject(_action_text(name, arguments), call)
            else:
                obs = entry.session.run(call)
            del entry.session.observations[:-MAX_HISTORY]
            return self._result(entry, obs)

    def _result(self, entry: _Entry, obs: Observation) -> types.CallToolResult:
        content = observation_content(obs)
        if obs.hint is not None:
            text = f"Hint {obs.hint.code}: {obs.hint.message}"
            if obs.hint.suggestions:
                text += "\nSuggestions: " + ", ".join(obs.hint.suggestions)
        else:
            text = render_observation(obs, obs.step, question=entry.question,
                                      ranker=_bm25() if entry.question else None,
                                      top_k=TOP_RELATIONS, max_chars=MAX_TEXT_CHARS)
        if obs.relations is not None and obs.error is None:
            content["relations"] = _bounded_relations(obs, entry.question)
        # a backend that failed or timed out is an error even when a guideline hinted at it
        refused = (obs.feedback.python.status != "ok"
                   or obs.feedback.backend.status in ("backend_error", "timeout"))
        return _tool_result(_cap(text), content, is_error=refused)

    def _session_tool(self, entry: _Entry, name: str, args: dict[str, Any]) -> types.CallToolResult:
        unknown = sorted(set(args) - set(self._session_tool_schema(name)["properties"]))
        if unknown:
            raise ParseError(f"{name}: unknown argument(s) {', '.join(unknown)}",
                             json.dumps(args)[:MAX_TEXT_CHARS])
        if name == "start_question":
            return self._start(entry, args)
        if name == "ask":
            return self._ask(entry, args)
        if name == "reset":
            entry.session.reset()
        elif name == "undo":
            calls = list(entry.session.program)
            if not calls:
                raise QueryError("undo: the program is empty", code="nothing_to_undo")
            entry.session.reset()
            guidelines = entry.session.guidelines
            if isinstance(guidelines, _Guidelines):
                guidelines.muted = True
            try:
                for call in calls[:-1]:
                    entry.session.run(call)
            finally:
                if isinstance(guidelines, _Guidelines):
                    guidelines.muted = False
        program = str(entry.session.program)
        query = _query(entry.session)
        text = {"show_query": query or "(empty query)",
                "show_program": program or "(empty program)"}.get(
            name, f"Done. Program:\n{program or '(empty)'}")
        return _tool_result(_cap(text), {"status": "ok", "program": program, "query": query})

    def _start(self, entry: _Entry, args: dict[str, Any]) -> types.CallToolResult:
        question = _text_arg(args, "question", 0)
        given = _entities_arg(args)
        entities: dict[str, str] = {}
        if self.is_kb:
            entities = dict(given) if given else self.link(question)
        entry.session = self.new_session(entities)
        entry.question, entry.entities = question, entities
        linked = ", ".join(f"{m} -> {i}" for m, i in entities.items())
        how = "given" if given else "linked from the KB labels"
        if self.is_kb:
            text = (f"Question started. Entities ({how}): {linked}" if entities else
                    "Question started. No entity found in the KB labels: pass entities.")
        else:
            schema = entry.session.schema  # type: ignore[attr-defined]
            text = f"Question started. Schema:\n{format_schema(schema)}"
        return _tool_result(_cap(text), {"status": "ok", "question": question,
                                         "entities": entities})

    def _ask(self, entry: _Entry, args: dict[str, Any]) -> types.CallToolResult:
        from pyql.agent.errors import LLMError
        from pyql.agent.evaluation.records import EvalItem
        from pyql.agent.strategy import StrategyConfig, build_strategy

        assert self.llm is not None and self._provider is not None
        question = _text_arg(args, "question", 0)
        given = _entities_arg(args)
        entities = dict(given) if given is not None else (
            self.link(question) if self.is_kb else {})
        with self._linker_lock:
            self._asked += 1
            item = EvalItem(id=f"mcp-{self._asked}", question=question, entities=entities,
                            tools="sparql" if self.is_kb else "sql", table=self.table)
        llm = self._provider.for_item(item)
        config = StrategyConfig(guidelines=self.guidelines, max_steps=self.llm.max_steps,
                                table=self.table, options=dict(self.llm.options))
        strategy = build_strategy(self.llm.strategy, llm, self.backend, config)
        try:
            result = strategy.run(question, entities, table=self.table)
        except LLMError as exc:  # the model failed, not the call: a tool error with its fields
            return _tool_result(_cap(f"Error: the LLM call failed: {exc}"), {
                "status": "llm_error", "error": {"type": type(exc).__name__,
                                                 "message": str(exc)[:500],
                                                 "status": exc.status, "code": exc.code}},
                is_error=True)
        answers = [_json_value(a) for a in result.answers]
        steps = [{"n": s.n, "thought": s.thought, "action": s.action,
                  "observation": _cap(s.observation), "hint": s.hint}
                 for s in result.steps]
        text = (f"Answers: {', '.join(map(str, answers)) or '(none)'}\n"
                f"Query:\n{result.query or '(none)'}")
        return _tool_result(_cap(text), {
            "status": "ok", "question": question, "entities": entities, "answers": answers,
            "query": result.query, "program": str(result.program),
            "finished": result.finished, "trajectory": steps})

    # -- resources ------------------------------------------------------------------------------
    def resources(self) -> list[types.Resource]:
        vocabulary = (types.Resource(name="relations", uri="pyql://relations",
                                     mime_type="text/plain",
                                     description="The KB's relations (ranked for the session's "
                                                 "question once one is started).")
                      if self.is_kb else
                      types.Resource(name="schema", uri="pyql://schema", mime_type="text/plain",
                                     description="The database's tables, columns and keys."))
        return [vocabulary,
                types.Resource(name="program", uri="pyql://session/program",
                               mime_type="text/plain",
                               description="The session's program of accepted calls."),
                types.Resource(name="query", uri="pyql://session/query", mime_type="text/plain",
                               description="The session's query, compiled.")]

    def resource_templates(self) -> list[types.ResourceTemplate]:
        if not self.is_kb:
            return []
        return [types.ResourceTemplate(
            name="relations-for-question", uri_template="pyql://relations/{question}",
            mime_type="text/plain",
            description="The KB's relations ranked for a question (URL-encoded).")]

    def read(self, key: Any, uri: str) -> str:
        entry = self.sessions.get(key)
        if uri == "pyql://session/program":
            return str(entry.session.program)
        if uri == "pyql://session/query":
            return _query(entry.session)
        if uri == "pyql://schema" and not self.is_kb:
            return format_schema(entry.session.schema)  # type: ignore[attr-defined]
        if uri == "pyql://relations" and self.is_kb:
            return self.relations(entry.question)
        if uri.startswith("pyql://relations/") and self.is_kb:
            return self.relations(unquote(uri.removeprefix("pyql://relations/")))
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri[:200]!r}")

    def relations(self, question: str) -> str:
        """The KB's relations, one a line: the first :data:`VOCABULARY_SHOWN`, best first by
        BM25 for ``question`` when one is given, then how many there are in all."""
        from pyql.agent.grounding.paths.binding import RelationVocabulary

        names = list(RelationVocabulary.of_kb(self.backend).relations)
        if question:
            scores = _bm25().scores(question, names)
            names = [names[i] for i in sorted(range(len(names)), key=lambda i: (-scores[i], i))]
        shown = names[:VOCABULARY_SHOWN]
        more = f"\n({len(names)} relations in all)" if len(names) > len(shown) else ""
        return "\n".join(shown) + more

    # -- prompts --------------------------------------------------------------------------------
    def prompts(self) -> list[types.Prompt]:
        return [types.Prompt(
            name="queryagent",
            description=f"QueryAgent's task description and one-shot demo ({self.profile.name} "
                        "profile): build the query with the tools, one call at a time.",
            arguments=[types.PromptArgument(name="question", required=False,
                                            description="The question to start with."),
                       types.PromptArgument(name="mode", required=False,
                                            description="tools (default) or text")])]

    def prompt(self, name: str, arguments: Mapping[str, str] | None) -> types.GetPromptResult:
        if name != "queryagent":
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {name[:100]!r}")
        args = dict(arguments or {})
        for key, value in args.items():
            if len(key) > MAX_ARGUMENT_CHARS or len(str(value)) > MAX_ARGUMENT_CHARS:
                raise MCPError(types.INVALID_PARAMS,
                               f"prompt argument {key[:100]!r} has {len(str(value))} characters; "
                               f"at most {MAX_ARGUMENT_CHARS} are read",
                               data={"argument": key[:100], "length": len(str(value)),
                                     "limit": MAX_ARGUMENT_CHARS})
        mode = args.get("mode") or "tools"
        if mode not in ("tools", "text"):
            raise MCPError(types.INVALID_PARAMS, "mode must be 'tools' or 'text'")
        text = system_prompt(self.profile, mode if not self.profile.verbatim else "text")
        question = args.get("question")
        if question:
            try:
                entities = self.link(question) if self.is_kb else {}
            except BackendError as exc:  # linking hit a failing KB: a typed error, not a crash
                raise MCPError(types.INTERNAL_ERROR, f"linking the question's entities failed: "
                               f"{str(exc)[:300]}", data={"type": type(exc).__name__,
                                                         "backend": exc.backend}) from exc
            schema = None if self.is_kb else self.backend.schema()
            text += "\n" + question_message(self.profile, question, entities=entities,
                                            schema=schema)
        return types.GetPromptResult(
            description=f"QueryAgent, {self.profile.name} profile",
            messages=[types.PromptMessage(role="user",
                                          content=types.TextContent(type="text", text=text))])

    # -- the MCP server -------------------------------------------------------------------------
    def _key(self, ctx: Any) -> Any:
        """The MCP session a request belongs to: over stdio, the one connection this process
        serves (either protocol era); over HTTP, the ``Mcp-Session-Id`` of the handshake era.
        A per-request HTTP exchange (2026 era, or a stateless one) has no session."""
        if ctx.request is None:
            return self._stdio_key
        session_id = ctx.request.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(types.INVALID_REQUEST, "pyql mcp keeps one pyql session per MCP "
                           "session: connect over HTTP with the initialize handshake (a "
                           "pre-2026-07-28 protocol)")
        return ("http", session_id)

    def server(self, *, inline_steps: bool = False) -> Server[Any]:
        """A low-level MCP server serving this backend (one Session per MCP session).

        With ``inline_steps`` (stdio: one host, which waits for each result) a DSL step and the
        session tools but ``start_question`` and ``ask`` run on the event loop itself: a hop to a
        worker thread and back costs two thread wake-ups, more than the step on an embedded
        store (``benchmarks/mcp_latency.py``), and the connection has nothing else to serve
        meanwhile. Otherwise (HTTP: concurrent clients) every call runs in a worker thread. A
        call that arrives while a threaded one is running goes to a thread too: it waits for
        the session's lock, and inline that wait would stop the event loop (no listing, no ping,
        no cancellation until ``ask`` ends).
        """
        threaded = {"start_question", "ask"}
        in_threads = 0  # calls in worker threads; read and changed on the event loop only

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools())

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            nonlocal in_threads
            key = self._key(ctx)
            if inline_steps and params.name not in threaded and not in_threads:
                return self.call(key, params.name, params.arguments)
            in_threads += 1
            try:
                return await anyio.to_thread.run_sync(self.call, key, params.name,
                                                      params.arguments,
                                                      limiter=self.sessions.get(key).limiter)
            finally:
                in_threads -= 1

        async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=self.resources())

        async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
            return types.ListResourceTemplatesResult(resource_templates=self.resource_templates())

        async def read_resource(ctx: Any, params: types.ReadResourceRequestParams
                                ) -> types.ReadResourceResult:
            uri = str(params.uri)
            key = self._key(ctx)
            text = await anyio.to_thread.run_sync(self.read, key, uri,
                                                  limiter=self.sessions.get(key).limiter)
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=uri, mime_type="text/plain", text=text)])

        async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
            return types.ListPromptsResult(prompts=self.prompts())

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams
                             ) -> types.GetPromptResult:
            try:  # a session's prompts wait for its calls only, not for other sessions'
                limiter = self.sessions.get(self._key(ctx)).limiter
            except MCPError:  # a per-request HTTP exchange: no session, the shared pool
                limiter = None
            return await anyio.to_thread.run_sync(self.prompt, params.name, params.arguments,
                                                  limiter=limiter)

        async def discover(ctx: Any, params: Any) -> Any:
            if ctx.request is not None:  # HTTP: a client that falls back gets a session
                raise MCPError(types.METHOD_NOT_FOUND, "pyql mcp keeps one pyql session per "
                               "MCP session: use the initialize handshake over HTTP")
            return await stdio_discover.handler(ctx, params)  # stdio: the connection is one

        server: Server[Any] = Server(
            "pyql", version=__version__,
            instructions=_instructions(self.profile, self.is_kb),
            on_list_tools=list_tools, on_call_tool=call_tool,
            on_list_resources=list_resources, on_list_resource_templates=list_templates,
            on_read_resource=read_resource, on_list_prompts=list_prompts,
            on_get_prompt=get_prompt)
        if not _tracing():  # the SDK's span per message costs ~0.1 ms when nothing records it
            server.middleware = [m for m in server.middleware  # (the class is not public)
                                 if type(m).__name__ != "OpenTelemetryMiddleware"]
        stdio_discover = server.get_request_handler("server/discover")
        assert stdio_discover is not None
        server.add_request_handler("server/discover", stdio_discover.params_type, discover)
        return server


# -- helpers ------------------------------------------------------------------------------------


def _tracing() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (e.g. by ``opentelemetry-instrument``
    before the server starts): only then are the SDK's per-message spans recorded."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(),
                          (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


class _StdioConnection:
    """The one connection a stdio server process serves (a session key)."""


def _default_prompt_profile(backend: Any, table: str | None) -> str:
    if isinstance(backend, KB):
        name = backend.profile.name
        return name if name in ("freebase", "metaqa", "wikidata") else "generic"
    return "wikisql" if table else "spider"


def _instructions(profile: PromptProfile, is_kb: bool) -> str:
    what = "SPARQL over a knowledge graph" if is_kb else "SQL over a database"
    return (f"Build {what} step by step. Call start_question first, then the DSL tools "
            f"({', '.join(profile.functions)}) one at a time; each result shows what the "
            "backend returned. A result starting with 'Hint CODE:' means the step was rolled "
            "back: follow the hint. End with execute(). The prompt 'queryagent' has a worked "
            "example.")


def _check_lengths(name: str, arguments: Mapping[str, Any]) -> None:
    for index, (key, value) in enumerate(arguments.items()):
        text = value if isinstance(value, str) else _json_text(value)
        if len(text) > MAX_ARGUMENT_CHARS:
            raise TermError(f"argument {key!r} of {name[:100]} has {len(text)} characters; at most "
                            f"{MAX_ARGUMENT_CHARS} are read", text=text[:80] + "...",
                            expected=f"at most {MAX_ARGUMENT_CHARS} characters", index=index)
    if len(name) > MAX_ARGUMENT_CHARS:
        raise ParseError(f"a tool name of {len(name)} characters", name[:80])


def _action_text(name: str, arguments: Mapping[str, Any]) -> str:
    """The tool call as one line for the step record (long arguments in part)."""
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else _json_text(value)
        parts.append(f"{key}={text[:80]!r}" + ("..." if len(text) > 80 else ""))
    return f"{name[:100]}({', '.join(parts)})"


def _entities_arg(args: Mapping[str, Any]) -> dict[str, str] | None:
    """The ``entities`` argument of ``start_question``/``ask`` (None: not given), checked to be
    an object of mention -> KB id (text)."""
    given = args.get("entities")
    if given is not None and not (isinstance(given, dict)
                                  and all(isinstance(v, str) for v in given.values())):
        raise TermError("entities must be an object of mention -> KB id (text)",
                        text=json.dumps(given, default=str)[:200], expected="object", index=1)
    return dict(given) if given is not None else None


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    try:
        return json.dumps(arguments)[:MAX_TEXT_CHARS]
    except ValueError:  # an int past Python's digit limit: its text stays unread
        return _action_text("", arguments)


def _text_arg(args: Mapping[str, Any], key: str, index: int) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise TermError(f"{key} must be non-empty text", text=str(value)[:80], expected="text",
                        index=index)
    return value


def _json_text(value: Any) -> str:
    """``value`` as JSON; an int past Python's digit limit (4,300) as its length in digits'
    worth of ``9`` (so the length check refuses it like any over-long argument)."""
    try:
        return json.dumps(value, default=str)
    except ValueError:
        return "9" * (MAX_ARGUMENT_CHARS + 1)


def _query(session: Environment) -> str:
    program = session.program
    return session.to_query() if len(program) else ""


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 4].rstrip() + " ..."


def _bm25() -> Any:
    from pyql.agent.grounding.ranking import BM25Ranker

    return BM25Ranker()


def _bounded_relations(obs: Observation, question: str) -> dict[str, Any]:
    from pyql.agent.grounding.ranking import select_relations

    relations = obs.relations
    assert relations is not None
    # opaque ids (Wikidata) are ranked on their labels; the lists keep the ids, "labels" names
    # each: {"forward": ["P161"], "labels": {"P161": "cast member"}}
    by_shown = {relations.shown(r): r for r in relations.all}
    forward, backward = select_relations(question, [relations.shown(r) for r in relations.forward],
                                         [relations.shown(r) for r in relations.backward],
                                         _bm25() if question else None, top_k=TOP_RELATIONS)
    out: dict[str, Any] = {
        "forward": [by_shown[r] for r in forward], "backward": [by_shown[r] for r in backward],
        "forward_total": len(relations.forward), "backward_total": len(relations.backward)}
    if relations.labels:
        kept = set(out["forward"]) | set(out["backward"])
        out["labels"] = {name: label for name, label in relations.labels if name in kept}
    return out


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return str(value)


def observation_content(obs: Observation) -> dict[str, Any]:
    """The structured content of a step's result: status, values, relations, answers, the
    hint (code, name, message, suggestions) or the typed error, and the query after the step."""
    fb = obs.feedback
    hint = obs.hint
    error: dict[str, Any] | None = None
    if fb.python.status != "ok":
        py = fb.python
        error = {"type": py.error_type, "status": py.status, "message": obs.text,
                 "function": py.function, "arg_index": py.arg_index,
                 "expected": py.expected, "code": py.error_code,
                 "suggestions": list(py.suggestions)}
    elif fb.backend.status in ("backend_error", "timeout"):  # hinted at or not
        error = {"type": fb.backend.error_type, "status": fb.backend.status,
                 "message": fb.backend.message or obs.text}
    return {
        "status": obs.status,
        "ok": obs.ok,
        "step": obs.step,
        "values": {var: {"values": [_json_value(v) for v in vv.values], "total": vv.total}
                   for var, vv in obs.values.items()},
        "relations": None,
        "answers": ([_json_value(a) for a in obs.answers] if obs.answers is not None
                    else None),
        "hint": ({"code": hint.code, "name": hint.name, "message": hint.message,
                  "suggestions": list(hint.suggestions)} if hint is not None else None),
        "error": error,
        "query": obs.query,
    }


def _tool_result(text: str, content: dict[str, Any], *, is_error: bool = False
                 ) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=bounded(content), is_error=is_error)


def bounded(content: dict[str, Any]) -> dict[str, Any]:
    """``content`` with every string cut to :data:`MAX_VALUE_CHARS` and every list to
    :data:`MAX_LIST_ITEMS` (both quartered until the JSON takes at most
    :data:`MAX_STRUCTURED_CHARS`), as the text is bounded; ``truncated: true`` when anything
    was cut (the totals, e.g. ``values.X.total``, still count what there was)."""
    chars, items = MAX_VALUE_CHARS, MAX_LIST_ITEMS
    cut = [False]

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            if len(value) > chars:
                cut[0] = True
                return value[:chars] + "..."
            return value
        if isinstance(value, dict):
            return {str(k)[:chars]: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            if len(value) > items:
                cut[0] = True
            return [walk(v) for v in value[:items]]
        return value

    while True:
        out = walk(content)
        if not cut[0] or len(json.dumps(out, default=str)) <= MAX_STRUCTURED_CHARS or chars < 8:
            break
        chars, items, cut[0] = chars // 4, max(1, items // 4), False
    if cut[0]:
        out["truncated"] = True
    return out


def backend_error_result(exc: BackendError) -> types.CallToolResult:
    """A failing backend met outside a DSL step (linking a question's entities, replaying the
    program for ``undo``) as a tool error with its fields."""
    status = "timeout" if type(exc).__name__ == "BackendTimeoutError" else "backend_error"
    return _tool_result(_cap(f"Error: the backend failed: {exc}"), {
        "status": status, "error": {"type": type(exc).__name__, "status": status,
                                    "message": str(exc)[:500], "backend": exc.backend}},
        is_error=True)


def _llm_provider(config: LlmConfig) -> Any:
    """The provider of the ``ask`` tool's model, built as ``pyql eval`` builds it (a spec that
    cannot be used, e.g. ``local`` without its model, is :class:`LLMSpecError` here, before the
    server starts)."""
    from pyql.agent.evaluation.specs import build_provider

    options = {"api_key": config.api_key} if config.api_key else None
    return build_provider(config.spec, base_url=config.base_url, strategy=config.strategy,
                          openai_options=options)


def error_result(exc: InputError) -> types.CallToolResult:
    """A session tool's typed input error as a tool error."""
    return _tool_result(_cap(f"Error: {exc}"), {
        "status": "error", "error": {"type": type(exc).__name__, "message": str(exc)[:500],
                                     **{k: v for k, v in vars(exc).items()
                                        if isinstance(v, (str, int, type(None)))
                                        and k != "text"}}}, is_error=True)
