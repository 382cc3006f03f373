"""``pyql run`` under the conditions of issue 15 (items 4 and 6): queries printed whole when
piped, long programs streaming their steps (a progress bar on a terminal with --json), and
MetaQA's kb.txt opened the way ``pyql ask`` opens it.

The streaming tests run the real CLI in a subprocess against a local SPARQL endpoint (answered
by pyoxigraph over the demo KB) that holds back every query of the program's second call until
the test has read the first call's output: without streaming, the output never comes.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import re
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

import pyql.demo as demo
from pyql.cli import app
from tests.support.loopback import LoopbackEndpoint, send_results

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()

MOVIES = "http://example.org/movies/"
#: a relation IRI outside any declared prefix: the SPARQL line that holds it passes 80 columns
LONG = "http://example.org/unprefixed/" + "a_relation_name_long_enough_to_pass_the_terminal_width"
PROGRAM = (f"add_fact(?film, ex:directed_by, ex:Christopher_Nolan)\nadd_fact(?film, <{LONG}>, ?y)\n"
           "set_answer(?film)")


def query_block(stdout: str) -> str:
    """The text between the ``SPARQL ───`` rule and the closing rule."""
    match = re.search(r"^SPARQL ─+\n(.*?)\n─+$", stdout, re.S | re.M)
    assert match, stdout
    return match.group(1)


def check_whole(stdout: str, sparql: str) -> None:
    block = query_block(stdout)
    assert block == sparql.strip()
    assert any(len(line) > 80 and LONG in line for line in block.splitlines())
    ox.Store().query(block)  # the copied query parses


# -- item 4: queries printed whole ----------------------------------------------------------


def test_run_prints_the_final_query_whole_at_80_columns():
    args = ["run", "--kb", str(demo.movies_path()), PROGRAM]
    sparql = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["sparql"]
    result = runner.invoke(app, args)  # not a terminal: rich's width is 80
    assert result.exit_code == 0, result.output
    check_whole(result.stdout, sparql)


def test_run_prints_the_final_query_whole_into_a_pipe():
    args = [sys.executable, "-m", "pyql", "run", "--kb", str(demo.movies_path()), PROGRAM]
    env = {**os.environ, "COLUMNS": "40"}
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    as_json = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120)
    check_whole(done.stdout, json.loads(as_json.stdout)["sparql"])


# -- item 4: long work streams --------------------------------------------------------------


class GatedEndpoint(LoopbackEndpoint):
    """A SPARQL endpoint over the demo KB that holds queries containing ``gate`` until
    :meth:`open`."""

    def __init__(self, gate: str) -> None:
        self.store = ox.Store()
        self.store.load(path=str(demo.movies_path()), format=ox.RdfFormat.TURTLE)
        self.gate = gate
        self.opened = threading.Event()
        super().__init__()

    def answer(self, handler: BaseHTTPRequestHandler, params: dict[str, list[str]]) -> None:
        query = params["query"][0]
        if self.gate in query:
            self.opened.wait(120)
        send_results(handler, self.store.query(query).serialize(format=ox.QueryResultsFormat.JSON))

    def open(self) -> None:
        self.opened.set()

    def close(self) -> None:
        self.opened.set()
        super().close()


@pytest.fixture()
def endpoint() -> Iterator[GatedEndpoint]:
    gated = GatedEndpoint(gate="release_year")
    yield gated
    gated.close()


STREAMED = (
    "add_fact(?film, ex:directed_by, ex:Christopher_Nolan)\n"
    "add_fact(?film, ex:release_year, ?year)\n"
    "set_answer(?film)"
)


def pyql_run(url: str, *extra: str, **popen: object) -> subprocess.Popen:
    args = [sys.executable, "-m", "pyql", "run", "--kb", url, "--prefix", f"ex={MOVIES}",
            *extra, STREAMED]
    return subprocess.Popen(args, text=True, **popen)  # type: ignore[call-overload]


def lines_of(stream) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_run_streams_each_step_as_it_runs(endpoint: GatedEndpoint):
    proc = pyql_run(endpoint.url, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = lines_of(proc.stdout)
        seen = []
        # call 2 is held by the endpoint: call 1 must be on stdout already
        while not any("The value of variable ?film" in line for line in seen):
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                pytest.fail(f"no step printed while call 2 was running; got {seen!r}")
            assert line is not None, f"pyql run ended early: {seen!r} {proc.stderr.read()}"
            seen.append(line)
        assert seen[0].strip() == "1  add_fact(?film, ex:directed_by, ex:Christopher_Nolan)"
        assert proc.poll() is None  # still waiting on call 2
        endpoint.open()
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        endpoint.open()
        proc.kill()
        proc.wait()


def test_run_json_shows_progress_on_a_terminal(endpoint: GatedEndpoint):
    """With --json stdout is the JSON alone; a terminal on stderr gets a progress bar."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = pyql_run(endpoint.url, "--json", stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    try:
        shown = b""
        while b"calls" not in shown or b"1/4" not in shown:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                pytest.fail(f"no progress on the terminal while call 2 was running: {shown!r}")
            shown += os.read(master, 4096)
        endpoint.open()
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        data = json.loads(out)
        assert data["ok"] and [s["step"] for s in data["steps"]] == [1, 2, 3, 4]
    finally:
        endpoint.open()
        proc.kill()
        proc.wait()
        os.close(master)


# -- item 6: one KB opener ------------------------------------------------------------------

KB_TXT = "Kismet|directed_by|William Dieterle\nKismet|release_year|1944\n"


@pytest.mark.parametrize("profile", [[], ["--profile", "metaqa"]], ids=["default", "metaqa"])
def test_run_opens_metaqa_kb_txt_like_ask(tmp_path, profile):
    """Issue 15 item 6: `pyql run --kb .../metaqa/kb.txt --profile metaqa` said "cannot tell
    the RDF format" (a small kb.txt of the same format; the opener is what is tested)."""
    kb = tmp_path / "kb.txt"
    kb.write_text(KB_TXT)
    result = runner.invoke(app, ["run", "--kb", str(kb), *profile, "-e", "Kismet=Kismet",
                                 "--json", "add_fact(Kismet, directed_by, ?d)\nset_answer(?d)"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["profile"] == "metaqa"
    assert data["labels"] == ["William Dieterle"]


def test_the_one_opener_reads_metaqa_kb_txt(tmp_path):
    """pyql.kb.open_kb, which every command's --kb goes through, reads MetaQA's kb.txt."""
    from pyql.errors import ProfileError
    from pyql.kb import open_kb

    kb_txt = tmp_path / "kb.txt"
    kb_txt.write_text(KB_TXT)
    kb = open_kb(str(kb_txt))
    assert kb.profile.name == "metaqa" and len(kb) > 0  # type: ignore[arg-type]
    assert open_kb(str(kb_txt), profile="metaqa").profile.name == "metaqa"
    with pytest.raises(ProfileError, match="MetaQA's kb.txt"):
        open_kb(str(kb_txt), profile="generic")


def test_a_txt_kb_with_another_profile_is_a_usage_error(tmp_path):
    kb = tmp_path / "kb.txt"
    kb.write_text("Kismet|directed_by|William Dieterle\n")
    result = runner.invoke(app, ["run", "--kb", str(kb), "-p", "freebase", "execute()"])
    assert result.exit_code == 2
    assert "MetaQA's kb.txt" in result.output


def test_a_txt_kb_that_is_not_metaqa_is_one_error_line(tmp_path):
    kb = tmp_path / "triples.txt"
    kb.write_text("<http://e/a> <http://e/b> <http://e/c> .\n")
    result = runner.invoke(app, ["run", "--kb", str(kb), "execute()"])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error: cannot load {kb} as MetaQA's kb.txt: ")
    assert lines[1].startswith("hint: ") and ".nt" in lines[1]


# -- issue 36, item 19: one error, said once; an empty program named ---------------------------


@pytest.mark.parametrize("keep_going", [False, True])
def test_a_failed_step_s_reason_is_printed_once(keep_going: bool) -> None:
    program = ("add_fact(ex:Inception, ex:directed_by, ?d)\n"
               "add_fact(ex:Inception, ex:directed_by, ?d)\nset_answer(?d)")
    result = runner.invoke(app, ["run", "--kb", str(demo.movies_path()), "--prefix",
                                 f"ex={MOVIES}", program,
                                 *(["--keep-going"] if keep_going else [])])
    assert result.exit_code == 1, result.output
    reason = "is already in the query; it was not added again"
    assert result.output.count(reason) == 1, result.output
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert error.startswith("error: step 2 failed: ") and reason in error
    assert " 2  add_fact(ex:Inception, ex:directed_by, ?d)" in result.stdout  # the step is shown
    assert "failed: the error line says why" in result.stdout


@pytest.mark.parametrize("program", ["", "   "])
def test_an_empty_program_is_named(program: str) -> None:
    for command in (["run", "--kb", str(demo.movies_path())], ["compile"]):
        result = runner.invoke(app, [*command, program])
        assert result.exit_code == 1, result.output
        [error] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert error.startswith("error: the program is empty")
        assert "no such program file" not in result.stderr
