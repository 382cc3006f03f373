"""Reading what commands are given: programs, entity tables, prefixes, profiles."""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import typer

from pyql.cli.errors import CliError, as_cli_error
from pyql.errors import InputError, ProfileError, TermError
from pyql.profiles import Profile, get_profile
from pyql.program import Program

__all__ = [
    "DEFAULT_PROFILE",
    "build_profile",
    "check_extremum",
    "declared_prefixes",
    "entities",
    "pairs",
    "parse_program",
    "read_file",
    "read_program",
]

#: the profile of every command when neither ``--profile`` nor the KB names one (a MetaQA
#: ``kb.txt`` is read with the ``metaqa`` profile: see :func:`pyql.cli.backends.open_kb`)
DEFAULT_PROFILE = "generic"


def read_program(arg: str) -> tuple[str, str | None]:
    """The program text and the file it came from (``None`` for inline text or stdin)."""
    if arg == "-":
        return sys.stdin.read().removeprefix(_BOM), None
    if arg.startswith("@"):
        return read_file(Path(arg[1:]), "program"), arg[1:]
    if not arg.strip():  # '' names no file: it is an empty program
        raise CliError(
            "the program is empty" + (f" ({len(arg)} blank characters)" if arg else ""),
            hint="write one call per line, e.g. 'add_fact(?x, relation, entity)', or give a "
            "file, @FILE, or - to read stdin")
    path = Path(arg)
    if "(" not in arg or _is_file(path):
        if not _is_file(path):
            raise CliError(
                f"no such program file: {arg}",
                hint="pass the program text in quotes, a file path, @FILE, or - to read stdin",
            )
        return read_file(path, "program"), arg
    return arg, None


#: the byte-order mark some editors (Notepad, Excel) write at the start of UTF-8 files
_BOM = "\ufeff"


def _is_file(path: Path) -> bool:
    """``path.is_file()``, false for text no file can be named (a long inline program)."""
    try:
        return path.is_file()
    except OSError:  # ENAMETOOLONG
        return False


def read_file(path: Path, what: str) -> str:
    """A UTF-8 text file (a leading byte-order mark dropped), or a :class:`CliError` saying
    which ``what`` file is wrong."""
    if not path.is_file():
        raise CliError(f"{what} file not found: {path}")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise CliError(f"{what} file is not UTF-8 text: {path}") from None
    except OSError as exc:
        raise CliError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None


def parse_program(text: str, tools: str, source: str | None) -> Program:
    """A program of at least one call, in the ``tools`` set (``sparql`` or ``sql``)."""
    try:
        program = Program.parse(text, tools)
    except InputError as exc:
        raise as_cli_error(exc, where=source or "") from None
    if not len(program):
        raise CliError(
            f"{source or 'the program'} has no calls",
            hint="write one call per line, e.g. add_fact(?x, relation, entity)",
        )
    return program


def pairs(values: Sequence[str] | None, option: str, shape: str) -> dict[str, str]:
    """``KEY=VALUE`` options as a dict (a usage error, exit 2, for anything else)."""
    out: dict[str, str] = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise typer.BadParameter(f"expected {shape}, got {value!r}", param_hint=option)
        out[key.strip()] = val.strip()
    return out


def entities(entity: Sequence[str] | None, entities_file: Path | None) -> dict[str, str]:
    """The entity table of ``--entities FILE.json`` and ``--entity MENTION=ID`` (which win)."""
    table: dict[str, str] = {}
    if entities_file is not None:
        text = read_file(entities_file, "entities")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"{entities_file}: not JSON: {exc.msg} (line {exc.lineno}, col {exc.colno})"
            ) from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise CliError(f"{entities_file}: expected a JSON object of mention -> KB id strings")
        table.update(data)
    table.update(pairs(entity, "--entity", "MENTION=ID"))
    return table


_STANDARD_PREFIXES = frozenset({"rdf", "rdfs", "xsd", "owl"})


def build_profile(name: str | None, *prefix_maps: Mapping[str, str]) -> Profile:
    """The named profile (:data:`DEFAULT_PROFILE` for ``None``) with extra prefixes; the first
    new prefix becomes the display prefix when the profile has none (so SPARQL shows
    ``ex:Film`` instead of a full IRI)."""
    try:
        profile = get_profile(name or DEFAULT_PROFILE)
    except ProfileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--profile") from None
    merged: dict[str, str] = {}
    for prefixes in prefix_maps:
        merged.update(prefixes)
    new = {k: v for k, v in merged.items() if profile.prefixes.get(k) != v}
    if not new:
        return profile
    try:
        profile = profile.with_prefixes(**new)
    except TermError as exc:
        raise typer.BadParameter(f"bad namespace IRI: {exc}", param_hint="--prefix") from None
    if profile.display_prefix is None:
        # explicit --prefix options come last in prefix_maps and win
        for prefixes in reversed(prefix_maps):
            shown = next((k for k in prefixes if k and k not in _STANDARD_PREFIXES), None)
            if shown is not None:
                return replace(profile, display_prefix=shown)
    return profile


_PREFIX_DECL = re.compile(
    r"^[ \t]*(?:@prefix|PREFIX)[ \t]+([A-Za-z][\w\-.]*)?:[ \t]*<([^<>\s]*)>",
    re.IGNORECASE | re.MULTILINE,
)


def declared_prefixes(path: Path) -> dict[str, str]:
    """Prefixes declared at the top of a Turtle/TriG/N3 file (the first 64 KB are read)."""
    suffixes = [s for s in path.suffixes if s != ".gz"]
    if not path.is_file() or not suffixes or suffixes[-1] not in (".ttl", ".trig", ".n3"):
        return {}
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            head = handle.read(1 << 16).decode("utf-8", errors="replace")
    except OSError:
        return {}
    return {m.group(1) or "": m.group(2) for m in _PREFIX_DECL.finditer(head)}


def check_extremum(value: str) -> str:
    """``--extremum``: ``ties`` or ``limit``."""
    if value not in ("ties", "limit"):
        raise typer.BadParameter(
            f"expected 'ties' or 'limit', got {value!r}", param_hint="--extremum"
        )
    return value
