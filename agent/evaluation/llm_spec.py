"""The ``--llm`` spec, read once into a frozen value.

:func:`parse_llm_spec` reads the text given to ``--llm`` (``pyql eval``, ``pyql ask``) into an
:class:`LLMSpec` — a model (``openai:MODEL``, ``local[:PATH]``), a recording
(``replay:PATH``), the no-model baseline that only chooses (``ranker``,
:mod:`pyql.agent.llm.ranker`) — or a :class:`StandInSpec` (``gold[:K=V,...]``,
``noisy-gold:RATE[:TYPES][:K=V,...]``) holding the corruption rate, the injection types and the
stand-in parameters given, each already read as a number and checked. Everything after it
(:func:`~pyql.agent.evaluation.specs.build_provider`, the stand-in factories of
:mod:`pyql.agent.evaluation.standins`, the CLI's checks) takes the object, never the text, so a
spec means the same to every strategy: what a strategy cannot play is refused by its factory's
``check`` with an :class:`LLMSpecError` naming the field, before a run starts.

A stand-in's assumptions are :class:`StandInParameter` values (the probability that one of its
components does its job); :meth:`StandInSpec.values` gives their values under a spec, and
:class:`StandIn` is what ``metrics.json`` records of them.

>>> spec = parse_llm_spec("noisy-gold:0.3:wrong_arity:fix_on_hint=0.5")
>>> spec.kind, spec.rate, spec.types, dict(spec.parameters)
('noisy-gold', 0.3, ('wrong_arity',), {'fix_on_hint': 0.5})
>>> parse_llm_spec("openai:gpt-4o-mini").argument
'gpt-4o-mini'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pyql.errors import PyqlError

__all__ = [
    "LLMSpec",
    "LLMSpecError",
    "StandIn",
    "StandInParameter",
    "StandInSpec",
    "parse_llm_spec",
    "probability",
]

_FORMS = ("openai:MODEL, local[:PATH.gguf], replay:PATH, ranker, gold[:KEY=VALUE,...], "
          "noisy-gold:RATE[:TYPE,...][:KEY=VALUE,...]")
_STAND_INS = ("gold", "noisy-gold")


class LLMSpecError(PyqlError, ValueError):
    """An ``--llm`` spec that cannot be used (unknown form, missing module, unreadable file, a
    stand-in parameter not declared, a value out of range, a stand-in the strategy does not
    play).

    ``spec`` is the spec, ``parameter`` the field at fault (``rate``, ``types``, ``kind`` or a
    stand-in parameter's name) and ``value`` the text given for it (None when the error is not
    about one field); ``strategy`` the strategy whose stand-in refused it (None: any)."""

    def __init__(self, message: str, *, spec: str | None = None, parameter: str | None = None,
                 value: str | None = None, strategy: str | None = None) -> None:
        super().__init__(message)
        self.spec = spec
        self.parameter = parameter
        self.value = value
        self.strategy = strategy


def probability(name: str, value: float, *, spec: str | None = None) -> float:
    """``value`` if it is between 0 and 1, else :class:`LLMSpecError` (``parameter=name``):
    the one check of a rate or a stand-in's accuracy, whether it comes from a spec or is given
    to a stand-in's constructor.

    >>> probability("rate", 1.5)
    Traceback (most recent call last):
    pyql.agent.evaluation.llm_spec.LLMSpecError: rate is a probability (0 to 1), not 1.5
    """
    if not 0.0 <= value <= 1.0:
        where = f"{spec}: " if spec else ""
        raise LLMSpecError(f"{where}{name} is a probability (0 to 1), not {value:g}", spec=spec,
                           parameter=name, value=f"{value:g}")
    return value


@dataclass(frozen=True)
class LLMSpec:
    """A parsed ``--llm``: ``kind`` (``openai``, ``local``, ``replay``, ``ranker``, ``gold``,
    ``noisy-gold``), ``argument`` (the model, the path; ``""`` for none) and ``text``, the spec
    as given (for logs and ``config.json``)."""

    text: str
    kind: str
    argument: str = ""

    def __str__(self) -> str:
        return self.text

    @property
    def is_stand_in(self) -> bool:
        return isinstance(self, StandInSpec)


@dataclass(frozen=True)
class StandInSpec(LLMSpec):
    """``gold[:K=V,...]`` or ``noisy-gold:RATE[:TYPES][:K=V,...]``: the corruption ``rate``
    (0 for gold), the injection ``types`` allowed (None: all the stand-in has) and the stand-in
    ``parameters`` the spec sets (name -> probability), each checked to be a probability."""

    rate: float = 0.0
    types: tuple[str, ...] | None = None
    parameters: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))

    def __hash__(self) -> int:
        return hash((self.text, self.kind, self.rate, self.types,
                     tuple(sorted(self.parameters.items()))))

    def values(self, declared: Sequence[StandInParameter], *, strategy: str | None = None
               ) -> dict[str, float]:
        """The value of each ``declared`` parameter: the oracle's for ``gold``, the default for
        ``noisy-gold``, overridden by the spec's; a parameter the spec sets that is not declared
        is :class:`LLMSpecError`.

        >>> p = StandInParameter("judge_accuracy", 0.85, "verdict right", "assumption")
        >>> parse_llm_spec("noisy-gold:0.3").values([p]), parse_llm_spec("gold").values([p])
        ({'judge_accuracy': 0.85}, {'judge_accuracy': 1.0})
        """
        names = [p.name for p in declared]
        for key, value in self.parameters.items():
            if key not in names:
                known = ", ".join(names) or "none"
                owner = f"the {strategy} stand-in" if strategy else "this stand-in"
                raise LLMSpecError(f"{self.text}: {owner} has no parameter {key!r} (its "
                                   f"parameters: {known})", spec=self.text, parameter=key,
                                   value=f"{value:g}", strategy=strategy)
        return {p.name: self.parameters.get(p.name, p.oracle if self.kind == "gold"
                                            else p.default) for p in declared}


@dataclass(frozen=True)
class StandInParameter:
    """One assumption of a stand-in: the probability that a component does its job.

    ``default`` is what ``noisy-gold`` assumes, ``oracle`` what ``gold`` assumes (the component
    right by construction); ``source`` says where the default comes from (a paper's figure, or
    ``assumption``)."""

    name: str
    default: float
    meaning: str
    source: str
    oracle: float = 1.0


@dataclass(frozen=True)
class StandIn:
    """The stand-in of a run and the values of its declared parameters (``rate``: noisy-gold's
    corruption rate, 0 for gold). ``to_dict`` is the ``stand_in`` field of ``metrics.json``.

    >>> StandIn("noisy-gold", "srp", {"rate": 0.3, "judge_accuracy": 1.0}).describe()
    'noisy-gold (rate=0.3, judge_accuracy=1)'
    """

    name: str
    strategy: str
    parameters: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "strategy": self.strategy,
                "parameters": dict(self.parameters)}

    def describe(self) -> str:
        values = ", ".join(f"{k}={v:g}" for k, v in self.parameters.items())
        return f"{self.name} ({values})" if values else self.name


def _segments(spec: str, arg: str) -> tuple[list[str], dict[str, float]]:
    """The positional segments of a stand-in spec's argument and its ``key=value`` pairs, each
    value read as a probability."""
    positional: list[str] = []
    pairs: dict[str, float] = {}
    for segment in arg.split(":") if arg.strip() else ():
        segment = segment.strip()
        if "=" not in segment:
            positional.append(segment)
            continue
        for pair in segment.split(","):
            key, _, text = pair.partition("=")
            key, text = key.strip(), text.strip()
            if not key:
                raise LLMSpecError(f"{spec}: {pair.strip()!r} is not KEY=VALUE", spec=spec,
                                   value=pair.strip())
            if key in pairs:
                raise LLMSpecError(f"{spec}: {key} is given twice", spec=spec, parameter=key,
                                   value=text)
            try:
                value = float(text)
            except ValueError:
                raise LLMSpecError(f"{spec}: {key} needs a number, not {text!r}", spec=spec,
                                   parameter=key, value=text) from None
            pairs[key] = probability(key, value, spec=spec)
    return positional, pairs


def _stand_in(spec: str, kind: str, arg: str) -> StandInSpec:
    positional, pairs = _segments(spec, arg)
    if kind == "gold":
        if positional:
            raise LLMSpecError(f"gold takes only KEY=VALUE parameters, not {arg!r}", spec=spec)
        return StandInSpec(spec, "gold", arg, parameters=pairs)
    text = positional[0] if positional else ""
    try:
        rate = float(text)
    except ValueError:
        raise LLMSpecError(f"noisy-gold:RATE needs a number, not {text!r}", spec=spec,
                           parameter="rate", value=text) from None
    probability("rate", rate, spec=spec)
    if len(positional) > 2:
        raise LLMSpecError(f"noisy-gold takes RATE[:TYPES][:KEY=VALUE,...], not {arg!r}",
                           spec=spec)
    kinds = positional[1] if len(positional) > 1 else ""
    # the types are the strategy's stand-in's to know: StandInFactory.check reads them
    types = tuple(t.strip() for t in kinds.split(",") if t.strip()) or None
    return StandInSpec(spec, "noisy-gold", arg, rate=rate, types=types, parameters=pairs)


def parse_llm_spec(spec: str | LLMSpec) -> LLMSpec:
    """The :class:`LLMSpec` of ``spec`` (a :class:`StandInSpec` for ``gold`` and
    ``noisy-gold``); :class:`LLMSpecError` for an unknown form, a rate or a parameter value that
    is not a probability (the injection types are the strategy's stand-in's to check:
    :meth:`~pyql.agent.evaluation.standins.StandInFactory.check`). A parsed spec is returned as it is.

    >>> gold = parse_llm_spec("gold")
    >>> gold.is_stand_in, gold.rate, parse_llm_spec(gold) is gold
    (True, 0.0, True)
    >>> parse_llm_spec("noisy-gold:1.5")
    Traceback (most recent call last):
    pyql.agent.evaluation.llm_spec.LLMSpecError: noisy-gold:1.5: rate is a probability
    (0 to 1), not 1.5
    """
    if isinstance(spec, LLMSpec):
        return spec
    text = spec.strip()
    kind, sep, arg = text.partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind == "gold" and (not sep or "=" in arg):
        return _stand_in(text, "gold", arg)
    if kind == "local" and (not sep or arg):
        return LLMSpec(text, "local", arg)
    if kind == "ranker" and not arg:
        return LLMSpec(text, "ranker")
    if kind == "noisy-gold" and arg:
        return _stand_in(text, "noisy-gold", arg)
    if kind in ("openai", "replay") and arg:
        return LLMSpec(text, kind, arg)
    raise LLMSpecError(f"unknown --llm spec {spec!r}; expected one of: {_FORMS}", spec=spec)
