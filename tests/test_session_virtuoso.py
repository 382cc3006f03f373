"""The same Session steps on the embedded store and on a real Virtuoso give the same answers.

Virtuoso is started by the ``virtuoso`` fixture (tests/support/virtuoso.py); these tests are
skipped only when ``virtuoso-t`` is not installed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyoxigraph as ox
import pytest

from pyql import Session
from pyql.datasets import metaqa
from pyql.datasets.gold import score
from pyql.demo import KB_TOURS, movies_path, movies_profile
from pyql.kb import OxigraphKB, SparqlEndpointKB

pytestmark = pytest.mark.server

MOVIES = movies_profile()


def _summary(obs):  # what must be identical across backends
    rel = obs.relations
    return (
        obs.status,
        None if rel is None else (rel.forward, rel.backward),
        {k: (sorted(v.values), v.total) for k, v in obs.values.items()},
        None if obs.answers is None else sorted(obs.answers),
    )


@pytest.fixture(scope="module")
def movies_endpoint(virtuoso) -> SparqlEndpointKB:
    graph = virtuoso.load(movies_path(), graph="urn:pyql:test:movies")
    return SparqlEndpointKB(virtuoso.sparql_url, profile=MOVIES, graph=graph, timeout=30)


@pytest.mark.parametrize("tour", KB_TOURS, ids=lambda tour: tour.title)
def test_movie_sessions_identical(movies_endpoint, tour):
    """The demo's tours (two hops, a filter and an argmax, a count through compound nodes)."""
    embedded = OxigraphKB.from_file(movies_path(), profile=MOVIES)
    local = Session(embedded, tour.entities)
    remote = Session(movies_endpoint, tour.entities)
    for action in tour.steps:
        a, b = local.run(action), remote.run(action)
        assert a.ok, a.text
        assert _summary(a) == _summary(b), action
    assert local.query.to_sparql() == remote.query.to_sparql()
    assert b.answers  # the program reaches answers


@pytest.fixture(scope="module")
def metaqa_pair(virtuoso, pyql_data, tmp_path_factory):
    kb = metaqa.load_kb(pyql_data / "metaqa" / "kb.txt")
    dump = Path(tmp_path_factory.mktemp("metaqa")) / "metaqa.nt"
    kb.store.dump(str(dump), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
    graph = virtuoso.load(dump, graph="urn:pyql:test:metaqa")
    return kb, SparqlEndpointKB(virtuoso.sparql_url, profile="metaqa", graph=graph, timeout=60)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_metaqa_gold_programs_identical(metaqa_pair, pyql_data, hops):
    embedded, endpoint = metaqa_pair
    qa, qtype = metaqa.paths(pyql_data, hops, "dev")[:2]
    items = list(metaqa.load_questions(qa, qtype))
    sample = random.Random(hops).sample(items, 15)
    for item in sample:
        program = metaqa.gold_program(item)
        entities = {item.topic: item.topic}
        local, remote = Session(embedded, entities), Session(endpoint, entities)
        for call in program:
            a, b = local.run(call), remote.run(call)
            assert _summary(a) == _summary(b), (item.id, str(call))
        assert score(b.answers or (), item.answers).hit1 == 1.0, item.id
