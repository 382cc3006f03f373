"""The KB backend contract.

A backend runs read-only SPARQL SELECT/ASK queries and returns a
:class:`~pyql.results.ResultSet` whose cells are pyql terms. It translates native failures into
:mod:`pyql.errors` (``BackendUnavailableError``, ``BackendTimeoutError``, ``BackendQueryError``)
— an endpoint failure is never an empty result — and refuses SPARQL Update with
:class:`~pyql.errors.ReadOnlyError` before anything reaches the engine.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from pyql.errors import ReadOnlyError
from pyql.profiles import Profile, get_profile
from pyql.results import ResultSet
from pyql.sparql.compile import CompiledSparql

__all__ = ["KB", "ensure_read_only"]

# Update operations of SPARQL 1.1 Update; matched outside of IRIs, strings and comments.
_UPDATE_KEYWORDS = re.compile(
    # the lookahead on the first letters only lets the search skip other positions quickly
    r"(?<![?$:\w.\-])(?=[idlcmaw])(INSERT|DELETE|LOAD|CLEAR|CREATE|DROP|COPY|MOVE|ADD|WITH)"
    r"(?![\w:.\-])",
    re.IGNORECASE,
)
_FORM = re.compile(r"\b(SELECT|ASK|CONSTRUCT|DESCRIBE)\b", re.IGNORECASE)
_CODEPOINT = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")


def _decode_codepoints(query: str) -> str:
    """The query with SPARQL's codepoint escapes (``\\u0049``, ``\\U00000049``) decoded: SPARQL
    processes them before parsing, anywhere in the text (SPARQL 1.1 section 19.2), so a keyword
    can be spelt with them. Escapes of no valid character are left as written."""

    def char(m: re.Match[str]) -> str:
        code = int(m.group(1) or m.group(2), 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return m.group(0)
        return chr(code)

    return _CODEPOINT.sub(char, query)


_LANG = r"(?:@[A-Za-z]+(?:-[A-Za-z0-9]+)*)?"  # "x"@add is a language tag, not the ADD keyword
# strings (long and short; a backslash escapes the next character; unterminated: to the end) with
# their language tag, IRIs and comments: where keyword-like text is not a keyword
_NOT_CODE = re.compile(
    r"(?=[\"'<#])(?:"  # a quick test of the first character
    r'"""(?:[^"\\]|\\[\s\S]|\\\Z|"(?!""))*(?:"""|\Z)' + _LANG
    + r"|'{3}(?:[^'\\]|\\[\s\S]|\\\Z|'(?!''))*(?:'{3}|\Z)" + _LANG
    + r'|"(?:[^"\\]|\\[\s\S]|\\\Z)*(?:"|\Z)' + _LANG
    + r"|'(?:[^'\\]|\\[\s\S]|\\\Z)*(?:'|\Z)" + _LANG
    + r"|(?P<iri><[^<>\"{}|^`\\\x00-\x20]*>)"
    + r"|#[^\n]*)"
)


def _blank(m: re.Match[str]) -> str:
    if m.group("iri") is not None:
        return "<>"
    return "" if m.group(0)[0] == "#" else '""'


def _strip_literals(query: str) -> str:
    """The query with strings, IRIs and comments blanked out (keywords inside them don't count)."""
    return _NOT_CODE.sub(_blank, query)


#: the update keywords, lower case: a query none of them occurs in (as any substring) needs no
#: parsing for them
_UPDATE_WORDS = ("insert", "delete", "load", "clear", "create", "drop", "copy", "move", "add",
                 "with")
_IRI = r"<[^<>\"{}|^`\\\x00-\x20]*>"
# the prologue (BASE/PREFIX declarations, comments) and the query form right after it: the
# usual shape of a query, read without blanking the whole text first
_PROLOGUE_FORM = re.compile(
    r"(?:\s+|#[^\n]*\n|BASE\s*" + _IRI + r"|PREFIX\s+[^\s:<>\"'#]*:\s*" + _IRI + r")*"
    r"(?:SELECT|ASK|CONSTRUCT|DESCRIBE)\b",
    re.IGNORECASE,
)


def ensure_read_only(query: str) -> str:
    """Return ``query`` if it is a read query; raise :class:`ReadOnlyError` for SPARQL Update.

    >>> ensure_read_only("SELECT * WHERE { ?s ?p ?o }")[:6]
    'SELECT'
    >>> ensure_read_only("DELETE WHERE { ?s ?p ?o }")
    Traceback (most recent call last):
    pyql.errors.ReadOnlyError: SPARQL Update is not allowed (found DELETE); pyql backends are read-only
    >>> ensure_read_only("\\u0049NSERT DATA { <a> <b> <c> }")  # escapes are decoded first
    Traceback (most recent call last):
    pyql.errors.ReadOnlyError: SPARQL Update is not allowed (found INSERT); pyql backends are read-only
    """
    if not _plainly_read_only(query):
        _check_blanked(query)
    return query


def _check_blanked(query: str) -> None:
    """The full check: escapes decoded, strings, IRIs and comments blanked, then the keywords."""
    bare = _strip_literals(_decode_codepoints(query))
    m = _UPDATE_KEYWORDS.search(bare)
    if m:
        raise ReadOnlyError(
            f"SPARQL Update is not allowed (found {m.group(1).upper()}); pyql backends are read-only"
        )
    if not _FORM.search(bare):
        raise ReadOnlyError("not a SPARQL query (no SELECT/ASK/CONSTRUCT/DESCRIBE)")


def _plainly_read_only(query: str) -> bool:
    """The common case, decided without blanking the text (every step's queries pass here):
    ASCII, no escapes, no update keyword as any substring, the query form right after the
    prologue. True only where the full check passes too (blanking strings, IRIs and comments
    cannot make a keyword, nor hide the form this finds)."""
    if not query.isascii() or "\\" in query or not _PROLOGUE_FORM.match(query):
        return False
    lower = query.lower()
    for word in _UPDATE_WORDS:
        if word in lower:
            return False
    return True


class KB(ABC):
    """A read-only SPARQL knowledge base with a :class:`~pyql.profiles.Profile`."""

    profile: Profile

    def __init__(self, profile: str | Profile = "generic") -> None:
        self.profile = get_profile(profile)
        #: how many queries this backend ran (for QPQ accounting)
        self.query_count = 0
        #: how many of them only looked labels up (``purpose="label"``): the paper's QPQ does
        #: not count them
        self.label_query_count = 0
        #: seconds spent inside the engine (evaluating queries and reading their solutions), as
        #: far as the backend can tell them apart from pyql's own work (0 if it cannot)
        self.engine_seconds = 0.0
        #: the clock ``engine_seconds`` reads (``time.thread_time`` counts CPU time only, which
        #: a benchmark on a busy machine prefers)
        self.engine_clock: Callable[[], float] = time.perf_counter

    @property
    def shared(self) -> KB:
        """The KB whose data this one shows: itself, or the KB a per-question view wraps (what
        is asked once per KB, such as its relation vocabulary, is keyed by it)."""
        return self

    def select(self, query: str, *, timeout: float | None = None,
               purpose: str = "query") -> ResultSet:
        """Run a SELECT query; cells are terms. Raises BackendError subclasses on failure.

        ``purpose="label"`` marks a lookup of display labels (counted in
        :attr:`label_query_count` too). Text from the compiler
        (:class:`~pyql.sparql.compile.CompiledSparql`) is a read query by construction; any
        other text is checked (:func:`ensure_read_only`)."""
        self._admit(query)
        if purpose == "label":
            self.label_query_count += 1
        return self._select(query, timeout=timeout)

    def ask(self, query: str, *, timeout: float | None = None) -> bool:
        self._admit(query)
        return self._ask(query, timeout=timeout)

    def _admit(self, query: str) -> None:
        """Refuse an update before it reaches the engine (compiled text is a read query by
        construction), then count the query."""
        if type(query) is not CompiledSparql:
            ensure_read_only(query)
        self.query_count += 1

    @abstractmethod
    def _select(self, query: str, *, timeout: float | None) -> ResultSet: ...

    @abstractmethod
    def _ask(self, query: str, *, timeout: float | None) -> bool: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (connections, file handles)."""

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
