"""Loading a Freebase-format KB both ways: ``pyql kb load`` (Oxigraph) and Virtuoso's bulk
loader, and the same Session steps giving identical observations on both."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

from pyql import Session
from pyql.cli import app
from pyql.datasets.freebase_sample import FB, write_sample
from pyql.kb import SparqlEndpointKB
from pyql.kb.loader import (
    MANIFEST,
    SourceAlreadyLoadedError,
    StoreError,
    load_store,
    open_store,
    store_info,
)
from pyql.kb.virtuoso import Virtuoso, VirtuosoError, VirtuosoNotFound, VirtuosoSettings
from tests.support.virtuoso import free_port

PEOPLE = 150  # about 3,000 triples
runner = CliRunner()


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fb") / "freebase-sample.nt.gz"
    write_sample(path, people=PEOPLE, seed=7)
    return path


@pytest.fixture(scope="module")
def store(sample, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("store") / "fb"
    load_store([sample], target)
    return target


def test_sample_has_the_dumps_shape(sample) -> None:
    text = gzip.open(sample, "rt").read()
    assert 2_500 < text.count("\n") < 5_000
    assert f"<{FB}government.government_position_held.from>" in text
    assert "-08:00\"^^<http://www.w3.org/2001/XMLSchema#date>" in text
    assert "^^<http://www.w3.org/2001/XMLSchema#gYear>" in text
    assert '"@pt .' in text  # a name in another language, as the dump has


def test_load_writes_a_manifest(sample, store) -> None:
    manifest = store_info(store)
    assert manifest.triples == sum(1 for _ in gzip.open(sample, "rt"))
    (source,) = manifest.sources
    assert source.compressed and source.format == "N-Triples"
    assert source.bytes == sample.stat().st_size and source.triples == manifest.triples
    kb = open_store(store, profile="freebase")
    assert len(kb) == manifest.triples
    with pytest.raises(RuntimeError):  # opened read-only: the store refuses writes
        kb.store.add(ox.Quad(ox.NamedNode("http://e/a"), ox.NamedNode("http://e/p"),
                             ox.Literal("x")))


def test_progress_and_adding_a_plain_turtle_file(tmp_path) -> None:
    ttl = tmp_path / "extra.ttl"
    ttl.write_text("@prefix e: <http://e/> .\ne:a e:p e:b , e:c .\n")
    seen: list[tuple[int, int]] = []
    load_store([ttl], tmp_path / "s", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (ttl.stat().st_size, ttl.stat().st_size)
    more = tmp_path / "more.ttl"
    more.write_text("@prefix e: <http://e/> .\ne:a e:p e:d .\n")
    manifest = load_store([more], tmp_path / "s")  # added to the store
    assert manifest.triples == 3 and len(manifest.sources) == 2
    assert all(len(s.sha256) == 64 for s in manifest.sources)


def test_a_source_already_loaded_is_refused_unless_forced(tmp_path) -> None:
    ttl = tmp_path / "cast.ttl"
    ttl.write_text("@prefix e: <http://e/> .\ne:film e:cast [ e:actor e:a ; e:role \"r\" ] .\n")
    store = tmp_path / "s"
    first = load_store([ttl], store)
    assert first.triples == 3
    again = tmp_path / "again.ttl"
    shutil.copyfile(ttl, again)
    for source in (ttl, again):  # the same path, or the same content elsewhere
        with pytest.raises(SourceAlreadyLoadedError) as refused:
            load_store([source], store)
        assert refused.value.path == str(source)
        assert refused.value.loaded_as == str(ttl.resolve())
    assert store_info(store) == first  # nothing loaded, the manifest untouched
    with pytest.raises(SourceAlreadyLoadedError):  # twice in one command
        load_store([ttl, again], tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    forced = load_store([again], store, force=True)  # the blank node is copied: 3 more triples
    assert forced.triples == 6 and len(forced.sources) == 2


def test_kb_load_cli_refuses_a_second_load_with_a_hint(tmp_path) -> None:
    nt = tmp_path / "a.nt"
    nt.write_text('<http://e/a> <http://e/p> "x" .\n')
    store = str(tmp_path / "s")
    assert runner.invoke(app, ["kb", "load", str(nt), "--store", store]).exit_code == 0
    result = runner.invoke(app, ["kb", "load", str(nt), "--store", store, "--json"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert "already loaded" in error["message"] and "--force" in error["hint"]
    result = runner.invoke(app, ["kb", "load", str(nt), "--store", store, "--force"])
    assert result.exit_code == 0, result.output
    assert [s.triples for s in store_info(store).sources] == [1, 0]


def test_bad_sources_are_typed_errors(tmp_path) -> None:
    with pytest.raises(StoreError) as missing:
        load_store([tmp_path / "nope.nt"], tmp_path / "s")
    assert missing.value.path.endswith("nope.nt")
    odd = tmp_path / "data.csv"
    odd.write_text("a,b\n")
    with pytest.raises(StoreError):
        load_store([odd], tmp_path / "s")
    broken = tmp_path / "broken.nt"
    broken.write_text("<http://e/a> <http://e/p> .\n")
    with pytest.raises(StoreError) as syntax:
        load_store([broken], tmp_path / "s2")
    assert syntax.value.path == str(broken)
    with pytest.raises(StoreError):
        store_info(tmp_path)
    assert not (tmp_path / "s" / MANIFEST).exists()


def test_missing_virtuoso_binary_is_named(tmp_path) -> None:
    db = Virtuoso.init(tmp_path / "v", binary="no-such-virtuoso-t")
    with pytest.raises(VirtuosoNotFound) as info:
        db.start()
    assert info.value.binary == "no-such-virtuoso-t"
    with pytest.raises(VirtuosoError):
        Virtuoso(tmp_path / "elsewhere")


# the same steps on both backends: names, CVTs, dates with timezones, a time window, a count
PROGRAMS = [
    ["get_relation(m.0p1)",
     "add_fact(m.0p1, government.politician.government_positions_held, ?c)",
     "get_relation(?c)",
     "add_fact(?c, government.government_position_held.basic_title, ?title)",
     "set_answer(?title)", "execute()"],
    ["add_fact(?p, people.person.nationality, m.0c2)",
     "add_fact(?p, people.person.date_of_birth, ?born)",
     'add_filter(?born, <, "1950-06"^^xsd:dateTime)',
     "set_answer(?p)", "execute()"],
    ["add_fact(m.0c3, location.location.area, ?a)", "execute()"],
    ["add_fact(?c, government.government_position_held.jurisdiction_of_office, m.0c1)",
     "add_time_constrain(?c, government.government_position_held.from, "
     'government.government_position_held.to, "1990-12-31"^^xsd:dateTime, '
     '"1990-01-01"^^xsd:dateTime)',
     "add_fact(?c, government.government_position_held.office_holder, ?p)",
     "set_answer(?p)", "execute()"],
    ["add_fact(?p, people.person.spouse_s, ?m)", "add_fact(?m, people.marriage.from, ?when)",
     "add_min(?when)", "set_answer(?p)", "execute()"],
    ["add_fact(?p, people.person.place_of_birth, m.0c4)", "add_count(?p, ?n)", "execute()"],
]


def _summary(obs):
    rel = obs.relations
    return (obs.status, None if rel is None else (rel.forward, rel.backward),
            {k: (sorted(v.values), v.total) for k, v in obs.values.items()},
            None if obs.answers is None else sorted(map(str, obs.answers)))


@pytest.mark.server
def test_loaded_both_ways_the_same_observations(sample, store, tmp_path) -> None:
    if shutil.which("virtuoso-t") is None:
        pytest.skip("virtuoso-t is not on PATH (apt-get install virtuoso-opensource-7-bin)")
    settings = VirtuosoSettings(sql_port=free_port(), http_port=free_port(), memory_gb=0.12)
    db = Virtuoso.init(tmp_path / "virtuoso", settings)
    db.start(timeout=60)
    try:
        graph = "http://rdf.freebase.com/"
        assert db.load([sample], graph, loaders=2) == store_info(store).triples
        embedded = open_store(store, profile="freebase")
        endpoint = SparqlEndpointKB(db.sparql_url, profile="freebase", graph=graph, timeout=30)
        answered = 0
        for program in PROGRAMS:
            local, remote = Session(embedded), Session(endpoint)
            for action in program:
                a, b = local.run(action), remote.run(action)
                assert a.ok, (action, a.text)
                assert _summary(a) == _summary(b), action
            answered += bool(b.answers)
        assert answered == len(PROGRAMS)
        assert db.stop() is True
        assert not db.is_running()
    finally:
        db.kill()
