"""Token counting from local tiktoken files, prices, and per-question usage."""

from __future__ import annotations

import hashlib
import logging
import shutil
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pyql.agent.llm.accounting import (
    DEFAULT_PRICES,
    Price,
    PriceTable,
    TokenCounter,
    TokenUsage,
    UsageTally,
    encoding_name_for_model,
    get_encoding,
    load_encoding,
)


def test_load_encoding_from_local_files(tiktoken_dir: Path) -> None:
    cl100k = load_encoding("cl100k_base", tiktoken_dir)
    assert cl100k.encode("hello world") == [15339, 1917]
    assert cl100k.decode(cl100k.encode("get_relation(m.0crbvqz)")) == "get_relation(m.0crbvqz)"
    assert cl100k.encode("<|endoftext|>", allowed_special="all") == [100257]
    o200k = load_encoding("o200k_base", tiktoken_dir)
    assert o200k.encode("hello world") == [24912, 2375]


def test_load_encoding_from_cache_named_file(tiktoken_dir: Path, tmp_path: Path) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    shutil.copy(tiktoken_dir / "cl100k_base.tiktoken", tmp_path / hashlib.sha1(url.encode()).hexdigest())
    assert load_encoding("cl100k_base", tmp_path).encode("hello world") == [15339, 1917]


def test_load_encoding_checks_the_file(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken")
    (tmp_path / "cl100k_base.tiktoken").write_bytes(b"IQ== 0\n")
    with pytest.raises(ValueError, match="sha256"):
        load_encoding("cl100k_base", tmp_path)
    with pytest.raises(FileNotFoundError):
        load_encoding("o200k_base", tmp_path)
    with pytest.raises(ValueError, match="unknown encoding"):
        load_encoding("p50k_base", tmp_path)


def test_get_encoding_reads_the_environment(tiktoken_dir: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.setenv("PYQL_TIKTOKEN_DIR", str(tiktoken_dir))
    assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_encoding_for_model() -> None:
    assert encoding_name_for_model("gpt-3.5-turbo") == "cl100k_base"
    assert encoding_name_for_model("gpt-4o-mini-2024-07-18") == "o200k_base"
    assert encoding_name_for_model("openai/gpt-4.1") == "o200k_base"
    assert encoding_name_for_model("llama-3") == "cl100k_base"


def test_token_counter_counts_messages(tiktoken_dir: Path) -> None:
    counter = TokenCounter("cl100k_base", directory=tiktoken_dir)
    assert counter.exact and counter.count("hello world") == 2
    messages = [{"role": "user", "content": "hello world"}]
    # 3 per message + "user" (1) + "hello world" (2) + 3 reply priming
    assert counter.count_messages(messages) == 9
    assert counter.count_messages(messages, [{"type": "function"}]) > 9
    # one message's share: what the agent adds as its prompt grows by a turn
    turn = [{"role": "assistant", "content": "Thought 1 : x"}, {"role": "user", "content": None,
                                                                 "name": "obs"}]
    assert counter.count_messages(messages + turn) == (
        counter.count_messages(messages) + sum(counter.count_message(m) for m in turn))


def test_token_counter_loads_its_encoding_once_on_first_use(tiktoken_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    loads: list[TokenCounter] = []
    load = TokenCounter._load
    monkeypatch.setattr(TokenCounter, "_load", lambda self: (loads.append(self), load(self))[1])
    counter = TokenCounter("cl100k_base", directory=tiktoken_dir)
    assert loads == []  # made, not loaded: a run that never counts never pays for it
    barrier = threading.Barrier(8)

    def count() -> int:
        barrier.wait()
        return counter.count("hello world")

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda _: count(), range(8))) == [2] * 8
    assert loads == [counter]


def test_token_counter_falls_back_to_estimates(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                               ) -> None:
    counter = TokenCounter("cl100k_base", directory=tmp_path)
    with caplog.at_level(logging.WARNING):
        assert counter.count("x" * 10) == 3
    assert not counter.exact
    assert "estimated" in caplog.text


def test_prices(caplog: pytest.LogCaptureFixture) -> None:
    table = PriceTable()
    # the paper's gpt-3.5-turbo price: $0.0015 / 1K input, $0.002 / 1K output
    assert table.cost("gpt-3.5-turbo-0613", 1000, 1000) == pytest.approx(0.0035)
    assert table.cost("gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert table.cost("gpt-4o-mini", 1_000_000, 0, cached_tokens=500_000) == pytest.approx(0.1125)
    with caplog.at_level(logging.WARNING):
        assert table.cost("my-local-model", 10**6, 10**6) == 0.0
        assert table.cost("my-local-model", 10**6, 10**6) == 0.0
    assert caplog.text.count("my-local-model") == 1
    custom = PriceTable({"m": {"input": 1.0, "output": 3.0}, "n": (2.0, 4.0)})
    assert custom.cost("m", 10**6, 10**6) == 4.0 and custom.cost("n", 10**6, 0) == 2.0
    # looked up once per model, the same price every time
    assert custom.lookup("m-2024") is custom.lookup("m-2024") is custom.prices["m"]
    assert custom.lookup("x") is None and custom.lookup("x") is None
    assert isinstance(DEFAULT_PRICES["gpt-4o"], Price)


def test_price_table_of_keeps_a_table_and_makes_one_of_a_mapping() -> None:
    custom = PriceTable({"m": (1.0, 3.0)})
    assert PriceTable.of(custom) is custom
    assert PriceTable.of({"m": (1.0, 3.0)}).cost("m", 10**6, 10**6) == 4.0
    assert PriceTable.of(None).prices == PriceTable().prices


def test_token_counter_for_an_llm_uses_its_models_encoding(tiktoken_dir: Path) -> None:
    from pyql.agent.llm.clients import ScriptedLLM

    assert TokenCounter.for_llm(ScriptedLLM([], model="gpt-4o-mini")).encoding.name == "o200k_base"
    assert TokenCounter.for_llm(ScriptedLLM([])).encoding.name == "cl100k_base"
    assert TokenCounter.for_llm(object()).encoding.name == "cl100k_base"


def test_usage_adds_up() -> None:
    tally = UsageTally()
    tally.add_call(TokenUsage(prompt_tokens=100, completion_tokens=10), cost=0.1, seconds=1.0)
    tally.add_trigger("RM202")
    a = tally.usage()
    tally = UsageTally()
    tally.kb_queries = 3
    tally.add_call(TokenUsage(prompt_tokens=50, completion_tokens=5, estimated=True), cost=0.2)
    tally.add_trigger("RM202")
    tally.add_trigger("PY101")
    b = tally.usage(seconds=2.0)
    tally.add_trigger("PY101")
    assert b.guideline_triggers == {"RM202": 1, "PY101": 1}  # a made usage does not move
    total = a + b
    assert (total.llm_calls, total.prompt_tokens, total.completion_tokens) == (2, 150, 15)
    assert total.cost == pytest.approx(0.3) and total.kb_queries == 3 and total.seconds == 2.0
    assert total.estimated_tokens
    assert total.guideline_triggers == {"RM202": 2, "PY101": 1}
    assert a.guideline_triggers == {"RM202": 1}  # values are immutable


def _offline(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """tiktoken with an empty cache and every download refused at once (a proxy nobody runs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("PYQL_TIKTOKEN_DIR", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(proxy, f"http://127.0.0.1:{port}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # tiktoken's in-process cache


def test_get_encoding_uses_tiktokens_own_cache(tiktoken_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _offline(monkeypatch, tmp_path)
    # tiktoken's own cache (files named by the sha1 of the download URL) answers, no network
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    shutil.copy(tiktoken_dir / "o200k_base.tiktoken", tmp_path / hashlib.sha1(url.encode()).hexdigest())
    assert get_encoding("o200k_base").encode("hello world") == [24912, 2375]


def test_offline_without_a_cache_uses_the_fallback_or_estimates(
        tiktoken_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _offline(monkeypatch, tmp_path)
    monkeypatch.setenv("PYQL_DATA", str(tmp_path))  # shared data without a tiktoken/ copy
    with pytest.raises(OSError):
        get_encoding("cl100k_base")  # tiktoken tried to download, and could not
    assert get_encoding("cl100k_base", fallback=tiktoken_dir).encode("hello world") == [15339, 1917]
    assert TokenCounter("cl100k_base", fallback=tiktoken_dir).exact
    estimate = TokenCounter("cl100k_base")
    assert not estimate.exact and estimate.count("12345678") == 2


def test_the_directory_overrides_tiktoken(tiktoken_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _offline(monkeypatch, tmp_path)
    monkeypatch.setenv("PYQL_TIKTOKEN_DIR", str(tiktoken_dir))
    assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert list(tmp_path.iterdir()) == []  # tiktoken was not asked


def test_prompt_stats(tiktoken_dir: Path) -> None:
    from typer.testing import CliRunner

    from pyql.agent.commands.prompts import prompt_stats
    from pyql.agent.strategies.queryagent.prompts import prompt_profiles
    from pyql.cli import app

    rows = prompt_stats(str(tiktoken_dir))
    # every prompt: ours in both modes, the verbatim originals in text mode
    assert {(r["profile"], r["mode"]) for r in rows} == {
        (p, m) for p in prompt_profiles() for m in ("text", "tools")
        if m == "text" or not p.startswith("paper-")}
    for row in rows:
        assert row["static_tokens"] == row["system_tokens"] + row["tool_schema_tokens"]
        assert (row["tool_schema_tokens"] > 0) == (row["mode"] == "tools")
    original = {r["profile"]: r["original_tokens"] for r in rows}
    # the original prompts' sizes (as the issue measured them), counted from the verbatim files
    assert (original["freebase"], original["metaqa"], original["wikisql"]) == (1875, 932, 1647)
    assert original["paper-graphq"] == 1807 and original["paper-webqsp"] == 1274
    assert original["generic"] is None and original["spider"] is None
    paper = [r for r in rows if r["profile"].startswith("paper-")]
    assert len(paper) == 5 and all(abs(r["static_tokens"] - r["original_tokens"]) <= 1
                                   for r in paper)  # the verbatim prompt is the original
    result = CliRunner().invoke(app, ["prompts", "stats", "--tiktoken-dir", str(tiktoken_dir)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "GrailQA" in out and "paper-webqsp" in out


def test_offline_the_shared_data_copy_is_the_default_fallback(monkeypatch) -> None:  # noqa: ANN001
    """No network, no override: the rank files come from the shared data's tiktoken/ folder
    (``pyql prompts stats`` and token counts work offline out of the box)."""
    import tiktoken

    from pyql.agent.llm.accounting import data_tiktoken_dir, get_encoding
    from tests.conftest import data_dir

    def offline(name: str) -> None:
        raise OSError("no network")

    monkeypatch.delenv("PYQL_TIKTOKEN_DIR", raising=False)
    monkeypatch.setenv("PYQL_DATA", str(data_dir()))
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    assert data_tiktoken_dir() == data_dir() / "tiktoken"
    assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    monkeypatch.setenv("PYQL_DATA", str(data_dir() / "metaqa"))  # no tiktoken/ there
    assert data_tiktoken_dir() is None
