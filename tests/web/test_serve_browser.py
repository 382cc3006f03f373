"""``pyql serve`` in a real browser: the system Chromium driven by Playwright (its Python driver,
launched with ``executable_path``: no browser is downloaded), against the real app served by
uvicorn on 127.0.0.1, the bundled movie KB and real run directories.

Skipped only when no Chromium binary is found (Debian: ``apt-get install -y chromium``; or set
``PYQL_CHROMIUM``).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pyql.agent.evaluation.rundir import RunDir
from pyql.apps.web.workspace import Workspace
from tests.support.chromium import SKIP_REASON, chromium
from tests.web.support import (
    FIXTURE_RUN,
    big_run,
    copy_run,
    movies_workspace,
    results,
    serve,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)

#: the demo's second tour: seven calls, one answer
NOLAN = "Which film by Christopher Nolan released before 2015 is the longest?"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert errors == [], f"script errors on the page: {errors}"


@pytest.fixture(scope="module")
def movies() -> Workspace:
    return movies_workspace()


def _steps(page: Page) -> list[dict[str, object]]:
    return page.eval_on_selector_all(
        "#steps > li", """items => items.map(li => ({n: Number(li.dataset.n),
            server: Number(li.dataset.serverMs), shown: Number(li.dataset.shownMs),
            hint: li.dataset.hint || null, call: li.querySelector('.call .value')?.textContent,
            text: li.textContent}))""")


# -- Ask ------------------------------------------------------------------------------------------
def test_one_click_answers_the_first_demo_question(page: Page, movies: Workspace,
                                                    tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        page.goto(served.url + "/")
        page.click("#ask-button")
        page.wait_for_selector("#live[data-state=done]")
        answers = page.locator("#answers li").all_inner_texts()
    assert sorted(answers) == ["ex:Christopher_Nolan", "ex:James_Cameron", "ex:Martin_Scorsese"]


def test_a_gold_run_streams_its_steps_in_order_and_ends_with_the_answer(
        page: Page, movies: Workspace, tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        page.goto(served.url + "/")
        page.select_option("#example", "1")
        assert page.input_value("#question") == NOLAN
        page.click("#ask-button")
        page.wait_for_selector("#live[data-state=done]")
        steps = _steps(page)
        calls = [s["call"] for s in steps]
        assert [s["n"] for s in steps] == list(range(1, 8))
        assert calls[0] == "add_fact(?film, ex:directed_by, Christopher Nolan)"
        assert calls[-1] == "execute()"
        # each step on screen within 200 ms of the Session finishing it (the Recorder's
        # callback stamps server_ms; the page stamps shown_ms when it has drawn the step)
        # (the same wall clock on both sides; a few ms of slack below 0 for the browser's clock,
        # kept from its monotonic one, drifting from the system's)
        lags = [s["shown"] - s["server"] for s in steps]
        assert all(-5 < lag < 200 for lag in lags), lags
        assert page.inner_text("#answers").strip() == "ex:Interstellar"
        assert "add_max(?minutes)" in page.inner_text("#program-so-far")
        assert "MAX(?minutes)" in page.inner_text("#query-so-far")
        # the permalink is the saved run directory's question page
        page.click("#permalink")
        page.wait_for_selector("#question-steps")
        assert page.inner_text("#question-text") == NOLAN
        assert page.locator("#question-steps > li").count() == 7
    [run_dir] = list((tmp_path / "out").iterdir())
    [record] = results(run_dir)
    assert record["predicted"] == ["ex:Interstellar"] and record["status"] == "ok"
    assert list(RunDir(run_dir).trajectories()) == [record["id"]]


def test_a_hint_appears_with_its_code_and_its_guideline(
        page: Page, movies: Workspace, tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        page.goto(served.url + "/")
        page.fill("#question", "Which films did Christopher Nolan direct?")
        page.fill("#entities", "Christopher Nolan=ex:Christopher_Nolan")
        page.fill("#program", "add_fact(?film, ex:directed_by)\n"
                  "add_fact(?film, ex:directed_by, Christopher Nolan)\nset_answer(?film)")
        page.click("#ask-button")
        page.wait_for_selector("#live[data-state=done]")
        hinted = page.locator("#steps > li[data-hint]").first
        assert hinted.get_attribute("data-hint") == "PY104"
        assert hinted.locator(".hint-code").inner_text() == "PY104"
        assert "rolled back" in hinted.inner_text()
        # the wrong call never made it into the program
        assert "add_fact(?film, ex:directed_by)\n" not in page.inner_text("#program-so-far") + "\n"
        link = hinted.locator(".hint-code").get_attribute("href")
        assert link == "/guidelines/PY104"
        page.goto(served.url + link)
        assert page.inner_text("h1").startswith("PY104")


def test_cancel_stops_the_run(page: Page, movies: Workspace, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYQL_EVAL_TEST_DELAY", "0.4")  # the gold stand-in: 0.4 s a reply
    with serve(movies, tmp_path / "out") as served:
        page.goto(served.url + "/")
        page.select_option("#example", "1")
        page.click("#ask-button")
        page.wait_for_selector("#steps > li[data-n='1']")
        page.click("#cancel-button")
        page.wait_for_selector("#live[data-state=cancelled]")
        shown = len(_steps(page))
        assert 1 <= shown < 7
        time.sleep(1.0)  # the run thread is done: no step comes after the cancel
        assert len(_steps(page)) == shown
        [run] = served.app.state.asks.runs.values()
        assert run.state == "cancelled" and len(run.steps) == shown
    [run_dir] = list((tmp_path / "out").iterdir())
    [record] = results(run_dir)
    assert record["stop_reason"] == "cancelled" and record["finished"] is False


def test_a_closed_tab_cancels_its_run(browser: Browser, movies: Workspace, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYQL_EVAL_TEST_DELAY", "0.4")
    with serve(movies, tmp_path / "out") as served:
        context = browser.new_context()
        tab = context.new_page()
        tab.goto(served.url + "/")
        tab.select_option("#example", "1")
        tab.click("#ask-button")
        tab.wait_for_selector("#steps > li[data-n='1']")
        [run] = served.app.state.asks.runs.values()
        context.close()  # the tab goes away mid-run
        deadline = time.monotonic() + 10
        while not run.finished and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run.state == "cancelled" and len(run.steps) < 7


def test_a_script_in_a_kb_label_renders_as_text(page: Page, tmp_path: Path) -> None:
    evil = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    kb = tmp_path / "evil.ttl"
    kb.write_text(
        "@prefix ex: <http://example.org/> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:Nolan rdfs:label "Nolan" .\n'
        f"ex:Nolan ex:directed ex:Evil .\nex:Evil rdfs:label {json.dumps(evil)} .\n",
        encoding="utf-8")
    with serve(Workspace(kb=str(kb)), tmp_path / "out") as served:
        page.goto(served.url + "/")
        page.fill("#question", "What did Nolan direct?")
        page.fill("#entities", "Nolan=ex:Nolan")
        page.fill("#program", "add_fact(Nolan, ex:directed, ?film)\nset_answer(?film)")
        page.click("#ask-button")
        page.wait_for_selector("#live[data-state=done]")
        first = page.locator("#steps > li").first
        assert "<script>window.__pwned = 1</script>" in first.inner_text()
        assert page.locator("#steps script, #steps img").count() == 0
        # the Playground shows the same label as text too
        page.goto(served.url + "/playground")
        page.fill("#pad-entities", "Nolan=ex:Nolan")
        page.click("#pad-new")
        page.wait_for_selector("body[data-pad]")
        page.fill("#pad-input", "add_fact(Nolan, ex:directed, ?film)")
        page.click("#pad-run")
        page.wait_for_selector("#pad-log > li")
        assert "<img src=x" in page.inner_text("#pad-log")
        assert page.locator("#pad-log script, #pad-log img").count() == 0
        assert page.evaluate("window.__pwned === undefined")


# -- Runs -----------------------------------------------------------------------------------------
def test_the_runs_page_filters_by_outcome_hint_and_hops(
        page: Page, movies: Workspace, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    copy_run(runs / "small")
    with serve(movies, tmp_path / "out", [runs]) as served:
        page.goto(served.url + "/runs")
        page.click("#runs-table a:text('small')")
        page.wait_for_selector("body[data-ready='1']")
        shown = page.locator("#q-shown")
        assert shown.get_attribute("data-total") == "12"
        page.select_option("#f-status", "incorrect")
        assert shown.get_attribute("data-shown") == "3"
        page.select_option("#f-status", "")
        page.select_option("#f-hint", "KB201")
        visible = page.eval_on_selector_all(
            "#q-body tr:not([hidden])", "rows => rows.map(r => r.dataset.id)")
        assert sorted(visible) == ["1hop-dev-5", "3hop-dev-1"]
        page.select_option("#f-hops", "3")
        assert shown.get_attribute("data-shown") == "1"
        # the question page: gold vs predicted, the query, every step
        page.click("#q-body tr:not([hidden]) a")
        page.wait_for_selector("#question-steps")
        assert page.locator("#question-steps > li[data-hint='KB201']").count() == 11
        assert page.locator("#gold-answers li").count() >= 1


def test_a_thousand_question_run_opens_and_filters_in_under_a_second(
        page: Page, movies: Workspace, tmp_path: Path) -> None:
    big_run(tmp_path / "runs" / "big", 1000)
    with serve(movies, tmp_path / "out", [tmp_path / "runs"]) as served:
        start = time.perf_counter()
        page.goto(served.url + "/run?key=1/big")
        page.wait_for_selector("body[data-ready='1']")
        opened = time.perf_counter() - start
        assert page.locator("#q-shown").get_attribute("data-total") == "1000"
        start = time.perf_counter()
        page.select_option("#f-status", "correct")
        page.select_option("#f-hint", "PY104")
        count = page.locator("#q-shown").get_attribute("data-shown")
        filtered = time.perf_counter() - start
    # 1hop-dev-7 is the one correct PY104 question among the 12 records cycled
    assert count == str(len(range(1, 1000, 12)))
    assert opened < 1.0, f"opened in {opened:.3f}s"
    assert filtered < 1.0, f"filtered in {filtered:.3f}s"


def test_a_running_run_is_followed(page: Page, movies: Workspace, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "live"
    run_dir.mkdir(parents=True)
    shutil.copy(FIXTURE_RUN / "config.json", run_dir / "config.json")
    lines = (FIXTURE_RUN / "results.jsonl").read_text(encoding="utf-8").splitlines(True)
    (run_dir / "results.jsonl").write_text("".join(lines[:4]), encoding="utf-8")
    with serve(movies, tmp_path / "out", [tmp_path / "runs"]) as served, \
            RunDir(run_dir).lock():  # as pyql eval holds it while it writes
        page.goto(served.url + "/run?key=1/live")
        page.wait_for_selector("body[data-following='1']")
        assert page.locator("#q-shown").get_attribute("data-total") == "4"
        with (run_dir / "results.jsonl").open("a", encoding="utf-8") as handle:
            handle.write("".join(lines[4:9]))
        page.wait_for_selector("#q-shown[data-total='9']")
    assert page.locator("#q-body tr").count() == 9


def test_the_compare_page_shows_a_flipped_question_and_where_it_diverged(
        page: Page, movies: Workspace, tmp_path: Path) -> None:
    a = copy_run(tmp_path / "runs" / "a")
    b = copy_run(tmp_path / "runs" / "b")
    # in B, 1hop-dev-0 went wrong: another relation at step 2, a wrong answer
    rows = results(b)
    for row in rows:
        if row["id"] == "1hop-dev-0":
            row["metrics"] = {k: 0.0 for k in row["metrics"]}
            row["predicted"] = ["Whale Rider"]
    (b / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    lines = (b / "trajectories.jsonl").read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    current = None
    for record in records:
        if record["record"] == "question":
            current = record["meta"]["id"]
        elif record["record"] == "step" and current == "1hop-dev-0" and record["n"] == 2:
            record["action"] = "add_fact(?x1, directed_by, Temuera Morrison)"
    (b / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    with serve(movies, tmp_path / "out", [tmp_path / "runs"]) as served:
        page.goto(served.url + "/runs")
        page.select_option("#compare-form select[name=a]", "1/a")
        page.select_option("#compare-form select[name=b]", "1/b")
        page.click("#compare-form button")
        page.wait_for_selector("#compare-table")
        visible = page.locator("#compare-table tr.pair:not([hidden])")
        assert visible.count() == 1
        assert visible.get_attribute("data-id") == "1hop-dev-0"
        assert "worse" in (visible.get_attribute("class") or "")
        assert visible.locator(".divergence").inner_text() == "step 2"
        assert "directed_by" in visible.inner_text()
        headline = page.locator("#compare-metrics tr", has_text="Hit@1 (any answer)")
        assert headline.locator("td").all_inner_texts()[1:] == ["0.67", "0.67"]
        page.uncheck("#only-flipped")
        assert page.locator("#compare-table tr.pair:not([hidden])").count() == 12
    assert a.is_dir()


# -- Playground -----------------------------------------------------------------------------------
def test_the_playground_completes_runs_and_undoes(page: Page, movies: Workspace,
                                                  tmp_path: Path) -> None:
    with serve(movies, tmp_path / "out") as served:
        page.goto(served.url + "/playground")
        page.fill("#pad-entities", "Christopher Nolan=ex:Christopher_Nolan")
        page.click("#pad-new")
        page.wait_for_selector("body[data-pad]")
        box = page.locator("#pad-input")
        box.type("add_f")
        box.press("Tab")  # the function
        assert box.input_value() == "add_fact("
        box.type("?film, ex:dir")
        box.press("Tab")  # a relation at the linked entity
        assert box.input_value() == "add_fact(?film, ex:directed_by"
        box.type(", Christopher Nolan)")
        page.click("#pad-run")
        page.wait_for_selector("#pad-log > li[data-status=ok]")
        assert "ex:directed_by ex:Christopher_Nolan" in page.inner_text("#pad-query")
        box.fill("set_answer(?film)")
        page.click("#pad-run")
        page.wait_for_selector("#pad-log > li:nth-child(2)")
        assert page.inner_text("#pad-program").count("\n") == 1
        page.click("#pad-undo")
        page.wait_for_selector("#pad-log > li.undo")
        assert page.inner_text("#pad-program").strip() == (
            "add_fact(?film, ex:directed_by, Christopher Nolan)")
