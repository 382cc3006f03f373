"""Tests of the command line (pyql.cli), the demo tours (pyql.demo) and examples/quickstart.py.

Commands run in-process through typer's CliRunner; one test runs the installed module as a
subprocess (``python -m pyql demo``) and one runs the quickstart script.
"""

from __future__ import annotations

import doctest
import json
import socket
import subprocess
import sys
import types
from pathlib import Path

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

import pyql.demo as demo
from pyql import Session, __version__
from pyql.cli import app

REPO = Path(__file__).resolve().parent.parent
ENTITIES = REPO / "examples" / "movies_entities.json"

runner = CliRunner()


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def movies() -> str:
    return str(demo.movies_path())


def assert_one_line_error(result, code: int = 1, *, hint: bool | None = None) -> str:
    """The command failed with ``code``, one ``error:`` line on stderr, no traceback."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert lines[0] == errors[0]
    if hint is not None:
        assert any(line.startswith("hint: ") for line in lines) == hint, result.stderr
    return errors[0]


def is_valid_sparql(text: str) -> bool:
    ox.Store().query(text)  # raises SyntaxError if not
    return True


# -- demo -----------------------------------------------------------------------------------


def test_demo_runs_every_tour_and_prints_answers():
    result = invoke("demo")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for number in (1, 2, 3):
        assert f"Tour {number}/3" in out
    assert "Answer: Interstellar" in out
    assert "Answer: 6" in out
    answer_line = next(
        line for line in out.splitlines() if line.startswith("Answer: ") and "Nolan" in line
    )
    assert {"Christopher Nolan", "Martin Scorsese", "James Cameron"} <= set(
        answer_line.removeprefix("Answer: ").split(", ")
    )
    assert "SPARQL so far" in out
    assert "COUNT(DISTINCT ?actor)" in out
    assert "UnName_Entity" in out  # the compound cast nodes
    assert "every answer as expected" in out
    assert result.stderr == ""


def test_demo_one_tour():
    result = invoke("demo", "--tour", "2")
    assert result.exit_code == 0, result.output
    assert "Tour 2/3" in result.stdout
    assert "Tour 1/3" not in result.stdout and "Tour 3/3" not in result.stdout
    assert "add_filter(?year, <, 2015)" in result.stdout


def test_demo_tour_out_of_range_is_a_usage_error():
    result = invoke("demo", "--tour", "9")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_demo_kb_path():
    result = invoke("demo", "--kb-path")
    assert result.exit_code == 0
    path = Path(result.stdout.strip())
    assert path.is_file() and path.name == "movies.ttl"


def test_movies_kb_is_small_and_labelled():
    kb = demo.movies_kb()
    assert 40 <= len(kb) <= 90
    unlabelled = kb.select(
        "SELECT DISTINCT ?e WHERE { { ?e ?p ?o } UNION { ?s ?p ?e } FILTER(isIRI(?e)) "
        "FILTER(STRSTARTS(STR(?e), 'http://example.org/movies/')) "
        "FILTER NOT EXISTS { ?e <http://www.w3.org/2000/01/rdf-schema#label> ?l } "
        "FILTER NOT EXISTS { ?x ?e ?y } FILTER NOT EXISTS { ?x a ?e } }"
    )
    assert unlabelled.is_empty, unlabelled.rows


@pytest.mark.parametrize("tour", demo.KB_TOURS, ids=lambda t: t.title)
def test_each_kb_tour_reaches_its_answers(tour):
    result = demo.run_tour(demo.KB_TOUR_SET, tour)
    assert all(obs.ok for obs in result.observations), [o.text for o in result.observations]
    assert set(result.answers) == tour.expected
    assert result.ok


def test_demo_module_doctests():
    failures, _ = doctest.testmod(demo)
    assert failures == 0


def test_demo_without_sql_tours_is_one_error(monkeypatch):
    monkeypatch.setattr(demo, "TOUR_SETS", {"kb": demo.KB_TOUR_SET})
    monkeypatch.setattr(demo, "TOUR_SET_MODULES", {})
    result = invoke("demo", "--sql")
    assert "'sql'" in assert_one_line_error(result, hint=True)


def _titanic_year_tour(title: str, expected: str) -> demo.Tour:
    """A one-hop tour on the movie KB (Titanic's release year is 1997)."""
    return demo.Tour(
        title=title,
        question="When was Titanic released?",
        entities={"Titanic": "ex:Titanic"},
        steps=("add_fact(Titanic, ex:release_year, ?year)", "execute()"),
        expected=frozenset({expected}),
    )


def test_demo_runs_a_registered_tour_set(monkeypatch):
    # a registry without the real SQL tours (pyql.sql.demo registers them when imported)
    monkeypatch.setattr(demo, "TOUR_SETS", {"kb": demo.KB_TOUR_SET})
    tour = _titanic_year_tour("lookup", expected="1997")
    demo.register_tour_set(
        demo.TourSet(
            name="sql",
            title="stand-in SQL tours",
            language="sparql",
            tours=(tour,),
            open_session=lambda t: Session(demo.movies_kb(), entities=t.entities),
        )
    )
    result = invoke("demo", "--sql")
    assert result.exit_code == 0, result.output
    assert "stand-in SQL tours" in result.stdout
    assert "Answer: 1997" in result.stdout
    with pytest.raises(ValueError):
        demo.register_tour_set(
            demo.TourSet(
                name="sql", title="again", language="sql", tours=(), open_session=lambda t: None
            )
        )  # type: ignore[arg-type,return-value]


def test_demo_reports_a_tour_that_misses_its_answers(monkeypatch):
    wrong = _titanic_year_tour("wrong", expected="1998")
    monkeypatch.setattr(
        demo,
        "TOUR_SETS",
        {
            "kb": demo.TourSet(
                name="kb",
                title="t",
                language="sparql",
                tours=(wrong,),
                open_session=demo.KB_TOUR_SET.open_session,
            )
        },
    )
    result = invoke("demo")
    assert_one_line_error(result)
    assert "expected 1998" in result.stdout


# -- compile --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [
                "add_fact(m.0crbvqz, meteorology.tropical_cyclone.category, ?c)\nset_answer(?c)",
                "-p",
                "freebase",
            ],
            ["PREFIX ns: <http://rdf.freebase.com/ns/>", "SELECT DISTINCT ?c", "ns:m.0crbvqz"],
        ),
        (
            [
                "a=PyQL()\na.add_fact('m.03_r3', 'location.country.languages_spoken', 'x0')\n"
                "a.set_answer('x0')",
                "-p",
                "freebase",
            ],
            ["SELECT DISTINCT ?x0", "ns:m.03_r3"],
        ),
        (
            [
                "a=PyQL()\na.add_fact('m.03_r3', 'location.country.population', 'x0')\n"
                "a.add_max('x0')\na.set_answer('x0')",
                "--extremum",
                "limit",
                "-p",
                "freebase",
            ],
            ["ORDER BY DESC(?x0)", "LIMIT 1"],
        ),
        (
            ["add_fact(m.03_r3, location.country.population, ?p)\nadd_max(?p)", "-p", "freebase"],
            ["MAX(?p)"],
        ),
        (
            [
                "add_fact(?film, directed_by, Kismet)\nadd_count(?film, ?n)",
                "-p",
                "metaqa",
                "-e",
                "Kismet=Kismet",
            ],
            ["COUNT(DISTINCT ?film) AS ?n", "<http://pyql.dev/metaqa/entity/Kismet>"],
        ),
        (
            [
                "add_fact(Titanic, ex:release_year, ?y)",
                "-p",
                "generic",
                "--prefix",
                "ex=http://example.org/movies/",
                "-e",
                "Titanic=ex:Titanic",
            ],
            ["PREFIX ex: <http://example.org/movies/>", "ex:Titanic ex:release_year ?y"],
        ),
        (
            [
                "add_fact(Titanic, ex:release_year, ?y)\nadd_filter(?y, >, 1990)",
                "-p",
                "generic",
                "--prefix",
                "ex=http://example.org/movies/",
                "--entities",
                str(ENTITIES),
            ],
            ["ex:Titanic ex:release_year ?y", "FILTER (?y >"],
        ),
    ],
    ids=[
        "agent",
        "python",
        "python-limit",
        "argmax-ties",
        "metaqa-count",
        "generic-entity",
        "entities-file",
    ],
)
def test_compile(args, expected):
    result = invoke("compile", *args)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    for text in expected:
        assert text in result.stdout
    assert is_valid_sparql(result.stdout)


def test_compile_reads_files_and_stdin(tmp_path):
    program = "add_fact(m.0crbvqz, meteorology.tropical_cyclone.category, ?c)\n"
    path = tmp_path / "program.pyql"
    path.write_text(program)
    outputs = {
        "path": invoke("compile", "-p", "freebase", str(path)),
        "at-file": invoke("compile", "-p", "freebase", f"@{path}"),
        "stdin": invoke("compile", "-p", "freebase", "-", input=program),
        "inline": invoke("compile", "-p", "freebase", program),
    }
    for name, result in outputs.items():
        assert result.exit_code == 0, (name, result.output)
    assert len({r.stdout for r in outputs.values()}) == 1


def test_compile_json():
    result = invoke("compile", "-p", "freebase", "--json", "add_fact(m.0x, a.b, ?y)\nset_answer(?y)")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["program"] == "add_fact(m.0x, a.b, ?y)\nset_answer(?y)"
    assert data["profile"] == "freebase"
    assert is_valid_sparql(data["sparql"])


def test_compile_defaults_to_the_generic_profile_like_run():
    """One rule for --profile: generic unless given (metaqa for MetaQA's kb.txt)."""
    program = "add_fact(?x, <http://e/r>, ?y)\nset_answer(?y)"
    compiled = json.loads(invoke("compile", "--json", program).stdout)
    assert compiled["profile"] == "generic"
    ran = json.loads(invoke("run", "--json", "--kb", movies(), program).stdout)
    assert ran["profile"] == compiled["profile"]
    for command in ("compile", "run", "ask"):
        help_text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}).stdout
        assert "generic for anything else" in help_text, command


def test_a_freebase_id_without_the_freebase_profile_hints_at_it():
    result = invoke("compile", "add_fact(m.0crbvqz, ns:a.b, ?c)")
    assert_one_line_error(result, hint=True)
    assert "--profile freebase" in result.stderr


def test_compile_sql():
    result = invoke(
        "compile",
        "--sql",
        "--table",
        "players",
        "--dialect",
        "postgres",
        'add_condition(Player, =, "Terrence Ross")\nset_answer(Nationality)',
    )
    assert result.exit_code == 0, result.output
    assert "Nationality" in result.stdout and "players" in result.stdout
    assert "Terrence Ross" in result.stdout


def test_compile_sql_without_a_table_hints_at_the_option():
    result = invoke("compile", "--sql", "set_answer(Player)")
    assert_one_line_error(result, hint=True)
    assert "--table" in result.stderr


def test_compile_sql_when_sql_support_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyql.sql", types.ModuleType("pyql.sql"))
    result = invoke("compile", "--sql", "--table", "t", "set_answer(Player)")
    assert "SQL support is not installed" in assert_one_line_error(result, hint=True)


def test_compile_sql_when_sql_support_fails_to_import(monkeypatch):
    """A broken import is said with its reason, not taken for a missing feature."""
    monkeypatch.setitem(sys.modules, "pyql.sql", None)
    result = invoke("compile", "--sql", "--table", "t", "set_answer(Player)")
    line = assert_one_line_error(result, hint=True)
    assert "SQL support cannot be loaded: " in line and "pyql.sql" in line


def test_compile_sql_unknown_dialect_is_a_usage_error():
    result = invoke(
        "compile", "--sql", "--dialect", "nosuchsql", "--table", "t", "set_answer(Player)"
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output


# -- compile errors -------------------------------------------------------------------------


def test_compile_parse_error_has_line_and_col():
    result = invoke("compile", "add_fact(m.0x, a.b, ?y)\nset_answer(?y")
    line = assert_one_line_error(result)
    assert "(line 2, col 11)" in line
    assert "^" in result.stderr  # the caret under the position


def test_compile_parse_error_names_the_file(tmp_path):
    path = tmp_path / "bad.pyql"
    path.write_text("add_fact(m.0x, a.b, ?y)\nadd_fact ?y\n")
    line = assert_one_line_error(invoke("compile", str(path)))
    assert line.startswith(f"error: {path}: ") and "line 2" in line


@pytest.mark.parametrize(
    ("args", "needle", "hint"),
    [
        (["frob(?x)"], "unknown function 'frob'", False),
        (["add_fact(?x)"], "takes 3 arguments", False),
        (["set_answer(?x)"], "call 1 set_answer(?x)", None),
        (["add_fact(Titanic, ex:release_year, ?y)", "-p", "generic"], "ex:release_year", True),
        (
            ["add_fact(Titanic, <http://e/r>, ?y)", "-p", "generic"],
            "unknown entity 'Titanic'",
            True,
        ),
        (["get_relation(m.0x)", "-p", "freebase"], "builds no query", True),
        (["missing-program.pyql"], "no such program file", True),
        (["@missing-program.pyql"], "not found", False),
    ],
    ids=[
        "unknown-function",
        "arity",
        "unknown-variable",
        "unknown-prefix",
        "unknown-entity",
        "no-query",
        "missing-file",
        "missing-at-file",
    ],
)
def test_compile_errors_are_one_line(args, needle, hint):
    line = assert_one_line_error(invoke("compile", *args), hint=hint)
    assert needle in line


def test_compile_empty_program():
    line = assert_one_line_error(invoke("compile", "-", input="# only a comment\n"), hint=True)
    assert "has no calls" in line


def test_compile_unknown_prefix_hint_names_the_prefix():
    result = invoke("compile", "-p", "generic", "add_fact(?x, ex:release_year, ?y)")
    assert_one_line_error(result, hint=True)
    assert "--prefix ex=" in result.stderr


def test_compile_bad_entities_file(tmp_path):
    path = tmp_path / "entities.json"
    path.write_text("[1, 2]")
    assert "JSON object" in assert_one_line_error(
        invoke("compile", "--entities", str(path), "add_fact(m.0x, a.b, ?y)")
    )
    path.write_text("{oops")
    assert "not JSON" in assert_one_line_error(
        invoke("compile", "--entities", str(path), "add_fact(m.0x, a.b, ?y)")
    )


@pytest.mark.parametrize(
    "args",
    [
        ["-p", "nosuchprofile", "add_fact(m.0x, a.b, ?y)"],
        ["-e", "no-equals-sign", "add_fact(m.0x, a.b, ?y)"],
        ["--prefix", "ex", "add_fact(m.0x, a.b, ?y)"],
        ["--extremum", "first", "add_fact(m.0x, a.b, ?y)"],
        ["--no-such-option", "add_fact(m.0x, a.b, ?y)"],
        [],
    ],
    ids=["profile", "entity", "prefix", "extremum", "option", "no-program"],
)
def test_compile_usage_errors_exit_2(args):
    result = invoke("compile", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


# -- run ------------------------------------------------------------------------------------

TWO_HOPS = (
    "get_relation(Leonardo DiCaprio)\n"
    "add_fact(?film, ex:starring, Leonardo DiCaprio)\n"
    "add_fact(?film, ex:directed_by, ?director)\n"
    "set_answer(?director)\n"
    "execute()\n"
)


def test_run_json_on_the_movie_kb():
    result = invoke("run", "--kb", movies(), "--entities", str(ENTITIES), "--json", TWO_HOPS)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True
    assert data["profile"] == "generic"
    assert [s["action"] for s in data["steps"]] == TWO_HOPS.strip().splitlines()
    assert all(s["status"] == "ok" and s["ok"] and not s["implicit"] for s in data["steps"])
    assert "ex:starring" in data["steps"][0]["text"]
    assert set(data["answers"]) == {
        "ex:Christopher_Nolan",
        "ex:Martin_Scorsese",
        "ex:James_Cameron",
    }
    assert set(data["labels"]) == {"Christopher Nolan", "Martin Scorsese", "James Cameron"}
    assert "?film ex:starring ex:Leonardo_DiCaprio ." in data["sparql"]  # prefixes from the file
    assert is_valid_sparql(data["sparql"])
    assert data["program"] == TWO_HOPS.strip()


def test_run_prints_steps_sparql_and_answers():
    result = invoke(
        "run",
        "--kb",
        movies(),
        "-e",
        "Christopher Nolan=ex:Christopher_Nolan",
        "add_fact(?film, ex:directed_by, Christopher Nolan)\n"
        "add_fact(?film, ex:cast, ?role)\nadd_fact(?role, ex:actor, ?actor)\n"
        "add_count(?actor, ?n)",
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert " 1  add_fact(?film, ex:directed_by, Christopher Nolan)" in out
    assert "execute() (added: the program has no execute())" in out  # implicit execute
    assert "SELECT (COUNT(DISTINCT ?actor) AS ?n)" in out
    assert "Answers: 6" in out
    assert result.stderr == ""


def test_run_python_style_program_on_an_ntriples_file(tmp_path):
    kb = tmp_path / "kb.nt"
    kb.write_text(
        "<http://e.org/a> <http://e.org/r> <http://e.org/b> .\n"
        '<http://e.org/b> <http://www.w3.org/2000/01/rdf-schema#label> "Bee" .\n'
    )
    result = invoke(
        "run",
        "--kb",
        str(kb),
        "--prefix",
        "e=http://e.org/",
        "--json",
        "a=PyQL()\na.add_fact('e:a', 'e:r', 'x0')\na.set_answer('x0')\na.execute()",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["answers"] == ["e:b"] and data["labels"] == ["Bee"]


def test_run_on_a_store_directory(tmp_path):
    store = ox.Store(str(tmp_path / "store"))
    store.add(
        ox.Quad(
            ox.NamedNode("http://e.org/a"),
            ox.NamedNode("http://e.org/r"),
            ox.Literal("7", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#integer")),
        )
    )
    store.flush()
    del store
    result = invoke(
        "run",
        "--kb",
        str(tmp_path / "store"),
        "--prefix",
        "e=http://e.org/",
        "--json",
        "add_fact(e:a, e:r, ?v)",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["answers"] == ["7"]


def test_run_stops_at_the_first_failed_step():
    program = (
        "add_fact(?film, ex:directed_by, Christopher Nolan)\n"
        "set_answer(?nope)\n"
        "set_answer(?film)\nexecute()"
    )
    result = invoke("run", "--kb", movies(), "--entities", str(ENTITIES), "--json", program)
    line = assert_one_line_error(result, hint=True)
    assert line.startswith("error: step 2 failed: set_answer(?nope): ")
    data = json.loads(result.stdout)  # stdout stays valid JSON
    assert data["ok"] is False
    assert [s["status"] for s in data["steps"]] == ["ok", "error"]
    assert data["answers"] is None


def test_run_keep_going_runs_every_step():
    program = (
        "add_fact(?film, ex:directed_by, Christopher Nolan)\n"
        "set_answer(?nope)\n"
        "set_answer(?film)\nexecute()"
    )
    result = invoke(
        "run", "--kb", movies(), "--entities", str(ENTITIES), "--json", "--keep-going", program
    )
    assert_one_line_error(result)
    data = json.loads(result.stdout)
    assert [s["status"] for s in data["steps"]] == ["ok", "error", "ok", "ok"]
    assert len(data["answers"]) == 4  # the failed step was rolled back


def test_run_unknown_entity_hints_at_entity_option():
    # "Titanic" itself is a label of the KB, linked by pyql run; a misspelling is not
    result = invoke("run", "--kb", movies(), "add_fact(Titanik, ex:release_year, ?y)")
    line = assert_one_line_error(result, hint=True)
    assert "unknown entity 'Titanik'" in line
    assert "--entity" in result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--kb", "no/such/kb.ttl", "add_fact(?x, ex:r, ?y)"], "KB not found"),
        (["--kb", "PLACEHOLDER", "add_fact(?x ex:r ?y)"], "line 1"),
        (["--kb", "PLACEHOLDER", "nope(?x)"], "unknown function 'nope'"),
    ],
    ids=["kb-not-found", "parse-error", "unknown-function"],
)
def test_run_errors_are_one_line(args, needle):
    args = [movies() if a == "PLACEHOLDER" else a for a in args]
    assert needle in assert_one_line_error(invoke("run", *args))


def test_run_malformed_turtle(tmp_path):
    kb = tmp_path / "broken.ttl"
    kb.write_text("@prefix ex: <http://e.org/> .\nex:a ex:b .\n")
    line = assert_one_line_error(invoke("run", "--kb", str(kb), "add_fact(?x, ex:b, ?y)"))
    assert line.startswith(f"error: cannot load {kb}")


def test_run_unknown_rdf_format(tmp_path):
    kb = tmp_path / "kb.csv"
    kb.write_text("a,b\n")
    assert "RDF format" in assert_one_line_error(
        invoke("run", "--kb", str(kb), "add_fact(?x, <http://e/r>, ?y)")
    )


def test_run_unreachable_endpoint_is_one_error():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = invoke(
        "run",
        "--kb",
        f"http://127.0.0.1:{port}/sparql",
        "--timeout",
        "5",
        "add_fact(?x, <http://e.org/r>, ?y)",
    )
    line = assert_one_line_error(result)
    assert line.startswith("error: step 1 failed: ")


@pytest.mark.parametrize(
    "args",
    [
        ["add_fact(?x, ex:r, ?y)"],  # neither --kb nor --db
        ["--kb", "x.ttl", "--db", "sqlite://", "add_fact(?x, ex:r, ?y)"],
        ["--kb", "x.ttl", "--max-values", "0", "add_fact(?x, ex:r, ?y)"],
    ],
    ids=["no-source", "both-sources", "max-values"],
)
def test_run_usage_errors_exit_2(args):
    result = invoke("run", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_run_db_without_sql_sessions(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyql.sql", types.ModuleType("pyql.sql"))
    result = invoke("run", "--db", "sqlite://", "set_answer(Player)")
    assert "SQL support is not installed" in assert_one_line_error(result, hint=True)


# -- root, extensions, entry points ---------------------------------------------------------


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"pyql {__version__}"


def test_help_lists_the_commands():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("demo", "compile", "run"):
        assert command in result.stdout


def run_python(*args: str) -> subprocess.CompletedProcess[str]:
    """``python *args`` in a subprocess, from the repository root."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO)


def test_python_m_pyql_demo_subprocess():
    proc = run_python("-m", "pyql", "demo")
    assert proc.returncode == 0, proc.stderr
    assert "Answer: Interstellar" in proc.stdout
    assert proc.stderr == ""


def test_python_m_pyql_error_subprocess():
    proc = run_python("-m", "pyql", "compile", "frob(?x)")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: unknown function 'frob'")
    assert "Traceback" not in proc.stderr


def test_quickstart_example_runs():
    proc = run_python(str(REPO / "examples" / "quickstart.py"))
    assert proc.returncode == 0, proc.stderr
    assert "SELECT DISTINCT ?cyclone" in proc.stdout
    assert "answers: ['ex:Interstellar']" in proc.stdout
