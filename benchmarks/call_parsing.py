"""The DSL's call parser and printer: the fast paths against the full scanner, in one process.

What the evaluation harness does with each call an LLM writes: parse its text
(``pyql.program._parse_calls(text, sparql, contextual=True)``, what ``parse_call`` runs on a
miss of its memo) and print calls and programs (``str(call)``, ``str(program)``). The baseline
is the full scanner, the path every call took before the fast path:
``pyql.program._scan_calls(text, sparql, True)`` reads every call with ``_read_call``, which the
fast path falls back to (the differential tests in ``tests/test_program_parsing.py`` show both
give the same calls, errors and text).

Rows, each timed ``--repeat`` times for ``--number`` runs, baseline and fast path alternating so
that a shared machine's load hits both; the figure is the best round, in µs:

- **parse**: the four agent-style calls of a MetaQA question, and two calls the fast path hands
  to the full scanner (a quoted string with a comma, an argument with parentheses: their ratio
  is the fast path's cost of trying). Both paths share ``lex_atom`` and its memo, warm here (the
  arguments recur from call to call), so the ratio is the fast path's own gain;
- **print**: ``str(program)`` of a 9-call MetaQA 3-hop program: the first print (each call's
  text dropped before it; the cost of dropping, measured alone, subtracted) against the texts
  the calls keep.

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

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pyql.program import Program, _parse_calls, _scan_calls, _toolset  # noqa: E402

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


def best(fns: dict[str, Callable[[], object]], number: int, repeat: int) -> dict[str, float]:
    """µs per run of each function: the best of ``repeat`` rounds, the functions alternating."""
    times = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            times[name] = min(times[name], timeit.timeit(fn, number=number) / number * 1e6)
    return times


def measure(number: int, repeat: int) -> dict[str, dict[str, float]]:
    """Each row: its baseline first, then what replaces it."""
    sparql = _toolset("sparql")
    rows: dict[str, dict[str, float]] = {}
    for text in CALLS:
        assert _parse_calls(text, sparql, True) == _scan_calls(text, sparql, True)
        rows[text] = best({
            "full scanner": lambda t=text: _scan_calls(t, sparql, True),  # type: ignore[misc]
            "fast path": lambda t=text: _parse_calls(t, sparql, True),  # type: ignore[misc]
        }, number, repeat)

    program = Program.parse(PROGRAM)

    def drop() -> None:
        for call in program.calls:
            call.__dict__.pop("_text", None)

    def first() -> str:
        drop()
        return str(program)

    row = best({"first print": first, "kept text": program.__str__, "drop": drop},
               number, repeat)
    row["first print"] -= row.pop("drop")
    rows["str(program), 9 calls"] = row
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=20000, help="runs per round")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (the best is kept)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = measure(args.number, args.repeat)
    print(f"{'':50} {'baseline':>9} {'new':>9} {'new / baseline':>15}   (µs; load "
          f"{os.getloadavg()[0]:.2f})")
    for label, row in rows.items():
        (old_name, old), (new_name, new) = row.items()
        print(f"{label:50} {old:9.2f} {new:9.2f} {new / old:15.2f}   ({new_name} / {old_name})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
