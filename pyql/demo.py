"""The offline tours behind ``pyql demo``: short questions answered one DSL call at a time.

A :class:`Tour` is a question, its linked entities, the calls an agent would make and the
answers they must reach. Tours come in a :class:`TourSet`, which knows how to open a fresh
session for a tour (the KB or DB they run on) and which language its queries are in. The CLI
renders tour sets; this module only runs them, so tests can check every tour without a
terminal.

The built-in set, ``"kb"``, runs on the bundled movie KB (``pyql/data/movies.ttl``, loaded into
an in-memory Oxigraph store): no server, no key, no network.

Other tour sets plug in with :func:`register_tour_set`. A set named ``NAME`` that is not
registered yet is looked up in the module listed for it in :data:`TOUR_SET_MODULES` (the SQL
tours: ``pyql.sql.demo``), which registers it when imported::

    register_tour_set(TourSet(name="sql", title="...", language="sql", tours=(...),
                              open_session=lambda tour: MySqlSession(...), source="..."))

>>> results = [run_tour(KB_TOUR_SET, tour) for tour in KB_TOURS]
>>> [r.ok for r in results]
[True, True, True]
>>> sorted(results[1].answers)
['Interstellar']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Protocol

from pyql.kb.oxigraph import OxigraphKB
from pyql.profiles import GENERIC, Profile
from pyql.session import Observation, Session

__all__ = [
    "Tour",
    "TourSet",
    "TourResult",
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

    title: str
    question: str
    steps: tuple[str, ...]
    entities: Mapping[str, str] = field(default_factory=dict)
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
    #: the query language, for syntax highlighting: ``sparql`` or ``sql``
    language: str
    tours: tuple[Tour, ...]
    #: a fresh session for one tour (its own query, program and entities)
    open_session: Callable[[Tour], DemoSession]
    #: where the data comes from, shown to the user
    source: str = ""


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


KB_TOURS: tuple[Tour, ...] = (
    Tour(
        title="two hops",
        question="Who directed the films Leonardo DiCaprio starred in?",
        entities={"Leonardo DiCaprio": "ex:Leonardo_DiCaprio"},
        steps=(
            "get_relation(Leonardo DiCaprio)",
            "add_fact(?film, ex:starring, Leonardo DiCaprio)",
            "get_relation(?film)",
            "add_fact(?film, ex:directed_by, ?director)",
            "set_answer(?director)",
            "execute()",
        ),
        expected=frozenset({"Christopher Nolan", "Martin Scorsese", "James Cameron"}),
        note="get_relation shows which relations a node has; each add_fact is one hop.",
    ),
    Tour(
        title="a filter and an argmax",
        question="Which film by Christopher Nolan released before 2015 is the longest?",
        entities={"Christopher Nolan": "ex:Christopher_Nolan"},
        steps=(
            "add_fact(?film, ex:directed_by, Christopher Nolan)",
            "add_fact(?film, ex:release_year, ?year)",
            "add_filter(?year, <, 2015)",
            "add_fact(?film, ex:runtime_minutes, ?minutes)",
            "add_max(?minutes)",
            "set_answer(?film)",
            "execute()",
        ),
        expected=frozenset({"Interstellar"}),
        note="add_filter compares numbers; add_max keeps the largest (all of them on a tie).",
    ),
    Tour(
        title="a count through compound nodes",
        question="How many actors have played a role in a film by Christopher Nolan?",
        entities={"Christopher Nolan": "ex:Christopher_Nolan"},
        steps=(
            "add_fact(?film, ex:directed_by, Christopher Nolan)",
            "add_fact(?film, ex:cast, ?role)",
            "get_relation(?role)",
            "add_fact(?role, ex:actor, ?actor)",
            "add_count(?actor, ?count)",
            "execute()",
        ),
        expected=frozenset({"6"}),
        note="a cast entry is a compound node (UnName_Entity) joining film, actor and character.",
    ),
)


def _movies_session(tour: Tour) -> Session:
    return Session(_cached_movies_kb(), entities=tour.entities)


@lru_cache(maxsize=1)
def _cached_movies_kb() -> OxigraphKB:
    # read-only use: every tour gets its own Session, they can share the store
    return movies_kb()


KB_TOUR_SET = TourSet(
    name="kb",
    title="SPARQL on a small movie KB",
    language="sparql",
    tours=KB_TOURS,
    open_session=_movies_session,
    source="pyql/data/movies.ttl (bundled, in-memory Oxigraph)",
)

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
        try:
            importlib.import_module(TOUR_SET_MODULES[name])
        except ImportError:
            pass
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
