"""A KB backed by a remote SPARQL 1.1 endpoint (Virtuoso, Fuseki, GraphDB, QLever, Wikidata).

Requests are built with SPARQLWrapper (JSON results; GET for short queries, URL-encoded POST for
long ones; HTTP basic or digest auth; an optional default graph) and sent through a private
``urllib`` opener, so credentials never leak into the process-wide opener.

Failures are exceptions from :mod:`pyql.errors`, never an empty result:

=====================================================  ========================================
what happened                                          raised (after retries where marked *)
=====================================================  ========================================
connection refused, DNS failure, TLS failure           ``BackendUnavailableError``
connection reset / server closed the connection *      ``BackendUnavailableError``
socket timeout, HTTP 408, HTTP 504, engine timeout      ``BackendTimeoutError``
Virtuoso "anytime" partial result (``X-SQL-State``)    ``BackendTimeoutError``
HTTP 400 and other 4xx (syntax error, query too long)  ``BackendQueryError``
HTTP 401/403 (credentials), 404 (no endpoint there)    ``BackendUnavailableError``
HTTP 429, 502, 503 and other 5xx *                     ``BackendUnavailableError``
HTTP 500 with an engine error message (Virtuoso)       ``BackendQueryError`` (not retried)
HTTP 500 without one *                                 ``BackendQueryError``
a body that is not SPARQL JSON results                 ``BackendQueryError``
=====================================================  ========================================

Retries use exponential backoff: ``backoff * 2**attempt`` seconds (or the server's
``Retry-After``, capped at 60 s), at most ``retries`` times. Timeouts are not retried: the
budget was spent.

>>> kb = SparqlEndpointKB("http://localhost:8890/sparql", graph="http://example.org/g")
>>> kb.timeout, kb.retries
(30.0, 2)
"""

from __future__ import annotations

import json
import logging
import re
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from email.message import Message
from http.client import HTTPException, HTTPResponse, IncompleteRead
from typing import Any
from typing import Literal as LiteralType
from urllib.parse import quote

from SPARQLWrapper import ASK, BASIC, GET, JSON, POST, SELECT, URLENCODED, SPARQLWrapper

from pyql.errors import (
    BackendError,
    BackendQueryError,
    BackendTimeoutError,
    BackendUnavailableError,
    TermError,
)
from pyql.kb.base import KB
from pyql.profiles import Profile
from pyql.results import ResultSet
from pyql.terms import RDF_LANG_STRING, XSD, BlankNode, Entity, Literal

__all__ = ["SparqlEndpointKB"]

logger = logging.getLogger(__name__)

_AGENT = "pyql (SPARQLWrapper; +https://github.com/pyql)"
#: longest URL sent with GET; longer queries go by POST (many servers stop at 2-8 KB)
_MAX_GET_URL = 2000
_MAX_RETRY_AFTER = 60.0
_CHUNK = 1 << 16
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


class _Retry(Exception):
    """A transient failure: try again, or raise ``final`` when the retries are used up."""

    def __init__(self, final: BackendError, retry_after: float | None = None) -> None:
        super().__init__(str(final))
        self.final = final
        self.retry_after = retry_after


class SparqlEndpointKB(KB):
    """A read-only KB over a SPARQL 1.1 endpoint reached by HTTP(S).

    Args:
        url: the endpoint (``http://host:8890/sparql``).
        profile: the KB profile (name or :class:`~pyql.profiles.Profile`).
        graph: IRI sent as ``default-graph-uri``; ``None`` leaves the endpoint's default (on
            Virtuoso: the union of all graphs).
        timeout: seconds for one HTTP request (connecting and reading), unless a call gives its
            own.
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
    ) -> None:
        super().__init__(profile)
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
        self._password = password or ""
        handlers: list[urllib.request.BaseHandler] = []
        if user is not None and auth == "digest":
            passwords = urllib.request.HTTPPasswordMgrWithDefaultRealm()
            passwords.add_password(None, url, user, self._password)
            handlers.append(urllib.request.HTTPDigestAuthHandler(passwords))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        graph = f", graph={self.graph!r}" if self.graph else ""
        return f"SparqlEndpointKB({self.url!r}, profile={self.profile.name!r}{graph})"

    # -- KB contract -------------------------------------------------------------------------
    def _select(self, query: str, *, timeout: float | None) -> ResultSet:
        start = time.perf_counter()
        data = self._run(query, SELECT, timeout)
        try:
            columns = tuple(str(v) for v in data["head"]["vars"])
            bindings = data["results"]["bindings"]
        except (KeyError, TypeError):
            raise self._error(
                BackendQueryError, "the endpoint did not return SPARQL SELECT results", query
            ) from None
        rows = tuple(
            tuple(self._term(binding.get(name), query) for name in columns) for binding in bindings
        )
        elapsed = time.perf_counter() - start
        logger.debug("%s: %d rows in %.3fs", self.url, len(rows), elapsed)
        return ResultSet(columns=columns, rows=rows, elapsed=elapsed, query=query)

    def _ask(self, query: str, *, timeout: float | None) -> bool:
        data = self._run(query, ASK, timeout)
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

    # -- HTTP --------------------------------------------------------------------------------
    def _run(self, query: str, form: str, timeout: float | None) -> dict[str, Any]:
        """The decoded JSON of a successful request, retrying transient failures."""
        budget = self.timeout if timeout is None else float(timeout)
        if budget <= 0:
            raise self._error(BackendTimeoutError, "no time left for the query", query)
        attempt = 0
        while True:
            try:
                return self._attempt(query, form, budget)
            except _Retry as retry:
                if attempt >= self.retries:
                    raise retry.final from None
                delay = self.backoff * 2**attempt
                if retry.retry_after is not None:
                    delay = max(delay, min(retry.retry_after, _MAX_RETRY_AFTER))
                attempt += 1
                logger.warning(
                    "%s: %s; retry %d/%d in %.2fs",
                    self.url,
                    retry.final,
                    attempt,
                    self.retries,
                    delay,
                )
                time.sleep(delay)

    def _request(self, query: str, form: str) -> urllib.request.Request:
        wrapper = SPARQLWrapper(self.url, agent=_AGENT)
        wrapper.setQuery(query)
        # Force the form: the read-only check already ran, and this keeps SPARQLWrapper's own
        # query-type sniffing from ever choosing the update path.
        wrapper.queryType = form
        wrapper.setReturnFormat(JSON)
        if self.graph:
            wrapper.addDefaultGraph(self.graph)
        if self.user is not None and self.auth == "basic":
            wrapper.setHTTPAuth(BASIC)
            wrapper.setCredentials(self.user, self._password)
        for name, value in self.headers.items():
            wrapper.addCustomHttpHeader(name, value)
        for name, value in self.params.items():
            wrapper.addParameter(name, str(value))
        wrapper.setMethod(POST if self.method == "POST" else GET)
        # SPARQLWrapper exposes no public way to get the request without sending it through the
        # process-wide urllib opener (and it installs a global opener for digest auth).
        request = wrapper._createRequest()
        if self.method == "auto" and len(request.full_url) > _MAX_GET_URL:
            wrapper.setMethod(POST)
            wrapper.setRequestMethod(URLENCODED)
            request = wrapper._createRequest()
        return request

    def _attempt(self, query: str, form: str, budget: float) -> dict[str, Any]:
        request = self._request(query, form)
        deadline = time.monotonic() + budget
        try:
            response: HTTPResponse = self._opener.open(request, timeout=budget)
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc, query) from None
        except urllib.error.URLError as exc:
            raise self._network_error(exc.reason, query, budget) from None
        except (OSError, HTTPException) as exc:
            raise self._network_error(exc, query, budget) from None
        with response:
            self._check_partial(response.headers, query)
            body = self._read(response, deadline, query, budget)
            content_type = response.headers.get("Content-Type", "")
        try:
            data = json.loads(body.decode("utf-8"), strict=False)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise self._error(
                BackendQueryError,
                f"the endpoint did not return SPARQL JSON results (Content-Type {content_type!r}):"
                f" {_snippet(body)}",
                query,
            ) from None
        if not isinstance(data, dict):
            raise self._error(BackendQueryError, "the endpoint returned malformed JSON", query)
        return data

    def _read(self, response: HTTPResponse, deadline: float, query: str, budget: float) -> bytes:
        chunks: list[bytes] = []
        try:
            while True:
                if time.monotonic() > deadline:
                    raise self._error(
                        BackendTimeoutError,
                        f"the endpoint did not send its results within {budget:g}s",
                        query,
                    )
                chunk = response.read(_CHUNK)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        except (OSError, HTTPException) as exc:
            if isinstance(exc, IncompleteRead):
                raise _Retry(
                    self._error(
                        BackendUnavailableError,
                        "the endpoint closed the connection mid-result",
                        query,
                    )
                ) from None
            raise self._network_error(exc, query, budget) from None

    def _check_partial(self, headers: Message, query: str) -> None:
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

    def _network_error(self, reason: object, query: str, budget: float) -> BackendError | _Retry:
        if isinstance(reason, TimeoutError):  # socket.timeout is TimeoutError since 3.10
            return self._error(
                BackendTimeoutError, f"no answer within {budget:g}s (timed out)", query
            )
        if isinstance(reason, socket.gaierror):
            return self._error(
                BackendUnavailableError, f"cannot resolve the endpoint host ({reason})", query
            )
        if isinstance(reason, ConnectionRefusedError):
            return self._error(
                BackendUnavailableError, "connection refused (is the server running?)", query
            )
        if isinstance(
            reason, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, HTTPException)
        ):
            # includes http.client.RemoteDisconnected: often a restarting server or a proxy
            return _Retry(
                self._error(
                    BackendUnavailableError, f"the connection was dropped ({reason!r})", query
                )
            )
        if isinstance(reason, ssl.SSLError):
            return self._error(BackendUnavailableError, f"TLS failure ({reason})", query)
        return self._error(BackendUnavailableError, f"cannot reach the endpoint ({reason})", query)

    def _http_error(self, exc: urllib.error.HTTPError, query: str) -> BackendError | _Retry:
        status = exc.code
        try:
            body = exc.read()
        except (OSError, HTTPException):
            body = b""
        finally:
            exc.close()
        detail = _snippet(body) or str(exc.reason or "")
        message = f"HTTP {status}: {detail}"
        engine = _VIRTUOSO_ERROR.search(detail)
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
            return _Retry(
                self._error(BackendUnavailableError, f"rate limited ({message})", query),
                _retry_after(exc.headers),
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
            return failed if engine is not None else _Retry(failed, _retry_after(exc.headers))
        if status >= 500:
            return _Retry(
                self._error(
                    BackendUnavailableError, f"the endpoint is unavailable ({message})", query
                ),
                _retry_after(exc.headers),
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


def _snippet(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text[:_BODY_SNIPPET] + ("..." if len(text) > _BODY_SNIPPET else "")


def _retry_after(headers: Message | None) -> float | None:
    if headers is None:
        return None
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
