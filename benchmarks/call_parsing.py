"""The DSL's call parser and printer against their previous version, in one process.

What the evaluation harness does with each call an LLM writes: parse its text
(``pyql.program._parse_calls(text, sparql, contextual=True)``, what ``parse_call`` runs on a
miss of its memo) and print calls and programs (``str(call)``, ``str(program)``). The previous
version is ``tests/support/reference_parser.py``, a copy of the parser and printer as they were
before their fast paths (the differential tests in ``tests/test_program_parsing.py`` show both
give the same calls, errors and text).

Rows, each timed ``--repeat`` times for ``--number`` runs, the previous version and today's
alternating so that a shared machine's load hits both; the figure is the best round, in µs:

- **parse**: the four agent-style calls of a MetaQA question (and two calls the full scanner
  reads: a quoted string with a comma, an argument with parentheses). *warm*: today's parser
  with its atom cache holding the arguments (they recur from call to call: variables, the
  question's entities, relations); *cold*: with a cache that never keeps an atom (each
  argument lexed afresh, plus the cost of the useless store: an upper bound);
- **print**: ``str(program)`` of a 9-call MetaQA 3-hop program. *warm*: the calls keep their
  text; *first*: each call's text dropped before each print (the cost of dropping it, measured
  alone, subtracted).

Usage (from the repository root)::

    python benchmarks/call_parsing.py [--number 20000] [--repeat 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import pyql.syntax  # noqa: E402
from pyql.program import Program, _parse_calls, _toolset  # noqa: E402
from tests.support import reference_parser as reference  # noqa: E402

CALLS = [
    "get_relation(Temuera Morrison)",
    "add_fact(?x1, starred_actors, Temuera Morrison)",
    "set_answer(?x1)",
    "execute()",
    'add_fact(?x1, has_tags, "a, b")',
    "get_relation(The Green Mile (film))",
]

PROGRAM = """\
get_relation(Temuera Morrison)
add_fact(Temuera Morrison, starred_actors, ?x1)
get_relation(?x1)
add_fact(?x1, directed_by, ?x2)
get_relation(?x2)
add_fact(?x2, directed_by, ?x3)
add_filter(?x3, !=, Temuera Morrison)
set_answer(?x3)
execute()"""


class _Forgetful(dict):  # type: ignore[type-arg]
    """An atom cache that keeps nothing (the cold rows)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def best(fns: dict[str, Callable[[], object]], number: int, repeat: int) -> dict[str, float]:
    """µs per run of each function: the best of ``repeat`` rounds, the functions alternating."""
    times = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            times[name] = min(times[name], timeit.timeit(fn, number=number) / number * 1e6)
    return times


def measure(number: int, repeat: int) -> dict[str, dict[str, float]]:
    sparql = _toolset("sparql")
    rows: dict[str, dict[str, float]] = {}
    cache = pyql.syntax._LEXED
    forgetful = _Forgetful()

    def cold(text: str) -> Callable[[], object]:
        def run() -> object:
            pyql.syntax._LEXED = forgetful
            try:
                return _parse_calls(text, sparql, True)
            finally:
                pyql.syntax._LEXED = cache
        return run

    def swap() -> None:  # what cold() adds to the parse
        pyql.syntax._LEXED = forgetful
        try:
            pass
        finally:
            pyql.syntax._LEXED = cache

    overhead = best({"swap": swap}, number, repeat)["swap"]
    for text in CALLS:
        assert _parse_calls(text, sparql, True) == reference.parse_calls(text, sparql, True)
        row = best({
            "previous": lambda t=text: reference.parse_calls(t, sparql, True),  # type: ignore[misc]
            "warm": lambda t=text: _parse_calls(t, sparql, True),  # type: ignore[misc]
            "cold": cold(text),
        }, number, repeat)
        row["cold"] -= overhead
        rows[text] = row

    program = Program.parse(PROGRAM)
    assert str(program) == reference.program_text(program)

    def first() -> str:
        for call in program.calls:
            call.__dict__.pop("_text", None)
        return str(program)

    def drop() -> None:
        for call in program.calls:
            call.__dict__.pop("_text", None)

    row = best({"previous": lambda: reference.program_text(program), "warm": program.__str__,
                "first": first, "drop": drop}, number, repeat)
    row["first"] -= row.pop("drop")
    rows["str(program), 9 calls"] = row
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=20000, help="runs per round")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (the best is kept)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = measure(args.number, args.repeat)
    print(f"{'':50} {'previous':>9} {'today':>15}   today / previous   (µs; load "
          f"{os.getloadavg()[0]:.2f})")
    for label, row in rows.items():
        others = [k for k in row if k != "previous"]
        today = " / ".join(f"{row[k]:.2f}" for k in others)
        ratios = " / ".join(f"{row[k] / row['previous']:.2f}" for k in others)
        print(f"{label:50} {row['previous']:9.2f} {today:>15}   {ratios} ({' / '.join(others)})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
