"""Tokens, cost and time: per LLM call and per question.

- Token counts come from the API's ``usage`` when the provider reports it; otherwise they are
  counted with tiktoken (:class:`TokenCounter`), and marked ``estimated``.
- tiktoken encodings come from tiktoken itself (:func:`get_encoding`): its own cache
  (``$TIKTOKEN_CACHE_DIR``), downloaded once when missing and online. A directory of
  ``.tiktoken`` files overrides that (``directory=`` or ``$PYQL_TIKTOKEN_DIR``: no network at
  all), and a ``fallback`` directory (a dataset's ``tiktoken/``) is used when tiktoken cannot get
  the file (offline). Without tiktoken, or with no file anywhere, a 4-characters-per-token
  estimate is used and a warning logged.
- Cost comes from a :class:`PriceTable` (US$ per 1M input/output tokens; the paper's C.2 method).
  A model not in the table costs 0, with one warning per model.
- :class:`Usage` sums one question: LLM calls, tokens, cost, KB/DB queries, seconds and the
  guidelines that fired, by code.

>>> table = PriceTable({"m": Price(input=1.0, output=2.0)})
>>> table.cost("m", 1_000_000, 500_000)
2.0
>>> table.cost("m-2024-01-01", 1_000_000, 0)  # dated snapshots price as their base model
1.0
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from pyql.deadline import call_within
from pyql.registry import lookup

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "ENCODINGS",
    "Price",
    "PriceTable",
    "DEFAULT_PRICES",
    "TokenUsage",
    "Usage",
    "UsageTally",
    "TokenCounter",
    "load_encoding",
    "get_encoding",
    "encoding_name_for_model",
    "DOWNLOAD_TIMEOUT",
]

log = logging.getLogger(__name__)

#: one encoding load at a time: a counter is shared by a run's threads, and the first count
#: (not the counter's construction) loads its encoding, which takes about 0.2 s of CPU
_ENCODING_LOCK = threading.Lock()

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"
_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

#: what tiktoken's ``tiktoken_ext.openai_public`` declares for the two encodings we ship support
#: for: the split regex, the special tokens and the sha256 of the rank file
ENCODINGS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "pat_str": (
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
            r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        "special_tokens": {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    },
    "o200k_base": {
        "pat_str": "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
                r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
                r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "special_tokens": {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    },
}


def _rank_file(name: str, directory: Path) -> Path:
    plain = directory / f"{name}.tiktoken"
    if plain.is_file():
        return plain
    cached = directory / hashlib.sha1(f"{_BASE_URL}{name}.tiktoken".encode()).hexdigest()
    if cached.is_file():
        return cached
    raise FileNotFoundError(
        f"no {name}.tiktoken (or its tiktoken cache file {cached.name}) in {directory}"
    )


def _parse_ranks(data: bytes, source: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except ValueError as exc:
            raise ValueError(f"{source}:{number}: not a tiktoken rank line ({exc})") from None
    return ranks


@lru_cache(maxsize=8)
def _load_encoding(name: str, directory: str) -> tiktoken.Encoding:
    import tiktoken

    spec = lookup(ENCODINGS, name, "encoding")
    path = _rank_file(name, Path(directory))
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec["sha256"]:
        raise ValueError(f"{path}: sha256 {digest} is not the {name} rank file ({spec['sha256']})")
    return tiktoken.Encoding(
        name=name,
        pat_str=spec["pat_str"],
        mergeable_ranks=_parse_ranks(data, path),
        special_tokens=dict(spec["special_tokens"]),
    )


def load_encoding(name: str, directory: str | os.PathLike[str]) -> tiktoken.Encoding:
    """A tiktoken encoding built from ``<directory>/<name>.tiktoken`` without any network.

    The file may also be named by tiktoken's cache key (sha1 of its download URL). Its sha256
    is checked against the one tiktoken expects. Encodings are cached per (name, directory).
    """
    return _load_encoding(name, str(Path(directory).resolve()))


def data_tiktoken_dir() -> Path | None:
    """The shared data's ``tiktoken/`` folder (``$PYQL_DATA``, else ``../shared/data``), when
    there is one: the offline copy of the rank files."""
    from pyql.datasets.paths import default_data_dir

    try:
        folder = default_data_dir() / "tiktoken"
    except FileNotFoundError:
        return None
    return folder if folder.is_dir() else None


#: seconds tiktoken may take to fetch a rank file it has not cached (its download has no timeout)
DOWNLOAD_TIMEOUT = 30.0


def get_encoding(name: str = "cl100k_base", directory: str | os.PathLike[str] | None = None, *,
                 fallback: str | os.PathLike[str] | None = None,
                 download_timeout: float = DOWNLOAD_TIMEOUT) -> tiktoken.Encoding:
    """The encoding ``name`` the way tiktoken's users expect it, with an offline override.

    ``directory`` (else ``$PYQL_TIKTOKEN_DIR``) overrides everything: the rank file is read from
    there (:func:`load_encoding`), nothing else is tried. Otherwise ``tiktoken.get_encoding``
    answers from its cache or downloads the file (bounded by ``download_timeout``); if that
    fails (offline), the ``fallback`` directory is read (default: :func:`data_tiktoken_dir`). Raises OSError (or ValueError for a
    corrupt file) when the encoding is nowhere to be had.
    """
    override = directory or os.environ.get("PYQL_TIKTOKEN_DIR") or None
    if override:
        return load_encoding(name, override)
    import tiktoken

    try:
        return call_within(lambda: tiktoken.get_encoding(name), download_timeout,
                           name="pyql-tiktoken")
    except (OSError, ValueError) as exc:  # requests' errors and DeadlineExceeded are OSErrors
        fallback = fallback if fallback is not None else data_tiktoken_dir()
        if fallback is None:
            raise
        log.info("tiktoken could not get %s (%s); reading %s", name, exc, fallback)
        return load_encoding(name, fallback)


_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


def encoding_name_for_model(model: str) -> str:
    """``o200k_base`` for the GPT-4o generation and later, ``cl100k_base`` otherwise."""
    bare = model.rsplit("/", 1)[-1].lower()
    return "o200k_base" if bare.startswith(_O200K_PREFIXES) else "cl100k_base"


class TokenCounter:
    """Counts tokens of text and chat messages the way the OpenAI cookbook does.

    ``encoding`` may be an encoding name; it is loaded lazily with :func:`get_encoding`
    (``directory`` / ``$PYQL_TIKTOKEN_DIR`` as an override, else tiktoken's cache or download,
    else ``fallback``). If tiktoken or the files are missing, counts fall back to
    ``ceil(len(text) / 4)`` and :attr:`exact` is False.

    ``estimates`` says whether a :class:`~pyql.agent.recorder.Recorder` estimates with it the
    usage of a call whose client reports none (False: those tokens count 0; the counter still
    counts prompts against a context budget). ``pyql eval`` makes its counter with
    ``estimates=False`` for a stand-in run unless ``--token-estimates`` is given: the stand-ins
    report no usage and never read their prompts, and counting them costs more CPU than the
    rest of the harness (``benchmarks/harness_overhead.py``).
    """

    #: per message overhead and reply priming of the chat format (gpt-3.5-turbo-0613 and later)
    TOKENS_PER_MESSAGE = 3
    TOKENS_PER_NAME = 1
    REPLY_PRIMING = 3

    def __init__(self, encoding: str | tiktoken.Encoding | None = None, *,
                 model: str | None = None, directory: str | os.PathLike[str] | None = None,
                 fallback: str | os.PathLike[str] | None = None, estimates: bool = True
                 ) -> None:
        self._spec = encoding or encoding_name_for_model(model or "")
        self.estimates = estimates
        self._directory = directory
        self._fallback = fallback
        self._encoding: Any = None if isinstance(self._spec, str) else self._spec
        self._failed = False

    @classmethod
    def for_llm(cls, llm: Any) -> TokenCounter:
        """The counter of ``llm``'s model (its ``model`` attribute; a client without one gets
        the default encoding)."""
        return cls(model=getattr(llm, "model", "") or "")

    @property
    def encoding(self) -> tiktoken.Encoding | None:
        """The tiktoken encoding, loaded on first use (None when it cannot be loaded: counts
        are then estimated at 4 characters per token). A run that never counts never loads it.
        """
        if self._encoding is None and not self._failed:
            with _ENCODING_LOCK:
                if self._encoding is None and not self._failed:
                    self._load()
        return self._encoding

    def _load(self) -> None:
        try:
            self._encoding = get_encoding(str(self._spec), self._directory,
                                          fallback=self._fallback)
        except (ImportError, OSError, ValueError) as exc:  # requests errors are OSErrors
            self._failed = True
            log.warning("token counts are estimated (4 characters per token): %s", exc)

    @property
    def exact(self) -> bool:
        return self.encoding is not None

    def count(self, text: str) -> int:
        enc = self.encoding
        if enc is None:
            return -(-len(text) // 4)
        # special tokens' text is ordinary text here, as encode(disallowed_special=()) reads it
        return len(enc.encode_ordinary(text))

    def count_messages(self, messages: Sequence[Mapping[str, Any]],
                       tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """Prompt tokens of chat ``messages`` (and, approximately, the tool schemas)."""
        total = self.REPLY_PRIMING + sum(self.count_message(m) for m in messages)
        if tools:
            total += self.count(json.dumps(list(tools), ensure_ascii=False))
        return total

    def count_message(self, message: Mapping[str, Any]) -> int:
        """The tokens one chat message adds to a prompt (:meth:`count_messages` is the reply
        priming plus these)."""
        total = self.TOKENS_PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            total += self.count(value if isinstance(value, str)
                                else json.dumps(value, ensure_ascii=False))
            if key == "name":
                total += self.TOKENS_PER_NAME
        return total


@dataclass(frozen=True)
class Price:
    """US$ per 1M tokens: ``input`` (prompt), ``output`` (completion), ``cached_input``."""

    input: float
    output: float = 0.0
    cached_input: float | None = None


#: list prices (US$ / 1M tokens) of a few OpenAI models; pass your own table for others.
#: ``gpt-3.5-turbo-0613`` is the paper's price ($0.0015 / $0.002 per 1K tokens, appendix C.2).
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "gpt-3.5-turbo-0613": Price(1.50, 2.00),
    "gpt-3.5-turbo-1106": Price(1.00, 2.00),
    "gpt-4": Price(30.0, 60.0),
    "gpt-4-turbo": Price(10.0, 30.0),
    "gpt-4o": Price(2.50, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "text-embedding-ada-002": Price(0.10),
    "text-embedding-3-small": Price(0.02),
    "text-embedding-3-large": Price(0.13),
}


class PriceTable:
    """Model name -> :class:`Price`; dated snapshots (``gpt-4o-2024-08-06``) use the longest
    matching name. Unknown models cost 0 (one warning per model). A table is fixed once made
    (each model's price is looked up once)."""

    def __init__(self, prices: Mapping[str, Price | Mapping[str, float] | Sequence[float]] | None = None,
                 ) -> None:
        table = DEFAULT_PRICES if prices is None else prices
        self.prices: dict[str, Price] = {name: _as_price(p) for name, p in table.items()}
        self._warned: set[str] = set()
        #: model -> its price (or None), looked up once: every call of a question asks again
        self._found: dict[str, Price | None] = {}

    @classmethod
    def of(cls, prices: PriceTable | Mapping[str, Price | Mapping[str, float] | Sequence[float]]
           | None) -> PriceTable:
        """``prices`` as a table: a table as it is (its warnings shared), a mapping made into
        one, None the default prices."""
        return prices if isinstance(prices, PriceTable) else cls(prices)

    def lookup(self, model: str) -> Price | None:
        try:
            return self._found[model]
        except KeyError:
            found = self._found[model] = self._lookup(model)
            return found

    def _lookup(self, model: str) -> Price | None:
        bare = model.rsplit("/", 1)[-1]
        if bare in self.prices:
            return self.prices[bare]
        best = max((name for name in self.prices if bare.startswith(name + "-")), key=len,
                   default=None)
        return self.prices[best] if best else None

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int,
             cached_tokens: int = 0) -> float:
        price = self.lookup(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                log.warning("no price for model %r: its cost is counted as 0", model)
            return 0.0
        cached = min(cached_tokens, prompt_tokens)
        cached_price = price.cached_input if price.cached_input is not None else price.input
        return ((prompt_tokens - cached) * price.input + cached * cached_price
                + completion_tokens * price.output) / 1_000_000


def _as_price(value: Price | Mapping[str, float] | Sequence[float]) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        return Price(**value)
    return Price(*value)


class TokenUsage(BaseModel):
    """Tokens of one LLM call; ``estimated`` when counted locally instead of reported by the API."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Usage(BaseModel):
    """What answering one question used. Add two with ``+`` to total a run.

    A question's usage is summed by a :class:`UsageTally`:

    >>> tally = UsageTally()
    >>> tally.add_call(TokenUsage(prompt_tokens=10, completion_tokens=2), cost=0.5, seconds=1)
    >>> tally.add_trigger("G001"); tally.add_trigger("G001")
    >>> u = tally.usage()
    >>> (u.llm_calls, u.prompt_tokens, u.guideline_triggers)
    (1, 10, {'G001': 2})
    """

    model_config = ConfigDict(frozen=True)

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    #: some token counts are local estimates (the API reported no usage)
    estimated_tokens: bool = False
    cost: float = 0.0
    #: seconds spent waiting for the LLM (including retries)
    llm_seconds: float = 0.0
    kb_queries: int = 0
    #: of ``kb_queries``, the label lookups (the paper's QPQ leaves them out)
    label_queries: int = 0
    #: wall-clock seconds of the whole question
    seconds: float = 0.0
    guideline_triggers: dict[str, int] = Field(default_factory=dict)
    #: of ``llm_calls``, those sent with a schema (structured output, ``--constrain``)
    constrained_calls: int = 0
    #: of ``llm_calls``, those that scored candidates instead of writing a reply (choose mode)
    scoring_calls: int = 0
    #: replies the strategy could not read (a step with a ``format_issue``)
    parse_failures: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        triggers = dict(self.guideline_triggers)
        for code, n in other.guideline_triggers.items():
            triggers[code] = triggers.get(code, 0) + n
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            estimated_tokens=self.estimated_tokens or other.estimated_tokens,
            cost=self.cost + other.cost,
            llm_seconds=self.llm_seconds + other.llm_seconds,
            kb_queries=self.kb_queries + other.kb_queries,
            label_queries=self.label_queries + other.label_queries,
            constrained_calls=self.constrained_calls + other.constrained_calls,
            scoring_calls=self.scoring_calls + other.scoring_calls,
            parse_failures=self.parse_failures + other.parse_failures,
            seconds=self.seconds + other.seconds,
            guideline_triggers=triggers,
        )


class UsageTally:
    """The running sums of one question's :class:`Usage` (mutable: a frozen copy per call and
    step costs more than the step's own bookkeeping); :meth:`usage` makes the frozen value."""

    __slots__ = ("llm_calls", "prompt_tokens", "completion_tokens", "cached_tokens",
                 "estimated_tokens", "cost", "llm_seconds", "constrained_calls", "kb_queries",
                 "parse_failures", "triggers", "scoring_calls")

    def __init__(self) -> None:
        self.llm_calls = self.prompt_tokens = self.completion_tokens = self.cached_tokens = 0
        self.constrained_calls = self.kb_queries = self.parse_failures = 0
        self.scoring_calls = 0
        self.estimated_tokens = False
        self.cost = self.llm_seconds = 0.0
        self.triggers: dict[str, int] = {}

    def add_call(self, tokens: TokenUsage, *, cost: float = 0.0, seconds: float = 0.0,
                 constrained: bool = False, scoring: bool = False) -> None:
        """One LLM call: its tokens, cost and seconds (``scoring``: it scored candidates)."""
        self.llm_calls += 1
        self.constrained_calls += int(constrained)
        self.scoring_calls += int(scoring)
        self.prompt_tokens += tokens.prompt_tokens
        self.completion_tokens += tokens.completion_tokens
        self.cached_tokens += tokens.cached_tokens
        self.estimated_tokens = self.estimated_tokens or tokens.estimated
        self.cost += cost
        self.llm_seconds += seconds

    def add_trigger(self, code: str) -> None:
        """One hint of the guideline ``code``."""
        self.triggers[code] = self.triggers.get(code, 0) + 1

    def usage(self, **update: Any) -> Usage:
        """The sums as a :class:`Usage` (``update``: fields the tally does not keep, such as
        ``seconds``)."""
        fields: dict[str, Any] = {
            "llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "cached_tokens": self.cached_tokens,
            "estimated_tokens": self.estimated_tokens, "cost": self.cost,
            "llm_seconds": self.llm_seconds, "kb_queries": self.kb_queries,
            "guideline_triggers": dict(self.triggers),
            "constrained_calls": self.constrained_calls, "parse_failures": self.parse_failures,
            "scoring_calls": self.scoring_calls,
        }
        fields.update(update)
        return Usage(**fields)
