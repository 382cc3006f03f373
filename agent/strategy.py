"""The strategy interface: one contract for every reasoning strategy over a pyql environment.

A *strategy* answers one question over a KB or a database: QueryAgent (ReAct, step by step),
Readi (a whole reasoning path, instantiated, edited when stuck), SRP (references, relation check,
plan, judge, edit), or a third party's. Each one:

- is a class (a :class:`StrategyType`) built by ``from_config(llm, backend, config)`` from an LLM,
  a backend (a :class:`pyql.kb.KB`, a :class:`pyql.db.SqlDB` or a session factory) and a
  :class:`StrategyConfig` (the options every strategy understands, plus ``options`` for its own);
- knows nothing of the LLM stand-ins of runs without a model (``--llm gold``,
  ``--llm noisy-gold:R``): they belong to the evaluation, registered by strategy name in the
  entry-point group ``pyql.standins`` (:mod:`pyql.agent.evaluation.standins`; a stand-in reads
  the step records as one more step callback of the :class:`~pyql.agent.recorder.Recorder`);
- may name questions an evaluation must leave out through an optional classmethod
  ``held_out(options) -> frozenset[str]`` of question ids (SRP: the questions its reference base
  was built from), which the runner drops before ``--limit``/``--sample``;
- may add per-question numbers that need the gold answers through an optional classmethod
  ``measures(steps, item) -> dict[str, float]`` (SRP: judge accuracy, reference hit rate);
  metrics.json's ``strategy`` section averages them, and pools ``NAME:hits``/``NAME:of`` pairs
  into the run's ``NAME`` rate;
- may declare the longest reply it needs in a class attribute ``max_reply_tokens`` (QueryAgent:
  256, the original's cap; a whole path needs more): ``pyql ask``/``pyql eval`` send it as
  ``max_tokens`` unless ``--max-tokens`` says otherwise, so one runaway reply cannot grow
  without bound (default :data:`DEFAULT_MAX_REPLY_TOKENS`);
- takes ``config.constrain`` (``off``/``format``/``grounded``/``auto``; ``on`` is ``format``)
  and ``config.choose`` (score enumerable steps' candidates): its LLM calls go through a
  :class:`~pyql.agent.recorder.Recorder` with a :class:`~pyql.agent.llm.structured.ReplyFormat`
  each, so a server that honours JSON schemas only writes replies the strategy can read;
- declares the options it takes (``--option NAME=VALUE``) in a class attribute
  ``declared_options``: a mapping of names to :class:`StrategyOption` (the value's type and a
  line of help). :func:`check_options` reads the given values as those types and refuses an
  unknown name or an ill-typed value with :class:`StrategyOptionError` — ``pyql ask`` and
  ``pyql eval`` do so before anything is opened or a run directory made. A strategy without
  ``declared_options`` gets its options unchecked;
- answers with :meth:`Strategy.run` ``(question, entities=..., **context) -> Result``. The common
  :class:`Result` carries the answers, the final query, the program, the typed step records, the
  usage (LLM calls, tokens, cost, KB queries, seconds) and whether the strategy finished.

Strategies are registered by name in the entry-point group ``pyql.strategies`` (the value is the
class), so ``pyql eval --strategy NAME`` and ``pyql ask --strategy NAME`` run built-in and
third-party strategies alike::

    [project.entry-points."pyql.strategies"]
    mine = "my_package.strategy:MyStrategy"

A name is claimed once: a third party's ``readi`` beside the built-in is a
:class:`~pyql.plugins.PluginConflictError` when ``readi`` is asked for (:mod:`pyql.plugins`).

>>> "queryagent" in available_strategies()
True
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Generic,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    get_args,
    get_origin,
    overload,
    runtime_checkable,
)

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from pyql.agent.llm.accounting import Usage
from pyql.agent.trajectory import Step, Trajectory
from pyql.errors import PyqlError
from pyql.plugins import plugins
from pyql.registry import UnknownNameError, lookup

if TYPE_CHECKING:
    from pyql.db.base import DB
    from pyql.environment import Environment
    from pyql.kb.base import KB
    from pyql.program import Program

__all__ = [
    "DEFAULT_MAX_REPLY_TOKENS",
    "ENTRY_POINT_GROUP",
    "Backend",
    "GoldItem",
    "Result",
    "SessionFactory",
    "Strategy",
    "StrategyConfig",
    "StrategyOption",
    "StrategyOptionError",
    "StrategyType",
    "UnknownStrategyError",
    "available_strategies",
    "build_strategy",
    "check_options",
    "get_strategy",
    "max_reply_tokens",
]

#: the entry-point group strategies register under
ENTRY_POINT_GROUP = "pyql.strategies"
#: the reply cap of a strategy that declares no ``max_reply_tokens``
DEFAULT_MAX_REPLY_TOKENS = 512


def max_reply_tokens(strategy: Any) -> int:
    """The ``max_tokens`` a strategy (class) asks its replies to fit in."""
    value = getattr(strategy, "max_reply_tokens", None)
    return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_REPLY_TOKENS


class UnknownStrategyError(UnknownNameError):
    """No strategy of that name is installed (``available``, like ``known``, lists the installed
    ones)."""

    def __init__(self, what: str, name: str, known: Iterable[str]) -> None:
        super().__init__(what, name, known)
        self.available = self.known


@dataclass(frozen=True)
class StrategyOption:
    """One option a strategy takes (``--option NAME=VALUE``): the type of its value — anything
    pydantic validates (``int``, ``bool``, ``str``, ``str | None``, ``Literal["a", "b"]``,
    ``dict[str, Any]``); text is read leniently (``"3"`` as 3, ``"off"`` as False) — what it
    does, and for a number its range: ``ge`` (at least) and ``le`` (at most).

    >>> StrategyOption(int, "most LLM calls per question", ge=1).type_name
    'int >= 1'
    """

    type: Any
    help: str = ""
    ge: float | None = None
    le: float | None = None

    def read(self, value: Any) -> Any:
        """``value`` as this option's type, in its range; raises ``pydantic.ValidationError``.
        A number where text is expected is read as the text it was written as
        (``--option table=2019``)."""
        adapter = _adapter(self.type, self.ge, self.le)
        try:
            return adapter.validate_python(value)
        except ValidationError:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise
            return adapter.validate_python(json.dumps(value))

    @property
    def type_name(self) -> str:
        """What the value must be, in words (``int >= 1``, ``one of text, tools``)."""
        kind = self.type
        if get_origin(kind) is Literal:
            return "one of " + ", ".join(str(a) for a in get_args(kind))
        if get_origin(kind) is dict:
            return "a JSON object"
        name = kind.__name__ if isinstance(kind, type) else str(kind).replace("typing.", "")
        bounds = [f"{op} {_number(bound)}" for op, bound in ((">=", self.ge), ("<=", self.le))
                  if bound is not None]
        return " ".join([name, " and ".join(bounds)]) if bounds else name


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


@cache
def _adapter(kind: Any, ge: float | None = None, le: float | None = None) -> TypeAdapter[Any]:
    if ge is not None or le is not None:
        kind = Annotated[kind, Field(ge=ge, le=le)]
    return TypeAdapter(kind, config=ConfigDict(arbitrary_types_allowed=True))


class StrategyOptionError(PyqlError, ValueError):
    """An option the strategy does not take (``expected`` is None), or a value that is not of
    the option's type (``expected``: the type's name). ``known`` lists the strategy's options.

    >>> error = StrategyOptionError("readi", "max_edit", known=("max_edits",))
    >>> print(error)
    the readi strategy does not take --option max_edit; its options: max_edits
    """

    def __init__(self, strategy: str, option: str, *, known: Collection[str],
                 expected: str | None = None, value: Any = None) -> None:
        self.strategy = strategy
        self.option = option
        self.known = tuple(known)
        self.expected = expected
        self.value = value
        if expected is None:
            names = ", ".join(self.known) or "none"
            message = (f"the {strategy} strategy does not take --option {option}; its options: "
                       f"{names}")
        else:
            message = (f"--option {option}={value!r}: the {strategy} strategy expects "
                       f"{expected}")
        super().__init__(message)


def check_options(strategy: str | StrategyType, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with each value read as the type the strategy declares for it
    (``declared_options``); :class:`StrategyOptionError` for a name it does not declare or a
    value of the wrong type. A strategy that declares nothing gets ``options`` back as they are
    (it checks them itself, or not at all).

    >>> check_options("readi", {"max_edits": "2", "exclude_topic": "off"})
    {'max_edits': 2, 'exclude_topic': False}
    """
    kind = get_strategy(strategy) if isinstance(strategy, str) else strategy
    declared: Mapping[str, StrategyOption] | None = getattr(kind, "declared_options", None)
    if declared is None:
        return dict(options)
    name = getattr(kind, "name", str(strategy))
    out: dict[str, Any] = {}
    for key, value in options.items():
        spec = declared.get(key)
        if spec is None:
            raise StrategyOptionError(name, key, known=sorted(declared))
        try:
            out[key] = spec.read(value)
        except ValidationError:
            raise StrategyOptionError(name, key, known=sorted(declared),
                                      expected=spec.type_name, value=value) from None
    return out


_T = TypeVar("_T")


class _FromTrajectory(Generic[_T]):
    """An attribute of :class:`Result` that is its trajectory's, read through (kept once)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, result: None, owner: type) -> _FromTrajectory[_T]: ...
    @overload
    def __get__(self, result: Result, owner: type) -> _T: ...
    def __get__(self, result: Result | None, owner: type) -> _T | _FromTrajectory[_T]:
        return self if result is None else getattr(result.trajectory, self.name)


@dataclass(frozen=True)
class Result:
    """The outcome of one question, whatever the strategy: the trajectory (serialisable, with
    the typed steps, usage and answers) and the program the strategy ended with. The other
    attributes are the trajectory's: ``query`` is the final SPARQL/SQL text, ``finished`` says
    the strategy reached its own end (QueryAgent: execute() was accepted)."""

    trajectory: Trajectory
    program: Program

    question = _FromTrajectory[str]()
    strategy = _FromTrajectory[str]()
    answers = _FromTrajectory[tuple[Any, ...]]()
    query = _FromTrajectory[str]()
    steps = _FromTrajectory[tuple[Step, ...]]()
    usage = _FromTrajectory[Usage]()
    finished = _FromTrajectory[bool]()
    stop_reason = _FromTrajectory[str]()


@runtime_checkable
class Strategy(Protocol):
    """Answers questions over one environment (see the module docstring)."""

    #: the registered name (``queryagent``, ``readi``, ``srp``, ...)
    name: str

    def run(self, question: str, entities: Mapping[str, str] | None = None,
            **context: Any) -> Result:
        """Answer one question. ``entities`` maps mentions to KB ids; ``context`` holds what a
        dataset item adds (``table``, ``columns``, ``schema``, ``meta``, ``on_step``); a
        strategy ignores context keys it does not use."""
        ...


@dataclass(frozen=True)
class StrategyConfig:
    """The options every strategy understands; ``options`` holds a strategy's own
    (``pyql eval --option key=value``; e.g. Readi's ``max_edits``, SRP's ``references``).
    ``None`` means the strategy's default."""

    guidelines: bool = True
    max_steps: int | None = None
    mode: str = "text"
    profile: str | None = None
    #: the relation ranker (bm25, openai, minilm, hybrid); None: the strategy's (or preset's)
    ranker: str | None = None
    top_k: int | None = None
    seed: int = 0
    table: str | None = None
    token_counter: Any = None
    price_table: Any = None
    #: the dataset evaluated (``metaqa-3hop``, ``webqsp``, ...), when there is one
    dataset: str | None = None
    #: a named bundle of settings (:mod:`pyql.agent.strategies.queryagent.presets`: ``default``, ``paper``)
    preset: str | None = None
    #: structured output (:mod:`pyql.agent.llm.structured`): ``off``, ``format``, ``grounded``,
    #: ``auto`` (``on``: ``format``)
    constrain: str = "auto"
    #: choose mode (:mod:`pyql.agent.grounding.candidates`): enumerable steps score their candidates
    choose: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    def given(self, *names: str) -> dict[str, Any]:
        """The settings ``names`` that are set (not None), by name: what a factory passes on,
        leaving the strategy's own defaults for the others.

        >>> StrategyConfig(ranker="bm25").given("ranker", "top_k")
        {'ranker': 'bm25'}
        """
        return {name: value for name in names if (value := getattr(self, name)) is not None}

    def typed_options(self, *, ints: Collection[str] = (), flags: Collection[str] = ()
                      ) -> dict[str, Any]:
        """:attr:`options` with the numbers (``ints``) and the flags (``flags``: ``1``,
        ``true``, ``yes``, ``on`` are true) a caller gave as text read as ``int`` and ``bool``.

        >>> StrategyConfig(options={"max_edits": "3", "reflection": "off", "x": "y"}
        ...                ).typed_options(ints=("max_edits",), flags=("reflection",))
        {'max_edits': 3, 'reflection': False, 'x': 'y'}
        """
        typed = dict(self.options)
        for key, value in typed.items():
            if isinstance(value, str) and key in ints:
                typed[key] = int(value)
            elif isinstance(value, str) and key in flags:
                typed[key] = value.strip().lower() in ("1", "true", "yes", "on")
        return typed


class GoldItem(Protocol):
    """What ``measures(steps, item)`` may read of an evaluation item (the evaluation layer's
    ``EvalItem``): its gold answers, its toolset, its gold program (None: there is none) and
    its topic entities."""

    @property
    def answers(self) -> tuple[Any, ...]: ...

    @property
    def tools(self) -> str: ...

    @property
    def program(self) -> str | None: ...

    @property
    def entities(self) -> Mapping[str, str]: ...


class SessionFactory(Protocol):
    """Makes the environment of one question: a backend a strategy may be given instead of a
    KB or database (its own Session or SqlSession settings, a per-question view)."""

    def __call__(self, *, entities: Mapping[str, str], guidelines: Any, table: str | None
                 ) -> Environment: ...


#: what a strategy runs on
Backend: TypeAlias = "KB | DB | SessionFactory"


@runtime_checkable
class StrategyType(Protocol):
    """What the ``pyql.strategies`` entry point names: a strategy class with its factory."""

    name: str

    def from_config(self, llm: Any, backend: Any, config: StrategyConfig) -> Strategy:
        """Build the strategy (a classmethod on the class)."""
        ...


@cache
def _entry_points() -> Mapping[str, Any]:
    return plugins(ENTRY_POINT_GROUP)


def available_strategies() -> tuple[str, ...]:
    """The names of the installed strategies (entry-point group ``pyql.strategies``)."""
    return tuple(sorted(_entry_points()))


def get_strategy(name: str) -> StrategyType:
    """The strategy class registered under ``name``; :class:`UnknownStrategyError` if none is.

    The loader's policy (:mod:`pyql.plugins`): a name claimed by two plugins (a third party's
    ``readi`` beside the built-in) is :class:`~pyql.plugins.PluginConflictError`, a plugin whose
    import fails :class:`~pyql.plugins.PluginLoadError` (never swallowed)."""
    found = _entry_points()
    ep = lookup(found, name, "strategy", UnknownStrategyError)
    kind = ep.load()
    if not callable(getattr(kind, "from_config", None)):
        raise TypeError(f"strategy entry point {name!r} ({ep.value}) has no from_config(llm, "
                        "backend, config)")
    return kind


def build_strategy(name: str, llm: Any, backend: Any,
                   config: StrategyConfig | None = None) -> Strategy:
    """``get_strategy(name).from_config(llm, backend, config)``, checked to satisfy
    :class:`Strategy`."""
    strategy = get_strategy(name).from_config(llm, backend, config or StrategyConfig())
    if not isinstance(strategy, Strategy):
        raise TypeError(f"strategy {name!r} built a {type(strategy).__name__}, which has no "
                        "run(question, entities, **context) and name")
    return strategy


def _clear_cache() -> None:
    """Forget the entry points read so far (tests that install a plugin call this)."""
    _entry_points.cache_clear()

