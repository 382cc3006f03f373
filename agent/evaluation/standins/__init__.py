"""LLM stand-ins: the models of runs without one (``--llm gold``, ``--llm noisy-gold:R``).

A strategy asks its LLM its own questions (QueryAgent one action per call, Readi a whole path
then edits, SRP five stages, vanilla one query), so each strategy has its own stand-in. They
belong to the evaluation, not to the strategies: a strategy never knows whether a model or a
stand-in answers it. A stand-in reads what it needs from the step records (its ``observe(step)``
is one more step callback of the question's :class:`~pyql.agent.recorder.Recorder`), never
from the prompt's wording.

**One registry, by strategy name.** A :class:`StandInFactory` builds the stand-in of one
question; :func:`get_stand_in` finds the factory registered under the strategy's name in the
entry-point group ``pyql.standins`` (loaded by :mod:`pyql.plugins`, with its one conflict
policy: a name claimed twice is :class:`~pyql.plugins.PluginConflictError`). The built-in
strategies' factories are built in (:data:`BUILT_IN`); a third party registers its own beside
its strategy::

    [project.entry-points."pyql.standins"]
    mine = "my_package.stand_in:MyStandIn"    # a StandInFactory subclass

A strategy without one gets :class:`NoStandInError` when ``--llm`` is a stand-in spec, before
the run starts.

**One spec.** Every factory receives the parsed, frozen
:class:`~pyql.agent.evaluation.llm_spec.StandInSpec` (never the text). :meth:`StandInFactory.check`
says what the factory can play, the same way for every strategy: a kind it does not play, an
injection type it does not make (``noisy-gold:0.3:wrong_relation`` is QueryAgent's; Readi and SRP
corrupt path relations) or a parameter it does not declare is an
:class:`~pyql.agent.evaluation.llm_spec.LLMSpecError` with the field at fault, raised before the
run; what passes is the run's :class:`~pyql.agent.evaluation.llm_spec.StandIn` (its assumptions,
``metrics.json``'s ``stand_in``).

**Records.** A stand-in that keeps records of the mistakes it made (QueryAgent's noisy one) has
``reconcile(trajectory)`` (:class:`MistakeRecords`); the runner holds the stand-in it had built
for the question and asks it (:meth:`~pyql.agent.evaluation.specs.StandInProvider.stand_in_for`).

=====================  ===================================================================
strategy               stand-in
=====================  ===================================================================
queryagent (and its    :mod:`.queryagent`: ``gold`` replays the gold program one call per
variants)              step (:class:`~.gold.GoldLLM`), ``noisy-gold`` injects the paper's
                       hallucinations (:class:`~pyql.agent.evaluation.noisy.NoisyGoldLLM`)
readi                  :mod:`.readi`: the gold path, corrupted at the rate; edits and reader
srp                    :mod:`.srp`: SRP's stages over Readi's stand-in
vanilla, vanilla-few   :mod:`.vanilla`: the gold program compiled (``gold`` only)
=====================  ===================================================================

>>> get_stand_in("readi").check(parse_llm_spec("noisy-gold:0.3:wrong_relation"), "readi")
Traceback (most recent call last):
pyql.agent.evaluation.llm_spec.LLMSpecError: noisy-gold:0.3:wrong_relation: the readi stand-in
makes no injection type (asked for wrong_relation)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pyql.agent.evaluation.llm_spec import (
    LLMSpec,
    LLMSpecError,
    StandIn,
    StandInParameter,
    StandInSpec,
    parse_llm_spec,
)
from pyql.plugins import plugins

if TYPE_CHECKING:
    from pyql.agent.evaluation.records import EvalItem
    from pyql.agent.llm.clients import LLM

__all__ = [
    "BUILT_IN",
    "ENTRY_POINT_GROUP",
    "MistakeRecords",
    "NoStandInError",
    "StandInFactory",
    "available_stand_ins",
    "build_stand_in",
    "get_stand_in",
    "stand_in_assumptions",
    "stand_in_spec",
]

#: the entry-point group stand-in factories register under (the name: the strategy's)
ENTRY_POINT_GROUP = "pyql.standins"

_QUERYAGENT = "pyql.agent.evaluation.standins.queryagent:QueryAgentStandIn"
_VANILLA = "pyql.agent.evaluation.standins.vanilla:VanillaStandIn"
#: the built-in strategies' stand-ins (claimed like any plugin of the group)
BUILT_IN: Mapping[str, str] = {
    "queryagent": _QUERYAGENT,
    "queryagent-sc0": _QUERYAGENT,
    "queryagent-sc-few": _QUERYAGENT,
    "agentbench": _QUERYAGENT,
    "agentbench-eraser": _QUERYAGENT,
    "readi": "pyql.agent.evaluation.standins.readi:ReadiStandIns",
    "srp": "pyql.agent.evaluation.standins.srp:SRPStandIns",
    "vanilla": _VANILLA,
    "vanilla-few": _VANILLA,
}


class NoStandInError(LLMSpecError):
    """``--llm gold``/``noisy-gold`` for a strategy that has no stand-in registered:
    ``strategy``, ``spec`` and ``available`` (the strategies that have one)."""

    def __init__(self, strategy: str, spec: str, available: Iterable[str]) -> None:
        self.available = tuple(sorted(available))
        super().__init__(
            f"the {strategy} strategy has no stand-in for --llm {spec} (strategies with one: "
            f"{', '.join(self.available)}); register a StandInFactory in the "
            f"{ENTRY_POINT_GROUP} entry-point group, or use a model (openai:MODEL) or a replay",
            spec=spec, parameter="kind", strategy=strategy)


@runtime_checkable
class MistakeRecords(Protocol):
    """A stand-in that records the mistakes it made on purpose, settled with the question's
    trajectory at the end (``results.jsonl``'s ``meta.injections``)."""

    def reconcile(self, trajectory: Any) -> Sequence[Any]: ...


class StandInFactory(ABC):
    """Builds one strategy's stand-in LLM per question (module docstring). A subclass says
    what it plays in class attributes and implements :meth:`build`."""

    #: the stand-in kinds it plays
    kinds: ClassVar[frozenset[str]] = frozenset({"gold", "noisy-gold"})
    #: the noisy-gold injection types it makes (``noisy-gold:RATE:TYPES``); none: TYPES refused
    injection_types: ClassVar[tuple[str, ...]] = ()
    #: its declared assumptions (``noisy-gold`` takes the defaults, ``gold`` the oracle's)
    parameters: ClassVar[tuple[StandInParameter, ...]] = ()
    #: whether ``gold`` takes KEY=VALUE parameters (QueryAgent's gold only replays: no)
    gold_parameters: ClassVar[bool] = True

    def check(self, spec: StandInSpec, strategy: str) -> StandIn:
        """The run's assumptions under ``spec``, or :class:`LLMSpecError` (with ``strategy``
        and the field at fault) for what this stand-in does not play."""
        if spec.kind not in self.kinds:
            raise LLMSpecError(f"{spec.text}: the {strategy} stand-in plays "
                               f"{' and '.join(sorted(self.kinds))}, not {spec.kind}",
                               spec=spec.text, parameter="kind", value=spec.kind,
                               strategy=strategy)
        unknown = [t for t in spec.types or () if t not in self.injection_types]
        if unknown:
            makes = (f"makes the injection types {', '.join(self.injection_types)}"
                     if self.injection_types else "makes no injection type")
            raise LLMSpecError(f"{spec.text}: the {strategy} stand-in {makes} (asked for "
                               f"{', '.join(unknown)})",
                               spec=spec.text, parameter="types",
                               value=",".join(spec.types or ()), strategy=strategy)
        if spec.kind == "gold" and spec.parameters and not self.gold_parameters:
            name = next(iter(spec.parameters))
            raise LLMSpecError(f"{spec.text}: the {strategy} gold stand-in replays the gold "
                               f"program and takes no parameter; use noisy-gold:0:{spec.argument}",
                               spec=spec.text, parameter=name,
                               value=f"{spec.parameters[name]:g}", strategy=strategy)
        values = spec.values(self.parameters, strategy=strategy)
        return StandIn(spec.kind, strategy, {"rate": spec.rate, **values})

    @abstractmethod
    def build(self, spec: StandInSpec, item: EvalItem, *, seed: int = 0,
              preset: str | None = None) -> LLM:
        """The stand-in of one question (an item of the evaluation; ``seed`` is the
        question's own, :func:`~pyql.agent.evaluation.records.item_seed`; ``preset`` the run's
        preset other than the default). ``spec`` has passed :meth:`check`."""


@cache
def _entry_points() -> Any:
    return plugins(ENTRY_POINT_GROUP, builtin=BUILT_IN)


def available_stand_ins() -> tuple[str, ...]:
    """The strategies with a stand-in (built in or registered in ``pyql.standins``)."""
    return tuple(_entry_points().names())


@cache
def _factory(strategy: str) -> StandInFactory:
    found = _entry_points()
    target = found.load(strategy)
    factory = target() if isinstance(target, type) else target
    if not isinstance(factory, StandInFactory):
        raise TypeError(f"{ENTRY_POINT_GROUP} entry point {strategy!r} ({found[strategy]}) is "
                        "not a StandInFactory")
    return factory


def get_stand_in(strategy: str, spec: str | LLMSpec = "gold") -> StandInFactory:
    """The stand-in factory of ``strategy`` (by name); :class:`NoStandInError` (naming
    ``spec``) when it has none. A name claimed twice, or a plugin that fails to import, raises
    the loader's error (:mod:`pyql.plugins`)."""
    if strategy not in _entry_points():
        raise NoStandInError(strategy, str(spec), available_stand_ins())
    return _factory(strategy)


def stand_in_assumptions(spec: str | LLMSpec | None, strategy: str = "queryagent"
                         ) -> StandIn | None:
    """The :class:`~pyql.agent.evaluation.llm_spec.StandIn` of ``spec`` for ``strategy`` (None
    when ``spec`` names a model or a replay); :class:`LLMSpecError` when the strategy's
    stand-in cannot play it, :class:`NoStandInError` when it has none.

    >>> stand_in_assumptions("noisy-gold:0.3", "readi").describe()
    'noisy-gold (rate=0.3, edit_success=0.8, reader_accuracy=0.9)'
    >>> stand_in_assumptions("openai:gpt-4o") is None
    True
    """
    if spec is None:
        return None
    parsed = parse_llm_spec(spec)
    if not isinstance(parsed, StandInSpec):
        return None
    return get_stand_in(strategy, parsed).check(parsed, strategy)


def stand_in_spec(spec: str | LLMSpec) -> StandInSpec:
    """``spec`` parsed, when it names a stand-in; else :class:`LLMSpecError` (``kind``)."""
    parsed = parse_llm_spec(spec)
    if not isinstance(parsed, StandInSpec):
        raise LLMSpecError(f"{parsed.text!r} is not a stand-in (gold, noisy-gold:RATE)",
                           spec=parsed.text, parameter="kind", value=parsed.kind)
    return parsed


def build_stand_in(strategy: str, spec: str | LLMSpec, item: EvalItem, *, seed: int = 0,
                   preset: str | None = None) -> LLM:
    """The stand-in of one question for ``strategy`` under ``spec``, checked as a run checks it
    (:meth:`StandInFactory.check`): what a run's provider builds for ``item``, without the
    run's LLM cache. ``seed`` is the question's own.

    >>> from pyql.agent.evaluation.records import EvalItem
    >>> item = EvalItem(id="q1", question="q", program="get_relation(Kismet)")
    >>> build_stand_in("queryagent", "gold", item).remaining
    2
    """
    parsed = stand_in_spec(spec)
    factory = get_stand_in(strategy, parsed)
    factory.check(parsed, strategy)
    return factory.build(parsed, item, seed=seed, preset=preset)


def _clear_cache() -> None:
    """Forget the entry points read so far (tests that install a plugin call this)."""
    _entry_points.cache_clear()
    _factory.cache_clear()
