"""The paper preset: the original code's settings per dataset, and its verbatim prompts."""

from __future__ import annotations

import hashlib

import pytest

from pyql.agent.strategies.queryagent.presets import (
    ANSWER_CHOICE_PROMPT,
    PRESETS,
    PresetError,
    dataset_family,
    get_preset,
)
from pyql.agent.strategies.queryagent.prompts import (
    get_prompt_profile,
    question_message,
    system_prompt,
)

#: sha256 of the original prompt constants (cdhx/QueryAgent@5364b3e prompt_list.py)
ORIGINAL_SHA256 = {
    "paper-grailqa": "25a65203326525fc8bdc6c0441f7ce38a444e6f7f4343922b9e043226ac91ae0",
    "paper-graphq": "5f2796828a25b3aedc6d7ddad1ca9af4429b4e03dc94b5a7548d9e80ba3e5ccb",
    "paper-metaqa": "2335266699af0762ceea820c50dcb0e029e208b520f45fce8430daf16f342764",
    "paper-webqsp": "8cf76a16498ba59ec04e4bf9441ab305fb2020c35107aa46cbee33dd37bb9a33",
    "paper-wikisql": "f77a93130a6a6bc74ec87f6d5b7289afa30cedaec7c60e046d48c5b3a201251a",
}


@pytest.mark.parametrize(("dataset", "steps"), [
    ("grailqa", 7), ("webqsp", 7), ("metaqa-3hop", 7), ("metaqa-1hop", 7), ("graphq", 8),
    ("wikisql", 9)])
def test_paper_max_steps_per_dataset(dataset: str, steps: int) -> None:
    preset = get_preset("paper", dataset)
    assert preset.max_steps == steps
    assert preset.history == "paper"
    assert preset.temperature == 0.0
    assert preset.sources["max_steps"].startswith("ag_src/")


def test_paper_freebase_semantics() -> None:
    for dataset in ("grailqa", "graphq", "webqsp"):
        preset = get_preset("paper", dataset)
        assert preset.extremum_mode == "limit"  # ORDER BY ... LIMIT 1, ties dropped
        assert preset.on_stop == "choose_answer"
        assert preset.context_budget == 4090
        assert preset.ranker == "openai"
        assert preset.relation_filter == dataset  # a pyql.profiles.RELATION_FILTERS name
        assert preset.exclude_topic == "answer"  # set_answer's FILTER(?ans != mid)
    assert get_preset("paper", "metaqa").exclude_topic == "nodes"
    assert get_preset("default", "metaqa").exclude_topic == "off"
    assert get_preset("paper", "metaqa").on_stop == "execute"


def test_every_paper_setting_names_its_source() -> None:
    for preset in PRESETS["paper"].values():
        assert {"max_steps", "history", "prompt", "on_stop"} <= set(preset.sources)


def test_default_and_errors() -> None:
    assert get_preset("default", "spider").max_steps == 20
    with pytest.raises(PresetError, match="known: default, paper"):
        get_preset("nope", "metaqa")
    with pytest.raises(PresetError, match="covers grailqa, graphq, metaqa, webqsp, wikisql"):
        get_preset("paper", "spider")
    assert dataset_family("metaqa-2hop") == "metaqa"
    assert dataset_family("webqsp-predicted") == "webqsp"


@pytest.mark.parametrize("name", sorted(ORIGINAL_SHA256))
def test_paper_prompts_are_the_originals_verbatim(name: str) -> None:
    profile = get_prompt_profile(name)
    text = system_prompt(profile, "text")
    original = hashlib.sha256(_file_text(name).encode()).hexdigest()
    assert original == ORIGINAL_SHA256[name]
    assert text == profile.verbatim + "\n"
    assert profile.verbatim == _file_text(name).strip()
    with pytest.raises(ValueError, match="no tools mode"):
        system_prompt(profile, "tools")


def _file_text(name: str) -> str:
    from importlib import resources

    return resources.files("pyql.prompts").joinpath(f"paper/{name[6:]}.txt").read_text("utf-8")


def test_paper_webqsp_prompt_has_its_own_demo_and_time_constraint() -> None:
    profile = get_prompt_profile("paper-webqsp")
    assert "where do most of the people live in japan" in profile.verbatim
    assert "add_time_constrain" in profile.functions
    assert "Question : who" in question_message(profile, "who", entities={"Japan": "m.03_3d"})


def test_answer_choice_prompt_formats() -> None:
    text = ANSWER_CHOICE_PROMPT.format(question="q?", result="The value of variable ?x is [1]")
    assert text.endswith("Question : q?\nResult : The value of variable ?x is [1]\nOutput : ")
