"""Input echoed back in hints and error messages is capped.

Hints and error messages quote the action's arguments ("There is no column called X"). An
argument of a megabyte would come back whole, into the next prompt. :func:`clip_echoes` replaces
every long input found in a text by its head and tail around a marker that says how much was
cut; :func:`clip` does it for one text.

>>> clip("x" * 500, 20)
'xxxxxxxxxx…[480 characters cut]…xxxxxxxxxx'
>>> clip_echoes("There is no column called " + "y" * 1000 + ".", ["y" * 1000], 20)
'There is no column called yyyyyyyyyy…[980 characters cut]…yyyyyyyyyy.'
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ECHO_LIMIT", "TEXT_LIMIT", "clip", "clip_echoes", "echoed_inputs"]

#: at most this many characters of one input are echoed back
ECHO_LIMIT = 200
#: a message longer than this after clipping the inputs (an input the message transformed, e.g.
#: escaped) is clipped as a whole
TEXT_LIMIT = 20_000


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` if it has at most ``limit`` characters, else its head and tail around a marker."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2, 1)
    return f"{text[:keep]}…[{len(text) - 2 * keep:,} characters cut]…{text[-keep:]}"


def clip_echoes(text: str, inputs: Iterable[str], limit: int = ECHO_LIMIT) -> str:
    """``text`` with each input longer than ``limit`` that it contains clipped (:func:`clip`)."""
    for item in sorted({i for i in inputs if len(i) > limit}, key=len, reverse=True):
        if item in text:
            text = text.replace(item, clip(item, limit))
    return clip(text, TEXT_LIMIT)


def echoed_inputs(action_text: str, args: Iterable[object] = ()) -> tuple[str, ...]:
    """What a message may echo of an action: its text and each argument as written and as text
    (``args``: the call's atoms, or anything whose ``str`` and ``value`` are what was written)."""
    out = [action_text]
    for arg in args:
        out.append(str(arg))
        value = getattr(arg, "value", None)
        if isinstance(value, str):
            out.append(value)
    return tuple(out)
