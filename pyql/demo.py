"""The offline tours behind ``pyql demo``: short questions answered one DSL call at a time.

A :class:`Tour` is a question, its linked entities (or the table it starts from), the calls an
agent would make and the answers they must reach. Tours come in a :class:`TourSet`, which knows
how to open a fresh session for a tour (the KB or DB they run on) and which language its queries
are in. The CLI renders tour sets; this module only runs them, so tests can check every tour
without a terminal.

Tours are data: a tour file is JSON (``pyql/data/tours-kb.json``, ``tours-sql.json``) read by
:meth:`TourSet.load`, with the session factory given in code. The built-in set, ``"kb"``, runs
on the bundled movie KB (``pyql/data/movies.ttl``, loaded into an in-memory Oxigraph store): no
server, no key, no network.

Other tour sets plug in with :func:`register_tour_set`. A set named ``NAME`` that is not
registered yet is looked up in the module listed for it in :data:`TOUR_SET_MODULES` (the SQL
tours: ``pyql.sql.demo``), which registers it when imported::

    register_tour_set(TourSet.load("my-tours.json",
                                   open_session=lambda tour: MySqlSession(db, table=tour.table)))

>>> results = [run_tour(KB_TOUR_SET, tour) for tour in KB_TOURS]
>>> [r.ok for r in results]
[True, True, True]
>>> sorted(results[1].answers)
['Interstellar']
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from typing import Literal as TypingLiteral

from pydantic import ConfigDict, TypeAdapter, ValidationError

from pyql.errors import InputError
from pyql.kb.oxigraph import OxigraphKB
from pyql.profiles import GENERIC, Profile
from pyql.session import Observation, Session

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "Tour",
    "TourSet",
    "TourResult",
    "TourFileError",
    "DemoSession",
    "KB_TOURS",
    "KB_TOUR_SET",
    "TOUR_SETS",
    "TOUR_SET_MODULES",
    "MOVIES_NAMESPACE",
    "MOVIES_ENTITIES",
    "movies_profile",
    "movies_ttl",
    "movies_path",
    "movies_kb",
    "register_tour_set",
    "get_tour_set",
    "run_tour",
]

#: the namespace of the bundled movie KB (``ex:`` in its Turtle and in the demo's SPARQL)
MOVIES_NAMESPACE = "http://example.org/movies/"

#: mention -> KB id for the people and films of the movie KB (what an entity linker would give)
MOVIES_ENTITIES: dict[str, str] = {
    "Christopher Nolan": "ex:Christopher_Nolan",
    "Martin Scorsese": "ex:Martin_Scorsese",
    "James Cameron": "ex:James_Cameron",
    "Leonardo DiCaprio": "ex:Leonardo_DiCaprio",
    "Inception": "ex:Inception",
    "Interstellar": "ex:Interstellar",
    "The Dark Knight": "ex:The_Dark_Knight",
    "Oppenheimer": "ex:Oppenheimer",
    "The Departed": "ex:The_Departed",
    "Titanic": "ex:Titanic",
}


def movies_profile() -> Profile:
    """The generic RDF profile with the ``ex:`` prefix, used for display too.

    Compound (blank) nodes, like a film's cast entries, show as ``UnName_Entity`` as Freebase CVT
    nodes do, so observations are stable and tell the agent to hop through them.
    """
    return replace(
        GENERIC.with_prefixes(ex=MOVIES_NAMESPACE),
        display_prefix="ex",
        unnamed_label="UnName_Entity",
    )


def movies_ttl() -> bytes:
    """The Turtle text of the bundled movie KB."""
    return resources.files("pyql").joinpath("data/movies.ttl").read_bytes()


def movies_path() -> Path:
    """Where the bundled movie KB is installed (a regular file in any normal install)."""
    return Path(str(resources.files("pyql").joinpath("data/movies.ttl")))


def movies_kb() -> OxigraphKB:
    """A fresh in-memory KB holding the bundled movies (80 triples)."""
    kb = OxigraphKB(profile=movies_profile())
    kb.load_bytes(movies_ttl(), format="turtle")
    return kb


@dataclass(frozen=True)
class Tour:
    """One demo question: the calls that answer it and the answers they must reach.

    ``expected`` holds the answers as an observation shows them (labels, or a count's digits);
    order does not matter.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")

    title: str
    question: str
    steps: tuple[str, ...]
    #: mention -> KB id, for tours on a KB
    entities: Mapping[str, str] = field(default_factory=dict)
    #: the table a SQL tour starts from (None: every table of the database is in scope)
    table: str | None = None
    expected: frozenset[str] = frozenset()
    #: one sentence on what the tour shows
    note: str = ""


class DemoSession(Protocol):
    """What a tour needs from a session: run one action, get a typed observation."""

    def run(self, action: str) -> Observation: ...


@dataclass(frozen=True)
class TourSet:
    """Tours that share a data source and a query language."""

    name: str
    title: str
    #: the query language, for syntax highlighting
    language: TypingLiteral["sparql", "sql"]
    tours: tuple[Tour, ...]
    #: a fresh session for one tour (its own query, program and entities)
    open_session: Callable[[Tour], DemoSession]
    #: where the data comes from, shown to the user
    source: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike[str] | Traversable,
             open_session: Callable[[Tour], DemoSession]) -> TourSet:
        """Read a tour file: a JSON object of ``name``, ``title``, ``language``, ``source`` and
        ``tours`` (objects with the fields of :class:`Tour`). ``open_session`` makes the session
        of each tour. A file that does not read as one raises :class:`TourFileError`."""
        where = str(path)
        try:
            file = Path(path) if isinstance(path, (str, os.PathLike)) else path
            data = json.loads(file.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise TourFileError(where, "the file is not a JSON object")
            return _TOUR_SET.validate_python({**data, "open_session": open_session})
        except json.JSONDecodeError as exc:
            raise TourFileError(where, f"not JSON: {exc}") from None
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                 for e in exc.errors())
            raise TourFileError(where, problems) from None


_TOUR_SET = TypeAdapter(TourSet)


@dataclass(frozen=True)
class TourResult:
    """The observations of one tour and the answers it reached."""

    tour: Tour
    observations: tuple[Observation, ...]
    #: the answers as shown by the last ``execute()`` (labels), or () if none ran
    answers: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every step was accepted and the answers are the expected ones."""
        steps_ok = all(obs.ok for obs in self.observations)
        return steps_ok and (not self.tour.expected or set(self.answers) == self.tour.expected)


def _movies_session(tour: Tour) -> Session:
    return Session(_cached_movies_kb(), entities=tour.entities)


@lru_cache(maxsize=1)
def _cached_movies_kb() -> OxigraphKB:
    # read-only use: every tour gets its own Session, they can share the store
    return movies_kb()


KB_TOUR_SET = TourSet.load(resources.files("pyql").joinpath("data/tours-kb.json"),
                           open_session=_movies_session)
KB_TOURS: tuple[Tour, ...] = KB_TOUR_SET.tours

#: registered tour sets by name (``pyql demo`` runs ``kb``; ``pyql demo --sql`` runs ``sql``)
TOUR_SETS: dict[str, TourSet] = {KB_TOUR_SET.name: KB_TOUR_SET}

#: where a tour set that is not registered yet comes from (importing it registers the set)
TOUR_SET_MODULES: dict[str, str] = {"sql": "pyql.sql.demo"}


def register_tour_set(tour_set: TourSet) -> None:
    """Make a tour set available to ``pyql demo``; a name can be registered once."""
    existing = TOUR_SETS.get(tour_set.name)
    if existing is not None and existing is not tour_set:
        raise ValueError(f"a tour set named {tour_set.name!r} is already registered")
    TOUR_SETS[tour_set.name] = tour_set


def get_tour_set(name: str) -> TourSet:
    """The tour set called ``name``, importing its provider module if needed.

    Raises :class:`LookupError` when no such set is available.
    """
    if name not in TOUR_SETS and name in TOUR_SET_MODULES:
        module = TOUR_SET_MODULES[name]
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise LookupError(f"the {name!r} demo tours come from {module}, which cannot be "
                              f"imported: {exc}") from exc
    try:
        return TOUR_SETS[name]
    except KeyError:
        raise LookupError(
            f"no {name!r} demo tours are installed (available: {', '.join(sorted(TOUR_SETS))})"
        ) from None


def _answers(observations: Sequence[Observation]) -> tuple[str, ...]:
    for obs in reversed(observations):
        if obs.call is not None and obs.call.name == "execute" and obs.ok:
            if not obs.values:
                return ()
            shown = next(iter(obs.values.values()))
            return tuple(str(v) for v in shown.values)
    return ()


def run_tour(tour_set: TourSet, tour: Tour) -> TourResult:
    """Run every step of ``tour`` in a fresh session of ``tour_set``."""
    session = tour_set.open_session(tour)
    observations = tuple(session.run(step) for step in tour.steps)
    return TourResult(tour=tour, observations=observations, answers=_answers(observations))


class TourFileError(InputError):
    """A tour file that cannot be read as a :class:`TourSet`; ``path`` names it and ``problem``
    says what is wrong (the first JSON error, or each field that does not validate)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")
