"""``pyql serve`` over real HTTP (uvicorn on 127.0.0.1, no browser): the safety rules, typed
errors, the Ask runs' isolation and their run directories, the Playground and the run keys."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pyql.agent.evaluation.report import write_report
from pyql.apps.web.cli import BindError, check_bind
from pyql.apps.web.workspace import Workspace, WorkspaceError, parse_entities
from pyql.demo import movies_path
from tests.web.support import copy_run, movies_workspace, post, request, results, serve

NOLAN_PROGRAM = ("add_fact(?film, ex:directed_by, Christopher Nolan)\nset_answer(?film)\n"
                 "execute()")
NOLAN = {"question": "Which films did Christopher Nolan direct?", "llm": "gold",
         "entities": "Christopher Nolan=ex:Christopher_Nolan", "program": NOLAN_PROGRAM}


@pytest.fixture(scope="module")
def movies() -> Workspace:
    return movies_workspace()


def sse(url: str) -> Iterator[dict[str, Any]]:
    """The events of a server-sent event stream, as they arrive."""
    with urllib.request.urlopen(url, timeout=30) as response:
        for raw in response:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data:"):
                yield json.loads(line[5:].strip())


# -- safety ---------------------------------------------------------------------------------------
def test_a_state_changing_request_needs_the_origin_and_the_csrf_token(
        movies: Workspace, tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        url = served.url + "/api/ask"
        cases = {
            "no origin": {"X-CSRF-Token": served.csrf()},
            "another origin": {"Origin": "http://evil.example", "X-CSRF-Token": served.csrf()},
            "no token": {"Origin": served.url},
            "a wrong token": {"Origin": served.url, "X-CSRF-Token": "guess"},
        }
        for why, headers in cases.items():
            status, body, _ = request(url, method="POST", body=NOLAN, headers=headers)
            assert status == 403, why
            assert body["error"]["type"] == "CsrfError", why
        assert served.app.state.asks.runs == {}  # nothing was started
        status, body, headers = post(served, "/api/ask", NOLAN)
        assert status == 200 and body["permalink"].startswith("/question?key=0/ask-")
        assert "script-src 'self'" in headers["content-security-policy"]


def test_only_local_host_headers_are_answered(movies: Workspace, tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        status, _, _ = request(served.url + "/runs", headers={"Host": "evil.example"})
        assert status == 400  # DNS rebinding: another name for 127.0.0.1 is refused
        assert request(served.url + "/runs")[0] == 200


def test_a_server_with_a_token_answers_only_requests_that_carry_it(
        movies: Workspace, tmp_path: Path) -> None:
    token = "t0ken-of-the-test-0123456789"
    with serve(movies, tmp_path / "out", token=token, allowed_hosts=None) as served:
        status, body, _ = request(served.url + "/runs")
        assert status == 401 and body["error"]["type"] == "TokenRequired"
        status, _, headers = request(served.url + f"/runs?token={token}")
        assert status == 200 and "pyql_serve_token=" in headers["set-cookie"]
        status, _, _ = request(served.url + "/runs",
                               headers={"Cookie": f"pyql_serve_token={token}"})
        assert status == 200
        assert request(served.url + "/runs", headers={"Authorization": f"Bearer {token}"})[0] \
            == 200


def test_a_non_loopback_bind_needs_allow_remote_and_a_token() -> None:
    assert check_bind("127.0.0.1", False, None) and check_bind("localhost", False, None)
    with pytest.raises(BindError) as caught:
        check_bind("0.0.0.0", False, None)
    assert (caught.value.missing, caught.value.code) == ("allow_remote", 2)
    with pytest.raises(BindError) as caught:
        check_bind("0.0.0.0", True, "short")
    assert caught.value.missing == "token"
    assert check_bind("0.0.0.0", True, "a-long-enough-token-123") is False
    from pyql.cli import app

    result = CliRunner().invoke(app, ["serve", "--kb", str(movies_path()), "--host", "0.0.0.0"])
    assert result.exit_code == 2


def test_run_keys_cannot_leave_the_served_folders(movies: Workspace, tmp_path: Path) -> None:
    copy_run(tmp_path / "runs" / "small")
    (tmp_path / "secret").mkdir()
    copy_run(tmp_path / "secret" / "run")
    with serve(movies, tmp_path / "out", [tmp_path / "runs"]) as served:
        assert request(served.url + "/run?key=1/small")[0] == 200
        for key in ("1/../secret/run", "1/..%2Fsecret%2Frun", "7/small", "x/small", ""):
            status, text, _ = request(served.url + f"/run?key={key}")
            assert status == 404, key
        status, body, _ = request(served.url + "/api/run/rows?key=1/../secret/run&after=0")
        assert status == 404 and body["error"]["type"] == "RunNotFound"


# -- asking ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("change", "kind", "field"), [
    ({"question": " "}, "WorkspaceError", "question"),
    ({"strategy": "nope"}, "UnknownStrategyError", None),
    ({"program": ""}, "LLMSpecError", "program"),
    ({"llm": "gold:accuracy=2"}, "LLMSpecError", "accuracy"),
    ({"options": {"max_edits": "x"}, "strategy": "readi"}, "StrategyOptionError", "options"),
    ({"entities": "Christopher Nolan"}, "WorkspaceError", "entities"),
    ({"max_steps": "0"}, "WorkspaceError", "max_steps"),
])
def test_a_request_that_cannot_run_is_a_typed_error(
        movies: Workspace, tmp_path: Path, change: dict[str, Any], kind: str,
        field: str | None) -> None:
    with serve(movies, tmp_path / "out") as served:
        status, body, _ = post(served, "/api/ask", {**NOLAN, **change})
    assert status == 400
    assert body["error"]["type"] == kind
    assert body["error"]["field"] == field


def test_an_ask_run_is_a_run_directory_the_report_reads(
        movies: Workspace, tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        _, created, _ = post(served, "/api/ask", NOLAN)
        events = list(sse(served.url + created["events"]))
        assert [e["type"] for e in events] == ["start", "ready", "step", "step", "step", "done"]
        assert [e["seq"] for e in events] == list(range(6))
        done = events[-1]
        assert sorted(done["answers"]) == ["ex:Inception", "ex:Interstellar", "ex:Oppenheimer",
                                           "ex:The_Dark_Knight"]
        status, page, _ = request(served.url + created["permalink"])
        assert status == 200 and "Which films did Christopher Nolan direct?" in page
        assert 'id="gold-program"' in page  # the program the stand-in was given
    run_dir = tmp_path / "out" / done["run_dir"]
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["dataset"], config["llm"], config["strategy"]) == ("ask", "gold", "queryagent")
    [record] = results(run_dir)
    assert record["id"] == done["question_id"] and record["status"] == "ok"
    assert "ex:Interstellar" in write_report(run_dir).read_text(encoding="utf-8")


def test_a_hung_run_does_not_block_another(movies: Workspace, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(movies, tmp_path / "out") as served:
        monkeypatch.setenv("PYQL_EVAL_TEST_DELAY", "60")  # its stand-in: a minute a reply
        _, slow, _ = post(served, "/api/ask", NOLAN)
        slow_events = sse(served.url + slow["events"])
        assert next(slow_events)["type"] == "start"
        assert next(slow_events)["type"] == "ready"  # its model is made: it is now waiting
        monkeypatch.setenv("PYQL_EVAL_TEST_DELAY", "0")
        start = time.monotonic()
        _, fast, _ = post(served, "/api/ask", NOLAN)
        kinds = [e["type"] for e in sse(served.url + fast["events"])]
        took = time.monotonic() - start
        assert kinds[-1] == "done" and took < 10, (kinds, took)
        assert request(served.url + "/runs")[0] == 200
        runs = served.app.state.asks.runs
        assert runs[slow["id"]].state == "running" and runs[fast["id"]].state == "done"
        assert post(served, slow["cancel"])[1]["cancelled"] is True


def test_a_closed_event_stream_cancels_its_run(movies: Workspace, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYQL_EVAL_TEST_DELAY", "0.3")
    with serve(movies, tmp_path / "out") as served:
        _, created, _ = post(served, "/api/ask", NOLAN)
        response = urllib.request.urlopen(served.url + created["events"], timeout=30)
        for raw in response:  # read until the first step, then close the tab
            if raw.startswith(b"data:") and json.loads(raw[5:])["type"] == "step":
                break
        response.close()
        run = served.app.state.asks.runs[created["id"]]
        deadline = time.monotonic() + 10
        while not run.finished and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run.state == "cancelled"
        assert len(run.steps) < 3


# -- the playground -------------------------------------------------------------------------------
def test_the_playground_runs_calls_completes_and_undoes(
        movies: Workspace, tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        status, pad, _ = post(served, "/api/playground",
                              {"entities": "Christopher Nolan=ex:Christopher_Nolan"})
        assert status == 200 and pad["program"] == []
        base = f"/api/playground/{pad['id']}"
        _, known, _ = request(served.url + base + "/complete")
        assert "add_fact" in {f["name"] for f in known["functions"]}
        assert "ex:directed_by" in known["relations"]  # at the linked entity, no step taken
        _, state, _ = post(served, base + "/run",
                           {"action": "add_fact(?film, ex:directed_by, Christopher Nolan)"})
        assert state["observation"]["ok"] and "Interstellar" in state["observation"]["text"]
        _, state, _ = post(served, base + "/run", {"action": "add_fact(?film, ex:runtime)"})
        assert state["observation"]["hint"]["code"] == "PY104"
        assert len(state["program"]) == 1  # the hinted call was rolled back
        _, known, _ = request(served.url + base + "/complete")
        assert "?film" in known["variables"]
        _, state, _ = post(served, base + "/run", {"action": "set_answer(?film)"})
        assert "SELECT DISTINCT ?film" in state["query"]
        _, state, _ = post(served, base + "/undo")
        assert state["undone"] == "set_answer(?film)"
        assert state["program"] == ["add_fact(?film, ex:directed_by, Christopher Nolan)"]
        assert request(served.url + "/api/playground/nope/complete")[0] == 404


def test_the_playground_completes_the_columns_of_a_table(tmp_path: Path) -> None:
    from importlib import resources

    db = str(resources.files("pyql").joinpath("data/demo.sqlite"))
    workspace = Workspace(db=db, table="players")
    assert workspace.examples and workspace.tables()
    with serve(workspace, tmp_path / "out") as served:
        _, pad, _ = post(served, "/api/playground", {"table": "players"})
        _, known, _ = request(served.url + f"/api/playground/{pad['id']}/complete")
        assert {"name", "nationality"} <= set(known["columns"])


def test_entities_and_examples() -> None:
    assert parse_entities("A=ex:A\n\nB = ex:B") == {"A": "ex:A", "B": "ex:B"}
    with pytest.raises(WorkspaceError) as caught:
        parse_entities("just a name")
    assert caught.value.field == "entities"
    examples = movies_workspace().examples
    assert len(examples) == 3 and all(e.program.endswith("execute()") for e in examples)


def test_the_server_keeps_serving_while_a_run_streams(movies: Workspace, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYQL_EVAL_TEST_DELAY", "0.2")
    with serve(movies, tmp_path / "out") as served:
        _, created, _ = post(served, "/api/ask", NOLAN)
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.extend(
            e["type"] for e in sse(served.url + created["events"])))
        reader.start()
        for _ in range(5):
            assert request(served.url + "/playground")[0] == 200
        reader.join(30)
    assert got[-1] == "done"


def test_a_run_directory_is_opened_by_its_path(movies: Workspace, tmp_path: Path) -> None:
    copy_run(tmp_path / "elsewhere" / "small")
    (tmp_path / "empty").mkdir()
    with serve(movies, tmp_path / "out") as served:
        status, opened, _ = post(served, "/api/runs/open", {"path": str(tmp_path / "elsewhere")})
        assert status == 200 and opened["key"] == "1/small"
        assert request(served.url + opened["url"])[0] == 200
        status, body, _ = post(served, "/api/runs/open", {"path": str(tmp_path / "empty")})
        assert status == 400
        assert (body["error"]["type"], body["error"]["field"]) == ("RunNotFound", "path")
        status, _, _ = request(served.url + "/api/runs/open", method="POST",
                               body={"path": str(tmp_path / "elsewhere")},
                               headers={"Origin": "http://evil.example"})
        assert status == 403


def test_the_strategy_its_options_and_the_mode_reach_the_run(
        movies: Workspace, tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        _, readi, _ = post(served, "/api/ask", {**NOLAN, "strategy": "readi",
                                                "options": {"max_edits": "1"}})
        readi_end = list(sse(served.url + readi["events"]))[-1]
        _, tools, _ = post(served, "/api/ask", {**NOLAN, "mode": "tools"})
        tools_events = list(sse(served.url + tools["events"]))
    assert readi_end["type"] == "done"
    config = json.loads((tmp_path / "out" / readi_end["run_dir"] / "config.json").read_text())
    assert (config["strategy"], config["options"]) == ("readi", {"max_edits": 1})
    assert tools_events[-1]["type"] == "done" and "ex:Interstellar" in tools_events[-1]["answers"]
    config = json.loads((tmp_path / "out" / tools_events[-1]["run_dir"] / "config.json"
                         ).read_text())
    assert config["mode"] == "tools"


def test_an_ablation_folder_lists_its_two_runs(tmp_path: Path) -> None:
    from pyql.apps.web.runs import RunIndex

    root = tmp_path / "runs"
    for side in ("eraser_on", "eraser_off"):
        copy_run(root / "abl" / side)
    (root / "abl" / "metrics.json").write_text("{}", encoding="utf-8")
    copy_run(root / "plain")
    keys = [ref.key for ref in RunIndex([root]).runs()]
    assert keys == ["0/abl/eraser_off", "0/abl/eraser_on", "0/plain"]
    assert RunIndex([root / "plain"]).runs()[0].key == "0/"


def test_a_sql_question_streams_its_sql(tmp_path: Path) -> None:
    from importlib import resources

    from pyql.demo import get_tour_set

    workspace = Workspace(db=str(resources.files("pyql").joinpath("data/demo.sqlite")))
    tour = get_tour_set("sql").tours[0]
    [example] = [e for e in workspace.examples if e.question == tour.question]
    with serve(workspace, tmp_path / "out") as served:
        _, created, _ = post(served, "/api/ask", {"question": example.question, "llm": "gold",
                                                  "program": example.program,
                                                  "table": example.table or ""})
        events = list(sse(served.url + created["events"]))
    assert events[0]["language"] == "sql"
    steps = [e for e in events if e["type"] == "step"]
    assert steps and all("SELECT" in e["step"]["query"] for e in steps if e["step"]["query"])
    assert steps[-1]["query_html"].startswith('<pre class="code hl">')  # Pygments' SQL
    assert set(events[-1]["answers"]) == set(tour.expected)


def test_the_web_app_sits_at_the_top_of_the_import_graph() -> None:
    from tests.test_import_graph import GRAPH, _layer_violations

    assert {"pyql.apps.web.app", "pyql.apps.web.cli", "pyql.apps.web.asks"} <= set(GRAPH)
    assert "pyql.agent.evaluation.report" in GRAPH["pyql.apps.web.runs"]
    assert not [edge for edge in _layer_violations() if "pyql.apps" in edge[0] + edge[1]]
    assert not [name for name, targets in GRAPH.items()
                if not name.startswith("pyql.apps") and any(t.startswith("pyql.apps")
                                                            for t in targets)]


def test_a_permalink_followed_before_the_run_ends_says_so(
        movies: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYQL_EVAL_TEST_DELAY", "0.5")
    with serve(movies, tmp_path / "out") as served:
        _, created, _ = post(served, "/api/ask", NOLAN)
        events = sse(served.url + created["events"])
        assert next(events)["type"] == "start"
        status, page, _ = request(served.url + created["permalink"])
        assert status == 404 and "<title>Still running" in page
        assert [e["type"] for e in events][-1] == "done"
        assert request(served.url + created["permalink"])[0] == 200
