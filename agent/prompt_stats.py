"""Static prompt sizes: ``python -m pyql.agent.prompt_stats [--tiktoken-dir DIR] [--json]``.

Counts the tokens (cl100k_base, the encoding of the paper's gpt-3.5-turbo) of the static prefix
each question shares — the system message, plus the tool schemas in tools mode — and compares them
with the sizes of the original QueryAgent prompts (GrailQA 1,875 / MetaQA 932 / WikiSQL 1,647
tokens). Encodings are read from ``--tiktoken-dir`` or ``$PYQL_TIKTOKEN_DIR`` when given.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from pyql.agent.accounting import TokenCounter, get_encoding
from pyql.agent.prompting import get_prompt_profile, system_prompt, tool_schemas

__all__ = ["ORIGINAL_TOKENS", "prompt_stats", "main"]

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyql.agent.prompt_stats",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiktoken-dir", default=None,
                        help="directory with cl100k_base.tiktoken (default: $PYQL_TIKTOKEN_DIR)")
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args(argv)
    rows = prompt_stats(args.tiktoken_dir)
    out = sys.stdout
    if args.json:
        out.write(json.dumps(rows, indent=2) + "\n")
        return 0
    out.write(f"{'dataset':<9} {'mode':<6} {'system':>7} {'tools':>6} {'static':>7} "
              f"{'original':>9} {'ratio':>6}\n")
    for r in rows:
        out.write(f"{r['dataset']:<9} {r['mode']:<6} {r['system_tokens']:>7} "
                  f"{r['tool_schema_tokens']:>6} {r['static_tokens']:>7} "
                  f"{r['original_tokens']:>9} {r['ratio']:>6}\n")
    out.write("tokens: cl100k_base; static = system message (+ tool schemas in tools mode)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
