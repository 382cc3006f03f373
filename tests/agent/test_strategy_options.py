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
    ({"max_steps": "many"}, "int"),
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
