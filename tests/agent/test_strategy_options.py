"""Strategy options are declared and checked before a run (issue 24, item 8): each built-in
strategy declares what ``--option`` may set; an unknown name or an ill-typed value is refused
with a typed error naming the strategy's options, and ``pyql eval`` exits 2 before the run
directory exists."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pyql.agent.evaluation.records import RunConfig
from pyql.agent.evaluation.runner import evaluate
from pyql.agent.strategy import (
    StrategyOptionError,
    available_strategies,
    check_options,
    get_strategy,
)
from pyql.cli import app
from tests.conftest import require_data

BUILT_IN = ("queryagent", "queryagent-sc0", "queryagent-sc-few", "readi", "srp")


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_declared_option_is_a_constructor_keyword(name: str) -> None:
    kind = get_strategy(name)
    assert kind.declared_options, name
    assert set(kind.declared_options) <= _keywords(kind), name


def _keywords(kind: type) -> set[str]:
    """The keywords the constructor takes (through ``**kwargs`` passed on to a base class)."""
    names: set[str] = set()
    for cls in kind.__mro__:
        if "__init__" not in vars(cls):
            continue
        parameters = inspect.signature(cls.__init__).parameters.values()
        names |= {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return names


def test_values_are_read_as_the_declared_types() -> None:
    assert check_options("readi", {"max_edits": "2", "exclude_topic": "off"}) == {
        "max_edits": 2, "exclude_topic": False}
    # a number where text is expected is the text it was written as (--option table=2019)
    assert check_options("queryagent", {"table": 2019, "mode": "tools"}) == {
        "table": "2019", "mode": "tools"}
    assert set(available_strategies()) >= set(BUILT_IN)


@pytest.mark.parametrize(("options", "expected"), [
    ({"nonsense_opt": 1}, None),
    ({"max_steps": "many"}, "int >= 1"),
    ({"mode": "voice"}, "one of text, tools"),
    ({"session_options": 3}, "a JSON object"),
])
def test_unknown_or_ill_typed_options_are_refused(options: dict, expected: str | None) -> None:
    with pytest.raises(StrategyOptionError) as caught:
        check_options("queryagent", options)
    error = caught.value
    assert (error.strategy, error.option, error.expected) == (
        "queryagent", next(iter(options)), expected)
    assert "max_observation_chars" in error.known


def test_eval_refuses_a_bad_option_before_the_run_directory(tmp_path: Path) -> None:
    data = require_data("metaqa").parent
    runner = CliRunner()
    for option, says in (("nonsense_opt=1", "does not take --option nonsense_opt; its options:"),
                         ("max_edits=lots", "--option max_edits='lots': the readi strategy "
                                            "expects int")):
        out = tmp_path / option.partition("=")[0]
        result = runner.invoke(app, ["eval", "--dataset", "metaqa-1hop", "--data-dir", str(data),
                                     "--llm", "gold", "--strategy", "readi", "--option", option,
                                     "--limit", "1", "--out", str(out)])
        assert result.exit_code == 2, result.output
        [line] = [line for line in result.stderr.splitlines() if line.strip()]
        assert line.startswith("error: ") and says in line
        assert not out.exists()
    # the library refuses it too, before making the directory
    config = RunConfig(dataset="metaqa-1hop", llm="gold", data_dir=str(data), limit=1,
                       options={"nonsense_opt": 1})
    with pytest.raises(StrategyOptionError):
        evaluate(config, tmp_path / "lib", progress=False)
    assert not (tmp_path / "lib").exists()


# -- issue 36, item 15: ranges, malformed options and usage errors exit 2 before the run ------


@pytest.mark.parametrize(("strategy", "option", "value"), [
    ("queryagent", "max_steps", 0), ("queryagent", "max_steps", -5),
    ("queryagent", "temperature", 2.5), ("readi", "max_edits", -1),
    ("srp", "check_count", 0),
])
def test_out_of_range_values_are_refused(strategy: str, option: str, value: float) -> None:
    with pytest.raises(StrategyOptionError) as caught:
        check_options(strategy, {option: value})
    assert caught.value.option == option
    assert caught.value.expected is not None
    assert ">=" in caught.value.expected or "<=" in caught.value.expected
    # the edge of the range is taken
    edge = get_strategy(strategy).declared_options[option]
    assert check_options(strategy, {option: edge.ge}) == {option: edge.ge}


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[0] == errors[0], result.stderr
    assert all(line.startswith(("error: ", "hint: ")) for line in lines), result.stderr
    assert "╭" not in result.output and "Usage:" not in result.output
    return errors[0]


@pytest.mark.parametrize(("args", "says"), [
    (["--option", "max_steps=0"], "--option max_steps=0: the queryagent strategy expects int >= 1"),
    (["--option", "max_steps=-5"], "expects int >= 1"),
    (["--option", "noequals"], "--option 'noequals' is not KEY=VALUE"),
    (["--dataset", "nope"], "unknown dataset 'nope'"),
    (["--no-out"], "missing --out"),
])
def test_eval_usage_errors_exit_2_with_one_error_line(tmp_path: Path, args: list[str],
                                                      says: str) -> None:
    out = tmp_path / "run"
    argv = ["eval", "--dataset", "metaqa-1hop", "--llm", "gold", "--data-dir", str(tmp_path),
            "--limit", "1", "--out", str(out)]
    if args == ["--no-out"]:
        argv = argv[:-2]
    else:
        argv += args
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert says in _one_error_line(result)
    assert not out.exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--option", "max_steps=0"], "expects int >= 1"),
    (["--option", "noequals"], "expected KEY=VALUE, got 'noequals'"),
    (["--strategy", "nope"], "unknown strategy 'nope'"),
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--ranker", "nope"], "unknown ranker 'nope'"),
])
def test_ask_usage_errors_exit_2_before_anything_runs(args: list[str], says: str) -> None:
    from pyql.demo import movies_path

    result = CliRunner().invoke(app, ["ask", "who directed Inception", "--kb", str(movies_path()),
                                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                                      *args])
    assert result.exit_code == 2, result.output
    assert says in _one_error_line(result)


@pytest.mark.parametrize("argv", [
    ["run", "get_relation(x)"],                       # neither --kb nor --db
    ["run", "--bogus", "get_relation(x)"],            # an unknown option
    ["run", "--max-values", "0", "--kb", "x.ttl", "x"],  # typer's own range check
    ["kb", "info"],                                    # a missing argument
    ["--bogus"],
])
def test_typer_usage_errors_are_error_lines_exit_2(argv: list[str]) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    _one_error_line(result)
    assert result.stderr.splitlines()[-1].startswith("hint: see pyql")
