"""The core CLI under the hostile inputs of issue 24: terminal escapes in KB data (item 7), a
UTF-8 byte-order mark in program and entity files (item 10), ``--json`` errors (item 11) and
nameless answers (item 15). The real ``pyql`` app through typer's CliRunner."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from typer.testing import CliRunner

from pyql.cli import app
from pyql.datasets.metaqa import cache_store_dir
from pyql.demo import movies_path
from pyql.kb import open_kb
from tests.conftest import require_data

runner = CliRunner()

#: an erase-screen CSI, an OSC window title (BEL-terminated) and a one-character C1 CSI
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x9b31m"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile_kb(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.ttl"
    path.write_text(
        "@prefix ex: <http://example.org/> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:film ex:title "Kismet\\u001B[2J\\u001B]0;owned\\u0007\\u009B31m" ;\n'
        "    ex:directed_by ex:someone .\n"
        'ex:someone rdfs:label "William\\u001B[2J Dieterle" .\n',
        encoding="utf-8")
    return path


def test_values_from_the_kb_reach_the_terminal_without_control_characters(tmp_path):
    kb = str(hostile_kb(tmp_path))
    for program in ("add_fact(ex:film, ex:title, ?t)", "add_fact(ex:film, ex:directed_by, ?d)"):
        result = runner.invoke(app, ["run", "--kb", kb, program])
        assert result.exit_code == 0, result.output
        assert not CONTROL.search(result.stdout), repr(result.stdout)
        assert "Answers: " in result.stdout
    assert "Answers: William[2J Dieterle" in result.stdout  # shown, as text


def test_json_escapes_control_characters(tmp_path):
    result = runner.invoke(app, ["run", "--kb", str(hostile_kb(tmp_path)), "--json",
                                 "add_fact(ex:film, ex:title, ?t)"])
    assert result.exit_code == 0, result.output
    assert not CONTROL.search(result.stdout), repr(result.stdout)
    data = json.loads(result.stdout)
    assert data["labels"] == ["Kismet" + HOSTILE]  # intact in the data


def test_error_lines_carry_no_control_characters(tmp_path):
    result = runner.invoke(app, ["run", "--kb", str(hostile_kb(tmp_path)),
                                 "add_fact(ex:film, ex:title, \x1b[2J)"])
    assert result.exit_code == 1
    assert "error: " in result.stderr
    assert not CONTROL.search(result.stderr), repr(result.stderr)


def test_a_byte_order_mark_is_accepted_in_program_and_entity_files(tmp_path):
    program = tmp_path / "program.pyql"
    program.write_text("add_fact(?film, ex:directed_by, Nolan)\nset_answer(?film)\n",
                       encoding="utf-8-sig")
    linked = tmp_path / "entities.json"
    linked.write_text(json.dumps({"Nolan": "ex:Christopher_Nolan"}), encoding="utf-8-sig")
    assert program.read_bytes().startswith(b"\xef\xbb\xbf")
    result = runner.invoke(app, ["run", "--kb", str(movies_path()), str(program),
                                 "--entities", str(linked)])
    assert result.exit_code == 0, result.output
    assert "Inception" in result.stdout
    result = runner.invoke(app, ["compile", f"@{program}", "--entities", str(linked),
                                 "--prefix", "ex=http://example.org/movies/"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["run", "--kb", str(movies_path()), "-"],
                           input="\ufeffadd_fact(?f, ex:directed_by, ex:Christopher_Nolan)\n")
    assert result.exit_code == 0, result.output


def one_json_error(result, code: int = 1) -> dict:
    assert result.exit_code == code, result.output
    data = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert data["ok"] is False
    assert data["error"]["message"] and data["error"]["exit_code"] == code
    return data["error"]


def test_run_json_prints_one_json_object_on_every_error(tmp_path):
    kb = str(movies_path())
    error = one_json_error(runner.invoke(app, ["run", "--kb", kb, "--json", "add_fact(?x"]))
    assert error["kind"] == "error" and error["detail"]  # the caret under the parse error
    assert "error: " in runner.invoke(app, ["run", "--kb", kb, "--json", "add_fact(?x"]).stderr
    one_json_error(runner.invoke(app, ["run", "--kb", str(tmp_path / "none.ttl"), "--json",
                                       "add_fact(?x, ex:p, ?y)"]))
    error = one_json_error(runner.invoke(app, ["run", "--json", "add_fact(?x, ex:p, ?y)"]), 2)
    assert error["kind"] == "usage"
    one_json_error(runner.invoke(app, ["compile", "--json", "add_fact(?x"]))
    failed = runner.invoke(app, ["run", "--kb", kb, "--json", "add_fact(?x, ex:directed_by, Bob)"])
    assert failed.exit_code == 1
    assert json.loads(failed.stdout)["ok"] is False  # the run's own object, with its steps


def test_nameless_answers_show_their_id_beside_the_placeholder():
    result = runner.invoke(app, ["run", "--kb", str(movies_path()),
                                 "add_fact(ex:Inception, ex:cast, ?c)\nset_answer(?c)"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("Answers: "))
    shown = line.removeprefix("Answers: ").split(", ")
    assert len(shown) == 2
    assert all(re.fullmatch(r"UnName_Entity \(_:\w+\)", s) for s in shown), line
    assert len(set(shown)) == 2  # the ids tell the two apart


def test_a_fact_repeated_by_a_looping_model_is_not_added_again():
    program = "\n".join(["add_fact(?film, ex:directed_by, ex:Christopher_Nolan)"] * 250)
    started = time.perf_counter()
    result = runner.invoke(app, ["run", "--kb", str(movies_path()), "--keep-going", "--json",
                                 program + "\nset_answer(?film)"])
    seconds = time.perf_counter() - started
    data = json.loads(result.stdout)
    assert result.exit_code == 1  # the repeats are failed steps, each saying why
    repeats = data["steps"][1:250]
    assert not any(s["ok"] for s in repeats)
    assert all("is already in the query; it was not added again" in s["text"] for s in repeats)
    assert data["sparql"].count("ex:directed_by") == 1
    assert len(data["answers"]) == 4
    assert seconds < 20  # 250 copies of the pattern took more than ten minutes


def test_metaqa_kb_txt_is_parsed_once_then_reopened(tmp_path, monkeypatch):
    """Item 14: the parsed store is cached (one per kb.txt, under $PYQL_CACHE_DIR); the second
    open of the full MetaQA KB takes well under a second."""
    kb_txt = require_data("metaqa", "kb.txt")
    monkeypatch.setenv("PYQL_CACHE_DIR", str(tmp_path / "cache"))
    first = open_kb(str(kb_txt))
    triples = len(first)
    del first  # the read-only store closes; a second process may open it as well
    started = time.perf_counter()
    again = open_kb(str(kb_txt))
    assert time.perf_counter() - started < 1.0
    assert len(again) == triples
    assert list((tmp_path / "cache" / "metaqa").iterdir()) == [cache_store_dir(kb_txt)]


def test_run_links_mentions_from_kb_labels(tmp_path, monkeypatch):
    monkeypatch.setenv("PYQL_CACHE_DIR", str(tmp_path / "cache"))
    kb_txt = tmp_path / "kb.txt"
    kb_txt.write_text("Kismet|directed_by|William Dieterle\nKismet|release_year|1944\n"
                      "The Kismet Twins|directed_by|Nobody Known\n")
    program = "add_fact(Kismet, directed_by, ?d)"
    result = runner.invoke(app, ["run", "--kb", str(kb_txt), program])
    assert result.exit_code == 0, result.output
    assert "linked Kismet → Kismet" in result.stdout
    assert "Answers: William Dieterle" in result.stdout
    data = json.loads(runner.invoke(app, ["run", "--kb", str(kb_txt), "--json", program]).stdout)
    assert data["linked"] == {"Kismet": "Kismet"} and data["answers"] == ["William Dieterle"]
    given = runner.invoke(app, ["run", "--kb", str(kb_txt), "--json", "-e", "Kismet=Kismet",
                                program])
    assert json.loads(given.stdout)["linked"] == {}  # given: nothing to look up
    unknown = runner.invoke(app, ["run", "--kb", str(kb_txt), "add_fact(Kizmet, directed_by, ?d)"])
    assert unknown.exit_code == 1  # not a label: the entity hint, as before
    assert "--entity" in unknown.stderr
    rdf = runner.invoke(app, ["run", "--kb", str(movies_path()), "--json",
                              'add_fact(?film, ex:directed_by, "Christopher Nolan")'])
    assert json.loads(rdf.stdout)["linked"] == {}  # a quoted string is a literal, never linked
    linked = runner.invoke(app, ["run", "--kb", str(movies_path()), "--json",
                                 "add_fact(?film, ex:directed_by, Christopher Nolan)"])
    assert json.loads(linked.stdout)["linked"] == {"Christopher Nolan": "ex:Christopher_Nolan"}
