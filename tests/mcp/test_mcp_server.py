"""``pyql mcp`` driven by the mcp SDK's own client over stdio and Streamable HTTP (issue 23)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any
from urllib.parse import quote

import pytest

from pyql.agent.strategies.queryagent.prompts import get_prompt_profile
from pyql.schemas import tool_schemas
from tests.mcp.conftest import (
    HttpServer,
    MetaQACase,
    checksum,
    connected,
    start_http,
    stdio_server,
    stop,
    tool_arguments,
)
from tests.test_injection import PAYLOADS

Client = pytest.importorskip("mcp").Client

TRANSPORTS = ["stdio", "http"]
METAQA_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"]
                  for t in tool_schemas(get_prompt_profile("metaqa").signatures,
                                        get_prompt_profile("metaqa"))}
SESSION_TOOLS = {"start_question", "show_query", "show_program", "undo", "reset"}
#: one payload of each family: closing an IRI, a string, a group; a SPARQL update; control bytes
ATTACKS = [p for p in PAYLOADS if p in (
    "} ; DELETE WHERE { ?s ?p ?o } #", '"}; DROP ALL; #',
    "<http://x> } INSERT DATA { <http://a> <http://b> <http://c> } #", "\x00\x07\x1b\x7f")]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def gold_answers(client: Client, case: MetaQACase) -> list[Any]:
    started = await client.call_tool("start_question", {"question": case.item.question})
    assert not started.is_error and started.structured_content["entities"] == {
        case.item.topic: case.item.topic}  # linked from the KB labels, as pyql ask links
    result = None
    for call in case.program:
        result = await client.call_tool(call.name, tool_arguments(call, METAQA_SCHEMAS))
        assert not result.is_error, result.content
        assert result.structured_content["hint"] is None
    assert result is not None
    return list(result.structured_content["answers"])


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_carry_the_dsl_schemas(transport, metaqa_case, kb_http):
    async def go() -> None:
        async with connected(transport, kb_http, "--kb", str(metaqa_case.kb)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == set(METAQA_SCHEMAS) | SESSION_TOOLS  # no ask without --llm
            for name, schema in METAQA_SCHEMAS.items():
                assert tools[name].input_schema == schema
            assert tools["start_question"].input_schema["required"] == ["question"]

    run(go())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_metaqa_two_hop_gold_program_answers(transport, metaqa_case, kb_http):
    async def go() -> None:
        async with connected(transport, kb_http, "--kb", str(metaqa_case.kb)) as client:
            answers = await gold_answers(client, metaqa_case)
            assert sorted(answers) == sorted(metaqa_case.item.answers)
            program = await client.call_tool("show_program", {})
            assert program.structured_content["program"].splitlines() == [
                str(c) for c in metaqa_case.program]
            query = (await client.read_resource("pyql://session/query")).contents[0].text
            assert query.startswith("SELECT") and "directed_by" in query
            ranked = (await client.read_resource("pyql://relations")).contents[0].text
            # ranked for the session's question
            assert set(ranked.splitlines()[:2]) == {"in_language", "directed_by"}
            other = quote("which genre is My Big Fat Greek Wedding")
            genre = (await client.read_resource(f"pyql://relations/{other}")).contents[0].text
            assert genre.splitlines()[0] == "has_genre"
            undone = await client.call_tool("undo", {})
            assert len(undone.structured_content["program"].splitlines()) == len(
                metaqa_case.program) - 1

    run(go())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_guideline_hint_is_a_result_with_its_code(transport, metaqa_case, kb_http):
    async def go() -> None:
        async with connected(transport, kb_http, "--kb", str(metaqa_case.kb)) as client:
            await client.call_tool("start_question", {"question": metaqa_case.item.question})
            # both variables new: a valid call the memory guideline RM204 refuses
            result = await client.call_tool("add_fact", {"head": "?a", "relation": "directed_by",
                                                         "tail": "?b"})
            assert not result.is_error
            hint = result.structured_content["hint"]
            assert hint["code"] == "RM204" and result.structured_content["status"] == "hint"
            assert result.content[0].text.startswith("Hint RM204: ")
            assert (await client.call_tool("show_program", {})).structured_content[
                "program"] == ""  # rolled back

    run(go())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_calls_are_typed_tool_errors_and_the_server_keeps_serving(transport, metaqa_case,
                                                                      kb_http):
    source = checksum(metaqa_case.kb)

    async def go() -> None:
        async with connected(transport, kb_http, "--kb", str(metaqa_case.kb)) as client:
            await client.call_tool("start_question", {"question": metaqa_case.item.question})
            cases = [
                ("add_fact", {"subject": "x"}, "ParseError"),  # an argument it does not have
                ("add_fact", {"head": "?x"}, "ArityError"),
                ("drop_all", {"graph": "x"}, "UnknownFunctionError"),
                ("get_relation", {"node": "x" * 100_000}, "TermError"),
                ("start_question", {"question": "q", "extra": 1}, "ParseError"),
            ]
            for name, args, error_type in cases:
                result = await client.call_tool(name, args)
                assert result.is_error, (name, args)
                assert result.structured_content["error"]["type"] == error_type
                assert len(result.content[0].text) <= 3000
            for attack in ATTACKS:
                for name, schema in METAQA_SCHEMAS.items():
                    for param in schema["properties"]:
                        args = {p: "?x1" for p in schema["required"]} | {param: attack}
                        result = await client.call_tool(name, args)
                        content = result.structured_content
                        if result.is_error:  # refused with the typed error's fields
                            assert content["error"]["type"], (name, param, attack)
                        else:  # or kept inside a literal: no write ever reaches the store
                            assert content["status"] in ("ok", "empty", "hint")
            assert sorted(await gold_answers(client, metaqa_case)) == sorted(
                metaqa_case.item.answers)
            vocabulary = (await client.read_resource("pyql://relations")).contents[0].text
            assert "directed_by" in vocabulary and "http://a" not in vocabulary
    run(go())
    assert checksum(metaqa_case.kb) == source


def test_injections_leave_the_store_as_it_was(metaqa_case):
    """In process: the store's every triple, before and after every attack on every argument."""
    from pyql.apps.mcp import PyqlMcp
    from pyql.kb import open_kb

    kb = open_kb(str(metaqa_case.kb))
    dump = sorted(str(q) for q in kb.store)  # type: ignore[attr-defined]
    face = PyqlMcp(kb)
    key = object.__new__(type("Key", (), {}))
    face.call(key, "start_question", {"question": metaqa_case.item.question})
    refused = 0
    for attack in PAYLOADS:
        for name, schema in METAQA_SCHEMAS.items():
            for param in schema["properties"]:
                result = face.call(key, name, {p: "?x1" for p in schema["required"]}
                                   | {param: attack})
                refused += bool(result.is_error)
    assert refused > len(PAYLOADS)  # most are refused outright
    assert sorted(str(q) for q in kb.store) == dump  # type: ignore[attr-defined]


def test_the_sql_side_on_the_demo_database(demo_db):
    before = checksum(demo_db)

    async def go() -> None:
        async with Client(stdio_server("--db", str(demo_db), "--table", "players")) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"get_column", "add_condition", "set_answer", "execute"} <= tools
            schema = (await client.read_resource("pyql://schema")).contents[0].text
            assert schema.startswith("coaches(") or "players(" in schema
            await client.call_tool("start_question", {"question": "Spanish scorers?"})
            steps = [("add_condition", {"column": "nationality", "op": "=", "value": "Spain"}),
                     ("add_condition", {"column": "points_per_game", "op": ">", "value": "10"}),
                     ("set_answer", {"column": "name"}), ("execute", {})]
            for name, args in steps:
                result = await client.call_tool(name, args)
                assert not result.is_error, result.content
            assert sorted(result.structured_content["answers"]) == [
                "Bruno Salgado", "Gabe Moreno", "Luis Ortega"]
            for attack in [*ATTACKS, "x'; DROP TABLE players; --", "1; DELETE FROM players"]:
                for name, args in [("add_condition", {"column": attack, "op": "=", "value": "a"}),
                                   ("add_condition", {"column": "name", "op": attack,
                                                      "value": "a"}),
                                   ("add_condition", {"column": "name", "op": "=",
                                                      "value": attack}),
                                   ("get_column", {"column": attack})]:
                    result = await client.call_tool(name, args)
                    assert result.is_error or result.structured_content["status"] in (
                        "ok", "empty", "hint")
            query = (await client.read_resource("pyql://session/query")).contents[0].text
            assert query.startswith("SELECT")

    run(go())
    assert checksum(demo_db) == before


def test_two_http_clients_do_not_see_each_others_sessions(metaqa_case, kb_http):
    other_question = "which films did Joel Zwick direct"

    async def first() -> tuple[list[Any], str]:
        async with Client(kb_http.url) as client:
            answers = await gold_answers(client, metaqa_case)
            program = (await client.call_tool("show_program", {})).structured_content["program"]
            return answers, program

    async def second() -> str:
        async with Client(kb_http.url) as client:
            await client.call_tool("start_question", {"question": other_question})
            for _ in range(3):
                result = await client.call_tool(
                    "add_fact", {"head": "?film", "relation": "directed_by", "tail": "Joel Zwick"})
                assert not result.is_error
                await asyncio.sleep(0)
                await client.call_tool("undo", {})
            await client.call_tool(
                "add_fact", {"head": "?film", "relation": "directed_by", "tail": "Joel Zwick"})
            return (await client.read_resource("pyql://session/program")).contents[0].text

    async def both() -> tuple[tuple[list[Any], str], str]:
        return await asyncio.gather(first(), second())

    (answers, program), other = run(both())
    assert sorted(answers) == sorted(metaqa_case.item.answers)
    assert program.splitlines() == [str(c) for c in metaqa_case.program]
    assert other == "add_fact(?film, directed_by, Joel Zwick)"


KILLED_CLIENT = """
import asyncio, sys
from mcp import Client
async def main():
    async with Client(sys.argv[1]) as client:
        await client.call_tool("start_question", {"question": sys.argv[2]})
        print("calling", flush=True)
        while True:
            await client.call_tool("get_relation", {"node": "Joel Zwick"})
asyncio.run(main())
"""


def test_a_client_killed_mid_call_leaves_the_server_serving(metaqa_case):
    server = start_http("--kb", str(metaqa_case.kb))
    try:
        client = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, server.url,
                                   metaqa_case.item.question], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        assert client.stdout is not None and client.stdout.readline().strip() == b"calling"
        time.sleep(0.3)  # calling in a loop: killed in the middle of one
        client.kill()
        client.wait()

        async def after() -> list[Any]:
            async with Client(server.url) as fresh:
                return await gold_answers(fresh, metaqa_case)

        assert sorted(run(after())) == sorted(metaqa_case.item.answers)
        assert server.process.poll() is None
    finally:
        stop(server)


def test_idle_sessions_expire():
    from pyql.apps.mcp.server import SessionStore, _Entry

    made: list[_Entry] = []

    def factory() -> _Entry:
        made.append(_Entry(session=None))  # type: ignore[arg-type]
        return made[-1]

    class Key:
        pass

    store = SessionStore(factory, idle_timeout=0.05)
    a, b = Key(), Key()
    assert store.get(a) is store.get(a)
    time.sleep(0.1)
    store.get(b)  # a's state went idle: dropped
    assert len(store) == 1 and store.get(a) is not made[0]


def test_prompts_hold_queryagents_task_and_demo(metaqa_case):
    async def go() -> None:
        async with Client(stdio_server("--kb", str(metaqa_case.kb))) as client:
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert prompts == {"queryagent"}
            got = await client.get_prompt("queryagent", {"question": metaqa_case.item.question})
            text = got.messages[0].content.text
            profile = get_prompt_profile("metaqa")
            assert text.startswith(profile.task[:200]) and profile.example[:200] in text
            assert text.rstrip().endswith(f"{metaqa_case.item.topic}: {metaqa_case.item.topic}}}")

    run(go())


def test_http_per_request_calls_are_refused_with_a_reason(kb_http: HttpServer):
    from mcp.shared.exceptions import MCPError

    async def go() -> None:
        async with Client(kb_http.url, mode="2026-07-28") as client:
            with pytest.raises(MCPError, match="one pyql session per MCP session"):
                await client.call_tool("show_program", {})

    run(go())


def test_the_ask_tool_runs_a_strategy_end_to_end(fake_openai):
    from pyql.demo import movies_path
    from tests.agent_cli.test_ask import NOLAN_FILMS, QUESTION, TEXT_SCRIPT

    fake_openai.push(*TEXT_SCRIPT)
    params = stdio_server("--kb", str(movies_path()), "--llm", "openai:gpt-test", "--base-url",
                          fake_openai.base_url)
    params.env = {**(params.env or {}), "OPENAI_API_KEY": fake_openai.api_key}

    async def go() -> Any:
        async with Client(params) as client:
            assert "ask" in {t.name for t in (await client.list_tools()).tools}
            return await client.call_tool("ask", {"question": QUESTION})

    result = run(go())
    assert not result.is_error, result.content
    content = result.structured_content
    assert sorted(content["answers"]) == NOLAN_FILMS
    assert "directed_by" in content["query"] and content["finished"]
    assert [s["action"] for s in content["trajectory"]][-1] == "execute()"


def test_a_step_sent_while_ask_runs_does_not_stop_the_stdio_server(fake_openai):
    # over stdio steps run on the event loop; one that waited there for the session ask holds
    # froze the connection until ask ended: no listing, no ping, no cancellation
    from pyql.demo import movies_path
    from tests.agent_cli.test_ask import QUESTION, TEXT_SCRIPT
    from tests.support.fake_openai import Slow

    fake_openai.push(Slow(3.0, then=TEXT_SCRIPT[0]), *TEXT_SCRIPT[1:])
    params = stdio_server("--kb", str(movies_path()), "--llm", "openai:gpt-test", "--base-url",
                          fake_openai.base_url)
    params.env = {**(params.env or {}), "OPENAI_API_KEY": fake_openai.api_key}

    async def go() -> tuple[float, Any, Any]:
        async with Client(params) as client:
            await client.list_tools()
            ask = asyncio.create_task(client.call_tool("ask", {"question": QUESTION}))
            await asyncio.sleep(0.8)  # ask is waiting for the model's first reply
            program = asyncio.create_task(client.call_tool("show_program", {}))
            await asyncio.sleep(0.3)
            start = time.perf_counter()
            await client.list_tools()
            waited = time.perf_counter() - start
            return waited, await ask, await program

    waited, asked, program = run(go())
    assert waited < 1.5, f"the server did not answer for {waited:.1f} s while ask ran"
    assert not asked.is_error, asked.content
    assert not program.is_error


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_undo_keeps_a_call_accepted_after_its_hint(transport, metaqa_case, kb_http):
    # an empty result is hinted once (KB203); repeated, the call is accepted. undo replays the
    # calls before the last one: the guidelines must not refuse that call again.
    empty = {"head": "?x1", "relation": "written_by", "tail": metaqa_case.item.topic}

    async def go() -> None:
        async with connected(transport, kb_http, "--kb", str(metaqa_case.kb)) as client:
            await client.call_tool("start_question", {"question": metaqa_case.item.question})
            first = await client.call_tool("add_fact", empty)
            assert first.structured_content["hint"]["code"] == "KB203"
            again = await client.call_tool("add_fact", empty)
            assert again.structured_content["hint"] is None
            assert again.structured_content["status"] == "empty"
            await client.call_tool("get_relation", {"node": metaqa_case.item.topic})
            undone = await client.call_tool("undo", {})
            assert not undone.is_error
            assert undone.structured_content["program"] == (
                f"add_fact(?x1, written_by, {metaqa_case.item.topic})")

    run(go())


def test_a_session_the_client_ends_is_freed_at_once(metaqa_case):
    from pyql.apps.mcp import PyqlMcp
    from pyql.apps.mcp.serve import http_app
    from pyql.kb import open_kb
    from tests.support.threaded_server import served_in_thread

    face = PyqlMcp(open_kb(str(metaqa_case.kb)))
    with served_in_thread(http_app(face)) as running:

        async def go() -> None:
            url = f"{running.url}/mcp"
            async with Client(url) as first, Client(url) as second:
                await first.call_tool("start_question", {"question": metaqa_case.item.question})
                await second.call_tool("show_program", {})
                assert len(face.sessions) == 2
            # leaving `async with` sends DELETE for each session: nothing waits for the timeout
            assert len(face.sessions) == 0

        run(go())


def test_the_sdk_span_middleware_is_left_out_when_nothing_records_it(metaqa_case):
    from mcp.server.lowlevel import Server

    from pyql.apps.mcp import PyqlMcp
    from pyql.kb import open_kb

    # the SDK still ships it under the name the server filters on
    assert "OpenTelemetryMiddleware" in {type(m).__name__ for m in Server("x").middleware}
    server = PyqlMcp(open_kb(str(metaqa_case.kb))).server()
    assert "OpenTelemetryMiddleware" not in {type(m).__name__ for m in server.middleware}
