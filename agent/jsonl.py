"""Reading JSON-lines files (trajectories, evaluation results): one reader for both.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
>>> _ = path.write_text('{"a": 1}\\n\\n{"b": 2}\\n{"c": ', encoding="utf-8")
>>> list(json_lines(path, complete=True))
[(1, {'a': 1}), (3, {'b': 2})]
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Container, Iterator
from typing import Any

__all__ = ["json_lines", "Malformed"]

#: the longest line read (trajectories and results are far shorter: observations and answers are
#: bounded); a longer one is malformed
MAX_LINE = 64 << 20
_CHUNK = 1 << 20


def _lines(handle: Any, max_line: int) -> Iterator[tuple[int, bytes | None]]:
    """``(number, line)`` of a binary file; a line over ``max_line`` bytes is read in chunks,
    dropped, and given as None."""
    number = 0
    while True:
        line = handle.readline(max_line + 1)
        if not line:
            return
        number += 1
        if len(line) > max_line and not line.endswith(b"\n"):
            while True:  # skip the rest of the line
                rest = handle.readline(_CHUNK)
                if not rest or rest.endswith(b"\n"):
                    break
            # a last line without its newline stays incomplete (``complete`` stops there)
            yield number, (None if rest else line)
            continue
        yield number, line


#: told of a line that cannot be read: its number and why (it may raise to stop the reading)
Malformed = Callable[[int, str], None]


def json_lines(path: str | os.PathLike[str], *, complete: bool = False,
               error: Callable[[str], Exception] = ValueError,
               malformed: Malformed | None = None, numbers: Container[int] | None = None,
               skip: Callable[[bytes], bool] | None = None,
               max_line: int = MAX_LINE) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of ``path``, in order.

    ``complete=True`` stops at a last line without its newline (a writer is appending it, or
    was cut short) instead of reading it. Lines not parsed: those not in ``numbers`` (when
    given), and those ``skip(line)`` is true of (the raw bytes; it is asked as the lines come,
    so it may depend on the values read before). A line that is not JSON is passed to
    ``malformed`` and skipped, or without it raises ``error(message)``, the message naming the
    file and the line; so is a line longer than ``max_line`` bytes, which is skipped without
    being read into memory whole."""
    with open(path, "rb") as handle:
        for number, line in _lines(handle, max_line):
            if line is None:
                why = f"a line longer than {max_line:,} bytes (not read)"
                if malformed is None:
                    raise error(f"{path}:{number}: {why}")
                malformed(number, why)
                continue
            if complete and not line.endswith(b"\n"):
                return
            if (not line.strip() or (numbers is not None and number not in numbers)
                    or (skip is not None and skip(line))):
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
                why = f"not a JSON line ({getattr(exc, 'msg', exc)})"
                if malformed is None:
                    raise error(f"{path}:{number}: {why}") from None
                malformed(number, why)
                continue
            yield number, value
