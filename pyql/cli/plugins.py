"""Commands from other packages: the entry-point group ``pyql.commands``.

An entry point's value is a function ``register(app: typer.Typer) -> None`` that adds commands
or a sub-app to the ``pyql`` app; its name is the command (or sub-app) it adds::

    [project.entry-points."pyql.commands"]
    ask = "pyql.agent.commands.ask:register"

To add a command under an existing (or new) group such as ``pyql fidelity`` or ``pyql kb``,
take the group with :func:`group`::

    def register(app: typer.Typer) -> None:
        group(app, "kb", help="Load and inspect KBs.").command("load")(load_command)

The core CLI (``demo``, ``compile``, ``run``, ``fidelity``) imports none of its plugins: the upper
layers (the agent, the evaluation, the guidelines) plug in here. Plugins are loaded the first
time a command the core lacks is looked up (or the command list is shown), so ``pyql compile``
never imports them and no import order can leave a plugin half-initialised. A plugin that fails
to load is not skipped in silence: its command stays listed, marked unavailable with the reason,
and running it prints that reason as one ``error:`` line (:class:`CommandPluginError`). Names
follow the one policy of :mod:`pyql.plugins`: a name (an entry point's, or a command's, the
core's included) claimed by two plugins is a :class:`~pyql.plugins.PluginConflictError`, and the
command, listed as unavailable, prints it; groups such as ``fidelity`` are shared, not claimed.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Iterable, MutableMapping
from importlib.metadata import EntryPoint
from typing import Any

import typer
from typer.core import TyperGroup
from typer.main import get_command

from pyql.cli.errors import CliError, NoArgsIsHelpError, UsageError, fail, usage_failed
from pyql.cli.output import stderr
from pyql.errors import PyqlError
from pyql.plugins import Plugin, PluginConflictError, PluginLoadError
from pyql.plugins import plugins as load_plugins

__all__ = ["GROUP", "CommandPluginError", "PluginGroup", "group", "missing_extra",
           "plugin_commands"]

log = logging.getLogger(__name__)

#: the entry-point group of command plugins
GROUP = "pyql.commands"


class CommandPluginError(PyqlError):
    """A command plugin that could not be loaded or registered.

    ``name`` is the entry point's (the command it adds), ``target`` its ``module:function``,
    ``error_type`` and ``detail`` what went wrong."""

    def __init__(self, name: str, target: str, error_type: str, detail: str,
                 install: str | None = None) -> None:
        self.name = name
        self.target = target
        self.error_type = error_type
        self.detail = detail
        #: the command that installs the optional extra the plugin needs (a module it imports
        #: is missing: ``pip install 'pyql-kbqa[mcp]'``), else None
        self.install = install
        if install is not None:
            message = (f"pyql {name} needs an optional extra that is not installed "
                       f"({error_type}: {detail})")
        else:
            message = (f"the command plugin {name!r} ({target}) failed to load: "
                       f"{error_type}: {detail}")
        super().__init__(message)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_extra(dist: str | None, exc: BaseException) -> str | None:
    """The install command of the extra of ``dist`` (a plugin's distribution) that provides
    the module ``exc`` (a :class:`ModuleNotFoundError`, or an error it caused) names:
    ``pip install 'pyql-kbqa[mcp]'`` for ``mcp`` or one of its own modules (``mcp_types``).
    The smallest extra that lists it wins (``mcp`` rather than ``dev``); None when no extra
    does."""
    while exc is not None and not isinstance(exc, ModuleNotFoundError):
        exc = exc.__cause__  # type: ignore[assignment]
    if exc is None or not exc.name or dist is None:
        return None
    module = _canonical(exc.name.split(".")[0])
    try:
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    extras: dict[str, list[str]] = {}
    for requirement in requires:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", requirement)
        if name and extra:
            extras.setdefault(extra.group(1), []).append(_canonical(name.group()))
    providing = [(len(names), extra) for extra, names in extras.items()
                 if any(module == n or module.startswith(n + "-") for n in names)]
    if not providing:
        return None
    return f"pip install '{dist}[{min(providing)[1]}]'"


def group(app: typer.Typer, name: str, *, help: str | None = None) -> typer.Typer:  # noqa: A002
    """The sub-app ``pyql NAME`` of ``app``, added (with ``help``) when it is not there yet."""
    for info in app.registered_groups:
        if info.name == name and info.typer_instance is not None:
            return info.typer_instance
    sub = typer.Typer(name=name, help=help, no_args_is_help=True, add_completion=False)
    app.add_typer(sub, name=name)
    return sub


def plugin_commands(
    plugins: Iterable[EntryPoint] | None = None,
) -> tuple[dict[str, Any], list[PyqlError]]:
    """The commands each plugin of :data:`GROUP` (or of ``plugins``) registers, by name, and
    the plugins that failed (:class:`CommandPluginError`) or clash
    (:class:`~pyql.plugins.PluginConflictError`: an entry-point name or a command claimed
    twice); each leaves an unavailable command of its name in its place."""
    found = load_plugins(GROUP, entry_points=plugins)
    if plugins is None and not found:
        stderr().print("warning: no pyql command plugins are installed (ask, eval, report, "
                       "guidelines ...): reinstall pyql, e.g. pip install -e .", style="yellow")
    commands: dict[str, Any] = {}
    failures: list[PyqlError] = []
    for name in found.names():
        try:
            plugin = found[name]
        except PluginConflictError as exc:
            failures.append(exc)
            commands[name] = _unavailable(name, exc, "claimed by " + ", ".join(
                str(p) for p in exc.plugins))
            continue
        collector = _collector()
        try:
            register = plugin.load()
            if not callable(register):
                raise TypeError(f"{plugin.value} is not a function register(app)")
            register(collector)
            added = get_command(collector).commands  # type: ignore[attr-defined]
        except Exception as exc:  # any failure of a plugin is reported, never a crash
            kind, detail = ((exc.error_type, exc.detail) if isinstance(exc, PluginLoadError)
                            else (type(exc).__name__, str(exc)))
            install = missing_extra(plugin.dist, exc)
            error = CommandPluginError(name, plugin.value, kind, detail, install)
            log.info("%s", error)  # shown by `pyql --help` and by the command itself
            failures.append(error)
            why = f"needs an extra: {install}" if install else f"{kind}: {detail}"
            added = {name: _unavailable(name, error, why)}
        for command_name, command in added.items():
            _own(command, plugin)
            _merge(commands, command_name, command, failures)
    return commands, failures


class PluginGroup(TyperGroup):
    """The ``pyql`` group: the plugins' commands are added the first time a command is looked
    up that the core does not have (or a group such as ``fidelity`` that plugins extend), so
    ``pyql compile`` never imports the layers above and no import order can break a plugin."""

    _plugins_loaded = False

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        commands, _ = plugin_commands()
        for name, command in commands.items():
            _merge(self.commands, name, command, [])

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except NoArgsIsHelpError:
            raise
        except UsageError as exc:  # pyql --bogus
            usage_failed(exc)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a usage error of any command under ``pyql`` (an unknown or missing
        option, a bad value, a command's own :class:`typer.BadParameter`) is one ``error:``
        line, exit 2 (:func:`~pyql.cli.errors.usage_failed`)."""
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise
        except UsageError as exc:
            usage_failed(exc)

    def list_commands(self, ctx: Any) -> list[str]:
        self._load_plugins()
        return super().list_commands(ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None or isinstance(command, TyperGroup):
            self._load_plugins()
            command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_flags(command, ctx)
        return command

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _plain_flags(self, ctx)
        return params


def _plain_flags(command: Any, ctx: Any) -> None:
    """Help shows what to type, never a Python type (``<list[Path]>``, ``<float range>``), in
    ``command`` and the commands of a group under it: flags (``--json``, ``--help``) take no
    value and show none; an option or argument without its own metavar gets one
    (:func:`metavar_for`)."""
    options = [*command.params, command.get_help_option(ctx)]
    for param in options:
        if param is None:
            continue
        if getattr(param, "param_type_name", "") == "argument":
            _plain_argument(param, ctx)
        elif param.metavar is None:
            param.metavar = metavar_for(param, ctx)
    for sub in getattr(command, "commands", {}).values():
        _plain_flags(sub, ctx)


def _plain_argument(param: Any, ctx: Any) -> None:
    """An argument is shown by its upper-case name (``STORE``), and its type column holds
    its choices (``wikisql|spider``) or nothing, never a Python type (``<list[Path]>``)."""
    if param.metavar is None:
        param.metavar = (param.name or "value").upper()
    if not hasattr(param, "display_type_rich") or "_plain" in vars(param):
        return
    label = metavar_for(param, ctx)
    shown = label if "|" in label else None
    param._plain = True
    param.display_type_rich = lambda ctx: shown


def metavar_for(param: Any, ctx: Any = None) -> str:
    """The metavar of ``param`` when it declares none, upper-case like the declared ones: a
    flag none, a choice its values (``wikisql|spider``), a number ``N`` (``SECONDS`` for a
    timeout, ``X`` for a fraction), a path ``DIR`` or ``PATH``, text its name
    (``--split SPLIT``)."""
    if getattr(param, "is_flag", False):
        return ""
    name = (param.name or "value").upper()
    if hasattr(param, "display_type"):  # typer >= 0.22: its own type descriptor
        label = str(param.display_type(ctx) or "")
    else:  # pragma: no cover - older typer: click's parameter type
        kind = param.type
        choices = getattr(kind, "choices", None)
        label = "|".join(map(str, choices)) if choices else getattr(kind, "name", "")
    label = label.strip("<>")
    inner = re.fullmatch(r"list\[(.*)\]", label)
    label = inner.group(1) if inner else label
    if "|" in label:
        return label
    if "timeout" in name.lower():
        return "SECONDS"
    if label.startswith("int"):
        return "N"
    if label.startswith("float"):
        return "X"
    if label.lower() == "path":
        return "DIR" if name.endswith(("DIR", "DIRECTORY")) else "PATH"
    return name


def _own(command: Any, plugin: Plugin) -> None:
    """Mark ``command`` (and a group's commands) as the plugin's, for conflict messages."""
    command._pyql_plugin = plugin
    for sub in getattr(command, "commands", {}).values():
        _own(sub, plugin)


def _merge(commands: MutableMapping[str, Any], name: str, command: Any,
           failures: list[PyqlError], path: tuple[str, ...] = ()) -> None:
    """Add ``command``; the commands of a group that is there already join it. A name both
    claim otherwise is a conflict (:mod:`pyql.plugins`): neither is run, the command says why."""
    existing = commands.get(name)
    if existing is None:
        commands[name] = command
    elif isinstance(existing, TyperGroup) and isinstance(command, TyperGroup):
        for sub_name, sub in command.commands.items():
            _merge(existing.commands, sub_name, sub, failures, (*path, name))
    elif existing is not command:
        full = " ".join((*path, name))
        error = PluginConflictError(GROUP, full, (
            getattr(existing, "_pyql_plugin", None) or Plugin(GROUP, full, "pyql.cli", "pyql"),
            getattr(command, "_pyql_plugin", None) or Plugin(GROUP, full, "pyql.cli", "pyql")))
        log.warning("%s", error)
        failures.append(error)
        commands[name] = _unavailable(name, error, "claimed by " + ", ".join(
            str(p) for p in error.plugins))


def _collector() -> typer.Typer:
    """The app a plugin's ``register`` is given (its commands are then taken from it)."""
    collector = typer.Typer(rich_markup_mode="markdown", add_completion=False)
    collector.callback()(_no_options)
    return collector


def _no_options() -> None:
    """The collector's callback: it makes the collector a group whatever a plugin adds."""


def _unavailable(name: str, error: PyqlError, why: str) -> Any:
    """A command ``name`` that says why it is not there (``error``)."""
    conflict = isinstance(error, PluginConflictError)
    install = getattr(error, "install", None)

    def unavailable(
        args: list[str] | None = typer.Argument(None, hidden=True),  # noqa: B008
    ) -> None:
        fail(CliError(str(error), hint="uninstall one of the packages that claim the name"
                      if conflict else install or "install what the plugin needs, or "
                      "reinstall or uninstall the package that provides it"))

    collector = _collector()
    collector.command(
        name,
        help=f"(unavailable: {why})",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )(unavailable)
    return get_command(collector).commands[name]  # type: ignore[attr-defined]
