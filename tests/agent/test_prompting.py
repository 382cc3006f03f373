"""Prompts: generated tool docs/schemas, the static prefix, reading replies, rendering
observations and hints, and the one-shot examples checked against their sources."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from pyql import Session
from pyql.agent.strategies.queryagent.prompts import (
    RETRY_WORDING,
    get_prompt_profile,
    parse_reply,
    prompt_profiles,
    question_message,
    render_hint,
    render_observation,
    render_relations,
    system_prompt,
    tools_doc,
)
from pyql.feedback import Hint
from pyql.program import SPARQL_TOOLS, SQL_TOOLS, TOOLSETS, parse_call
from pyql.schemas import tool_schemas
from tests.conftest import REPO, data_dir
from tests.support.metaqa import metaqa_kb

#: the generated prompts (the original papers' verbatim ones are tested in test_presets.py)
PROFILES = [name for name in prompt_profiles() if not get_prompt_profile(name).verbatim]


def unordered(text: str) -> str:
    """``text`` with the items of every ``[...]`` list sorted (value order is the store's)."""
    return re.sub(r"\[([^\[\]]*)\]",
                  lambda m: "[" + ", ".join(sorted(m.group(1).split(", "))) + "]", text)


def example_steps(example: str) -> list[tuple[str, str | None]]:
    """(action, observation or None) for each step of a one-shot example."""
    actions = re.findall(r"^Action (\d+) : (.*)$", example, re.MULTILINE)
    observations = dict(re.findall(r"^Observation (\d+) : (.*)$", example, re.MULTILINE))
    return [(action, observations.get(n)) for n, action in actions]


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("mode", ["text", "tools"])
def test_prefix_before_the_question_is_identical(name: str, mode: str) -> None:
    profile = get_prompt_profile(name)
    first = [system_prompt(profile, mode),
             question_message(profile, "who directed [Kismet]", entities={"Kismet": "Kismet"},
                              columns=["a"])]
    second = [system_prompt(profile, mode),
              question_message(profile, "name the films [Joel Zwick] wrote",
                               entities={"Joel Zwick": "Joel Zwick"}, columns=["b", "c"])]
    assert first[0] == second[0]
    assert first[1].startswith("Question : ") and second[1].startswith("Question : ")
    # the serialised request is byte-identical up to the question text
    a = json.dumps([{"role": "system", "content": first[0]}, {"role": "user", "content": first[1]}])
    b = json.dumps([{"role": "system", "content": second[0]}, {"role": "user", "content": second[1]}])
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    assert a[:common].endswith('"Question : ')
    if mode == "tools":
        assert tool_schemas(profile.signatures, profile) == tool_schemas(profile.signatures, profile)


@pytest.mark.parametrize("name", PROFILES)
def test_tool_doc_is_generated_from_the_signatures(name: str) -> None:
    profile = get_prompt_profile(name)
    text = system_prompt(profile, "text")
    doc = tools_doc(profile.signatures, profile)
    assert doc in text
    for sig in profile.signatures:
        assert str(sig) in doc and sig.doc in doc
        for param in sig.params:
            assert f"- {param.name}: " in doc
    assert len(re.findall(r"^\d+\. ", doc, re.MULTILINE)) == len(profile.functions)
    # tools mode leaves the functions to the tool schemas
    assert doc not in system_prompt(profile, "tools")


@pytest.mark.parametrize("toolset", ["sparql", "sql"])
def test_tool_schemas_match_the_signatures(toolset: str) -> None:
    signatures = list(TOOLSETS[toolset].values())
    schemas = tool_schemas(signatures)
    assert [s["function"]["name"] for s in schemas] == [sig.name for sig in signatures]
    for schema, sig in zip(schemas, signatures, strict=True):
        params = schema["function"]["parameters"]
        assert list(params["properties"]) == [p.name for p in sig.params]
        assert params["required"] == [p.name for p in sig.params if not p.optional]
        assert schema["function"]["description"] == sig.doc
        for p in sig.params:
            if p.choices:
                assert params["properties"][p.name]["enum"] == list(p.choices)
    json.dumps(schemas)  # serialisable


def test_profiles_use_their_toolsets() -> None:
    assert get_prompt_profile("freebase").functions == (
        "get_relation", "add_fact", "add_max", "add_min", "add_count", "add_filter", "set_answer",
        "execute")  # the paper's Table 10
    assert get_prompt_profile("wikisql").tools == "sql"
    assert "add_type" in get_prompt_profile("wikidata").functions
    with pytest.raises(ValueError, match="unknown prompt profile"):
        get_prompt_profile("dbpedia")


@pytest.mark.parametrize("name", PROFILES)
def test_example_actions_are_valid_calls(name: str) -> None:
    profile = get_prompt_profile(name)
    steps = example_steps(profile.example)
    assert steps and steps[-1][0] == "execute()"
    for action, observation in steps:
        call = parse_call(action, profile.tools)
        assert call.name in profile.functions
        assert (observation is None) == (call.name == "execute")


@pytest.mark.parametrize(
    ("reply", "thought", "actions"),
    [
        ("Thought 1 : look.\nAction 1 : get_relation(m.0x)", "look.", ("get_relation(m.0x)",)),
        ("Thought 1: look.\nAction 1: `get_relation(m.0x)`", "look.", ("get_relation(m.0x)",)),
        ("Sure, here it is.\n**Thought 2:** a\n**Action 2:** add_fact(?a, r, ?b)\nHope it helps",
         "a", ("add_fact(?a, r, ?b)",)),
        ("Thought 3 : x\nAction 3 :\n```python\nset_answer(?b)\n```\n", "x", ("set_answer(?b)",)),
        ("Thought 4 : x\nAction 4 : execute().", "x", ("execute()",)),
        ("Thought 5 : x\nAction 5 : get_relation(?m) to see its relations", "x",
         ("get_relation(?m)",)),
        ("thought 6 - x\naction 6: execute()", "", ("execute()",)),
        ("Thought 7 : x\nAction 7 : execute()\nObservation 7 : invented\nThought 8 : y\n"
         "Action 8 : get_relation(?z)", "x", ("execute()",)),
        ("Thought 9 : one\nThought 9 : two\nAction 9 : execute()", "one\ntwo", ("execute()",)),
        ("Thought 1 : a\nAction 1 : get_relation(x)\nThought 2 : b\nAction 2 : get_relation(y)",
         "a\nb", ("get_relation(x)", "get_relation(y)")),
        ("Thought 1 : I cannot find a relation, let me think.", "I cannot find a relation, let me think.",
         ()),
        ("Action 3: Since we couldn't find a suitable relation, we try another way.", "",
         ("Since we couldn't find a suitable relation, we try another way",)),
        ("I will now call\nget_relation(m.0x)\n", "I will now call\nget_relation(m.0x)",
         ("get_relation(m.0x)",)),
        ("", "", ()),
    ],
)
def test_parse_reply(reply: str, thought: str, actions: tuple[str, ...]) -> None:
    parsed = parse_reply(reply, SPARQL_TOOLS)
    assert parsed.actions == actions
    if reply.startswith("thought 6"):
        return  # "thought 6 - x" is not a marker; only the action is read
    assert parsed.thought == thought


def test_parse_reply_issues() -> None:
    assert parse_reply("Thought 1 : nothing to do").issue == "no_action"
    multiple = parse_reply("Action 1 : get_relation(x)\nAction 2 : get_relation(y)")
    assert multiple.issue == "multiple_actions"
    assert multiple.action_text == "get_relation(x)\nget_relation(y)"
    assert parse_reply("Action 1 : execute()").issue is None


def test_hint_renderer_owns_the_retry_wording() -> None:
    hint = Hint(code="RM202", message="You should use get_relation() first")
    assert render_hint(hint, 3) == ("You should use get_relation() first. "
                                    "Please re-generate only Thought 4 and Action 4.")
    assert render_hint(Hint(code="X", message="Check again!"), 1).endswith(
        "Check again! Please re-generate only Thought 2 and Action 2.")
    # the wording lives in one place: the prompting module of the agent
    agent_dir = REPO / "agent"
    holders = [p.relative_to(agent_dir).as_posix() for p in agent_dir.rglob("*.py")
               if "re-generate" in p.read_text()]
    assert holders == ["strategies/queryagent/prompts.py"]
    assert RETRY_WORDING.format(n=5) == "Please re-generate only Thought 5 and Action 5."


def test_render_relations() -> None:
    assert render_relations(["a"], []) == "{'forward': ['a'], 'backward': []}"
    assert render_relations(["a"], ["b"], forward_total=3, backward_total=1) == (
        "{'forward': ['a', ...], 'backward': ['b']}")


def test_render_observation_ranks_long_relation_lists() -> None:
    lines = "".join(f"Film|rel_{i}|Value {i}\n" for i in range(60)) + "Film|was_directed_by|Someone\n"
    kb = metaqa_kb(lines)
    session = Session(kb, {"Film": "Film"})
    obs = session.run("get_relation(Film)")
    assert len(obs.relations) == 61
    text = render_observation(obs, 1, question="who directed [Film]", ranker=None, top_k=40)
    assert text.count("'rel_") == 40 and "directed_by" not in text  # sorted order, cut
    assert text.endswith("...], 'backward': []}")
    from pyql.agent.grounding.ranking import BM25Ranker

    ranked = render_observation(obs, 1, question="who directed [Film]", ranker=BM25Ranker())
    assert "'was_directed_by'" in ranked and ranked.count("'") == 2 * 40 + 4
    assert ranked == render_observation(obs, 1, question="who directed [Film]", ranker=BM25Ranker())
    assert len(render_observation(obs, 1, max_chars=100, ranker=None)) == 100


def test_freebase_example_is_the_papers_figure_4() -> None:
    seed = REPO.parent / "shared" / "seeds" / "queryagent-eraser.txt"
    if not seed.is_file():
        pytest.skip(f"the paper's text is not at {seed}")
    paper = seed.read_text(encoding="utf-8")
    start = paper.index("Thought 1 : This question aims to find a cyclone")
    end = paper.index("Action 9 : `execute()`") + len("Action 9 : `execute()`")
    figure = re.sub(r"\s+", " ", paper[start:end].replace("`", ""))
    example = get_prompt_profile("freebase").example
    ours = re.sub(r"\s+", " ", example[example.index("Thought 1 :"):])
    assert ours == figure  # verbatim, without the paper's code-font backticks


def test_metaqa_example_matches_the_kb() -> None:
    """The example's observations are what the Session and the renderer produce on MetaQA."""
    kb_txt = data_dir() / "metaqa" / "kb.txt"
    if not kb_txt.is_file():
        pytest.skip(f"MetaQA KB not found at {kb_txt}")
    profile = get_prompt_profile("metaqa")
    steps = example_steps(profile.example)
    movies = {"Never a Dull Moment", "Johnny Handsome", "The Taking of Pelham One Two Three"}
    lines = [line for line in kb_txt.read_text(encoding="utf-8").splitlines()
             if line.split("|")[0] in movies or line.endswith("|John Godey")]
    session = Session(metaqa_kb("\n".join(lines)), {"John Godey": "John Godey"})
    question = re.search(r"^Question : (.*)$", profile.example, re.MULTILINE).group(1)
    for n, (action, observation) in enumerate(steps, 1):
        obs = session.run(action)
        assert obs.ok, obs.text
        if observation is not None:
            assert unordered(render_observation(obs, n, question=question)) == unordered(
                observation)
    assert set(obs.answers) == {"Walter Hill", "Joseph Sargent", "Jerry Paris"}
    assert "[John Godey]\tWalter Hill|Joseph Sargent|Jerry Paris" in (
        data_dir() / "metaqa" / "2-hop" / "qa_dev.txt").read_text(encoding="utf-8")


def test_wikisql_example_matches_the_db() -> None:
    tables = data_dir() / "wikisql" / "dev.tables.jsonl.gz"
    if not tables.is_file():
        pytest.skip(f"WikiSQL tables not found at {tables}")
    from pyql.db import SqlDB
    from pyql.sql.session import SqlSession

    with gzip.open(tables, "rt", encoding="utf-8") as handle:
        table = next(t for t in map(json.loads, handle) if t["id"] == "1-10015132-11")

    def setup(conn: object) -> None:
        columns = ", ".join(f'"{h}" TEXT' for h in table["header"])
        conn.execute(f'CREATE TABLE "players" ({columns})')  # type: ignore[attr-defined]
        marks = ", ".join("?" * len(table["header"]))
        conn.executemany(f'INSERT INTO "players" VALUES ({marks})', table["rows"])  # type: ignore[attr-defined]

    session = SqlSession(SqlDB.sqlite_memory(setup), table="players")
    profile = get_prompt_profile("wikisql")
    header = re.search(r"^Table Header : (.*)$", profile.example, re.MULTILINE).group(1)
    assert header == str(list(session.memory.columns))
    for n, (action, observation) in enumerate(example_steps(profile.example), 1):
        obs = session.run(action)
        assert obs.ok, obs.text
        if observation is not None:
            assert render_observation(obs, n) == observation
    assert obs.answers == ("Guard-Forward",)
    question = re.search(r"^Question : (.*)$", profile.example, re.MULTILINE).group(1)
    dev = (data_dir() / "wikisql" / "dev.jsonl").read_text(encoding="utf-8")
    assert json.dumps(question) in dev


def test_sql_tools_are_documented_for_wikisql() -> None:
    doc = tools_doc(get_prompt_profile("wikisql").signatures, get_prompt_profile("wikisql"))
    for name in ("get_column", "add_condition", "set_answer", "execute"):
        assert str(SQL_TOOLS[name]) in doc


def test_prompt_files_ship_as_package_data() -> None:
    prompts = REPO / "prompts"
    names = {p.name for p in prompts.iterdir() if p.is_file()}
    assert {"profiles.json", "format_text.md", "format_tools.md"} <= names
    assert all(Path(n).suffix in {".md", ".json", ".py", ".txt", ".yaml"} for n in names)


def test_a_reply_read_before_is_answered_from_memory_per_functions() -> None:
    text = "Thought 9 : done.\nAction 9 : execute()"
    first = parse_reply(text, ("execute",))
    assert parse_reply(text, ("execute",)) is first
    assert (first.thought, first.actions, first.issue) == ("done.", ("execute()",), None)
    # without an Action marker the functions decide: each set of functions has its own reading
    bare = "get_relation(m.0x)"
    assert parse_reply(bare, ("get_relation",)).actions == ("get_relation(m.0x)",)
    assert parse_reply(bare, ()).issue == "no_action"
    fenced = "Thought 1 : a\nAction 1 :\n```python\npyql get_relation(m.0x)\n```"
    assert parse_reply(fenced).actions == ("get_relation(m.0x)",)
    long_reply = "Thought 1 : " + "x" * 2000 + "\nAction 1 : execute()"
    assert parse_reply(long_reply).actions == ("execute()",)
    assert parse_reply(long_reply) is not parse_reply(long_reply)  # long replies are not kept


def test_the_retry_wording_names_the_next_step_as_the_paper_does() -> None:
    """Issue 36, item 19 asked whether a hint at step 4 should name "Thought 5 and Action 5".
    It should: the paper's own trajectories (Appendix G, Figures 5-7) answer an error at step i
    with "re-generate only Thought i+1 and Action i+1", and the model's next reply is numbered
    i+1 (the hinted step keeps its number in the transcript; pyql's trajectory does the same,
    tests/agent/test_query_agent.py::test_mistakes_with_guidelines_give_hints)."""
    fixtures = REPO / "tests" / "fixtures" / "paper_requests"
    seen = 0
    for path in sorted(fixtures.glob("figure*.trajectory.json")):
        observations = json.loads(path.read_text())["observations"]
        for step, (text, _) in enumerate(observations, start=1):
            named = re.search(r"re-generate only Thought (\d+) and Action (\d+)", text)
            if named is None:
                continue
            seen += 1
            assert int(named.group(1)) == int(named.group(2)) == step + 1, (path.name, step)
            assert render_hint(Hint(code="X", message="m"), step).endswith(
                f"Thought {step + 1} and Action {step + 1}.")
    assert seen >= 3
