"""One loader for pyql's plugin groups, with one conflict policy.

pyql is extended through six entry-point groups, each read here:

================== ============================================ =================================
group              the value                                    read by
================== ============================================ =================================
pyql.guidelines    a guideline class, instance or list          ``pyql.guidelines.registry``
pyql.strategies    a strategy class (``from_config``)           ``pyql.agent.strategy``
pyql.eval_datasets an ``EvalDataset`` subclass                  ``pyql.agent.evaluation.datasets``
pyql.commands      ``register(app: typer.Typer)``               ``pyql.cli.plugins``
pyql.standins      a ``StandInFactory`` (by strategy name)      ``pyql.agent.evaluation.standins``
pyql.checkers      ``default``: what ``guidelines=True`` means   ``pyql.environment``
================== ============================================ =================================

The policy, the same in every group (pluggy's: one manager, and a clash is an error, never a
silent choice):

- the same entry point seen twice (one distribution twice on ``sys.path``, an editable install
  next to a built one: same name, same target) is one plugin;
- a name claimed by two different targets is a **conflict**: using that name raises
  :class:`PluginConflictError`, naming both targets and their distributions. A plugin never
  replaces a built-in, nor the other way round; the other names of the group stay usable.
  Where a group is loaded whole (the guideline registry) the conflict fails the load; a command
  in conflict is listed as unavailable and running it prints the error;
- a plugin that fails to import raises :class:`PluginLoadError` naming it (never skipped in
  silence);
- an unknown name is :class:`~pyql.registry.UnknownNameError` (``what``, ``name``, ``known``).

>>> from importlib.metadata import EntryPoint
>>> ep = lambda name, value: EntryPoint(name, value, "pyql.strategies")
>>> found = plugins("pyql.strategies", entry_points=[
...     ep("mine", "json:dumps"), ep("mine", "json:loads"), ep("ok", "json:dumps")])
>>> found.names(), found.load("ok").__name__
(('mine', 'ok'), 'dumps')
>>> found.get("mine")
Traceback (most recent call last):
pyql.plugins.PluginConflictError: pyql.strategies: the name 'mine' is claimed by 2 plugins: json:dumps, json:loads
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from pyql.errors import PyqlError
from pyql.registry import UnknownNameError, lookup

__all__ = [
    "GROUPS",
    "Plugin",
    "PluginConflictError",
    "PluginLoadError",
    "Plugins",
    "UnknownPluginError",
    "plugins",
]

#: pyql's entry-point groups and what one plugin of each is called in errors
GROUPS: dict[str, str] = {
    "pyql.guidelines": "guideline pack",
    "pyql.strategies": "strategy",
    "pyql.eval_datasets": "dataset",
    "pyql.commands": "command",
    "pyql.standins": "stand-in",
    "pyql.checkers": "guideline checker",
}


@dataclass(frozen=True)
class Plugin:
    """One entry point: its ``group``, ``name``, ``value`` (``module:attr``) and distribution
    (``entry_point``: the :class:`importlib.metadata.EntryPoint` it came from, if any)."""

    group: str
    name: str
    value: str
    dist: str | None = None
    entry_point: Any = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return self.value + (f" ({self.dist})" if self.dist else "")

    def load(self) -> Any:
        """The object the entry point names; :class:`PluginLoadError` if it cannot be had."""
        module_name, _, attr = self.value.partition(":")
        try:
            if self.entry_point is not None:
                return self.entry_point.load()
            obj: Any = importlib.import_module(module_name.strip())
            for part in filter(None, attr.strip().split(".")):
                obj = getattr(obj, part)
        except Exception as exc:  # whatever a plugin's import raises, it is reported, named
            raise PluginLoadError(self, type(exc).__name__, str(exc)) from exc
        return obj


class PluginConflictError(PyqlError):
    """A plugin name claimed by several different targets: ``group``, ``name`` and the
    ``plugins`` claiming it."""

    def __init__(self, group: str, name: str, claimants: Iterable[Plugin]) -> None:
        self.group = group
        self.name = name
        self.plugins = tuple(claimants)
        super().__init__(f"{group}: the name {name!r} is claimed by {len(self.plugins)} plugins: "
                         + ", ".join(str(p) for p in self.plugins))


class PluginLoadError(PyqlError):
    """A plugin whose target cannot be imported: the ``plugin``, ``error_type`` and ``detail``
    of what its import raised."""

    def __init__(self, plugin: Plugin, error_type: str, detail: str) -> None:
        self.plugin = plugin
        self.error_type = error_type
        self.detail = detail
        super().__init__(f"{plugin.group}: the plugin {plugin.name!r} ({plugin}) failed to "
                         f"load: {error_type}: {detail}")


class UnknownPluginError(UnknownNameError):
    """No plugin of that name in the group (``what`` says which kind)."""


class Plugins(Mapping[str, Plugin]):
    """The plugins of one group by name (names in conflict included: using one raises)."""

    def __init__(self, group: str, claims: Mapping[str, tuple[Plugin, ...]]) -> None:
        self.group = group
        self.what = GROUPS.get(group, "plugin")
        self._claims = dict(sorted(claims.items()))

    def names(self) -> tuple[str, ...]:
        """Every name of the group, those in conflict too (sorted)."""
        return tuple(self._claims)

    def conflicts(self) -> tuple[PluginConflictError, ...]:
        """One error per name claimed by several targets."""
        return tuple(PluginConflictError(self.group, name, claims)
                     for name, claims in self._claims.items() if len(claims) > 1)

    def __getitem__(self, name: str) -> Plugin:
        """The plugin ``name`` (KeyError if none: a Mapping); a conflict raises."""
        claims = self._claims[name]
        if len(claims) > 1:
            raise PluginConflictError(self.group, name, claims)
        return claims[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._claims)

    def __len__(self) -> int:
        return len(self._claims)

    def load(self, name: str) -> Any:
        """The object of the plugin ``name``: an unknown name (:class:`UnknownPluginError`), a
        conflict and an import failure each raise their error."""
        return lookup(self, name, self.what, UnknownPluginError).load()


def plugins(group: str, *, entry_points: Iterable[Any] | None = None,
            builtin: Mapping[str, str] | None = None) -> Plugins:
    """The plugins of ``group``: its installed entry points (or ``entry_points``), plus
    ``builtin`` (``name -> module:attr``, for built-ins that are not entry points) which claim
    their names like any plugin (module docstring: the conflict policy)."""
    found = list(metadata.entry_points(group=group) if entry_points is None else entry_points)
    claims: dict[str, list[Plugin]] = {}
    for name, value in (builtin or {}).items():
        claims.setdefault(name, []).append(Plugin(group, name, value, "pyql (built in)"))
    for ep in found:
        dist = getattr(getattr(ep, "dist", None), "name", None)
        plugin = Plugin(group, ep.name, ep.value, dist, ep)
        held = claims.setdefault(ep.name, [])
        if not any(p.value == plugin.value for p in held):  # the same target seen twice is one
            held.append(plugin)
    return Plugins(group, {name: tuple(held) for name, held in claims.items()})
