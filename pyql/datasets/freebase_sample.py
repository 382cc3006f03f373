"""A generated KB in the Freebase dump's own layout, for tests and load benchmarks.

:func:`write_sample` writes N-Triples as the Freebase dump does: full ``<http://rdf.freebase.com/ns/...>``
IRIs, ``m.`` ids, English names (``type.object.name`` with ``@en``, plus a few other languages
and ``common.topic.alias``), ``type.object.type``, ``common.topic.notable_types``, and compound
value type (CVT) nodes without names: a person's ``government.government_position_held``
(office holder, title, jurisdiction, from/to dates) and ``people.marriage`` (spouses, from/to).
Dates come as the dump has them: ``xsd:date``, ``xsd:gYear`` and ``xsd:gYearMonth``, some with
a timezone (``"1961-08-04-08:00"^^xsd:date``); numbers as ``xsd:int``/``xsd:float``.

The content is seeded and reproducible; :func:`sample_triples` streams the lines, so a
five-million-triple file is written in constant memory (``people`` sets the size: about 21
triples per person).

>>> lines = list(sample_triples(people=2, seed=0))
>>> lines[0]
'<http://rdf.freebase.com/ns/m.0c1> <http://rdf.freebase.com/ns/type.object.type> <http://rdf.freebase.com/ns/location.country> .\\n'
>>> sum(1 for _ in sample_triples(people=100)) > 2000
True
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Iterator
from pathlib import Path

__all__ = ["FB", "mid", "sample_triples", "write_sample"]

FB = "http://rdf.freebase.com/ns/"
_XSD = "http://www.w3.org/2001/XMLSchema#"
_COUNTRIES = ("Jamaica", "Brazil", "Norway", "Kenya", "Japan", "Chile")
_TITLES = ("President", "Governor", "Senator", "Mayor")
_FIRST = ("Ana", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun")
_LAST = ("Silva", "Okafor", "Berg", "Tanaka", "Rossi", "Novak", "Diaz", "Kim")
_ZONES = ("", "", "-08:00", "-05:00", "+01:00")  # no "Z": see docs/freebase.md


def mid(kind: str, n: int) -> str:
    """A stable ``m.`` id: ``mid("c", 1)`` is ``m.0c1``."""
    return f"m.0{kind}{n}"


def _iri(local: str) -> str:
    return f"<{FB}{local}>"


def _lit(text: str, lang: str | None = "en") -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"@{lang}' if lang else f'"{escaped}"'


def _typed(lexical: str, datatype: str) -> str:
    return f'"{lexical}"^^<{_XSD}{datatype}>'


def _triple(s: str, p: str, o: str) -> str:
    return f"{s} {_iri(p)} {o} .\n"


def _date(rng: random.Random, year: int) -> str:
    form = rng.random()
    zone = rng.choice(_ZONES)
    if form < 0.2:
        return _typed(f"{year:04d}", "gYear")
    if form < 0.3:
        return _typed(f"{year:04d}-{rng.randint(1, 12):02d}", "gYearMonth")
    return _typed(f"{year:04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}{zone}", "date")


def sample_triples(*, people: int = 100, seed: int = 0) -> Iterator[str]:
    """The sample's N-Triples lines (see the module docstring)."""
    rng = random.Random(seed)
    for i, name in enumerate(_COUNTRIES, 1):
        c = _iri(mid("c", i))
        yield _triple(c, "type.object.type", _iri("location.country"))
        yield _triple(c, "type.object.name", _lit(name))
        yield _triple(c, "common.topic.notable_types", _iri("m.01mp"))
        yield _triple(c, "location.location.area", _typed(f"{rng.uniform(1e4, 1e6):.1f}", "float"))
        yield _triple(c, "topic_server.population_number", _typed(str(rng.randint(10**5, 10**8)), "int"))
    for i, title in enumerate(_TITLES, 1):
        t = _iri(mid("t", i))
        yield _triple(t, "type.object.type", _iri("government.government_office_category"))
        yield _triple(t, "type.object.name", _lit(title))
    for i in range(1, people + 1):
        p = _iri(mid("p", i))
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        born = rng.randint(1900, 1990)
        country = _iri(mid("c", rng.randint(1, len(_COUNTRIES))))
        yield _triple(p, "type.object.type", _iri("people.person"))
        yield _triple(p, "type.object.type", _iri("government.politician"))
        yield _triple(p, "type.object.name", _lit(f"{first} {last} {i}"))
        if rng.random() < 0.3:
            yield _triple(p, "type.object.name", _lit(f"{first} {last} {i}", "pt"))
        yield _triple(p, "common.topic.alias", _lit(f"{first[0]}. {last} {i}"))
        yield _triple(p, "people.person.date_of_birth", _date(rng, born))
        yield _triple(p, "people.person.nationality", country)
        yield _triple(p, "people.person.place_of_birth", country)
        yield _triple(p, "people.person.height_meters", _typed(f"{rng.uniform(1.5, 2.0):.2f}", "float"))
        for k in range(rng.randint(1, 2)):  # CVT: a position held
            cvt = _iri(f"m.0g{i}_{k}")
            start = born + rng.randint(25, 50)
            yield _triple(p, "government.politician.government_positions_held", cvt)
            yield _triple(cvt, "type.object.type", _iri("government.government_position_held"))
            yield _triple(cvt, "government.government_position_held.office_holder", p)
            yield _triple(cvt, "government.government_position_held.basic_title",
                          _iri(mid("t", rng.randint(1, len(_TITLES)))))
            yield _triple(cvt, "government.government_position_held.jurisdiction_of_office", country)
            yield _triple(cvt, "government.government_position_held.from", _date(rng, start))
            if rng.random() < 0.8:  # some positions are still held: no end date
                yield _triple(cvt, "government.government_position_held.to",
                              _date(rng, start + rng.randint(1, 8)))
        if i > 1 and rng.random() < 0.5:  # CVT: a marriage to an earlier person
            cvt = _iri(f"m.0m{i}")
            spouse = _iri(mid("p", rng.randint(1, i - 1)))
            yield _triple(p, "people.person.spouse_s", cvt)
            yield _triple(spouse, "people.person.spouse_s", cvt)
            yield _triple(cvt, "type.object.type", _iri("people.marriage"))
            yield _triple(cvt, "people.marriage.spouse", p)
            yield _triple(cvt, "people.marriage.spouse", spouse)
            yield _triple(cvt, "people.marriage.from", _date(rng, born + rng.randint(20, 40)))


def write_sample(path: str | Path, *, people: int = 100, seed: int = 0) -> int:
    """Write the sample to ``path`` (gzipped when it ends in ``.gz``); return the triple count."""
    target = Path(path)
    opener = gzip.open if target.suffix == ".gz" else open
    n = 0
    with opener(target, "wt", encoding="utf-8") as out:  # type: ignore[operator]
        for line in sample_triples(people=people, seed=seed):
            out.write(line)
            n += 1
    return n
