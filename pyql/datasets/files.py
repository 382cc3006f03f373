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

Lines are read bounded: a line longer than :data:`MAX_LINE_BYTES` (1 MiB) is an error at its
line, found after reading at most that much of it (a 1 GB line never comes into memory whole),
and a question longer than :data:`MAX_QUESTION_CHARS` (10,000 characters; the datasets' longest
are a few hundred) is one too (:func:`question`). A UTF-8 byte order mark at the start of a file
is not part of its first line.

>>> question("x" * 10_001, "qa_dev.txt", 7)
Traceback (most recent call last):
pyql.errors.DatasetFileError: qa_dev.txt:7: the question has 10,001 characters; at most 10,000 are allowed
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pyql.errors import DatasetFileError

__all__ = ["MAX_LINE_BYTES", "MAX_QUESTION_CHARS", "json_lines", "json_file", "field",
           "lines", "question"]

#: the longest line a dataset file may have, in bytes
MAX_LINE_BYTES = 1 << 20
#: the longest question a dataset may ask, in characters
MAX_QUESTION_CHARS = 10_000
_BOM = b"\xef\xbb\xbf"


def lines(handle: IO[bytes], path: str | Path, *, max_bytes: int = MAX_LINE_BYTES
          ) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` of a binary file, each line at most ``max_bytes`` long (a
    longer one is a :class:`~pyql.errors.DatasetFileError` at its line, read no further); a
    UTF-8 byte order mark opening the file is dropped."""
    number = 0
    while True:
        raw = handle.readline(max_bytes + 1)
        if not raw:
            return
        number += 1
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            raise DatasetFileError(path, number, f"line longer than {max_bytes:,} bytes")
        yield number, raw


def question(text: Any, path: str | Path, line: int | None) -> Any:
    """``text`` when it is a question of at most :data:`MAX_QUESTION_CHARS` characters; a
    longer one is a :class:`~pyql.errors.DatasetFileError` (what is not a string is returned
    as it is, for the loader's own checks)."""
    if isinstance(text, str) and len(text) > MAX_QUESTION_CHARS:
        raise DatasetFileError(path, line, f"the question has {len(text):,} characters; at most "
                               f"{MAX_QUESTION_CHARS:,} are allowed")
    return text


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
        for number, raw in lines(fh, path):
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
