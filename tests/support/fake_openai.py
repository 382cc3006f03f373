"""A fake OpenAI-compatible server for offline tests of the real ``openai`` client code path.

:class:`FakeOpenAI` is a stdlib ``ThreadingHTTPServer`` on a free 127.0.0.1 port serving
``POST /v1/chat/completions`` and ``POST /v1/embeddings``. Chat requests are answered from a
queue of scripted behaviours (:meth:`FakeOpenAI.push`):

- :class:`Text` (a canned assistant text, optional usage), :class:`ToolCalls` (raw argument
  strings allowed, so malformed JSON can be sent);
- :class:`RateLimit` (429 with ``Retry-After``), :class:`ServerError` (500 by default),
  :class:`Slow` (sleep, then another behaviour), :class:`Malformed` (a 200 whose body is not
  JSON), :class:`ContextTooLong` (400 ``context_length_exceeded``), :class:`Status` (any status
  and error body);
- :class:`Hang` (read the request, never answer: the connection stays open until the server
  stops or ``seconds`` pass) and :class:`Drip` (send the headers of another behaviour's reply,
  then its body ``chunk`` bytes every ``interval`` seconds — no socket timeout ever trips).

Independently of the queue, a wrong ``Authorization`` header gets 401 (``invalid_api_key``) and a
model not in ``models`` gets 404 (``model_not_found``). An empty queue answers 400
``script_exhausted`` so a test never hangs. Embeddings are deterministic hashed bag-of-words
vectors (texts sharing words are similar). Every request is recorded in :attr:`requests`.

The server is bounded: it refuses requests beyond ``max_requests`` and shuts itself down after
``lifetime`` seconds. The pytest fixture :func:`fake_openai` yields a started server::

    def test_it(fake_openai):
        fake_openai.push(Text("Thought 1: ...\\nAction 1: execute()"))
        llm = OpenAIChat("gpt-test", base_url=fake_openai.base_url, api_key=fake_openai.api_key)
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "FakeOpenAI",
    "Text",
    "ToolCalls",
    "RateLimit",
    "ServerError",
    "Slow",
    "Hang",
    "Drip",
    "Malformed",
    "ContextTooLong",
    "Status",
    "RecordedRequest",
    "fake_embedding",
    "fake_openai",
]

log = logging.getLogger(__name__)

EMBEDDING_DIM = 64
#: what the handler sends: status, headers, body
_Reply = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True)
class Text:
    content: str
    #: (prompt_tokens, completion_tokens); None omits ``usage`` from the response
    usage: tuple[int, int] | None = (10, 5)
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolCalls:
    #: (name, arguments): arguments is a dict (sent as JSON) or a raw string (sent as is)
    calls: Sequence[tuple[str, Mapping[str, Any] | str]]
    content: str | None = None
    usage: tuple[int, int] | None = (10, 5)


@dataclass(frozen=True)
class RateLimit:
    retry_after: float | None = 1.0
    code: str | None = "rate_limit_exceeded"


@dataclass(frozen=True)
class ServerError:
    status: int = 500


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: Any = field(default_factory=lambda: Text("(slow reply)"))


@dataclass(frozen=True)
class Hang:
    #: seconds before the connection is closed without a reply (bounded by the server lifetime)
    seconds: float = 3600.0


@dataclass(frozen=True)
class Drip:
    interval: float = 0.5
    chunk: int = 1
    then: Any = field(default_factory=lambda: Text("(dripped reply)"))


@dataclass(frozen=True)
class Malformed:
    body: str = '{"id": "x", "choices": [ {"message": '


@dataclass(frozen=True)
class ContextTooLong:
    pass


@dataclass(frozen=True)
class Status:
    status: int
    body: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any
    time: float


def fake_embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Deterministic unit vector: hashed bag of lower-cased words (split on non-alphanumerics)."""
    vector = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        index = int.from_bytes(digest[:4], "big") % dim
        vector[index] += 1.0 if digest[4] % 2 == 0 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _error(message: str, type_: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code, "param": param}}


class FakeOpenAI:
    """See the module docstring."""

    def __init__(
        self,
        *,
        api_key: str = "sk-test-fake",
        models: Sequence[str] = ("gpt-test", "gpt-4o-mini", "text-embedding-ada-002"),
        max_requests: int = 500,
        lifetime: float = 120.0,
    ) -> None:
        self.api_key = api_key
        self.models = set(models)
        self.max_requests = max_requests
        self.lifetime = lifetime
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- control ------------------------------------------------------------------------------
    def push(self, *behaviours: Any) -> FakeOpenAI:
        with self._lock:
            self._queue.extend(behaviours)
        return self

    @property
    def pending(self) -> int:
        return len(self._queue)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        handler = type("Handler", (_Handler,), {"fake": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._timer is not None:
            self._timer.cancel()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ------------------------------------------------------------------------------
    def _next(self) -> Any:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def handle(self, path: str, headers: dict[str, str], raw: bytes
               ) -> _Reply | Hang | tuple[Drip, _Reply]:
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(RecordedRequest(path, headers, body, time.time()))
            too_many = len(self.requests) > self.max_requests
        if too_many:
            return self._json(503, _error("fake server: request limit reached", "server_error", None))
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return self._json(401, _error("Incorrect API key provided.", "invalid_request_error",
                                          "invalid_api_key"))
        if not isinstance(body, dict):
            return self._json(400, _error("body is not JSON", "invalid_request_error", None))
        model = body.get("model")
        if model not in self.models:
            return self._json(404, _error(f"The model `{model}` does not exist or you do not "
                                          "have access to it.", "invalid_request_error",
                                          "model_not_found"))
        if path.endswith("/embeddings"):
            return self._embeddings(body)
        if path.endswith("/chat/completions"):
            return self._behave(self._next(), body)
        return self._json(404, _error(f"unknown path {path}", "invalid_request_error", None))

    def _behave(self, behaviour: Any, body: dict[str, Any]) -> _Reply | Hang | tuple[Drip, _Reply]:
        if behaviour is None:
            return self._json(400, _error("fake server: no scripted reply left",
                                          "invalid_request_error", "script_exhausted"))
        if isinstance(behaviour, Slow):
            self._stopping.wait(behaviour.seconds)
            return self._behave(behaviour.then, body)
        if isinstance(behaviour, Hang):
            return behaviour
        if isinstance(behaviour, Drip):
            reply = self._behave(behaviour.then, body)
            assert isinstance(reply, tuple) and isinstance(reply[0], int), "Drip needs a reply"
            return behaviour, reply  # type: ignore[return-value]
        if isinstance(behaviour, RateLimit):
            headers = {} if behaviour.retry_after is None else {
                "Retry-After": f"{behaviour.retry_after:g}"}
            return self._json(429, _error("Rate limit reached.", "requests", behaviour.code),
                              headers)
        if isinstance(behaviour, ServerError):
            return self._json(behaviour.status, _error("The server had an error.", "server_error",
                                                       None))
        if isinstance(behaviour, ContextTooLong):
            return self._json(400, _error(
                "This model's maximum context length is 16385 tokens. However, your messages "
                "resulted in 20000 tokens.", "invalid_request_error", "context_length_exceeded",
                "messages"))
        if isinstance(behaviour, Malformed):
            return 200, {"Content-Type": "application/json"}, behaviour.body.encode()
        if isinstance(behaviour, Status):
            return self._json(behaviour.status, dict(behaviour.body), dict(behaviour.headers))
        if isinstance(behaviour, Text):
            return self._completion(body, {"role": "assistant", "content": behaviour.content},
                                    behaviour.finish_reason, behaviour.usage)
        if isinstance(behaviour, ToolCalls):
            calls = [
                {"id": f"call_{i}_{len(self.requests)}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str)
                              else json.dumps(args)}}
                for i, (name, args) in enumerate(behaviour.calls)
            ]
            message: dict[str, Any] = {"role": "assistant", "content": behaviour.content,
                                       "tool_calls": calls}
            return self._completion(body, message, "tool_calls", behaviour.usage)
        raise TypeError(f"unknown behaviour {behaviour!r}")

    def _completion(self, body: dict[str, Any], message: dict[str, Any], finish: str,
                    usage: tuple[int, int] | None) -> tuple[int, dict[str, str], bytes]:
        payload: dict[str, Any] = {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}],
        }
        if usage is not None:
            payload["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                "total_tokens": usage[0] + usage[1]}
        return self._json(200, payload)

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        data = [{"object": "embedding", "index": i, "embedding": fake_embedding(str(t))}
                for i, t in enumerate(texts)]
        tokens = sum(len(str(t).split()) for t in texts)
        return self._json(200, {"object": "list", "data": data, "model": body["model"],
                                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    @staticmethod
    def _json(status: int, payload: Any, headers: Mapping[str, str] | None = None
              ) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(
            payload).encode()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.fake.handle(self.path, headers, raw)
        if isinstance(answer, Hang):
            self.fake._stopping.wait(min(answer.seconds, self.fake.lifetime))
            self.close_connection = True
            return
        drip = None
        if isinstance(answer[0], Drip):
            drip, answer = answer
        status, out_headers, payload = answer
        try:
            self.send_response(status)
            for key, value in out_headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if drip is None:
                self.wfile.write(payload)
                return
            self.wfile.flush()
            for i in range(0, len(payload), drip.chunk):
                if self.fake._stopping.wait(drip.interval):
                    self.close_connection = True
                    return
                self.wfile.write(payload[i:i + drip.chunk])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("fake-openai: " + format, *args)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started :class:`FakeOpenAI`; stopped after the test."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
