"""``pyql kb ...`` and ``pyql fidelity sparql`` through the real app (typer's CliRunner)."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from pyql.cli import app
from pyql.datasets.freebase_sample import write_sample
from tests.support.virtuoso import free_port

runner = CliRunner()


def test_kb_load_then_info_then_run(tmp_path) -> None:
    sample = tmp_path / "fb.nt.gz"
    triples = write_sample(sample, people=40)
    store = tmp_path / "store"
    loaded = runner.invoke(app, ["kb", "load", str(sample), "--store", str(store), "--json"])
    assert loaded.exit_code == 0, loaded.output
    assert json.loads(loaded.output)["triples"] == triples
    info = runner.invoke(app, ["kb", "info", str(store)])
    assert info.exit_code == 0 and f"{triples:,} triples" in info.output
    ran = runner.invoke(app, ["run", "-p", "freebase", "--kb", str(store), "--json",
                              "add_fact(m.0p1, people.person.nationality, ?c)\nexecute()"])
    assert ran.exit_code == 0, ran.output


def test_one_triple_is_one_triple(tmp_path) -> None:
    """Issue 36, item 19: ``kb info`` said "1 triples"."""
    source = tmp_path / "one.nt"
    source.write_text("<http://example.org/a> <http://example.org/b> <http://example.org/c> .\n")
    store = tmp_path / "store"
    loaded = runner.invoke(app, ["kb", "load", str(source), "--store", str(store)])
    assert loaded.exit_code == 0, loaded.output
    assert ": 1 triple from 1 file," in loaded.output
    info = runner.invoke(app, ["kb", "info", str(store)])
    assert info.exit_code == 0, info.output
    first, source_line = info.output.splitlines()[:2]
    assert first.startswith(f"{store}: 1 triple (") and "  1 triple  " in source_line
    assert "triples" not in info.output


def test_kb_errors_are_one_line(tmp_path) -> None:
    missing = runner.invoke(app, ["kb", "load", str(tmp_path / "none.nt"), "--store",
                                  str(tmp_path / "s")])
    assert missing.exit_code == 1 and "error: no such file" in missing.output
    info = runner.invoke(app, ["kb", "info", str(tmp_path)])
    assert info.exit_code == 1 and "pyql-manifest.json" in info.output
    status = runner.invoke(app, ["kb", "virtuoso", "status", "--dir", str(tmp_path)])
    assert status.exit_code == 1 and "virtuoso init" in status.output


@pytest.mark.server
def test_kb_virtuoso_lifecycle(tmp_path) -> None:
    if shutil.which("virtuoso-t") is None:
        pytest.skip("virtuoso-t is not on PATH (apt-get install virtuoso-opensource-7-bin)")
    sample = tmp_path / "fb.nt"
    triples = write_sample(sample, people=20)
    d = str(tmp_path / "v")
    init = runner.invoke(app, ["kb", "virtuoso", "init", "--dir", d, "--memory", "0.12",
                               "--http-port", str(free_port()), "--sql-port", str(free_port())])
    assert init.exit_code == 0, init.output
    try:
        assert runner.invoke(app, ["kb", "virtuoso", "start", "--dir", d]).exit_code == 0
        load = runner.invoke(app, ["kb", "virtuoso", "load", "--dir", d, str(sample)])
        assert load.exit_code == 0 and f"{triples:,} triples" in load.output, load.output
        assert "running" in runner.invoke(app, ["kb", "virtuoso", "status", "--dir", d]).output
    finally:
        stop = runner.invoke(app, ["kb", "virtuoso", "stop", "--dir", d])
    assert stop.output.strip() == "stopped"


def test_fidelity_sparql(pyql_data) -> None:
    result = runner.invoke(app, ["fidelity", "sparql", "grailqa", "--limit", "4", "--json",
                                 "--data-dir", str(pyql_data)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["covered"] == 4 and summary["agree"] == summary["checked"]
