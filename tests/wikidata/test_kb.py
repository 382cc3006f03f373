"""A Wikidata-shaped dump slice streamed into the embedded store (``.nt.bz2`` / ``.nt.gz``, the
forms of Wikidata's truthy dumps), then queried with the ``wikidata`` profile."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

from pyql.cli import app
from pyql.kb.loader import compression, rdf_format

runner = CliRunner()
FIXTURE = Path(__file__).parent.parent / "fixtures" / "kb" / "wikidata_small.ttl"


def _ntriples() -> bytes:
    quads = ox.parse(path=str(FIXTURE), format=ox.RdfFormat.TURTLE)
    return ox.serialize([q.triple for q in quads], format=ox.RdfFormat.N_TRIPLES)


@pytest.mark.parametrize(("suffix", "open_", "kind"), [(".nt.bz2", bz2.open, "bzip2"),
                                                        (".nt.gz", gzip.open, "gzip")])
def test_a_compressed_dump_slice_loads_and_answers(tmp_path: Path, suffix: str, open_,
                                                   kind: str) -> None:
    dump = tmp_path / f"latest-truthy{suffix}"
    with open_(dump, "wb") as out:
        out.write(_ntriples())
    assert compression(dump) == kind and rdf_format(dump) == (ox.RdfFormat.N_TRIPLES, True)
    store = tmp_path / "store"
    result = runner.invoke(app, ["kb", "load", str(dump), "--store", str(store)])
    assert result.exit_code == 0, result.output
    info = runner.invoke(app, ["kb", "info", str(store), "--json"])
    manifest = json.loads(info.output)
    assert manifest["sources"][0]["compression"] == kind and manifest["triples"] == len(
        list(ox.parse(path=str(FIXTURE), format=ox.RdfFormat.TURTLE)))
    result = runner.invoke(app, ["run", "--kb", str(store), "--profile", "wikidata", "--json",
                                 "add_fact(Q42, p:P69, ?s)\nadd_fact(?s, ps:P69, ?x)\n"
                                 "add_type(?x, Q3918)\nset_answer(?x)\nexecute()"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["answers"] == ["Q691283"]


def test_an_unknown_suffix_is_refused(tmp_path: Path) -> None:
    dump = tmp_path / "dump.nt.xz"
    dump.write_bytes(b"")
    result = runner.invoke(app, ["kb", "load", str(dump), "--store", str(tmp_path / "s")])
    assert result.exit_code == 1 and ".bz2" in result.output


def test_kb_load_builds_a_label_index_for_offline_linking(tmp_path: Path) -> None:
    from pyql.agent.grounding.linking import LabelIndex, LabelLinker
    from pyql.kb import OxigraphKB
    from pyql.kb.labels import label_index_path

    dump = tmp_path / "slice.nt"
    dump.write_bytes(_ntriples())
    store = tmp_path / "store"
    result = runner.invoke(app, ["kb", "load", str(dump), "--store", str(store),
                                 "--labels", "wikidata", "--json"])
    assert result.exit_code == 0, result.output
    [written] = json.loads(result.output)["label_indexes"]
    assert written["path"] == str(label_index_path(store, "wikidata"))
    kb = OxigraphKB(path=store, profile="wikidata", read_only=True)
    index = LabelIndex.from_kb(kb)
    assert kb.query_count == 0  # read from the file, not the store
    linker = LabelLinker(index)
    # exact label, an alias (skos:altLabel), and a normalised form (case, accents, punctuation)
    assert linker.link("who played Ford Prefect alongside Yasiin Bey?") == {
        "Ford Prefect": "Q1267823", "Yasiin Bey": "Q223117"}
    assert linker.link("where was douglas noel adams educated") == {"douglas noel adams": "Q42"}
    assert ("Q183", "Deutschland") not in index.entries()  # English (or untagged) only
    kb.close()


def test_a_label_index_older_than_its_store_is_not_used(tmp_path: Path) -> None:
    from pyql.kb import OxigraphKB
    from pyql.kb.labels import read_label_index, write_label_index

    dump = tmp_path / "slice.nt"
    dump.write_bytes(_ntriples())
    store = tmp_path / "store"
    assert runner.invoke(app, ["kb", "load", str(dump), "--store", str(store)]).exit_code == 0
    write_label_index(store, "wikidata")
    more = tmp_path / "more.nt"
    more.write_text('<http://www.wikidata.org/entity/Q1> '
                    '<http://www.w3.org/2000/01/rdf-schema#label> "universe"@en .\n')
    assert runner.invoke(app, ["kb", "load", str(more), "--store", str(store)]).exit_code == 0
    kb = OxigraphKB(path=store, profile="wikidata", read_only=True)
    assert read_label_index(kb) is None
    kb.close()
