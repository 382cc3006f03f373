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
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["json_lines"]


def json_lines(path: str | os.PathLike[str], *, complete: bool = False,
               error: Callable[[str], Exception] = ValueError) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of ``path``, in order.

    ``complete=True`` stops at a last line without its newline (a writer is appending it, or
    was cut short) instead of reading it. A line that is not JSON raises ``error(message)``, the
    message naming the file and the line."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if complete and not line.endswith(b"\n"):
                return
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{number}: not a JSON line ({exc.msg})") from None
            yield number, value
