"""Reading dataset files so that a malformed one is one ``path:line: problem`` error
(:class:`~pyql.errors.DatasetFileError`), never a traceback from deep inside a loader.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "dev.jsonl"
>>> _ = path.write_bytes(b'{"a": 1}\\n\\n{"a": \\n')
>>> next(json_lines(path))
(1, {'a': 1})
>>> list(json_lines(path))
Traceback (most recent call last):
pyql.errors.DatasetFileError: .../dev.jsonl:3: not JSON: Expecting value (character 8)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pyql.errors import DatasetFileError

__all__ = ["json_lines", "json_file", "field"]


def _open_bytes(path: Path) -> IO[bytes]:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")  # noqa: SIM115


def _loads(data: bytes, path: Path, line: int | None) -> Any:
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        raise DatasetFileError(path, line, f"not UTF-8 (byte {data[exc.start]:#04x})") from None
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        at = f"character {exc.pos + 1}" if line is not None else f"column {exc.colno}"
        raise DatasetFileError(path, where, f"not JSON: {exc.msg} ({at})") from None


def json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSON-lines file (gzip or not)."""
    path = Path(path)
    with _open_bytes(path) as fh:
        for number, raw in enumerate(fh, 1):
            if raw.strip():
                yield number, _loads(raw, path, number)


def json_file(path: str | Path) -> Any:
    """The JSON value of a whole file (gzip or not)."""
    path = Path(path)
    with _open_bytes(path) as fh:
        return _loads(fh.read(), path, None)


def field(record: Any, name: str, path: Path, line: int | None, what: str = "the record"
          ) -> Any:
    """``record[name]``, or a :class:`~pyql.errors.DatasetFileError` when the record (``what``:
    how the message names it) is not an object or lacks the field."""
    if not isinstance(record, dict):
        raise DatasetFileError(path, line, f"{what} is not a JSON object")
    if name not in record:
        raise DatasetFileError(path, line, f"{what} has no {name!r} field")
    return record[name]
