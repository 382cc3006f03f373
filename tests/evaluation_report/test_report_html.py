"""The HTML report of a run directory: sections, numbers, escaping, big runs, fallbacks, CLI."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.evaluation import report
from pyql.agent.evaluation.records import QuestionResult
from pyql.agent.evaluation.report import (
    REPORT,
    RunDirError,
    is_stand_in,
    question_status,
    write_report,
)
from pyql.agent.evaluation.rundir import RunDir
from pyql.agent.evaluation.runner import recompute_metrics
from tests.evaluation_report.support import (
    FIXTURE,
    Page,
    copy_run,
    edit_config,
    renamed,
    results,
    steps,
    trajectories,
    write_results,
    write_trajectories,
)

SECTIONS = ("summary", "guidelines", "charts", "questions")
TABLES = ("metrics-table", "config-table", "guidelines-by-class", "guidelines-by-code",
          "breakdown-qtype", "breakdown-hops")
CHARTS = ("chart-by-qtype", "chart-by-hops", "chart-steps", "chart-guidelines")
VIEWER = ("q-toolbar", "q-search", "q-group", "q-hints", "q-count", "q-pager", "q-list")


def _render(run_dir: Path, **kwargs: int) -> tuple[str, Page]:
    path = write_report(run_dir, **kwargs)
    text = path.read_text(encoding="utf-8")
    return text, Page(text)


def _question_chunks(text: str) -> dict[str, str]:
    """The HTML of each question of the list, by its result id."""
    chunks = text.split('<details id="q-')[1:]
    out = {}
    for chunk in chunks:
        m = re.search(r'<span class="qid">([^<]*)</span>', chunk)
        assert m is not None
        out[m.group(1)] = chunk.split("</details>\n")[0]
    return out


@pytest.fixture(scope="module")
def fixture_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Page]:
    return _render(copy_run(tmp_path_factory.mktemp("report")))


def test_the_fixture_run_is_realistic() -> None:
    rows = [QuestionResult.model_validate(r) for r in results(FIXTURE)]
    assert len(rows) == 12
    statuses = [question_status(r) for r in rows]
    assert statuses.count("correct") == 8
    assert statuses.count("incorrect") == 3
    assert statuses.count("error") == 1
    recorded = RunDir(FIXTURE).trajectories()
    assert sorted(recorded) == sorted(r.id for r in rows)
    assert sum(1 for r in rows if any(s.hint for s in recorded[r.id].steps)) == 5
    for r in rows:  # a row's counts are its trajectory's
        assert r.usage["steps"] == len(recorded[r.id].steps)
        assert r.guidelines == Counter(s.hint for s in recorded[r.id].steps if s.hint)
    assert {r.meta["hops"] for r in rows} == {1, 2, 3}
    assert (FIXTURE / "metrics.json").is_file() and (FIXTURE / "config.json").is_file()


def test_the_page_has_every_section(fixture_page: tuple[str, Page]) -> None:
    text, page = fixture_page
    assert text.startswith("<!DOCTYPE html>")
    for element_id in (*SECTIONS, *TABLES, *CHARTS, *VIEWER):
        assert page.ids[element_id] == 1, element_id
    assert all(n == 1 for n in page.ids.values()), "duplicate ids"
    assert page.tags["svg"] == len(CHARTS)
    assert len(page.find("details", cls="q")) == 12
    assert len(page.find("li", cls="step")) == sum(
        len(t.steps) for t in RunDir(FIXTURE).trajectories().values())


def test_the_page_is_self_contained(fixture_page: tuple[str, Page]) -> None:
    text, page = fixture_page
    assert page.tags["link"] == 0 and page.tags["img"] == 0 and page.tags["iframe"] == 0
    assert page.tags["script"] == 1 and page.tags["style"] == 1
    for _, attrs in page.elements:
        for name in ("src", "href", "action"):
            value = attrs.get(name) or ""
            assert not re.match(r"(https?:)?//", value), (name, value)
    assert "@import" not in text and "url(" not in text


def test_the_summary_shows_the_metrics_and_config(fixture_page: tuple[str, Page]) -> None:
    text, page = fixture_page
    metrics = json.loads((FIXTURE / "metrics.json").read_text())
    summary = text.split('id="summary"')[1].split('id="guidelines"')[0]
    assert f"{100 * metrics['hit@1']:.1f}" in summary
    assert f"{100 * metrics['f1']:.1f}" in summary
    for label in ("Hit@1 (any answer)", "Hit@1 (top-1 answer)", "F1", "EM", "TPQ", "QPQ", "CPQ", "LLM calls / question",
                  "Tokens / question", "Total cost"):
        assert f">{label}<" in summary, label
    assert f"{metrics['tokens']:,.0f}" in summary
    assert re.search(r">Steps / question</td><td class=num>6\.33<", summary)
    assert "metaqa" in summary and "openai:gpt-4o-mini" in summary
    assert 'class="pill on"' in summary  # guidelines on
    assert "Headline metrics from metrics.json" in summary
    assert page.ids["stand-in-note"] == 0


def test_the_guideline_tables(fixture_page: tuple[str, Page]) -> None:
    text, _ = fixture_page
    by_code = text.split('id="guidelines-by-code"')[1].split("</table>")[0]
    rows = re.findall(r"<tr>(<td.*?)</tr>", by_code)
    assert [re.findall(r">([A-Z]{2}\d{3})<", r)[0] for r in rows] == [
        "KB201", "PY102", "PY104", "RM202"]
    assert "kb.empty_fact_unlisted_relation" in rows[0]  # names from the guideline registry
    cells = re.findall(r"<td class=num>([^<]*)</td>", rows[0])
    assert cells == ["12", "80.0", "2", "1", "8.3"]  # triggers, share, questions, corrected, rate
    # the paper's class (Tables 8/9) next to our code and name, from the guideline's needs
    paper = {re.findall(r">([A-Z]{2}\d{3})<", r)[0]:
             re.findall(r'<td class="paper-class">([^<]*)</td>', r)[0] for r in rows}
    assert paper == {"KB201": "KB+RM", "PY102": "Python", "PY104": "Python", "RM202": "RM"}
    feedback = text.split('id="guidelines-by-feedback"')[1].split("</table>")[0]
    assert ">KB+RM<" in feedback and ">RM<" in feedback
    by_class = text.split('id="guidelines-by-class"')[1].split("</table>")[0]
    assert ">PY<" in by_class and ">KB<" in by_class and ">RM<" in by_class
    assert "15 triggers in 5 of 12 questions" in text


def test_trajectories_show_each_step(fixture_page: tuple[str, Page]) -> None:
    text, page = fixture_page
    chunks = _question_chunks(text)
    assert len(chunks) == 12
    hinted = chunks["2hop-dev-1"]
    assert 'class="step k-hint"' in hinted and ">RM202<" in hinted
    assert "kb.get_relation_unbound_variable" in hinted
    assert "get_relation(?movie)" in hinted
    assert "Query after this step" in hinted and "SELECT DISTINCT" in hinted
    assert "tokens" in hinted
    assert 'data-status="error"' in chunks["3hop-dev-5"] and "RateLimitError" in chunks[
        "3hop-dev-5"]
    assert 'data-hints="11"' in chunks["3hop-dev-1"]
    statuses = [a["data-status"] for a in page.find("details", cls="q")]
    assert statuses.count("correct") == 8 and statuses.count("incorrect") == 3
    groups = {a["data-group"] for a in page.find("details", cls="q")}
    assert "actor_to_movie" in groups  # the filter's key: qtype


def test_text_from_results_is_escaped(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    rows = results(run)
    evil = '<script>alert("pwned")</script> & \'quotes\' "double"'
    recorded = trajectories(run)
    first = recorded.pop(rows[0]["id"])
    rows[0]["question"] = evil
    rows[0]["id"] = 'id"><script>x</script>'
    rows[0]["meta"]["qtype"] = '"><img src=x onerror=alert(1)>'
    rows[0]["predicted"] = ["</pre><script>bad()</script>"]
    rows[0]["error"] = "<b>boom</b>"
    step = steps(first)[0]
    step.update(thought="<i>think</i>", action="get_relation(<x>)",
                observation="</pre></div><script>alert(2)</script>", hint="KB201",
                query="SELECT ?x WHERE { ?x <p> \"<v>\" }")
    write_trajectories(run, [renamed(first, rows[0]["id"]), *recorded.values()])
    write_results(run, rows)
    edit_config(run, lambda c: c.update(llm='<script>llm()</script>',
                                        extra={"note": "</td><script>e()</script>"}))
    text, page = _render(run)
    assert page.tags["script"] == 1  # ours only
    assert page.tags["img"] == 0 and page.tags["b"] == 0 and page.tags["i"] == 0
    assert "alert" not in page.scripts[0]
    assert evil in page.text  # shown as text
    assert "</pre><script>bad()</script>" in page.text
    assert "get_relation(<x>)" in page.text and "<b>boom</b>" in page.text
    assert "<i>think</i>" in page.text and "</pre></div><script>alert(2)</script>" in page.text
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in text  # markupsafe's entities
    assert [a for a in page.find("details", cls="q") if a["data-group"] == rows[0]["meta"][
        "qtype"]]  # the attribute round-trips exactly
    for raw in ("<script>alert", "<script>x", "<img", "<script>bad", "<script>llm", "<script>e("):
        assert raw not in text


def test_long_texts_are_cut_with_an_expander(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    rows = results(run)
    long = "\n".join(f"row {i}: " + "x" * 90 for i in range(600))  # ~58k characters
    recorded = trajectories(run)
    steps(recorded[rows[0]["id"]])[1]["observation"] = long
    write_trajectories(run, recorded.values())
    text, page = _render(run)
    assert f"Show all ({len(long):,} characters)" in text
    assert "more characters not embedded; see trajectories.jsonl" in text
    assert len(page.find("details", cls="more")) >= 1
    assert text.count("row 599") == 0  # past MAX_TEXT_CHARS
    recorded_bytes = sum((FIXTURE / name).stat().st_size
                         for name in ("results.jsonl", "trajectories.jsonl"))
    assert len(text) < recorded_bytes * 2 + report.MAX_TEXT_CHARS * 2


def test_big_runs_cap_the_embedded_trajectories(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    text, page = _render(run, max_trajectories=3)
    assert page.ids["cap-note"] == 1
    chunks = _question_chunks(text)
    embedded = [qid for qid, chunk in chunks.items() if '<ol class="steps">' in chunk]
    assert len(embedded) == 3
    # errors first, then incorrect answers, in file order
    assert embedded == ["1hop-dev-2593", "2hop-dev-3", "3hop-dev-5"]
    assert sum('class="muted notembedded"' in c for c in chunks.values()) == 9
    assert len(page.find("details", cls="q")) == 12  # all listed, all searchable
    assert "1 of 1 error" in text and "2 of 3 incorrect" in text


def test_pages_and_sizes_scale(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    rows = results(run)
    recorded = trajectories(run)
    many, steps_of = [], []
    for i in range(600):
        row = dict(rows[i % len(rows)])
        steps_of.append(renamed(recorded[row["id"]], f"q{i}"))
        row["id"] = f"q{i}"
        many.append(row)
    write_results(run, many)
    write_trajectories(run, steps_of)
    text, page = _render(run, max_trajectories=50)
    assert len(page.find("details", cls="q")) == 600
    assert len(page.find("ol", cls="steps")) == 50
    assert page.find("div", id="q-list")[0]["data-page-size"] == str(report.PAGE_SIZE)
    per_row = (len(text) - 50 * 12_000) / 600
    assert per_row < 2_000, per_row  # a listed-only question costs little


def test_without_metrics_json_the_runners_aggregate_is_computed(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    (run / "metrics.json").unlink()
    text, _ = _render(run)
    assert "Headline metrics computed by metrics.aggregate from results.jsonl" in text
    assert ">66.7<" in text  # hit@1


def test_the_report_shows_the_runners_aggregate(tmp_path: Path) -> None:
    """One aggregate: what metrics.json holds is what the page shows (no second computation)."""
    run = copy_run(tmp_path)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["hit@1"] = 0.4321
    metrics["by"]["hops"]["3"]["errors"] = 97
    metrics["guidelines"]["by_code"]["KB201"]["triggers"] = 11
    (run / "metrics.json").write_text(json.dumps(metrics))
    text, _ = _render(run)
    assert ">43.2<" in text
    hops = text.split('id="breakdown-hops"')[1].split("</table>")[0]
    assert "<td class=num>97</td>" in hops
    by_code = text.split('id="guidelines-by-code"')[1].split("</table>")[0]
    assert re.search(r">KB201<.*?<td class=num>11</td>", by_code, re.S)


def test_an_older_metrics_json_is_recomputed(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    metrics = json.loads((run / "metrics.json").read_text())
    for key in ("scored", "outages", "outage_total", "qpq_paper"):
        metrics.pop(key)
    metrics["hit@1"] = 0.4321
    (run / "metrics.json").write_text(json.dumps(metrics))
    text, _ = _render(run)
    assert "metrics.json was written by an older pyql" in text
    assert "43.2" not in text and ">66.7<" in text


def test_a_stale_metrics_json_is_not_trusted(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics.update(n=3, **{"hit@1": 0.123})
    (run / "metrics.json").write_text(json.dumps(metrics))
    text, _ = _render(run)
    assert "metrics.json counts 3 questions but results.jsonl has 12" in text
    assert "12.3" not in text and ">66.7<" in text


@pytest.mark.parametrize(("llm", "kind"), [("gold", "gold"), ("noisy-gold:0.3", "noisy-gold"),
                                           ("openai:gpt-4o-mini", None)])
def test_the_stand_in_notice(tmp_path: Path, llm: str, kind: str | None) -> None:
    assert is_stand_in(llm) == kind
    run = copy_run(tmp_path)
    edit_config(run, lambda c: c.update(llm=llm))
    text, page = _render(run)
    assert page.ids["stand-in-note"] == (1 if kind else 0)
    if kind:
        assert "not an LLM" in text and f"<code>{kind}</code>" in text
        assert "recorded no stand-in assumptions" in text


def test_the_stand_in_assumptions_are_printed_from_metrics_json(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    edit_config(run, lambda c: c.update(llm="noisy-gold:0.3"))
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["stand_in"] = {"name": "noisy-gold", "strategy": "queryagent",
                           "parameters": {"rate": 0.3, "fix_on_hint": 0.6, "silent": 0.05}}
    (run / "metrics.json").write_text(json.dumps(metrics))
    text, page = _render(run)
    assert page.ids["stand-in-assumptions"] == 1
    table = text.split('id="stand-in-assumptions"')[1].split("</table>")[0]
    assert re.search(r"<code>fix_on_hint</code></td><td>0.6<", table)
    assert re.search(r"<code>silent</code></td><td>0.05<", table)


def test_malformed_and_duplicate_lines(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    rows = results(run)
    again = dict(rows[4], metrics={"hit@1": 1.0, "f1": 1.0, "em": 1.0, "top1": 1.0})
    lines = [json.dumps(r) for r in [*rows, again]] + ['{"id": "cut short', "not json"]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    text, page = _render(run)
    assert "2 malformed line(s)" in text
    assert "1 question(s) appear more than once" in text
    assert len(page.find("details", cls="q")) == 12
    chunks = _question_chunks(text)
    assert 'data-status="correct"' in chunks[rows[4]["id"]]  # the last line wins
    assert list(chunks)[-1] == rows[4]["id"]


def test_no_guidelines_and_no_results(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    rows = results(run)
    recorded = trajectories(run)
    for row in rows:
        row.update(guidelines={}, corrected={})
        for step in steps(recorded[row["id"]]):
            step["hint"] = None
    write_results(run, rows)
    write_trajectories(run, recorded.values())
    recompute_metrics(run)
    edit_config(run, lambda c: c.update(guidelines=False))
    text, page = _render(run)
    assert page.ids["guidelines-empty"] == 1 and "were off in this run" in text
    assert page.ids["chart-guidelines"] == 0
    (run / "results.jsonl").write_text("", encoding="utf-8")
    (run / "metrics.json").unlink()
    (run / "config.json").unlink()
    text, page = _render(run)
    assert "No results yet." in text and "config.json is missing" in text
    assert page.ids["q-list"] == 1


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no such run directory"):
        write_report(tmp_path / "missing")
    with pytest.raises(RunDirError, match="has no results.jsonl"):
        write_report(tmp_path)


def test_out_and_the_cli(tmp_path: Path) -> None:
    from pyql.cli import app

    run = copy_run(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / REPORT).is_file() and result.output.strip().endswith(REPORT)
    out = tmp_path / "elsewhere" / "r.html"
    result = runner.invoke(app, ["report", str(run), "--out", str(out), "--no-open",
                                 "--max-trajectories", "2"])
    assert result.exit_code == 0, result.output
    assert 'id="cap-note"' in out.read_text(encoding="utf-8")
    assert not list(out.parent.glob(".*.tmp"))
    result = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert "error:" in result.output and "no such run directory" in result.output


def test_the_assets_ship_as_package_data() -> None:
    """report.css and report.js are read with importlib.resources: the wheel must carry them."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"].get("package-data", {}).get(
        "pyql.agent.evaluation", [])
    from fnmatch import fnmatch

    for name in ("report.css", "report.js"):
        assert any(fnmatch(name, p) for p in patterns), (
            f'add "pyql.agent.evaluation" = ["*.css", "*.js"] to [tool.setuptools.package-data] '
            f"in pyproject.toml so that {name} ships in the wheel")


def test_outages_are_counted_apart_and_marked_in_the_list(tmp_path: Path) -> None:
    """Issue 15: a KB/DB or LLM outage is not a wrong answer: the summary shows scored and the
    outages per status (from metrics.json), the list marks the question Outage."""
    run = copy_run(tmp_path)
    rows = results(run)
    down = {"2hop-dev-3": "backend_error", "3hop-dev-5": "llm_timeout"}
    for row in rows:
        if row["id"] in down:
            row.update(status=down[row["id"]], error="unreachable", metrics={"hit@1": 0.0})
    write_results(run, rows)
    metrics = recompute_metrics(run)
    assert metrics["scored"] == 10 and metrics["outage_total"] == 2
    text, page = _render(run)
    summary = text.split('id="summary"')[1].split('id="guidelines"')[0]
    assert re.search(r">Scored</td><td class=num>10<", summary)
    assert re.search(r">Outages</td><td class=num>2<", summary)
    assert "backend_error 1, llm_timeout 1" in summary
    assert f">{100 * metrics['hit@1']:.1f}<" in summary  # over the scored questions
    statuses = {a["id"]: a["data-status"] for a in page.find("details", cls="q")}
    chunks = _question_chunks(text)
    for qid in down:
        assert 'data-status="outage"' in chunks[qid] and ">Outage<" in chunks[qid]
    assert list(statuses.values()).count("outage") == 2
    assert 'data-status="outage"' in text.split('id="q-list"')[0]  # a filter button


def test_question_status_reads_the_recorded_status() -> None:
    for status in ("backend_error", "llm_error", "llm_timeout"):
        result = QuestionResult(id="1", status=status, error="down", metrics={"hit@1": 0.0})
        assert question_status(result) == "outage"
    assert question_status(QuestionResult(id="2", status="error", error="bad",
                                          metrics={"hit@1": 0.0})) == "error"


def test_qpq_as_the_paper_counts_it(tmp_path: Path) -> None:
    """Issue 12: QPQ with every query, and without the label lookups as the paper counts it."""
    run = copy_run(tmp_path)
    rows = results(run)
    for row in rows:
        row["usage"]["kb_queries"] = 10
        row["usage"]["label_queries"] = 4
    write_results(run, rows)
    recompute_metrics(run)
    text, _ = _render(run)
    summary = text.split('id="summary"')[1].split('id="guidelines"')[0]
    assert re.search(r">QPQ</td><td class=num>10\.00<", summary)
    assert re.search(r">QPQ \(paper: without label lookups\)</td><td class=num>6\.00<", summary)


def test_a_strategys_own_counts_are_shown(tmp_path: Path) -> None:
    """Readi/SRP report their own counts (edits, instantiation success, answer coverage, LLM
    calls per kind) in metrics.json's ``strategy`` section: the summary lists them."""
    run = copy_run(tmp_path)
    rows = results(run)
    for i, row in enumerate(rows):
        row["usage"]["edits"] = float(i % 2)
        row["usage"]["llm_calls.generate"] = 1.0
    write_results(run, rows)
    recompute_metrics(run)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["strategy"]["llm_calls.generate"] == 1.0
    text, _ = _render(run)
    summary = text.split('id="summary"')[1].split('id="guidelines"')[0]
    assert re.search(r">llm_calls\.generate</td><td class=num>1\.000<", summary)
    edits = metrics["strategy"]["edits"]
    assert re.search(rf">edits</td><td class=num>{edits:.3f}<", summary)


# -- the steps come from trajectories.jsonl -------------------------------------------------------


def test_a_questions_steps_come_from_its_trajectory(fixture_page: tuple[str, Page]) -> None:
    text, _ = fixture_page
    chunks = _question_chunks(text)
    recorded = RunDir(FIXTURE).trajectories()
    for qid, chunk in chunks.items():
        shown = re.findall(r'<li class="step k-(\w+)" data-step="(\d+)"', chunk)
        steps_ = recorded[qid].steps
        assert [int(n) for _, n in shown] == [s.n for s in steps_]
        assert [k for k, _ in shown].count("hint") == sum(1 for s in steps_ if s.hint)
        n = len(steps_)
        assert f'<span class="chip">{n} step{"s" if n != 1 else ""}</span>' in chunk
    first = recorded["1hop-dev-0"].steps[0]
    seconds = first.llm_latency + first.env_latency
    assert f"{seconds:.2f} s" in chunks["1hop-dev-0"].split('data-step="2"')[0]


def test_a_run_without_trajectories_renders_without_steps(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    (run / "trajectories.jsonl").unlink()
    text, page = _render(run)
    chunks = _question_chunks(text)
    assert len(chunks) == 12 and not page.find("li", cls="step")
    assert all("this run directory has no trajectories.jsonl" in c for c in chunks.values())
    # the rows still count steps and hints (usage["steps"], guidelines)
    assert 'data-hints="11"' in chunks["3hop-dev-1"]
    assert '<span class="chip">12 steps</span>' in chunks["3hop-dev-1"]
    assert "Final query" in chunks["1hop-dev-0"]  # the rest of the question is there


def test_a_question_without_a_trajectory_says_so(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    recorded = trajectories(run)
    del recorded["2hop-dev-1"]
    write_trajectories(run, recorded.values())
    text, page = _render(run)
    chunks = _question_chunks(text)
    assert "trajectories.jsonl holds no trajectory of this question" in chunks["2hop-dev-1"]
    assert 'class="step' not in chunks["2hop-dev-1"]
    assert sum("notrajectory" in c for c in chunks.values()) == 1
    assert len(page.find("li", cls="step")) == sum(len(steps(r)) for r in recorded.values())


def test_the_last_trajectory_of_a_question_is_shown(tmp_path: Path) -> None:
    """A resumed run appends a question's trajectory again; a cut-short one shows its steps."""
    run = copy_run(tmp_path)
    recorded = trajectories(run)
    again = [dict(r) for r in recorded["1hop-dev-0"]]
    steps(again)[0]["action"] = "get_relation(Temuera Morrison, again)"
    cut = recorded["2hop-dev-0"][:-1]  # no result record: a crash
    write_trajectories(run, [*recorded.values(), again, cut])
    text, _ = _render(run)
    chunks = _question_chunks(text)
    assert "get_relation(Temuera Morrison, again)" in chunks["1hop-dev-0"]
    assert chunks["2hop-dev-0"].count('class="step ') == len(steps(cut))
