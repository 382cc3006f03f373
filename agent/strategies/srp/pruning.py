"""How far a set of triples goes along a relation path (the judge's pruned sequence, §4.5).

The judge keeps "the subsequences that are useful", as a set of triples. SRP needs to know the
tail of that pruned sequence along the path it instantiated, to offer the edit the relations
around it; the gold stand-in needs the same walk along the gold path to decide what it keeps.
:func:`follow` walks hop by hop from the topic: at each hop, the triples not used yet whose
relation is the hop's and whose head (a forward hop), tail (backward) or either end (direction
unknown) is a node the previous hop reached. Using a triple once matters when a path comes back
along the same relation (``directed_by`` then ``directed_by`` backward: the same edges).

>>> triples = [("Kismet", "directed_by", "W"), ("Other", "directed_by", "W"),
...            ("Other", "has_genre", "Drama")]
>>> [len(h) for h in follow(triples, "Kismet", [("directed_by", True), ("directed_by", False),
...                                             ("release_year", True)])]
[1, 1]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["follow"]

Triple = tuple[str, str, str]


def follow(triples: Iterable[Triple], start: str, steps: Sequence[tuple[str, bool | None]]
           ) -> list[tuple[Triple, ...]]:
    """Per hop, the triples that continue the path from ``start`` (names compared without case);
    the list stops before the first hop that no triple continues. ``steps`` are
    ``(relation, forward)`` pairs, ``forward=None`` for either direction."""
    pool = list(dict.fromkeys(triples))
    used: set[Triple] = set()
    frontier = {start.casefold()}
    out: list[tuple[Triple, ...]] = []
    for relation, forward in steps:
        hop: list[Triple] = []
        reached: set[str] = set()
        for t in pool:
            if t in used or t[1] != relation:
                continue
            head, tail = t[0].casefold(), t[2].casefold()
            if forward in (True, None) and head in frontier:
                hop.append(t)
                reached.add(tail)
            elif forward in (False, None) and tail in frontier:
                hop.append(t)
                reached.add(head)
        if not hop:
            break
        used.update(hop)
        out.append(tuple(hop))
        frontier = reached
    return out
