"""The core CLI under the hostile inputs of issue 24: terminal escapes in KB data (item 7), a
UTF-8 byte-order mark in program and entity files (item 10), ``--json`` errors (item 11) and
nameless answers (item 15). The real ``pyql`` app through typer's CliRunner."""

from __future__ import annotations

import gzip
import json
import os
import pty
import re
import select
import shlex
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.llm.accounting import TokenCounter
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
    again = runner.invoke(app, ["run", "--kb", str(movies_path()),
                                "add_fact(ex:Inception, ex:cast, ?c)\nset_answer(?c)"])
    assert line in again.stdout.splitlines()  # the same ids on every run


def test_blank_nodes_of_a_file_get_the_same_ids_on_every_load(tmp_path):
    from pyql.kb import OxigraphKB

    def blank_ids(path: Path) -> list[str]:
        kb = OxigraphKB.from_file(path)
        return sorted(str(q.subject) for q in kb.store if str(q.subject).startswith("_:"))

    first = blank_ids(movies_path())
    assert first and first == blank_ids(movies_path())
    assert first[0] == "_:b0"
    gz = tmp_path / "movies.ttl.gz"
    gz.write_bytes(gzip.compress(movies_path().read_bytes()))
    assert blank_ids(gz) == first


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
    """Item 14: the parsed store is cached (one per kb.txt, under $PYQL_CACHE, where pyql eval
    keeps it too); the second open of the full MetaQA KB takes well under a second."""
    kb_txt = require_data("metaqa", "kb.txt")
    monkeypatch.setenv("PYQL_CACHE", str(tmp_path / "cache"))
    first = open_kb(str(kb_txt))
    triples = len(first)
    del first  # the read-only store closes; a second process may open it as well
    started = time.perf_counter()
    again = open_kb(str(kb_txt))
    assert time.perf_counter() - started < 1.0
    assert len(again) == triples
    assert list((tmp_path / "cache" / "metaqa").iterdir()) == [cache_store_dir(kb_txt)]
    from pyql.agent.evaluation.datasets import get_dataset

    # the store pyql eval opens for its MetaQA datasets: one build serves both commands
    del again
    get_dataset("metaqa-1hop", kb_txt.parent.parent).backend().close()
    assert list((tmp_path / "cache" / "metaqa").iterdir()) == [cache_store_dir(kb_txt)]


def test_run_links_mentions_from_kb_labels(tmp_path, monkeypatch):
    monkeypatch.setenv("PYQL_CACHE", str(tmp_path / "cache"))
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


class _Busy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server hook
        self.send_response(503)
        self.end_headers()
        self.wfile.write(b"busy")

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_eval_warnings_print_above_the_progress_bar_with_their_url_once(tmp_path):
    """Item 16: a retry warning during `pyql eval` broke the progress bar's line and said its
    endpoint twice ("URL: URL: ...")."""
    data = require_data("metaqa", "1-hop")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/sparql"
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm", "PYQL_DATA": str(data.parent.parent)}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pyql", "eval", "--dataset", "metaqa-1hop", "--llm", "gold",
             "--limit", "1", "--max-outages", "0", "--kb", url, "--out", str(tmp_path / "run")],
            stdout=slave, stderr=slave, env=env)
        os.close(slave)
        shown = b""
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                pytest.fail(f"pyql eval printed nothing for 120 s: {shown!r}")
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        proc.wait(timeout=60)  # the outage makes the run incomplete: exit code 1
    finally:
        server.shutdown()
        server.server_close()
        os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode("utf-8", "replace"))
    # what stays on each line of the terminal: the text after its last carriage return
    rows = [line.split("\r")[-1] for line in text.replace("\r\n", "\n").split("\n")]
    warnings = [row for row in rows if "WARNING" in row]
    assert warnings, text
    for row in warnings:
        assert row.lstrip().startswith(("[", "WARNING")), row  # not after the bar on its line
        assert row.count(url) == 1, row


# -- item 16: help, hints and what the terminal shows -------------------------------------


def test_help_shows_no_bool_type_beside_flags():
    for args in (["--help"], ["run", "--help"], ["eval", "--help"], ["kb", "load", "--help"],
                 ["kb", "virtuoso", "status", "--help"]):
        result = runner.invoke(app, args, env={"COLUMNS": "120"})
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.stdout, (args, result.stdout)
    assert "--json" in runner.invoke(app, ["run", "--help"]).stdout


def test_eval_help_lists_every_built_in_dataset():
    from pyql.agent.evaluation.datasets import DATASETS, dataset_names

    text = " ".join(runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).stdout.split())
    for name in dataset_names():
        if name in DATASETS or name in ("grailqa", "grailqa-el", "cwq", "webqsp-el"):
            assert name in text, name


def test_webqsp_el_errors_name_webqsp_el(tmp_path):
    require_data("freebase_questions")
    result = runner.invoke(app, ["eval", "--dataset", "webqsp-el", "--llm", "gold", "--limit",
                                 "1", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "webqsp-el needs a Freebase KB" in result.stderr


def test_gold_runs_estimate_tokens_only_when_asked_and_mark_them_estimated(tmp_path,
                                                                             monkeypatch):
    require_data("metaqa", "1-hop")
    loads = []  # the encoding loads (0.2 s of CPU each): none in a run that counts nothing
    load = TokenCounter._load
    monkeypatch.setattr(TokenCounter, "_load", lambda self: (loads.append(self), load(self))[1])
    for flags, estimated in (([], False), (["--token-estimates"], True)):
        loads.clear()
        out = tmp_path / f"r{len(flags)}"
        result = runner.invoke(app, ["eval", "--dataset", "metaqa-1hop", "--llm", "gold",
                                     "--limit", "2", "--out", str(out), "--no-progress", *flags],
                               env={"COLUMNS": "120"})
        assert result.exit_code == 0, result.output
        assert ("tokens / question (estimated)" in result.stdout) is estimated
        assert ("tokens / question (not counted: --token-estimates)" in result.stdout
                ) is not estimated
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["tokens_estimated"] == float(estimated)
        assert metrics["tokens_counted"] is estimated
        assert (metrics["prompt_tokens"] > 0) is estimated
        assert json.loads((out / "config.json").read_text())["token_estimates"] is estimated
        assert len(loads) == int(estimated)


def test_demo_next_commands_fit_80_columns_and_run():
    for args, expected in ((["demo"], "Christopher Nolan"), (["demo", "--sql"], "216")):
        out = runner.invoke(app, args, env={"COLUMNS": "80"}).stdout
        lines = out.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("Next: "))
        command = lines[start + 1:start + 3]
        assert all(len(line) <= 80 for line in command), command
        assert command[0].endswith(" \\")
        words = shlex.split(" ".join(line.rstrip("\\") for line in command))
        assert words[:2] == ["pyql", "run"]
        path_option = "--kb-path" if "--kb" in words else "--db-path"
        path = runner.invoke(app, ["demo", path_option]).stdout.strip()
        assert Path(path).is_file()
        words = [path if w == f"$(pyql demo {path_option})" else w for w in words[2:]]
        result = runner.invoke(app, ["run", *words])
        assert result.exit_code == 0, result.output
        assert f"Answers: {expected}" in result.stdout


def test_a_huge_action_is_not_echoed_whole():
    action = f"add_fact(?x, ex:directed_by, \"{'a' * 100_000}\")"
    result = runner.invoke(app, ["run", "--kb", str(movies_path()), action])
    assert result.exit_code == 0, result.output
    steps = result.stdout[:result.stdout.index("SPARQL ─")]  # the query itself is whole
    assert len(steps) < 2_000 and "characters cut" in steps
    failed = runner.invoke(app, ["run", "--kb", str(movies_path()),
                                 f"add_fact(?x, ex:nope, {'b' * 100_000})"])
    assert failed.exit_code == 1
    assert len(failed.stdout) + len(failed.stderr) < 5_000


def test_database_hints_fit_the_database(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    result = runner.invoke(app, ["run", "--db", str(bad), "--table", "t", "get_column(x)"])
    assert result.exit_code == 1
    assert "hint: is it a SQLite database file" in result.stderr
    assert "endpoint" not in result.stderr
    mysql = runner.invoke(app, ["run", "--db", "mysql://u@127.0.0.1/db", "--table", "t",
                                "get_column(x)"])
    assert mysql.exit_code == 1
    assert "[postgres]" not in mysql.stderr and "MySQLdb" in mysql.stderr
