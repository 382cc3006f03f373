"""Static prompt sizes: ``pyql prompts stats [--tiktoken-dir DIR] [--json]`` (also
``python -m pyql.agent.prompt_stats``).

Counts the tokens (cl100k_base, the encoding of the paper's gpt-3.5-turbo) of the static prefix
each question shares — the system message, plus the tool schemas in tools mode — and compares them
with the sizes of the original QueryAgent prompts (GrailQA 1,875 / MetaQA 932 / WikiSQL 1,647
tokens). Encodings are read from ``--tiktoken-dir`` or ``$PYQL_TIKTOKEN_DIR`` when given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer

from pyql.agent.accounting import TokenCounter, get_encoding
from pyql.agent.prompting import get_prompt_profile, system_prompt, tool_schemas
from pyql.cli import group, print_json, reported
from pyql.cli.standalone import run_standalone

__all__ = ["ORIGINAL_TOKENS", "format_rows", "main", "prompt_stats", "register", "stats_command"]

#: tokens of the original prompts, by the prompt profile that replaces them
ORIGINAL_TOKENS = {"freebase": 1875, "metaqa": 932, "wikisql": 1647}
_DATASET = {"freebase": "GrailQA", "metaqa": "MetaQA", "wikisql": "WikiSQL"}


def prompt_stats(directory: str | None = None, encoding: str = "cl100k_base") -> list[dict[str, Any]]:
    """One row per (profile, mode): system tokens, tool-schema tokens, total, original, ratio."""
    counter = TokenCounter(get_encoding(encoding, directory))
    rows = []
    for name, original in ORIGINAL_TOKENS.items():
        profile = get_prompt_profile(name)
        for mode in ("text", "tools"):
            system = counter.count(system_prompt(profile, mode))
            tools = 0
            if mode == "tools":
                schemas = tool_schemas(profile.signatures, profile)
                tools = counter.count(json.dumps(schemas, ensure_ascii=False))
            total = system + tools
            rows.append({"profile": name, "dataset": _DATASET[name], "mode": mode,
                         "system_tokens": system, "tool_schema_tokens": tools,
                         "static_tokens": total, "original_tokens": original,
                         "ratio": round(total / original, 2)})
    return rows


def format_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows of :func:`prompt_stats` as a plain-text table."""
    lines = [f"{'dataset':<9} {'mode':<6} {'system':>7} {'tools':>6} {'static':>7} "
             f"{'original':>9} {'ratio':>6}"]
    for r in rows:
        lines.append(f"{r['dataset']:<9} {r['mode']:<6} {r['system_tokens']:>7} "
                     f"{r['tool_schema_tokens']:>6} {r['static_tokens']:>7} "
                     f"{r['original_tokens']:>9} {r['ratio']:>6}")
    lines.append("tokens: cl100k_base; static = system message (+ tool schemas in tools mode)")
    return "\n".join(lines)


def stats_command(
    tiktoken_dir: Annotated[str | None, typer.Option(
        "--tiktoken-dir", metavar="DIR",
        help="A directory with cl100k_base.tiktoken (default: $PYQL_TIKTOKEN_DIR).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """Tokens of the static prompt prefix per profile and mode, against the paper's prompts."""
    with reported():
        rows = prompt_stats(tiktoken_dir)
    if as_json:
        print_json(rows)
    else:
        typer.echo(format_rows(rows))


def register(app: typer.Typer) -> None:
    """Add ``pyql prompts stats`` (the ``pyql.commands`` entry point ``prompts``)."""
    group(app, "prompts", help="The agent's prompts.").command("stats")(stats_command)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pyql.agent.prompt_stats``: ``pyql prompts stats``."""
    return run_standalone(stats_command, argv, "python -m pyql.agent.prompt_stats")


if __name__ == "__main__":
    raise SystemExit(main())
