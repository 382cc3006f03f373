"""Typed errors of the LLM clients.

Every failure of a language-model call is an :class:`LLMError` (a :class:`pyql.errors.PyqlError`)
with structured fields, so callers decide on fields, not on message text:

::

    LLMError                       model, status (HTTP status or None), code (provider error code)
    ├── LLMAuthError               401/403, or no API key configured
    ├── LLMModelNotFoundError      404 / ``model_not_found``
    ├── LLMContextLengthError      the prompt is longer than the model's context window
    ├── LLMRateLimitError          429 after the retries (``retry_after`` in seconds, if given)
    ├── LLMTimeoutError            no reply in time (``timeout`` per attempt, ``attempts``, ``elapsed``,
    │                              ``deadline``: the total budget, if one ran out)
    ├── LLMServerError             5xx or connection failure after the retries
    ├── LLMBadRequestError         any other 4xx (an invalid parameter, ...)
    ├── LLMResponseError           a malformed response (bad JSON, no choices, ...)
    │   └── LLMReplayMismatchError a replayed trajectory does not match the prompt it is given
    ├── LLMScriptExhaustedError    a scripted/replay client has no reply left
    └── ScoringUnsupportedError    the client cannot score candidates (choose mode; ``reason``)

Errors of the *model's output* (an action that does not parse, a malformed tool-call argument
string) are not errors here: the agent turns them into observations for the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from pyql.errors import PyqlError

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "LLMError",
    "LLMAuthError",
    "LLMModelNotFoundError",
    "LLMContextLengthError",
    "LLMRateLimitError",
    "LLMTimeoutError",
    "LLMServerError",
    "LLMBadRequestError",
    "LLMResponseError",
    "LLMReplayMismatchError",
    "LLMScriptExhaustedError",
    "ScoringUnsupportedError",
]


class _LLMErrorFields(TypedDict, total=False):
    """The fields every :class:`LLMError` has, as keywords (what a subclass passes on)."""

    model: str
    status: int | None
    code: str | None


class LLMError(PyqlError):
    """A language-model call failed.

    ``model`` is the model asked, ``status`` the HTTP status (None when there was no response)
    and ``code`` the provider's error code (``context_length_exceeded``, ``invalid_api_key``...).
    """

    def __init__(
        self, message: str, *, model: str = "", status: int | None = None, code: str | None = None
    ) -> None:
        self.model = model
        self.status = status
        self.code = code
        super().__init__(message)


class LLMAuthError(LLMError):
    """The API key is missing, wrong, or not allowed to use the model (401/403)."""


class LLMModelNotFoundError(LLMError):
    """The model does not exist or the key has no access to it (404)."""


class LLMContextLengthError(LLMError):
    """The prompt (plus the completion budget) exceeds the model's context window."""


class LLMRateLimitError(LLMError):
    """Rate limited (429) and the retries ran out; ``retry_after`` is the server's advice."""

    def __init__(self, message: str, *, retry_after: float | None = None,
                 **fields: Unpack[_LLMErrorFields]) -> None:
        self.retry_after = retry_after
        super().__init__(message, **{"status": 429, **fields})


class LLMTimeoutError(LLMError):
    """No reply in time: every attempt timed out, or the call's deadline ran out.

    ``timeout`` is the seconds allowed per attempt, ``attempts`` how many were made, ``elapsed``
    the seconds the call took in all, ``deadline`` the total budget (seconds) when that is what
    ran out, else None. Fields are None when not known (an error from a stand-in client).
    """

    def __init__(self, message: str, *, timeout: float | None = None,
                 attempts: int | None = None, elapsed: float | None = None,
                 deadline: float | None = None, **fields: Unpack[_LLMErrorFields]) -> None:
        self.timeout = timeout
        self.attempts = attempts
        self.elapsed = elapsed
        self.deadline = deadline
        super().__init__(message, **fields)


class LLMServerError(LLMError):
    """The server failed (5xx) or could not be reached, and the retries ran out."""


class LLMBadRequestError(LLMError):
    """The request was rejected (4xx other than auth, not-found, rate limit, context length)."""


class LLMResponseError(LLMError):
    """The response could not be understood (not JSON, no choices, wrong shape)."""


class LLMReplayMismatchError(LLMResponseError):
    """A :class:`~pyql.agent.llm.ReplayLLM` was given a prompt other than the recorded one."""


class LLMScriptExhaustedError(LLMError):
    """A scripted or replay client was asked for more replies than it holds."""


class ScoringUnsupportedError(LLMError):
    """The client cannot score candidates (choose mode): ``reason`` says why (a server that
    returns no log-probabilities, a client without ``score``)."""

    def __init__(self, message: str, *, reason: str = "",
                 **fields: Unpack[_LLMErrorFields]) -> None:
        self.reason = reason
        super().__init__(message, **fields)
