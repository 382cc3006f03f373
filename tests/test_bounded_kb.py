"""Bounded work on the embedded store (issue 36, items 1 and 2): a query timeout that stops the
engine, and results bounded in rows and cell size."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pyoxigraph as ox
import pytest

from pyql.datasets import metaqa
from pyql.errors import BackendTimeoutError
from pyql.kb import OxigraphKB, open_kb
from pyql.results import Limits

R = "http://pyql.dev/metaqa/relation/"

#: an 8-hop chain over release_year / has_genre / has_tags: every hop multiplies the rows, and
#: DISTINCT keeps pyoxigraph inside one next() until the whole join is read (minutes)
CHAIN = """get_relation(Movie 1)
add_fact(Movie 1, release_year, ?y)
add_fact(?m1, release_year, ?y)
add_fact(?m1, has_genre, ?g)
add_fact(?m2, has_genre, ?g)
add_fact(?m2, has_tags, ?t)
add_fact(?m3, has_tags, ?t)
add_fact(?m3, release_year, ?y2)
add_fact(?m4, release_year, ?y2)
add_fact(?m4, has_genre, ?g2)
set_answer(?g2)
execute()
"""


def _chain_sparql(kb: OxigraphKB) -> str:
    movie = kb.profile.entity("Movie 1").iri
    return (f"PREFIX r: <{R}> SELECT DISTINCT ?g2 WHERE {{ <{movie}> r:release_year ?y . "
            "?m1 r:release_year ?y . ?m1 r:has_genre ?g . ?m2 r:has_genre ?g . "
            "?m2 r:has_tags ?t . ?m3 r:has_tags ?t . ?m3 r:release_year ?y2 . "
            "?m4 r:release_year ?y2 . ?m4 r:has_genre ?g2 }")


@pytest.fixture(scope="module")
def kb_txt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A MetaQA-shaped kb.txt: 2,000 movies, each with a year, 2 genres and 3 tags."""
    rnd = random.Random(0)
    lines = []
    for i in range(2000):
        lines.append(f"Movie {i}|release_year|{1950 + rnd.randrange(60)}")
        lines += [f"Movie {i}|has_genre|Genre {g}" for g in rnd.sample(range(20), 2)]
        lines += [f"Movie {i}|has_tags|tag {t}" for t in rnd.sample(range(200), 3)]
    path = tmp_path_factory.mktemp("metaqa") / "kb.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _children() -> list[int]:
    """The pids of this process's live children."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[1] == me and fields[0] != "Z":
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_timeout_stops_an_8_hop_chain_in_memory(kb_txt: Path) -> None:
    kb = metaqa.load_kb(kb_txt)
    # other tests of this worker may keep children of their own (a shared server): only the
    # children this test makes count
    earlier = set(_children())
    start = time.monotonic()
    with pytest.raises(BackendTimeoutError) as caught:
        kb.select(_chain_sparql(kb), timeout=2)
    took = time.monotonic() - start
    assert 1.9 <= took < 6
    assert caught.value.backend == "oxigraph"
    assert set(_children()) - earlier == set()  # the evaluation was stopped, not left running
    # the store still answers, in time, after a stopped query
    rows = kb.select(f"SELECT ?y WHERE {{ <{kb.profile.entity('Movie 1').iri}> <{R}release_year> ?y }}",
                     timeout=5).rows
    assert len(rows) == 1


def test_run_timeout_on_kb_txt_ends_typed_and_bounded(kb_txt: Path, tmp_path: Path) -> None:
    program = tmp_path / "chain.pyql"
    program.write_text(CHAIN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pyql", "run", "--kb", str(kb_txt), "--timeout", "2", "--json",
         f"@{program}"], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert took < 60, took
    out = json.loads(done.stdout)
    assert out["ok"] is False
    assert out["steps"][-1]["status"] == "timeout"


def test_open_kb_gives_the_embedded_store_its_timeout(kb_txt: Path) -> None:
    kb = open_kb(str(kb_txt), timeout=1.5)
    assert isinstance(kb, OxigraphKB) and kb.timeout == 1.5
    with pytest.raises(BackendTimeoutError):
        kb.select(_chain_sparql(kb))


def test_timed_queries_answer_like_untimed_ones() -> None:
    kb = OxigraphKB(profile="generic")
    kb.store.add(ox.Quad(ox.NamedNode("http://e/a"), ox.NamedNode("http://e/p"), ox.Literal("x")))
    query = "SELECT ?s ?o WHERE { ?s <http://e/p> ?o }"
    assert kb.select(query, timeout=5).rows == kb.select(query).rows
    assert kb.ask("ASK { ?s ?p ?o }", timeout=5) is True
    with pytest.raises(Exception) as bad:
        kb.select("SELECT * WHERE { ?s ?p }", timeout=5)
    assert type(bad.value).__name__ == "BackendQueryError"


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_rows_and_cells_are_bounded_and_stated(timeout: float | None) -> None:
    kb = OxigraphKB(profile="generic", limits=Limits(max_rows=3, max_cell=10))
    p = ox.NamedNode("http://e/p")
    for i in range(5):
        kb.store.add(ox.Quad(ox.NamedNode(f"http://e/s{i}"), p, ox.Literal("v" * 1000 + str(i))))
    rs = kb.select("SELECT ?o WHERE { ?s <http://e/p> ?o }", timeout=timeout)
    assert len(rs.rows) == 3 and rs.truncated
    assert rs.cells_cut == 3
    assert all(len(row[0].lexical) == 10 for row in rs.rows)


def test_a_huge_literal_does_not_come_back_whole() -> None:
    kb = OxigraphKB(profile="generic")  # default limits
    rs = kb.select('SELECT ?x WHERE { BIND(CONCAT(STRUUID(), "' + "y" * 100 + '") AS ?s) '
                   'BIND(CONCAT(?s, ?s, ?s, ?s, ?s, ?s, ?s, ?s, ?s, ?s) AS ?t) '
                   'BIND(CONCAT(?t, ?t, ?t, ?t, ?t, ?t, ?t, ?t, ?t, ?t) AS ?u) '
                   'BIND(CONCAT(?u, ?u, ?u, ?u, ?u, ?u, ?u, ?u, ?u, ?u) AS ?x) }')
    assert rs.cells_cut == 1
    assert len(rs.rows[0][0].lexical) == Limits().max_cell


# ---------------------------------------------------------------- SQL (item 2)

def _blob_db(**options):
    from pyql.db import SqlDB

    return SqlDB.sqlite_memory(lambda c: c.executescript(
        "CREATE TABLE t(id INT, b BLOB, s TEXT);"
        "INSERT INTO t VALUES (1, zeroblob(10000000), 'x'), (2, NULL, 'y'), (3, NULL, 'z');"),
        **options)


_NO_SETLIMIT = pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="sqlite3.Connection.setlimit needs Python 3.11: on 3.10 SQLite cannot be told to "
    "refuse a value over the cell bound before building it (cells are still cut when read)")


@_NO_SETLIMIT
def test_sql_zeroblob_is_refused_by_the_engine_not_built() -> None:
    import resource

    from pyql.errors import BackendQueryError

    db = _blob_db()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BackendQueryError) as caught:
        db.execute("SELECT zeroblob(300000000)")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100, grown_mb
    assert "limit" in str(caught.value) and caught.value.backend == "sqlite"


def test_sql_cells_and_rows_are_cut_and_stated() -> None:
    db = _blob_db(max_rows=2, max_cell=20_000)  # the engine reads values up to 20 MB
    rs = db.execute("SELECT b, s FROM t ORDER BY id")
    assert len(rs.rows) == 2 and rs.truncated
    assert rs.cells_cut == 1 and len(rs.rows[0][0]) == 20_000 and rs.rows[0][1] == "x"


def test_sql_observation_states_the_cut() -> None:
    from pyql.sql.session import SqlSession

    db = _blob_db()  # the default limits
    session = SqlSession(db, table="t")
    session.run("set_answer(b)")
    obs = session.run("execute()")
    assert obs.feedback.backend.cells_cut == 1
    assert "cut to the backend's cell limit" in obs.text
    assert len(obs.text) < 4 * 65_536 + 1000  # a 10 MB blob does not print 40 MB


def test_sparql_observation_states_the_cut() -> None:
    from pyql import Session

    kb = OxigraphKB(profile="generic", limits=Limits(max_cell=50))
    kb.store.add(ox.Quad(ox.NamedNode("http://e/a"), ox.NamedNode("http://e/p"),
                         ox.Literal("w" * 5000)))
    session = Session(kb, entities={"a": "<http://e/a>"})
    session.run("add_fact(a, <http://e/p>, ?o)")
    obs = session.run("execute()")
    assert obs.feedback.backend.cells_cut == 1
    assert "cut to the backend's cell limit" in obs.text


def test_endpoint_results_are_bounded_and_stated() -> None:
    from pyql.kb import SparqlEndpointKB
    from tests.support.loopback import LoopbackEndpoint, send_results

    class Long(LoopbackEndpoint):
        def answer(self, handler, params) -> None:  # type: ignore[no-untyped-def]
            rows = [{"o": {"type": "literal", "value": "v" * 1000 + str(i)}} for i in range(5)]
            send_results(handler, json.dumps({"head": {"vars": ["o"]},
                                              "results": {"bindings": rows}}).encode())

    with Long() as server:
        kb = SparqlEndpointKB(server.url, limits=Limits(max_rows=3, max_cell=10))
        rs = kb.select("SELECT ?o WHERE { ?s ?p ?o }")
    assert len(rs.rows) == 3 and rs.truncated and rs.cells_cut == 3
    assert all(len(row[0].lexical) == 10 for row in rs.rows)


def test_pyql_run_prints_a_10_mb_blob_bounded(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "blob.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t(id INT, b BLOB)")
    conn.execute("INSERT INTO t VALUES (1, zeroblob(10000000))")
    conn.commit()
    conn.close()
    for extra in ([], ["--json"]):
        done = subprocess.run([sys.executable, "-m", "pyql", "run", "--db", str(db), "--table",
                               "t", *extra, "set_answer(b)"], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert len(done.stdout) < 1_000_000, len(done.stdout)  # was 40 MB (120 MB with --json)
        assert "cut to the backend's cell limit" in done.stdout


@_NO_SETLIMIT
def test_vanilla_zeroblob_is_a_query_error_not_gigabytes() -> None:
    import resource

    import pyql
    from pyql.agent.llm.clients import ScriptedLLM
    from pyql.agent.strategies.baselines.vanilla import Vanilla
    from pyql.db import SqlDB

    db = SqlDB.sqlite(Path(pyql.__file__).parent / "data" / "demo.sqlite")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = Vanilla(ScriptedLLM(["```sql\nSELECT zeroblob(300000000)\n```"]), db).run(
        "q", table="players")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.stop_reason == "query_error" and grown_mb < 100, grown_mb


def test_a_store_directory_keeps_its_query_workers(kb_txt: Path) -> None:
    earlier = set(_children())  # another test's children (a shared server) are not ours
    kb = open_kb(str(kb_txt), timeout=3)  # MetaQA's kb.txt: a cached store, read-only
    assert isinstance(kb, OxigraphKB) and kb.read_only
    movie = kb.profile.entity("Movie 1").iri
    simple = f"SELECT ?y WHERE {{ <{movie}> <{R}release_year> ?y }}"
    try:
        first = kb.select(simple).rows
        for _ in range(20):
            assert kb.select(simple).rows == first
        assert kb._workers is not None and kb._workers.started == 1  # one worker, reused
        with pytest.raises(BackendTimeoutError):
            kb.select(_chain_sparql(kb), timeout=1)
        assert kb.select(simple).rows == first  # a new worker replaces the killed one
        assert kb._workers.started == 2
        assert kb.ask(f"ASK {{ <{movie}> ?p ?o }}") is True
    finally:
        kb.close()
    assert set(_children()) - earlier == set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("where", ["memory", "directory"])
def test_the_query_process_dies_with_a_killed_parent(kb_txt: Path, tmp_path: Path,
                                                     where: str) -> None:
    import signal

    script = (
        "import sys\n"
        "from pyql.datasets import metaqa\n"
        "from pyql.kb import open_kb\n"
        f"kb = metaqa.load_kb({str(kb_txt)!r}) if {where == 'memory'} else "
        f"open_kb({str(kb_txt)!r})\n"
        f"print('ready', flush=True)\n"
        f"kb.select({_chain_sparql(metaqa.load_kb(kb_txt))!r}, timeout=120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              env={**os.environ, "PYQL_CACHE": str(tmp_path / "cache")},
                              start_new_session=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().startswith(b"ready")
        until = time.monotonic() + 60
        children: list[int] = []
        while time.monotonic() < until and not children:
            children = [pid for pid in _pids() if _ppid(pid) == parent.pid]
            time.sleep(0.1)
        assert children, "no query process"
        time.sleep(1.0)  # evaluating
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        until = time.monotonic() + 5
        while time.monotonic() < until and any(_ppid(pid) is not None for pid in children):
            time.sleep(0.1)
        assert all(_ppid(pid) is None for pid in children), "the query process outlived it"
    finally:
        try:
            os.killpg(parent.pid, 9)
        except ProcessLookupError:
            pass


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _ppid(pid: int) -> int | None:
    """The parent of a live process (None: gone or a zombie)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else int(fields[1])
