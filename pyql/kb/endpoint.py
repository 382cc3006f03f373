"""A KB backed by a remote SPARQL 1.1 endpoint (Virtuoso, Fuseki, GraphDB, QLever, Wikidata).

Requests follow the SPARQL 1.1 protocol (JSON results; GET for short queries, URL-encoded POST
for long ones; HTTP basic or digest auth; an optional default graph) and are sent with ``httpx2``
(the HTTP client the ``openai`` SDK is built on). ``timeout`` is a wall-clock deadline for the
whole call — connecting, sending, a server that sends its answer a byte at a time, retries and
backoff included — enforced with :func:`pyql.deadline.call_within`, because socket timeouts
bound only one read. SPARQLWrapper is not used: its public API sends through urllib's
process-wide opener and offers only a per-read socket timeout (see docs/architecture.md).

Failures are exceptions from :mod:`pyql.errors`, never an empty result:

=====================================================  ========================================
what happened                                          raised (after retries where marked *)
=====================================================  ========================================
connection refused, DNS failure, TLS failure           ``BackendUnavailableError``
connection reset / server closed the connection *      ``BackendUnavailableError``
no full answer within ``timeout``, HTTP 408, HTTP 504  ``BackendTimeoutError``
engine timeout; Virtuoso "anytime" partial result      ``BackendTimeoutError``
HTTP 400 and other 4xx (syntax error, query too long)  ``BackendQueryError``
HTTP 401/403 (credentials), 404 (no endpoint there)    ``BackendUnavailableError``
HTTP 429, 502, 503 and other 5xx *                     ``BackendUnavailableError``
HTTP 500 with an engine error message (Virtuoso)       ``BackendQueryError`` (not retried)
HTTP 500 without one *                                 ``BackendQueryError``
a body that is not SPARQL JSON results                 ``BackendQueryError``
a result without a column the query selects            ``BackendQueryError``
=====================================================  ========================================

Retries (:func:`pyql.retrying.retry_call`) use exponential backoff, ``backoff * 2**n``
seconds, or the server's ``Retry-After`` (a longer wait than 60 s is not attempted), at most
``retries`` times and never past the deadline. Timeouts are not retried: the budget was spent.

>>> kb = SparqlEndpointKB("http://localhost:8890/sparql", graph="http://example.org/g")
>>> kb.timeout, kb.retries
(30.0, 2)
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import ssl
from collections.abc import Iterator, Mapping
from typing import Any
from typing import Literal as LiteralType
from urllib.parse import quote

import httpx2

from pyql.deadline import Deadline, DeadlineExceeded, call_within
from pyql.errors import (
    BackendError,
    BackendQueryError,
    BackendTimeoutError,
    BackendUnavailableError,
    TermError,
)
from pyql.kb.base import KB, _strip_literals
from pyql.profiles import Profile
from pyql.results import KB_LIMITS, Limits, ResultSet
from pyql.retrying import RetryPolicy, Transient, retry_call
from pyql.terms import RDF_LANG_STRING, XSD, BlankNode, Entity, Literal

__all__ = ["SparqlEndpointKB"]

logger = logging.getLogger(__name__)

#: the environment variable whose value replaces the User-Agent (public endpoints such as
#: query.wikidata.org ask for a contact: ``mytool/1.0 (me@example.org) pyql/0.1.0``)
USER_AGENT_ENV = "PYQL_USER_AGENT"


def user_agent() -> str:
    """The User-Agent pyql sends: ``$PYQL_USER_AGENT`` when set, else a descriptive one in the
    form the Wikimedia User-Agent policy asks for (client/version (contact) library/version).
    A value with a line break is ignored (it would split the header)."""
    import platform

    from pyql import __version__

    custom = os.environ.get(USER_AGENT_ENV, "").strip()
    if custom and not any(c in custom for c in "\r\n"):
        return custom
    return (f"pyql/{__version__} (KBQA toolkit; https://github.com/pyql; set {USER_AGENT_ENV} "
            f"to add your contact) httpx2/{getattr(httpx2, '__version__', '?')} "
            f"Python/{platform.python_version()}")
_ACCEPT = "application/sparql-results+json,application/json;q=0.9"
#: longest URL sent with GET; longer queries go by POST (many servers stop at 2-8 KB)
_MAX_GET_URL = 2000
_MAX_RETRY_AFTER = 60.0
_BODY_SNIPPET = 2000
#: a Virtuoso error line: "Virtuoso 37000 Error SP030: SPARQL compiler, line 1: ..."
_VIRTUOSO_ERROR = re.compile(r"Virtuoso\s+(?P<state>[0-9A-Z]{5})\s+Error\b")
#: Virtuoso SQL states / messages that mean "ran out of time"
_VIRTUOSO_TIMEOUT_STATES = frozenset({"S1T00", "S1TAT", "HYT00", "HYT01"})
_ENGINE_TIMEOUT_TEXT = re.compile(
    r"estimated execution time|timed? ?out|timeout|time limit", re.IGNORECASE
)
_BNODE_PREFIXES = ("nodeID://", "_:")
_BNODE_BAD_CHARS = re.compile(r"[^A-Za-z0-9_\-.]")
_IRI_BAD_CHARS = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_BOOLEAN_CANONICAL = {"1": "true", "0": "false"}
#: request parameters ``params`` may not set (the query itself, and anything that writes)
_RESERVED_PARAMS = frozenset(
    {"query", "update", "using-graph-uri", "using-named-graph-uri", "default-graph-uri"}
)


class SparqlEndpointKB(KB):
    """A read-only KB over a SPARQL 1.1 endpoint reached by HTTP(S).

    Args:
        url: the endpoint (``http://host:8890/sparql``).
        profile: the KB profile (name or :class:`~pyql.profiles.Profile`).
        graph: IRI sent as ``default-graph-uri``; ``None`` leaves the endpoint's default (on
            Virtuoso: the union of all graphs).
        timeout: wall-clock seconds for one query (connecting, reading the whole answer,
            retries and backoff), unless a call gives its own.
        retries: how many times a transient failure (connection reset, HTTP 429/5xx) is retried.
        backoff: first retry delay in seconds; doubled on each further retry.
        user, password: credentials for HTTP authentication (``auth``: ``"basic"`` or
            ``"digest"``; Virtuoso's ``/sparql-auth`` uses digest).
        method: ``"auto"`` (GET unless the URL would be too long, then POST), ``"GET"`` or
            ``"POST"``.
        headers: extra HTTP headers (e.g. an API key).
        params: extra request parameters the endpoint understands (e.g. Virtuoso's
            ``timeout`` in milliseconds, which makes it stop a query server-side).
    """

    def __init__(
        self,
        url: str,
        *,
        profile: str | Profile = "generic",
        graph: str | None = None,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        user: str | None = None,
        password: str | None = None,
        auth: LiteralType["basic", "digest"] = "basic",
        method: LiteralType["auto", "GET", "POST"] = "auto",
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        limits: Limits = KB_LIMITS,
    ) -> None:
        super().__init__(profile)
        #: rows and literal lengths one query returns (more rows: ``truncated``; a longer
        #: literal is cut and counted in ``cells_cut``)
        self.limits = limits
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"SPARQL endpoint URL must be http(s): {url!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        if retries < 0 or backoff < 0:
            raise ValueError("retries and backoff must not be negative")
        if auth not in ("basic", "digest"):
            raise ValueError(f"auth must be 'basic' or 'digest', got {auth!r}")
        if method not in ("auto", "GET", "POST"):
            raise ValueError(f"method must be 'auto', 'GET' or 'POST', got {method!r}")
        params = dict(params or {})
        reserved = _RESERVED_PARAMS.intersection(params)
        if reserved:
            raise ValueError(f"params may not set {', '.join(sorted(reserved))}")
        self.url = url
        self.graph = graph
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.user = user
        self.auth = auth
        self.method = method
        self.headers = dict(headers or {})
        self.params = params
        self._policy = RetryPolicy(retries=self.retries, backoff=self.backoff,
                                   backoff_max=float("inf"), jitter=False,
                                   max_retry_after=_MAX_RETRY_AFTER)
        credentials: httpx2.Auth | None = None
        if user is not None:
            kind = httpx2.DigestAuth if auth == "digest" else httpx2.BasicAuth
            credentials = kind(user, password or "")
        self._closed = False
        self._client = httpx2.Client(
            auth=credentials,
            headers={"Accept": _ACCEPT, "User-Agent": user_agent(), **self.headers},
            follow_redirects=True,
        )

    def __repr__(self) -> str:
        graph = f", graph={self.graph!r}" if self.graph else ""
        return f"SparqlEndpointKB({self.url!r}, profile={self.profile.name!r}{graph})"

    def close(self) -> None:
        """Close the pooled HTTP connections; a query afterwards is a BackendUnavailableError."""
        self._closed = True
        self._client.close()

    # -- KB contract -------------------------------------------------------------------------
    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        deadline = self._deadline(query, timeout)
        data = self._run(query, deadline)
        try:
            head = tuple(str(v) for v in data["head"]["vars"])
            bindings = data["results"]["bindings"]
        except (KeyError, TypeError):
            raise self._error(
                BackendQueryError, "the endpoint did not return SPARQL SELECT results", query
            ) from None
        columns = self._columns(head, query)
        cap, max_cell = self.limits.max_rows, self.limits.max_cell
        truncated = isinstance(bindings, list) and len(bindings) > cap
        try:
            rows = tuple(
                tuple(self._term(binding.get(name), query) for name in columns)
                for binding in (bindings[:cap] if truncated else bindings)
            )
        except (AttributeError, TypeError):  # bindings that are not objects
            raise self._error(
                BackendQueryError, "the endpoint returned malformed SPARQL JSON bindings", query
            ) from None
        cut = 0
        if any(isinstance(c, Literal) and len(c.lexical) > max_cell for row in rows for c in row):
            bounded = []
            for row in rows:
                cells = tuple(Literal(c.lexical[:max_cell], c.datatype, c.lang)
                              if isinstance(c, Literal) and len(c.lexical) > max_cell else c
                              for c in row)
                cut += sum(a is not b for a, b in zip(cells, row))
                bounded.append(cells)
            rows = tuple(bounded)
        elapsed = deadline.elapsed()
        logger.debug("%s: %d rows in %.3fs", self.url, len(rows), elapsed)
        return ResultSet(columns=columns, rows=rows, elapsed=elapsed, query=query,
                         truncated=truncated, cells_cut=cut)

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        data = self._run(query, self._deadline(query, timeout))
        if isinstance(data.get("boolean"), bool):
            return data["boolean"]
        # Virtuoso answers ASK with a one-column SELECT result named __ASK_RETVAL (1 or 0).
        try:
            columns = data["head"]["vars"]
            bindings = data["results"]["bindings"]
            if len(columns) == 1:
                if not bindings:
                    return False
                value = str(bindings[0][columns[0]]["value"]).strip().lower()
                if value in ("1", "true"):
                    return True
                if value in ("0", "false"):
                    return False
        except (KeyError, TypeError, IndexError):
            pass
        raise self._error(BackendQueryError, "the endpoint did not return an ASK result", query)

    def _columns(self, head: tuple[str, ...], query: str) -> tuple[str, ...]:
        """The result's columns: the variables the query selects, in its order, when it names
        them (``head`` must hold each: a result without a selected column is malformed, and
        callers read rows by position); else the endpoint's ``head``."""
        selected = projection(query)
        if selected is None:
            return head
        missing = [name for name in selected if name not in head]
        if missing:
            raise self._error(
                BackendQueryError,
                "the endpoint returned a malformed result: the query selects "
                f"{_vars(selected)} but the result has {_vars(head) or 'no columns'}",
                query,
            )
        return selected

    # -- HTTP --------------------------------------------------------------------------------
    def _deadline(self, query: str, timeout: float | None) -> Deadline:
        budget = self.timeout if timeout is None else float(timeout)
        if budget <= 0:
            raise self._error(BackendTimeoutError, "no time left for the query", query)
        return Deadline(budget)

    def _run(self, query: str, deadline: Deadline) -> dict[str, Any]:
        """The decoded JSON of a successful request, retrying transient failures."""
        if self._closed:
            raise self._error(BackendUnavailableError, "the KB was closed", query)

        def attempt() -> dict[str, Any]:
            left = deadline.remaining()
            try:
                if left <= 0:
                    raise DeadlineExceeded(deadline.seconds)
                return call_within(lambda: self._attempt(query, left), left, name="pyql-sparql")
            except DeadlineExceeded:
                raise self._error(
                    BackendTimeoutError,
                    f"the endpoint did not send its results within {deadline.seconds:g}s",
                    query,
                ) from None

        data, _ = retry_call(attempt, self._policy, deadline=deadline, name=self.url)
        return data

    def _request(self, query: str) -> httpx2.Request:
        params = [("default-graph-uri", self.graph)] if self.graph else []
        params += [(name, str(value)) for name, value in self.params.items()]
        if self.method != "POST":
            request = self._client.build_request(
                "GET", self.url, params=[("query", query), *params]
            )
            if self.method == "GET" or len(str(request.url)) <= _MAX_GET_URL:
                return request
        return self._client.build_request("POST", self.url, data=dict([("query", query), *params]))

    def _attempt(self, query: str, budget: float) -> dict[str, Any]:
        """One request (run in a worker thread; every socket read is bounded by ``budget``)."""
        request = self._request(query)
        request.extensions["timeout"] = httpx2.Timeout(budget).as_dict()
        try:
            response = self._client.send(request)
        except httpx2.TransportError as exc:
            raise self._network_error(exc, query, budget) from None
        if response.status_code >= 400:
            raise self._http_error(response, query)
        self._check_partial(response.headers, query)
        body = response.content
        try:
            data = json.loads(body.decode("utf-8"), strict=False)
        except (UnicodeDecodeError, json.JSONDecodeError):
            content_type = response.headers.get("Content-Type", "")
            raise self._error(
                BackendQueryError,
                f"the endpoint did not return SPARQL JSON results (Content-Type {content_type!r}):"
                f" {_snippet(body)}",
                query,
            ) from None
        if not isinstance(data, dict):
            raise self._error(BackendQueryError, "the endpoint returned malformed JSON", query)
        return data

    def _check_partial(self, headers: httpx2.Headers, query: str) -> None:
        state = (headers.get("X-SQL-State") or "").strip()
        if state in _VIRTUOSO_TIMEOUT_STATES:
            message = (headers.get("X-SQL-Message") or "").strip()
            raise self._error(
                BackendTimeoutError,
                "the endpoint interrupted the query at its time limit and returned incomplete "
                f"results ({state}: {message[:200]})",
                query,
            )

    # -- error translation -------------------------------------------------------------------
    def _error(self, kind: type[BackendError], message: str, query: str) -> BackendError:
        return kind(f"{self.url}: {message}", backend=self.url, query=query)

    def _network_error(
        self, exc: httpx2.TransportError, query: str, budget: float
    ) -> BackendError | Transient:
        if isinstance(exc, httpx2.TimeoutException):
            return self._error(
                BackendTimeoutError, f"no answer within {budget:.3g}s (timed out)", query
            )
        reason = next((c for c in _causes(exc) if isinstance(c, OSError)), None)
        if isinstance(reason, socket.gaierror):
            return self._error(
                BackendUnavailableError, f"cannot resolve the endpoint host ({reason})", query
            )
        if isinstance(reason, ConnectionRefusedError):
            return self._error(
                BackendUnavailableError, "connection refused (is the server running?)", query
            )
        if isinstance(reason, ssl.SSLError):
            return self._error(BackendUnavailableError, f"TLS failure ({reason})", query)
        if isinstance(exc, (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError)):
            # a reset, or a server that closed the connection (mid-result): often a restarting
            # server or a proxy
            return Transient(
                self._error(
                    BackendUnavailableError, f"the connection was dropped ({exc!r})", query
                )
            )
        return self._error(BackendUnavailableError, f"cannot reach the endpoint ({exc})", query)

    def _http_error(self, response: httpx2.Response, query: str) -> BackendError | Transient:
        status = response.status_code
        detail = _snippet(response.content) or response.reason_phrase
        message = f"HTTP {status}: {detail}"
        engine = _VIRTUOSO_ERROR.search(detail)
        after = _retry_after(response.headers)
        if status == 400:
            return self._error(
                BackendQueryError, f"the endpoint rejected the query ({message})", query
            )
        if status in (401, 403):
            return self._error(
                BackendUnavailableError,
                f"access denied, check the credentials ({message})",
                query,
            )
        if status == 404:
            return self._error(
                BackendUnavailableError, f"no SPARQL endpoint at this URL ({message})", query
            )
        if status in (408, 504):
            return self._error(BackendTimeoutError, f"the query timed out ({message})", query)
        if status == 429:
            return Transient(
                self._error(BackendUnavailableError, f"rate limited ({message})", query),
                retry_after=after,
            )
        if status == 500:
            # Virtuoso answers runtime errors (and its own time limits) with 500 and a message
            # naming an SQL state: deterministic, so retrying would give the same answer.
            timed_out = _ENGINE_TIMEOUT_TEXT.search(detail) is not None or (
                engine is not None and engine.group("state") in _VIRTUOSO_TIMEOUT_STATES
            )
            if timed_out:
                return self._error(
                    BackendTimeoutError, f"the engine stopped the query ({message})", query
                )
            failed = self._error(
                BackendQueryError, f"the engine failed the query ({message})", query
            )
            return failed if engine is not None else Transient(failed, retry_after=after)
        if status >= 500:
            return Transient(
                self._error(
                    BackendUnavailableError, f"the endpoint is unavailable ({message})", query
                ),
                retry_after=after,
            )
        return self._error(
            BackendQueryError, f"the endpoint refused the request ({message})", query
        )

    # -- results -----------------------------------------------------------------------------
    def _term(self, cell: Any, query: str) -> Entity | Literal | BlankNode | None:
        if cell is None:
            return None
        try:
            kind = cell["type"]
            value = str(cell["value"])
            if kind == "uri":
                iri = _safe_iri(value)
                return Entity(iri, id=self.profile.compact(iri))
            if kind in ("literal", "typed-literal"):
                lang = cell.get("xml:lang") or cell.get("lang") or None
                datatype = cell.get("datatype") or None
                if lang is not None:
                    datatype = None if datatype in (None, RDF_LANG_STRING) else datatype
                elif datatype == XSD + "boolean":
                    value = _BOOLEAN_CANONICAL.get(value, value)  # Virtuoso says 1/0
                return Literal(value, _safe_iri(datatype) if datatype else None, lang)
            if kind == "bnode":
                return BlankNode(_bnode_id(value))
        except (KeyError, TypeError, TermError) as exc:
            raise self._error(
                BackendQueryError,
                f"the endpoint returned a malformed term {cell!r} ({exc})",
                query,
            ) from None
        raise self._error(
            BackendQueryError, f"the endpoint returned an unsupported term type {kind!r}", query
        )


#: what the projection scan looks at: parentheses, the end of the projection, AS, variables, *
_PROJECTION_TOKEN = re.compile(r"[(){*]|\b(?:WHERE|FROM|AS)\b|[?$](\w+)", re.IGNORECASE)
_SELECT = re.compile(r"\bSELECT\b", re.IGNORECASE)


def projection(query: str) -> tuple[str, ...] | None:
    """The variables the (outer) SELECT of ``query`` projects, in order: ``?x`` at the top
    level and ``(expression AS ?x)``; None when it does not name them (``SELECT *``, no
    SELECT). Strings, IRIs and comments are blanked first, so text in them does not count.

    >>> projection('SELECT DISTINCT ?e ?l WHERE { ?e ?p ?l }')
    ('e', 'l')
    >>> projection('SELECT (COUNT(DISTINCT ?x) AS ?n) ?y WHERE { ?x <p> ?y }')
    ('n', 'y')
    >>> projection('SELECT * WHERE { ?s ?p ?o }') is None
    True
    """
    bare = _strip_literals(query)
    select = _SELECT.search(bare)
    if select is None:
        return None
    names: list[str] = []
    depth = 0
    after_as = False
    for token in _PROJECTION_TOKEN.finditer(bare, select.end()):
        text = token.group(0)
        word = text.upper()
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
        elif depth <= 0 and (text == "{" or word in ("WHERE", "FROM")):
            break
        elif text == "*":
            if depth <= 0:
                return None
        elif word == "AS":
            after_as = True
            continue
        elif token.group(1) is not None and (depth <= 0 or after_as):
            names.append(token.group(1))
        after_as = False
    return tuple(dict.fromkeys(names)) or None


def _vars(names: tuple[str, ...] | list[str]) -> str:
    return " ".join(f"?{name}" for name in names)


def _snippet(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text[:_BODY_SNIPPET] + ("..." if len(text) > _BODY_SNIPPET else "")


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (httpx2 wraps the socket's OSError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _retry_after(headers: httpx2.Headers) -> float | None:
    value = headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _safe_iri(value: str) -> str:
    """``value``, with characters SPARQL cannot write between ``<>`` percent-encoded.

    Endpoints loaded leniently (Virtuoso, old Freebase dumps) hold IRIs with spaces; encoding
    keeps the row instead of failing the whole result.
    """
    if _IRI_BAD_CHARS.search(value):
        encoded = _IRI_BAD_CHARS.sub(lambda m: quote(m.group(0), safe=""), value)
        logger.warning("IRI %r is not valid in SPARQL; using %r", value, encoded)
        return encoded
    return value


def _bnode_id(value: str) -> str:
    """A blank-node label valid in SPARQL (Virtuoso writes ``nodeID://b10001``)."""
    for prefix in _BNODE_PREFIXES:
        if value.startswith(prefix):
            value = value[len(prefix) :]
            break
    return _BNODE_BAD_CHARS.sub("_", value) or "b"
