"""``pyql ask`` end to end: typer's CliRunner, the real OpenAI client, and the fake
OpenAI-compatible server (tests/support/fake_openai.py) on the bundled movie KB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from pyql.agent.commands.ask import NO_LLM_MESSAGE
from pyql.agent.trajectory import Trajectory
from pyql.cli import app
from pyql.demo import movies_path
from tests.support.fake_openai import (
    ContextTooLong,
    FakeOpenAI,
    Hang,
    RateLimit,
    Slow,
    Text,
    ToolCalls,
)

runner = CliRunner()

QUESTION = "which films did Christopher Nolan direct"
NOLAN_FILMS = ["ex:Inception", "ex:Interstellar", "ex:Oppenheimer", "ex:The_Dark_Knight"]
TEXT_SCRIPT = (
    Text("Thought 1: Nolan's relations first.\nAction 1: get_relation(Christopher Nolan)"),
    Text("Thought 2: films he directed.\n"
         "Action 2: add_fact(?film, ex:directed_by, Christopher Nolan)"),
    Text("Thought 3: that is the answer.\nAction 3: set_answer(?film)"),
    Text("Thought 4: done.\nAction 4: execute()"),
)


def env_for(fake: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": fake.api_key,
            "PYQL_MODEL": "gpt-test", **extra}


def ask(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, ["ask", *args], env=env)


def assert_one_line_error(result, code: int = 1) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("hint: ")]
    return errors[0]


def user_message(fake: FakeOpenAI, index: int = 0) -> str:
    messages = fake.chat_requests[index].body["messages"]
    return next(m["content"] for m in messages if m["role"] == "user")


def test_text_mode_end_to_end(fake_openai, tmp_path):
    fake_openai.push(*TEXT_SCRIPT)
    result = ask(QUESTION, "--kb", str(movies_path()), env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out = result.stdout
    # the linked entity, shown and sent to the model
    assert "Christopher Nolan → ex:Christopher_Nolan" in out
    assert "{Christopher Nolan: ex:Christopher_Nolan}" in user_message(fake_openai)
    # the live trajectory, in order
    order = ["Step 1", "Nolan's relations first.", "get_relation(Christopher Nolan)",
             "ex:directed_by", "Step 2", "add_fact(?film, ex:directed_by, Christopher Nolan)",
             "'Inception'", "Step 4", "execute()", "SPARQL", "?film ex:directed_by "
             "ex:Christopher_Nolan", "Answer: "]
    positions = [out.index(text) for text in order]
    assert positions == sorted(positions)
    answer_line = next(line for line in out.splitlines() if line.startswith("Answer: "))
    assert answer_line == "Answer: " + ", ".join(NOLAN_FILMS)
    assert "Finished with execute(): 4 steps" in out
    assert len(fake_openai.chat_requests) == 4
    assert "tools" not in fake_openai.chat_requests[0].body


def test_the_final_query_is_printed_whole(fake_openai):
    """Issue 15 item 4: the query is not cut at the terminal width (80 columns here)."""
    title = "a title long enough that the filter line passes eighty columns of a terminal"
    script = (
        Text("Thought 1: films he directed.\n"
             "Action 1: add_fact(?film, ex:directed_by, Christopher Nolan)"),
        Text(f'Thought 2: drop one.\nAction 2: add_filter(?film, !=, "{title}")'),
        Text("Thought 3: answer.\nAction 3: set_answer(?film)"),
        Text("Thought 4: done.\nAction 4: execute()"),
    )
    fake_openai.push(*script)
    result = ask(QUESTION, "--kb", str(movies_path()), "--json", env=env_for(fake_openai))
    query = json.loads(result.stdout)["query"]
    fake_openai.push(*script)
    result = ask(QUESTION, "--kb", str(movies_path()), env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("SPARQL ─"))
    block = lines[start + 1:start + 1 + len(query.splitlines())]
    assert block == query.splitlines()
    assert any(title in line and len(line) > 80 for line in block)


def test_steps_stream_into_a_pipe(fake_openai):
    """Each step reaches a pipe when it happens, not when the question is done."""
    fake_openai.push(TEXT_SCRIPT[0], Slow(3.0, then=TEXT_SCRIPT[1]), *TEXT_SCRIPT[2:])
    env = {**os.environ, **env_for(fake_openai)}
    proc = subprocess.Popen([sys.executable, "-m", "pyql", "ask", QUESTION, "--kb",
                             str(movies_path())], stdout=subprocess.PIPE, text=True, env=env)
    arrived: dict[str, float] = {}
    for line in proc.stdout:  # type: ignore[union-attr]
        for mark in ("Step 1", "Step 2"):
            if line.startswith(mark):
                arrived.setdefault(mark, time.monotonic())
    assert proc.wait(timeout=120) == 0
    # step 2 waited 3 s for its reply: step 1 was on the pipe before that
    assert arrived["Step 2"] - arrived["Step 1"] > 2.0


TERSE = '''
from pyql.agent.strategies.queryagent.strategy import QueryAgent


class Terse(QueryAgent):
    """The QueryAgent under another name (a third-party strategy)."""

    name = "terse"
'''


@pytest.fixture()
def terse_strategy(tmp_path, monkeypatch):
    """A strategy installed as a distribution with a ``pyql.strategies`` entry point."""
    from pyql.agent import strategy

    site = tmp_path / "site"
    info = site / "pyql_terse-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyql_terse\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pyql.strategies]\nterse = pyql_terse:Terse\n")
    (site / "pyql_terse.py").write_text(TERSE)
    monkeypatch.syspath_prepend(str(site))
    strategy._clear_cache()
    yield "terse"
    strategy._clear_cache()


def test_ask_runs_a_third_party_strategy(fake_openai, terse_strategy):
    fake_openai.push(*TEXT_SCRIPT)
    result = ask(QUESTION, "--kb", str(movies_path()), "--strategy", terse_strategy,
                 "--option", "max_observation_chars=500", "--json", env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    assert data["strategy"] == "terse"
    assert sorted(data["answers"]) == NOLAN_FILMS


def test_an_unknown_strategy_is_one_line_before_any_llm_call(fake_openai):
    result = ask(QUESTION, "--kb", str(movies_path()), "--strategy", "nope",
                 env=env_for(fake_openai))
    line = assert_one_line_error(result, code=2)  # bad usage (issue 36, item 15)
    assert "unknown strategy 'nope'" in line and "queryagent" in line
    assert fake_openai.chat_requests == []
    bad = ask(QUESTION, "--kb", str(movies_path()), "--option", "novalue",
              env=env_for(fake_openai))
    assert bad.exit_code == 2
    unknown = ask(QUESTION, "--kb", str(movies_path()), "--option", "frobnicate=1",
                  env=env_for(fake_openai))
    line = assert_one_line_error(unknown, code=2)
    assert "does not take --option frobnicate" in line and "max_observation_chars" in line
    ill_typed = ask(QUESTION, "--kb", str(movies_path()), "--option", "max_steps=many",
                    env=env_for(fake_openai))
    assert "--option max_steps='many'" in assert_one_line_error(ill_typed, code=2)
    assert fake_openai.chat_requests == []


def test_tools_mode_end_to_end(fake_openai):
    fake_openai.push(
        ToolCalls([("get_relation", {"node": "Christopher Nolan"})]),
        ToolCalls([("add_fact", {"head": "?film", "relation": "ex:directed_by",
                                 "tail": "Christopher Nolan"})], content="films he directed"),
        ToolCalls([("set_answer", {"var": "?film"})]),
        ToolCalls([("execute", {})]),
    )
    result = ask(QUESTION, "--kb", str(movies_path()), "--mode", "tools",
                 env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "(tools mode, guidelines on)" in result.stdout
    assert "add_fact(?film, ex:directed_by, Christopher Nolan)" in result.stdout
    assert "Answer: " + ", ".join(NOLAN_FILMS) in result.stdout
    tools = fake_openai.chat_requests[0].body["tools"]
    assert "execute" in {t["function"]["name"] for t in tools}


def test_json_and_saved_trajectory(fake_openai, tmp_path):
    fake_openai.push(*TEXT_SCRIPT)
    path = tmp_path / "run" / "trajectory.jsonl"
    result = ask(QUESTION, "--kb", str(movies_path()), "--json", "--save-trajectory", str(path),
                 env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    assert data["answers"] == NOLAN_FILMS
    assert data["finished"] is True and data["stop_reason"] == "execute"
    assert data["entities"] == {"Christopher Nolan": "ex:Christopher_Nolan"}
    assert data["linking"][0]["candidates"][0]["method"] == "exact"
    assert [s["action"] for s in data["steps"]][-1] == "execute()"
    assert "ex:directed_by" in data["query"]
    assert data["usage"]["llm_calls"] == 4
    assert data["trajectory"] == str(path)
    saved = Trajectory.load(path)
    assert list(saved.answers) == NOLAN_FILMS
    assert saved.meta["linking"][0]["text"] == "Christopher Nolan"
    assert len(saved.steps) == 4


def test_fuzzy_linking_and_a_hint_shown_live(fake_openai):
    fake_openai.push(
        # the wrong direction: empty, and no get_relation first -> a guideline's hint
        Text("Thought 1: who directed it.\nAction 1: add_fact(?d, ex:directed_by, Inceptoin)"),
        Text("Thought 2: look first.\nAction 2: get_relation(Inceptoin)"),
        Text("Thought 3: the director.\nAction 3: add_fact(Inceptoin, ex:directed_by, ?d)"),
        Text("Thought 4: answer.\nAction 4: set_answer(?d)"),
        Text("Thought 5: done.\nAction 5: execute()"),
    )
    result = ask("who directed Inceptoin", "--kb", str(movies_path()), env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Inceptoin → ex:Inception  (fuzzy 0.89: 'Inception')" in result.stdout
    hint_lines = [line for line in result.stdout.splitlines() if line.startswith("  Hint ")]
    assert len(hint_lines) == 1 and "re-generate" in hint_lines[0]
    assert "Answer: ex:Christopher_Nolan" in result.stdout


def test_given_entities_skip_linking(fake_openai):
    fake_openai.push(Text("Thought 1: done.\nAction 1: execute()"))
    result = ask("which films did the director of Inception make", "--kb", str(movies_path()),
                 "--entity", "the director=ex:Christopher_Nolan", "--max-steps", "1",
                 "--no-guidelines", env=env_for(fake_openai))
    # the step cap without an answer: exit status 3 (issue 36, item 19)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert "the director → ex:Christopher_Nolan  (given)" in result.stdout
    assert "Inception →" not in result.stdout
    assert "{the director: ex:Christopher_Nolan}" in user_message(fake_openai)
    assert "guidelines off" in result.stdout
    assert "Stopped without execute()" in result.stdout


def test_sql_database(fake_openai):
    from pyql.sql.demo import demo_db_path

    fake_openai.push(
        Text("Thought 1: Spanish players.\nAction 1: add_condition(nationality, =, Spain)"),
        Text('Thought 2: scorers.\nAction 2: add_condition(points_per_game, >, "10")'),
        Text("Thought 3: names.\nAction 3: set_answer(name)"),
        Text("Thought 4: done.\nAction 4: execute()"),
    )
    result = ask("Which Spanish players score more than 10 points per game?",
                 "--db", str(demo_db_path()), "--table", "players", env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Entities" not in result.stdout and "Table: players" in result.stdout
    assert "SQL" in result.stdout
    answer_line = next(line for line in result.stdout.splitlines() if line.startswith("Answer"))
    assert set(answer_line.removeprefix("Answer: ").split(", ")) == {
        "Bruno Salgado", "Gabe Moreno", "Luis Ortega"}


def test_metaqa_kb_txt_with_brackets(fake_openai, tmp_path):
    kb_txt = tmp_path / "kb.txt"
    kb_txt.write_text("Kismet|directed_by|William Dieterle\nKismet|release_year|1944\n",
                      encoding="utf-8")
    fake_openai.push(
        Text("Thought 1: the director.\nAction 1: add_fact(Kismet, directed_by, ?d)"),
        Text("Thought 2: answer.\nAction 2: set_answer(?d)"),
        Text("Thought 3: done.\nAction 3: execute()"),
    )
    result = ask("who directed [Kismet]", "--kb", str(kb_txt), "--json",
                 env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    assert data["entities"] == {"Kismet": "Kismet"}
    assert data["linking"][0]["source"] == "bracket"
    assert data["answers"] == ["William Dieterle"]


# -- errors -----------------------------------------------------------------------------------


def test_no_llm_configured():
    result = ask(QUESTION, "--kb", str(movies_path()))
    line = assert_one_line_error(result, code=2)
    assert line == "error: " + NO_LLM_MESSAGE
    for text in ("OPENAI_API_KEY", "--model gpt-4o-mini", "--base-url http://localhost:8000/v1",
                 "vLLM", "Ollama", "llama.cpp", "--llm local"):  # issue 36, item 18: local too
        assert text in line
    assert result.stdout == ""


def test_auth_error_is_one_line(fake_openai):
    result = ask(QUESTION, "--kb", str(movies_path()),
                 env=env_for(fake_openai, OPENAI_API_KEY="sk-wrong"))
    line = assert_one_line_error(result)
    assert "API key" in line and "401" in line
    assert len(fake_openai.chat_requests) == 1  # not retried


def test_model_not_found_is_one_line(fake_openai):
    result = ask(QUESTION, "--kb", str(movies_path()), "--model", "no-such-model",
                 env=env_for(fake_openai))
    line = assert_one_line_error(result)
    assert "'no-such-model' not found" in line


def test_model_without_key_or_server_is_one_line():
    result = ask(QUESTION, "--kb", str(movies_path()), "--model", "gpt-4o-mini")
    line = assert_one_line_error(result)
    assert "no API key" in line and "OPENAI_API_KEY" in line


def test_rate_limit_is_one_line(fake_openai):
    # a wait longer than the client accepts (120 s) is not attempted: no sleeping here
    fake_openai.push(RateLimit(retry_after=600))
    result = ask(QUESTION, "--kb", str(movies_path()), env=env_for(fake_openai))
    line = assert_one_line_error(result)
    assert "rate limited" in line and "600s" in line


def test_context_too_long_at_the_first_step(fake_openai):
    fake_openai.push(ContextTooLong())
    result = ask(QUESTION, "--kb", str(movies_path()), env=env_for(fake_openai))
    line = assert_one_line_error(result)
    assert "context window" in line


@pytest.mark.parametrize(
    "args",
    [[], ["--kb", "x.ttl", "--db", "y.db"], ["--kb", "x.ttl", "--mode", "chat"]],
    ids=["no-backend", "two-backends", "bad-mode"],
)
def test_usage_errors(fake_openai, args):
    result = ask(QUESTION, *args, env=env_for(fake_openai))
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_missing_kb_file(fake_openai, tmp_path):
    result = ask(QUESTION, "--kb", str(tmp_path / "nope.ttl"), env=env_for(fake_openai))
    assert result.exit_code == 1
    assert "error: KB not found" in result.stderr
    assert fake_openai.chat_requests == []


def test_query_agent_on_step_hook(movies_kb):
    """The hook the live view uses: each step as soon as it is recorded; run's own wins."""
    from pyql.agent import QueryAgent, ScriptedLLM

    script = [t.content for t in TEXT_SCRIPT]
    seen: list[int] = []
    agent = QueryAgent(ScriptedLLM(script), movies_kb, guidelines=None,
                       on_step=lambda step: seen.append(step.n))
    result = agent.run(QUESTION, {"Christopher Nolan": "ex:Christopher_Nolan"})
    assert seen == [1, 2, 3, 4] and list(result.answers) == NOLAN_FILMS
    mine: list[str] = []
    agent.llm = ScriptedLLM(script)
    agent.run(QUESTION, {"Christopher Nolan": "ex:Christopher_Nolan"},
              on_step=lambda step: mine.append(step.action))
    assert mine[-1] == "execute()" and seen == [1, 2, 3, 4]


def test_ask_with_the_paper_preset_uses_the_original_prompt(fake_openai):
    fake_openai.push(*TEXT_SCRIPT)
    result = ask(QUESTION, "--kb", str(movies_path()), "--preset", "paper:grailqa",
                 "--ranker", "bm25", "--json", env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    messages = fake_openai.chat_requests[0].body["messages"]
    prompt = messages[0]["content"]  # the original's request: one user message
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert prompt.startswith("\nYou need to understand a question") and prompt.endswith(
        "\nThought 1:")
    assert "Remeber the following RULES" in prompt  # the original's wording, typo included


def test_ask_preset_errors_are_one_line(fake_openai):
    result = ask(QUESTION, "--kb", str(movies_path()), "--preset", "paper",
                 env=env_for(fake_openai))
    assert "pass dataset=" in assert_one_line_error(result)
    assert fake_openai.chat_requests == []


@pytest.mark.parametrize("flags", [["--preset", "paper"], ["--preset", "paper:grailqa"],
                                   ["--ranker", "openai"]])
def test_an_embedding_ranker_without_a_key_fails_before_the_model_starts(flags):
    """The paper preset ranks relations with OpenAI embeddings: with a local model and no key,
    the error came after the model had started and the entity was linked, and it did not say
    how to run offline."""
    result = ask(QUESTION, "--kb", str(movies_path()), "--llm", "local", *flags)
    assert result.exit_code == 1 and "Traceback" not in result.output
    error, hint = [line for line in result.stderr.splitlines() if line.strip()]
    assert error.startswith("error: the openai relation ranker") and "OPENAI_API_KEY" in error
    assert hint == "hint: set OPENAI_API_KEY, or rank offline with --ranker bm25"
    assert result.stdout == ""  # before the header: nothing linked, no model started


def test_a_hung_llm_costs_the_attempts_given_by_the_flags(fake_openai):
    # issue 15 item 3: a server that never answers held `pyql ask` for 312 s
    fake_openai.push(*[Hang()] * 5)
    start = time.monotonic()
    result = ask(QUESTION, "--kb", str(movies_path()), "--entity",
                 "Christopher Nolan=ex:Christopher_Nolan", "--llm-timeout", "0.3",
                 "--max-retries", "1", env=env_for(fake_openai))
    elapsed = time.monotonic() - start
    line = assert_one_line_error(result)
    assert "in time" in line and "--llm-timeout" in line
    assert elapsed < 3.0 and len(fake_openai.chat_requests) == 2


def test_the_deadline_bounds_the_whole_question(fake_openai):
    fake_openai.push(*[Hang()] * 20)
    start = time.monotonic()
    result = ask(QUESTION, "--kb", str(movies_path()), "--entity",
                 "Christopher Nolan=ex:Christopher_Nolan", "--llm-timeout", "0.4",
                 "--max-retries", "9", "--deadline", "1", env=env_for(fake_openai))
    elapsed = time.monotonic() - start
    line = assert_one_line_error(result)
    assert "deadline" in line
    assert elapsed < 3.0 and len(fake_openai.chat_requests) <= 4


def test_ask_and_eval_declare_their_shared_options_alike() -> None:
    import typer
    import typer.main

    from pyql.agent.commands.ask import register as register_ask
    from pyql.agent.commands.eval import register as register_eval

    both = typer.Typer()
    register_ask(both)
    register_eval(both)
    commands = typer.main.get_command(both).commands  # type: ignore[attr-defined]

    def declared(name: str) -> dict[str, tuple]:
        return {p.opts[0]: (p.help, p.default, p.metavar, getattr(p, "min", None))
                for p in commands[name].params}

    ask_options, eval_options = declared("ask"), declared("eval")
    for flag in ("--strategy", "--option", "--ranker", "--max-steps", "--mode",
                 "--no-guidelines", "--base-url", "--llm-timeout", "--deadline"):
        assert ask_options[flag] == eval_options[flag], flag


# -- issue 36, item 19: the step cap without an answer is its own exit status ---------------


@pytest.mark.parametrize("as_json", [False, True])
def test_the_step_cap_without_an_answer_exits_3(fake_openai, as_json: bool) -> None:
    from pyql.cli.errors import EXIT_NO_ANSWER

    fake_openai.push(Text("Thought 1: look.\nAction 1: get_relation(Inception)"),
                     Text("Thought 2: again.\nAction 2: get_relation(Inception)"))
    result = ask(QUESTION, "--kb", str(movies_path()), "--entity", "Inception=ex:Inception",
                 "--max-steps", "2", "--option", "execute_on_stop=false",
                 *(["--json"] if as_json else []), env=env_for(fake_openai))
    assert result.exit_code == EXIT_NO_ANSWER == 3, (result.stdout, result.stderr)
    assert result.stderr == ""  # not an error: the run ended, without an answer
    if as_json:
        data = json.loads(result.stdout)
        assert (data["answers"], data["finished"], data["stop_reason"]) == ([], False,
                                                                            "max_steps")
    else:
        assert "Stopped without execute(): the step limit (--max-steps) was reached" in (
            result.stdout)


def test_a_finished_run_exits_0_and_help_names_the_status(fake_openai) -> None:
    fake_openai.push(Text("Thought 1: the director.\nAction 1: add_fact(Inception, "
                          "ex:directed_by, ?d)"),
                     Text("Thought 2: answer.\nAction 2: set_answer(?d)"),
                     Text("Thought 3: done.\nAction 3: execute()"))
    result = ask(QUESTION, "--kb", str(movies_path()), "--entity", "Inception=ex:Inception",
                 "--max-steps", "3", env=env_for(fake_openai))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    shown = " ".join(runner.invoke(app, ["ask", "--help"], env={"COLUMNS": "200"}).stdout.split())
    assert "3 when it stopped at the step cap (--max-steps) without an answer" in shown
