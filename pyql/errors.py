"""pyql's error tree.

Every error pyql raises on purpose is a :class:`PyqlError`. The tree separates errors *caused by
the input* (an LLM's malformed action, an unknown entity, a program that does not type-check),
which an agent feeds back to the model, from errors of the *environment* (a backend that is down,
a timeout), which must never be mistaken for an empty result.

Errors carry structure (positions, argument index, expected/got, suggestions) so that callers and
tests can decide on fields rather than on message text.

::

    PyqlError
    ├── InputError                  the text/call/query given to pyql is wrong
    │   ├── ParseError              program/action text does not parse (position, line, col)
    │   ├── TermError               an argument is not a valid term for its slot (arg index)
    │   ├── CallError               unknown function / wrong arity
    │   │   ├── UnknownFunctionError
    │   │   └── ArityError
    │   ├── ToolsetError            a SPARQL operation on a SQL program (or the reverse)
    │   ├── QueryError              the call is well-formed but invalid for the current query
    │   ├── UnknownEntityError      a mention/label not in the entity table
    │   ├── SchemaError             unknown table/column (SQL), with close matches
    │   ├── ProgramTooLongError     a program or session past its cap on calls
    │   └── LocationError           a --kb/--db location that is not a URL nor an existing path
    ├── ReadOnlyError               a write (SPARQL Update, DML/DDL, PRAGMA, ...) was refused
    ├── ProfileError                a KB profile is misconfigured or cannot render a term
    ├── DatasetFileError            a dataset file is malformed (path, line, problem)
    └── BackendError                the KB/DB failed (never an empty result)
        ├── BackendUnavailableError the server cannot be reached
        ├── BackendTimeoutError     the query ran out of time
        └── BackendQueryError       the engine rejected the query
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "PyqlError",
    "InputError",
    "ParseError",
    "TermError",
    "CallError",
    "UnknownFunctionError",
    "ArityError",
    "QueryError",
    "ToolsetError",
    "PARSE_ERROR_KINDS",
    "UnknownEntityError",
    "SchemaError",
    "LocationError",
    "ProgramTooLongError",
    "ReadOnlyError",
    "ProfileError",
    "DatasetFileError",
    "BackendError",
    "BackendUnavailableError",
    "BackendTimeoutError",
    "BackendQueryError",
]


class PyqlError(Exception):
    """Base class of every error pyql raises on purpose."""


class InputError(PyqlError):
    """The input given to pyql (text, call, query step) is invalid."""


#: what went wrong when text did not give exactly one call (see :class:`ParseError.kind`)
PARSE_ERROR_KINDS = ("syntax", "no_action", "multiple_actions")


class ParseError(InputError):
    """Program or action text that does not parse.

    ``position`` is the 0-based character offset into ``text``; ``line``/``col`` are 1-based.
    ``kind`` says what was wrong: ``syntax`` (the text does not parse), ``no_action`` (no call
    where one was expected) or ``multiple_actions`` (several calls where one was expected);
    ``found`` is how many calls were found for the last two (None for ``syntax``).

    >>> ParseError("expected one call, found 2", "a()\\nb()", kind="multiple_actions", found=2).kind
    'multiple_actions'
    """

    def __init__(
        self, message: str, text: str = "", position: int = 0, *, kind: str = "syntax",
        found: int | None = None,
    ) -> None:
        if kind not in PARSE_ERROR_KINDS:
            raise ValueError(f"ParseError kind must be one of {PARSE_ERROR_KINDS}, not {kind!r}")
        self.kind = kind
        self.found = found
        self.description = message
        self.text = text
        self.position = max(0, min(position, len(text)))
        before = text[: self.position]
        self.line = before.count("\n") + 1
        self.col = self.position - (before.rfind("\n") + 1) + 1
        super().__init__(f"{message} (line {self.line}, col {self.col})" if text else message)

    #: the most characters of the offending line :attr:`highlight` shows
    HIGHLIGHT_WIDTH = 120

    @property
    def highlight(self) -> str:
        """The offending line with a caret under the error position; a line longer than
        :attr:`HIGHLIGHT_WIDTH` is shown as an excerpt around the position (``...`` where it is
        cut), so a one-line program of a million characters does not come back whole.

        >>> lines = ParseError("bad", "f(" + "x" * 500 + ")", 300).highlight.splitlines()
        >>> len(lines[0]), lines[0][:4], lines[0][-3:], lines[1].index("^")
        (126, '...x', '...', 63)
        """
        lines = self.text.split("\n")
        line = lines[self.line - 1] if self.line - 1 < len(lines) else ""
        col = self.col - 1
        width = self.HIGHLIGHT_WIDTH
        if len(line) <= width:
            return f"{line}\n{' ' * col}^"
        start = max(0, min(col - width // 2, len(line) - width))
        excerpt = line[start:start + width]
        lead = "..." if start > 0 else ""
        tail = "..." if start + width < len(line) else ""
        return f"{lead}{excerpt}{tail}\n{' ' * (len(lead) + col - start)}^"


class TermError(InputError):
    """An argument that is not a valid term for its slot.

    ``text`` is the argument as written, ``expected`` says what the slot accepts, ``index`` is
    the 0-based argument position when known.
    """

    def __init__(
        self, message: str, *, text: str = "", expected: str = "", index: int | None = None
    ) -> None:
        self.text = text
        self.expected = expected
        self.index = index
        super().__init__(message)

    def at(self, index: int, function: str | None = None) -> TermError:
        """A copy of this error located at argument ``index`` (of ``function``)."""
        where = f"argument {index + 1}" + (f" of {function}()" if function else "")
        message = str(self)
        if not message.startswith("argument "):
            message = f"{where}: {message}"
        return type(self)(message, text=self.text, expected=self.expected, index=index)


class CallError(InputError):
    """A call that does not match any DSL function signature."""

    def __init__(self, message: str, *, function: str = "") -> None:
        self.function = function
        super().__init__(message)


class UnknownFunctionError(CallError):
    """A call of a function that is not in the tool set."""

    def __init__(self, function: str, available: Sequence[str]) -> None:
        self.available = tuple(available)
        super().__init__(
            f"unknown function {function!r}; available: {', '.join(self.available)}",
            function=function,
        )


class ArityError(CallError):
    """A call with the wrong number of arguments."""

    def __init__(self, function: str, expected: int | tuple[int, int], got: int, signature: str):
        self.expected = expected
        self.got = got
        self.signature = signature
        if isinstance(expected, tuple):
            lo, hi = expected
            want = f"{lo} to {hi} arguments"
        else:
            want = f"{expected} argument{'s' if expected != 1 else ''}"
        super().__init__(f"{signature} takes {want}, got {got}", function=function)


class ToolsetError(InputError):
    """An operation offered by one toolset asked of a program or query of another (e.g.
    ``Program.to_sparql`` of a SQL program); ``tools`` is what it is, ``expected`` what the
    operation needs."""

    def __init__(self, message: str, *, tools: str = "", expected: str = "") -> None:
        self.tools = tools
        self.expected = expected
        super().__init__(message)


class QueryError(InputError):
    """A well-formed call that is invalid for the current query (e.g. unknown variable)."""

    def __init__(self, message: str, *, code: str = "", suggestions: Sequence[str] = ()) -> None:
        self.code = code
        self.suggestions = tuple(suggestions)
        super().__init__(message)


class UnknownEntityError(TermError):
    """A mention or label that is not in the entity table and is not an id."""


class SchemaError(InputError):
    """A table or column that does not exist; ``suggestions`` holds the closest names and
    ``kind`` says which it is (``"table"`` or ``"column"``)."""

    def __init__(self, message: str, *, name: str = "", suggestions: Sequence[str] = (),
                 kind: str = "column") -> None:
        if kind not in ("table", "column"):
            raise ValueError(f"SchemaError kind must be 'table' or 'column', not {kind!r}")
        self.kind = kind
        self.name = name
        self.suggestions = tuple(suggestions)
        super().__init__(message)


class LocationError(InputError):
    """A KB or database location (``--kb`` / ``--db``) that is neither a URL nor an existing
    path; ``kind`` is ``"kb"`` or ``"db"``, ``location`` the value as given."""

    def __init__(self, location: str, *, kind: str) -> None:
        if kind not in ("kb", "db"):
            raise ValueError(f"LocationError kind must be 'kb' or 'db', not {kind!r}")
        self.location = location
        self.kind = kind
        expected = ("an http(s) SPARQL endpoint URL, an Oxigraph store directory, an RDF file "
                    "or MetaQA's kb.txt") if kind == "kb" else "a database URL or a SQLite file"
        super().__init__(f"{location!r} is not {expected}")


class ProgramTooLongError(InputError):
    """A program (or a session's run of calls) longer than its cap: ``calls`` is how many
    there were (or the step that went past), ``limit`` the cap.

    >>> print(ProgramTooLongError(10_001, 10_000))
    the program has 10,001 calls; at most 10,000 are allowed
    """

    def __init__(self, calls: int, limit: int) -> None:
        self.calls = calls
        self.limit = limit
        super().__init__(f"the program has {calls:,} calls; at most {limit:,} are allowed")


class ReadOnlyError(PyqlError):
    """A write was refused before it reached an engine (pyql backends are read-only)."""


class ProfileError(PyqlError):
    """A KB profile is misconfigured, or cannot render/resolve a term."""


class DatasetFileError(PyqlError, ValueError):
    """A dataset file that is not what its format says: ``path``, ``line`` (1-based; None when
    the file as a whole is at fault) and ``problem``. Its text is one ``path:line: problem``
    line.

    >>> print(DatasetFileError("qa_dev.txt", 3, "no tab between the question and the answers"))
    qa_dev.txt:3: no tab between the question and the answers
    """

    def __init__(self, path: object, line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {problem}")


class BackendError(PyqlError):
    """The KB/DB failed. Never confused with an empty result."""

    def __init__(self, message: str, *, backend: str = "", query: str = "") -> None:
        self.backend = backend
        self.query = query
        super().__init__(message)


class BackendUnavailableError(BackendError):
    """The server cannot be reached (connection refused, DNS, dead process)."""


class BackendTimeoutError(BackendError):
    """The query did not finish within the configured timeout."""


class BackendQueryError(BackendError):
    """The engine rejected or failed the query (syntax it does not support, runtime error)."""
