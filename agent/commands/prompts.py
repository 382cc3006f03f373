"""Static prompt sizes: ``pyql prompts stats [--tiktoken-dir DIR] [--json]``.

Counts the tokens (cl100k_base, the encoding of the paper's gpt-3.5-turbo) of the static prefix
each question shares — the system message, plus the tool schemas in tools mode — for every
shipped prompt profile: pyql's own and the original QueryAgent prompts shown verbatim
(``paper-*``). Each is compared with the size of the original prompt of its dataset, counted
from the verbatim copies in ``prompts/paper/`` (GrailQA 1,875 / GraphQ 1,807 / WebQSP 1,274 /
MetaQA 932 / WikiSQL 1,647 tokens); a profile whose dataset had no original prompt (``generic``,
``spider``) has none. Encodings are read from ``--tiktoken-dir`` or ``$PYQL_TIKTOKEN_DIR`` when
given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer

from pyql.cli import group, print_json, reported

__all__ = ["ORIGINAL_PROMPTS", "ORIGINAL_OF", "format_rows", "prompt_stats", "register",
           "stats_command"]

#: the original prompt of each dataset (verbatim, prompts/paper/README.md) and its display name
ORIGINAL_PROMPTS = {"grailqa": ("GrailQA", "paper/grailqa.txt"),
                    "graphq": ("GraphQ", "paper/graphq.txt"),
                    "webqsp": ("WebQSP", "paper/webqsp.txt"),
                    "metaqa": ("MetaQA", "paper/metaqa.txt"),
                    "wikisql": ("WikiSQL", "paper/wikisql.txt")}
#: our profiles that replace an original prompt (the paper-* profiles are their dataset's)
ORIGINAL_OF = {"freebase": "grailqa", "metaqa": "metaqa", "wikisql": "wikisql"}


def _dataset(profile: str) -> str | None:
    if profile.startswith("paper-"):
        return profile[len("paper-"):]
    return ORIGINAL_OF.get(profile)


def prompt_stats(directory: str | None = None, encoding: str = "cl100k_base") -> list[dict[str, Any]]:
    """One row per (profile, mode; the verbatim ``paper-*`` prompts are text only): system tokens, tool-schema tokens, total, the original's
    tokens and the ratio (``None`` where the dataset had no original prompt)."""
    # here, not at the top: `pyql --help` imports this module to list `pyql prompts`
    from pyql.agent.llm.accounting import TokenCounter, get_encoding
    from pyql.agent.strategies.queryagent.prompts import (
        get_prompt_profile,
        prompt_profiles,
        read_prompt,
        system_prompt,
    )
    from pyql.schemas import tool_schemas

    counter = TokenCounter(get_encoding(encoding, directory))
    originals = {name: counter.count(read_prompt(path))
                 for name, (_, path) in ORIGINAL_PROMPTS.items()}
    rows = []
    for name in prompt_profiles():
        profile = get_prompt_profile(name)
        dataset = _dataset(name)
        original = originals.get(dataset) if dataset else None
        # a verbatim original prompt has no tools mode
        for mode in ("text",) if profile.verbatim else ("text", "tools"):
            system = counter.count(system_prompt(profile, mode))
            tools = 0
            if mode == "tools":
                schemas = tool_schemas(profile.signatures, profile)
                tools = counter.count(json.dumps(schemas, ensure_ascii=False))
            total = system + tools
            rows.append({"profile": name,
                         "dataset": ORIGINAL_PROMPTS[dataset][0] if dataset else "-",
                         "mode": mode, "system_tokens": system, "tool_schema_tokens": tools,
                         "static_tokens": total, "original_tokens": original,
                         "ratio": round(total / original, 2) if original else None})
    return rows


def format_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows of :func:`prompt_stats` as a plain-text table."""
    lines = [f"{'profile':<14} {'dataset':<8} {'mode':<6} {'system':>7} {'tools':>6} "
             f"{'static':>7} {'original':>9} {'ratio':>6}"]
    for r in rows:
        original = "-" if r["original_tokens"] is None else r["original_tokens"]
        ratio = "-" if r["ratio"] is None else r["ratio"]
        lines.append(f"{r['profile']:<14} {r['dataset']:<8} {r['mode']:<6} "
                     f"{r['system_tokens']:>7} {r['tool_schema_tokens']:>6} "
                     f"{r['static_tokens']:>7} {original:>9} {ratio:>6}")
    lines.append("tokens: cl100k_base; static = system message (+ tool schemas in tools mode); "
                 "original = the dataset's original prompt (prompts/paper/)")
    return "\n".join(lines)


def stats_command(
    tiktoken_dir: Annotated[str | None, typer.Option(
        "--tiktoken-dir", metavar="DIR",
        help="A directory with cl100k_base.tiktoken (default: $PYQL_TIKTOKEN_DIR).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """Tokens of the static prompt prefix of every prompt profile and mode, against the
    original prompt of its dataset."""
    with reported():
        rows = prompt_stats(tiktoken_dir)
    if as_json:
        print_json(rows)
    else:
        typer.echo(format_rows(rows))


def register(app: typer.Typer) -> None:
    """Add ``pyql prompts stats`` (the ``pyql.commands`` entry point ``prompts``)."""
    group(app, "prompts", help="The agent's prompts.").command("stats")(stats_command)
