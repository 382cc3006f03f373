"""``pyql mcp --profile wikidata``: the same tools, ids served with their labels (the SDK's own
client over stdio, on the hand-written Wikidata-shaped fixture)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from tests.mcp.conftest import stdio_server  # noqa: E402

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kb" / "wikidata_small.ttl"


def test_relations_and_values_are_served_with_their_labels() -> None:
    async def go() -> None:
        async with Client(stdio_server("--kb", str(FIXTURE), "--profile", "wikidata")) as client:
            started = await client.call_tool("start_question", {
                "question": "where was Douglas Adams educated?"})
            assert not started.is_error, started.content
            assert started.structured_content["entities"] == {"Douglas Adams": "Q42"}
            result = await client.call_tool("get_relation", {"node": "Q42"})
            assert not result.is_error, result.content
            relations = result.structured_content["relations"]
            assert "P69" in relations["forward"]  # the data keeps the ids
            assert relations["labels"]["P69"] == "educated at"
            assert relations["labels"]["p:P69"] == "educated at"
            text = result.content[0].text
            assert "P69 (educated at)" in text and "'P69'" not in text
            result = await client.call_tool("add_fact", {"head": "Q42", "relation": "P69",
                                                         "tail": "?x"})
            assert not result.is_error, result.content
            assert "Q691283 (St John's College)" in result.content[0].text

    asyncio.run(go())
