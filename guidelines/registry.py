"""The guideline registry: validated loading, ordered evaluation, selection and statistics.

Guidelines come from the entry-point group ``pyql.guidelines`` (:data:`GROUP`). pyql's own packs
register there exactly like third-party ones (``kb = "pyql.guidelines.packs.kb:GUIDELINES"``).
An entry point resolves to a module (its ``GUIDELINES`` list, else the :class:`Guideline`
subclasses it defines), a guideline class, or a list/iterable of them.

Loading validates early and names the culprit: a malformed guideline (bad code or name, no
docstring or no ``Bad:``/``Fixed:`` example, no ``check``, unknown needs/toolsets/triggers) or two
guidelines with the same code raise :class:`GuidelineLoadError` naming the plugin(s).

**Precedence.** :meth:`Registry.evaluate` asks the guidelines whose triggers match the step, in
this order, and the first hint wins:

1. ``PY`` codes: the action itself is malformed (Python feedback), nothing else can be trusted;
2. ``RM`` codes: the action is well formed but inconsistent with the reasoning memory;
3. ``KB`` and ``DB`` codes: the action is consistent but the KB/DB disagrees (empty result, CVT
   answer, backend failure).

Within a phase, guidelines are ordered by code. Guidelines in the ``fallback`` group (``PY290``,
``PY291``: they only rephrase a raw interpreter error) come after all others, so any specific
guideline of any phase wins over them.

>>> from pyql.guidelines.packs.python import GUIDELINES
>>> reg = Registry.from_classes(GUIDELINES)
>>> [g.code for g in reg][:3]
['PY101', 'PY102', 'PY103']
>>> len(reg.select(disable=["PY101"])) == len(reg) - 1
True
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from pyql.echo import ECHO_LIMIT, clip_echoes, echoed_inputs
from pyql.errors import PyqlError
from pyql.feedback import Feedback, Hint
from pyql.guidelines.base import (
    CODE_PATTERN,
    KB_STATUSES,
    NAME_PATTERN,
    NEEDS,
    PYTHON_STATUSES,
    TOOLSETS,
    Guideline,
    Triggers,
    env_class,
    parse_docstring,
)
from pyql.plugins import PluginLoadError, plugins
from pyql.program import TOOLSETS as TOOL_SIGNATURES

__all__ = [
    "GROUP",
    "BUILTIN_PACKS",
    "PHASES",
    "FALLBACK",
    "GuidelineLoadError",
    "GuidelineCheckError",
    "PluginSource",
    "Stats",
    "Registry",
    "validate_guideline",
    "resolve_plugin",
    "load_entry_points",
    "default_registry",
    "builtin_registry",
]

log = logging.getLogger(__name__)

#: the entry-point group guidelines register in
GROUP = "pyql.guidelines"
#: pyql's own packs: the same entry points as in pyproject.toml (used when metadata is missing)
BUILTIN_PACKS: dict[str, str] = {
    "python": "pyql.guidelines.packs.python:GUIDELINES",
    "kb": "pyql.guidelines.packs.kb:GUIDELINES",
    "sql": "pyql.guidelines.packs.sql:GUIDELINES",
}
_OWN_DIST = "pyql-kbqa"
#: evaluation phase of each code prefix (lower first)
PHASES: dict[str, int] = {"PY": 0, "RM": 1, "KB": 2, "DB": 2}
#: the group of guidelines evaluated last
FALLBACK = "fallback"


class GuidelineLoadError(PyqlError):
    """A plugin or guideline failed validation; ``sources`` names the plugin(s) involved."""

    def __init__(self, message: str, *, sources: Iterable[PluginSource] = (),
                 code: str | None = None) -> None:
        self.sources = tuple(sources)
        self.code = code
        super().__init__(message)


class GuidelineCheckError(PyqlError):
    """A guideline's ``check`` raised: a bug in the guideline, never the model's fault."""

    def __init__(self, message: str, *, code: str, source: PluginSource | None = None) -> None:
        self.code = code
        self.source = source
        super().__init__(message)


@dataclass(frozen=True)
class PluginSource:
    """Where a guideline came from: an entry point (name, value, distribution) or a direct list."""

    name: str
    value: str = ""
    dist: str | None = None

    def __str__(self) -> str:
        where = f"entry point {self.name!r}"
        if self.value:
            where += f" = {self.value!r}"
        return where + (f" (distribution {self.dist})" if self.dist else "")


_DIRECT = PluginSource("<direct>")


# -- validation -----------------------------------------------------------------------------------
def _fail(message: str, source: PluginSource, cls: Any = None) -> GuidelineLoadError:
    what = f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls)!s}" if cls else ""
    return GuidelineLoadError(f"{source}: {what + ': ' if what else ''}{message}",
                              sources=(source,), code=getattr(cls, "code", None))


def validate_guideline(obj: Any, source: PluginSource = _DIRECT) -> type[Guideline]:
    """Check one guideline class (or instance); return its class or raise GuidelineLoadError."""
    cls = obj if isinstance(obj, type) else type(obj)
    if not (isinstance(cls, type) and issubclass(cls, Guideline)) or cls is Guideline:
        raise _fail(f"{obj!r} is not a subclass of pyql.guidelines.Guideline", source)
    code = cls.code
    if not isinstance(code, str) or not CODE_PATTERN.fullmatch(code):
        raise _fail(f"bad code {code!r}: must match {CODE_PATTERN.pattern}", source, cls)
    if not isinstance(cls.name, str) or not NAME_PATTERN.fullmatch(cls.name):
        raise _fail(f"bad name {cls.name!r}: must be dotted lower case like 'kb.empty_result'",
                    source, cls)
    needs = cls.needs
    if not isinstance(needs, (set, frozenset)) or not needs or not set(needs) <= NEEDS:
        raise _fail(f"needs must be a non-empty subset of {sorted(NEEDS)}, got {needs!r}",
                    source, cls)
    toolsets = cls.toolsets
    if not isinstance(toolsets, (set, frozenset)) or not toolsets or not set(toolsets) <= TOOLSETS:
        raise _fail(f"toolsets must be a non-empty subset of {sorted(TOOLSETS)}, got {toolsets!r}",
                    source, cls)
    prefix = code[:2]
    required = {"PY": "python", "KB": "kb", "RM": "memory"}.get(prefix)
    if required is not None and required not in needs:
        raise _fail(f"code prefix {prefix} means {required!r} feedback, but needs is "
                    f"{sorted(needs)}", source, cls)
    if prefix == "DB" and set(toolsets) != {"sql"}:
        raise _fail("DB codes are for the SQL toolset only (toolsets = {'sql'})", source, cls)
    if prefix == "KB" and "sparql" not in toolsets:
        raise _fail("KB codes are for the SPARQL toolset (use DB for SQL)", source, cls)
    if not isinstance(cls.groups, tuple) or not all(isinstance(g, str) for g in cls.groups):
        raise _fail(f"groups must be a tuple of strings, got {cls.groups!r}", source, cls)
    trig = cls.triggers_on
    if not isinstance(trig, Triggers):
        raise _fail("triggers_on must be declared with pyql.guidelines.on(...)", source, cls)
    if trig.functions is not None:
        known = set().union(*(TOOL_SIGNATURES[t] for t in toolsets))
        unknown = sorted(trig.functions - known)
        if unknown:
            raise _fail(f"triggers_on names unknown functions {unknown} for toolsets "
                        f"{sorted(toolsets)}", source, cls)
    if trig.python is not None and not trig.python <= PYTHON_STATUSES:
        raise _fail(f"unknown python statuses {sorted(trig.python - PYTHON_STATUSES)}", source, cls)
    if trig.kb is not None and not trig.kb <= KB_STATUSES:
        raise _fail(f"unknown kb statuses {sorted(trig.kb - KB_STATUSES)}", source, cls)
    check = getattr(cls, "check", None)
    if check is None or check is Guideline.check or not callable(check):
        raise _fail("no check(feedback) method", source, cls)
    doc = parse_docstring(cls.__doc__)
    if not doc["description"]:
        raise _fail("no docstring (its first line is the description)", source, cls)
    if not doc["bad"] or not doc["fixed"]:
        raise _fail("the docstring needs a 'Bad:' and a 'Fixed:' example", source, cls)
    return cls


def resolve_plugin(obj: Any, source: PluginSource = _DIRECT) -> list[type[Guideline] | Guideline]:
    """The guidelines an entry point's object stands for (module, class, instance or iterable)."""
    if isinstance(obj, ModuleType):
        listed = getattr(obj, "GUIDELINES", None)
        if listed is not None:
            return resolve_plugin(listed, source)
        found = [v for v in vars(obj).values()
                 if isinstance(v, type) and issubclass(v, Guideline) and v is not Guideline
                 and v.__module__ == obj.__name__ and v.code]
        if not found:
            raise _fail(f"module {obj.__name__} defines no guidelines (and no GUIDELINES list)",
                        source)
        return sorted(found, key=lambda c: c.code)
    if isinstance(obj, Guideline) or (isinstance(obj, type) and issubclass(obj, Guideline)):
        return [obj]
    if isinstance(obj, (str, bytes, Mapping)) or not isinstance(obj, Iterable):
        raise _fail(f"entry point resolved to {obj!r}: expected a module, a guideline class or "
                    "a list of them", source)
    out: list[type[Guideline] | Guideline] = []
    for item in obj:
        if isinstance(item, Guideline) or (isinstance(item, type) and issubclass(item, Guideline)):
            out.append(item)
        else:
            raise _fail(f"{item!r} in the list is not a guideline class", source)
    return out


def _load_value(value: str, source: PluginSource) -> Any:
    module_name, _, attr = value.partition(":")
    try:
        obj: Any = importlib.import_module(module_name.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
    except Exception as exc:  # an import error in a plugin is reported with the plugin named
        raise GuidelineLoadError(f"{source}: cannot load: {type(exc).__name__}: {exc}",
                                 sources=(source,)) from exc
    return obj


def load_entry_points(
    group: str = GROUP, *, entry_points: Iterable[Any] | None = None
) -> list[tuple[PluginSource, Any]]:
    """Resolve the entry points of ``group``: ``[(source, guideline class or instance), ...]``.

    Read by the one plugin loader (:mod:`pyql.plugins`): the same entry point seen twice is one,
    a pack name claimed by two targets is :class:`~pyql.plugins.PluginConflictError`."""
    found = plugins(group, entry_points=entry_points)
    out: list[tuple[PluginSource, Any]] = []
    for name in found.names():
        plugin = found[name]
        source = PluginSource(plugin.name, plugin.value, plugin.dist)
        try:
            obj = plugin.load()
        except PluginLoadError as exc:
            raise GuidelineLoadError(f"{source}: cannot load: {exc.error_type}: {exc.detail}",
                                     sources=(source,)) from exc
        out.extend((source, g) for g in resolve_plugin(obj, source))
    return out


def _norm(dist: str) -> str:
    return dist.lower().replace("_", "-").replace(".", "-")


# -- statistics -----------------------------------------------------------------------------------
class Stats:
    """Thread-safe trigger counters: by code and by environment class (Tables 8 and 9)."""

    def __init__(self, classes: Mapping[str, str]) -> None:
        self._classes = dict(classes)
        self._lock = threading.Lock()
        self._by_code: Counter[str] = Counter()
        self._steps = 0

    def _record_step(self) -> None:
        with self._lock:
            self._steps += 1

    def _record(self, code: str) -> None:
        with self._lock:
            self._by_code[code] += 1

    @property
    def steps(self) -> int:
        """How many steps were evaluated."""
        return self._steps

    @property
    def by_code(self) -> dict[str, int]:
        """Trigger counts per code, most frequent first (codes that never fired are absent)."""
        with self._lock:
            return dict(sorted(self._by_code.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def by_class(self) -> dict[str, int]:
        """Trigger counts per environment class (``KB``, ``Python``, ``RM``, ``KB+RM`` ...)."""
        out: Counter[str] = Counter()
        with self._lock:
            for code, n in self._by_code.items():
                out[self._classes.get(code, "unknown")] += n
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._by_code.values())

    def top(self, n: int = 10) -> list[tuple[str, int]]:
        """The ``n`` most triggered codes (Table 9)."""
        return list(self.by_code.items())[:n]

    def reset(self) -> None:
        with self._lock:
            self._by_code.clear()
            self._steps = 0

    def snapshot(self) -> dict[str, Any]:
        return {"steps": self.steps, "total": self.total, "by_code": self.by_code,
                "by_class": self.by_class}

    def __repr__(self) -> str:
        return f"Stats(steps={self.steps}, total={self.total}, by_code={self.by_code})"


# -- the registry ---------------------------------------------------------------------------------
def _order(g: Guideline) -> tuple[int, str]:
    if FALLBACK in g.groups:
        return max(PHASES.values()) + 1, g.code
    return PHASES.get(g.code[:2], 9), g.code


class Registry:
    """An ordered, validated set of guidelines (see the module docstring)."""

    def __init__(self, entries: Iterable[tuple[PluginSource, Any]] = ()) -> None:
        by_code: dict[str, tuple[PluginSource, Guideline]] = {}
        for source, obj in entries:
            cls = validate_guideline(obj, source)
            previous = by_code.get(cls.code)
            if previous is not None:
                prev_source, prev = previous
                if type(prev) is cls and prev_source == source:
                    continue
                raise GuidelineLoadError(
                    f"duplicate guideline code {cls.code}: {type(prev).__qualname__} from "
                    f"{prev_source} and {cls.__qualname__} from {source}",
                    sources=(prev_source, source), code=cls.code,
                )
            by_code[cls.code] = (source, obj if isinstance(obj, Guideline) else cls())
        ordered = sorted((g for _, g in by_code.values()), key=_order)
        self._guidelines: tuple[Guideline, ...] = tuple(ordered)
        self._sources: dict[str, PluginSource] = {code: s for code, (s, _) in by_code.items()}
        self._by_code = {g.code: g for g in ordered}
        self._candidates: dict[tuple[str, str | None, str, str], tuple[Guideline, ...]] = {}
        self.stats = Stats({g.code: env_class(g.needs) for g in ordered})

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_classes(cls, guidelines: Iterable[Any], *, source: str = "<direct>") -> Registry:
        """A registry of the given guideline classes (or instances); for tests and scripts."""
        src = PluginSource(source)
        return cls((src, g) for g in guidelines)

    @classmethod
    def from_entry_points(cls, group: str = GROUP, *,
                          entry_points: Iterable[Any] | None = None) -> Registry:
        """Every guideline installed in ``group`` (pyql's packs and third-party plugins)."""
        return cls(load_entry_points(group, entry_points=entry_points))

    @classmethod
    def from_packs(cls, packs: Mapping[str, str]) -> Registry:
        """A registry from ``{name: "module:attr"}`` pack references (no package metadata)."""
        entries: list[tuple[PluginSource, Any]] = []
        for name, value in packs.items():
            source = PluginSource(name, value, "builtin")
            entries.extend((source, g) for g in resolve_plugin(_load_value(value, source), source))
        return cls(entries)

    def select(self, enable: Iterable[str] | None = None,
               disable: Iterable[str] | None = None) -> Registry:
        """A new registry with the guidelines chosen by code, code prefix, name or group.

        ``enable`` (default: all) keeps the matching guidelines, then ``disable`` drops matches.
        An unknown selector raises ValueError (it is almost always a typo).
        """
        enable = list(enable) if enable is not None else None
        disable = list(disable or ())
        for sel in [*(enable or ()), *disable]:
            if not any(self._matches(g, sel) for g in self._guidelines):
                raise ValueError(f"no guideline matches {sel!r} (codes, names, groups: see "
                                 "`pyql guidelines list`)")
        kept = [g for g in self._guidelines
                if (enable is None or any(self._matches(g, s) for s in enable))
                and not any(self._matches(g, s) for s in disable)]
        return Registry((self._sources[g.code], g) for g in kept)

    @staticmethod
    def _matches(g: Guideline, selector: str) -> bool:
        return (selector == g.code or selector == g.name or selector in g.groups
                or (selector.isupper() and g.code.startswith(selector)))

    # -- access ---------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Guideline]:
        return iter(self._guidelines)

    def __len__(self) -> int:
        return len(self._guidelines)

    def __contains__(self, code: object) -> bool:
        return code in self._by_code

    def __getitem__(self, code: str) -> Guideline:
        try:
            return self._by_code[code]
        except KeyError:
            raise KeyError(f"no guideline {code!r}") from None

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(g.code for g in self._guidelines)

    def source(self, code: str) -> PluginSource:
        """The plugin a guideline was loaded from."""
        return self._sources[code]

    def class_counts(self) -> dict[str, int]:
        """How many guidelines per environment class (Table 8's "Number" column)."""
        return dict(Counter(env_class(g.needs) for g in self._guidelines))

    def __repr__(self) -> str:
        return f"Registry({len(self)} guidelines: {', '.join(self.codes)})"

    # -- evaluation -----------------------------------------------------------------------------
    def candidates(self, feedback: Feedback) -> tuple[Guideline, ...]:
        """The guidelines whose toolsets and triggers match this step, in precedence order."""
        key = (feedback.tools, feedback.function, feedback.python.status, feedback.backend.status)
        found = self._candidates.get(key)
        if found is None:
            tools, function, py, kb = key
            found = tuple(g for g in self._guidelines
                          if tools in g.toolsets and g.triggers_on.matches(function, py, kb))
            self._candidates[key] = found
        return found

    def evaluate(self, feedback: Feedback) -> Hint | None:
        """The hint of the first guideline that fires on this step, or None."""
        self.stats._record_step()
        for g in self.candidates(feedback):
            try:
                hint = g.check(feedback)
            except Exception as exc:
                source = self._sources.get(g.code)
                raise GuidelineCheckError(
                    f"guideline {g.code} ({type(g).__qualname__}, {source}) raised "
                    f"{type(exc).__name__}: {exc}", code=g.code, source=source,
                ) from exc
            if hint is not None:
                if not isinstance(hint, Hint):
                    raise GuidelineCheckError(f"guideline {g.code} returned {hint!r}, not a Hint",
                                              code=g.code, source=self._sources.get(g.code))
                if hint.code != g.code or hint.name != g.name:
                    hint = replace(hint, code=g.code, name=g.name)
                hint = _clip_echoes(hint, feedback)
                self.stats._record(g.code)
                return hint
        return None


def _clip_echoes(hint: Hint, feedback: Feedback) -> Hint:
    """The hint with the action's long arguments echoed only in part (:mod:`pyql.echo`)."""
    inputs = echoed_inputs(feedback.action_text, feedback.call.args if feedback.call else ())
    if all(len(i) <= ECHO_LIMIT for i in inputs):
        return hint
    return replace(hint, message=clip_echoes(hint.message, inputs),
                   suggestions=tuple(clip_echoes(s, inputs) for s in hint.suggestions))


# -- defaults -------------------------------------------------------------------------------------
_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry(*, reload: bool = False) -> Registry:
    """Every installed guideline (entry points of :data:`GROUP`), loaded once and cached.

    If pyql's own distribution declares no entry points (running from a checkout that was never
    installed), the built-in packs are loaded directly and a warning is logged.
    """
    global _default
    with _default_lock:
        if _default is None or reload:
            entries = load_entry_points(GROUP)
            if not any(s.dist and _norm(s.dist) == _OWN_DIST for s, _ in entries):
                log.warning("no %s entry points from %s; loading the built-in packs directly "
                            "(reinstall pyql to register them)", GROUP, _OWN_DIST)
                entries = [e for e in entries if e[0].name not in BUILTIN_PACKS]
                builtin = builtin_registry()
                entries = [*((builtin.source(g.code), type(g)) for g in builtin), *entries]
            _default = Registry(entries)
        return _default


def builtin_registry() -> Registry:
    """pyql's own packs only (what ``docs/guidelines.md`` documents)."""
    return Registry.from_packs(BUILTIN_PACKS)
