"""Presets: named bundles of loop settings, so a run can reproduce a paper's exact setting.

``default`` is pyql's own setting (what ``QueryAgent`` does without a preset). ``paper`` is the
setting of the original QueryAgent code (GitHub ``cdhx/QueryAgent``, commit ``5364b3e``), per
dataset; each value names the file and line of the original it comes from (:attr:`Preset.sources`,
and ``docs/paper_preset.md`` puts them side by side with ours).

A preset only *chooses* settings that exist on their own: the loop's ``max_steps``, how the
history is shown to the model (:attr:`Preset.history`), the prompt-size budget past which a
question is given up, what happens when the loop ends without ``execute()``, the argmax/argmin
semantics of the Session, the relation ranker, the prompt profile, the request format and its
temperature, how relations are listed, the original-only guidelines and the Session's
``paper`` semantics (topic-entity exclusion, administrative-relation filtering, the silent
``add_fact`` retries). Any of them can still be overridden one by one.

>>> p = get_preset("paper", "graphq")
>>> (p.max_steps, p.history, p.context_budget, p.extremum_mode, p.prompt)
(8, 'paper', 4090, 'limit', 'paper-graphq')
>>> get_preset("paper", "metaqa-3hop").max_steps
7
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyql.errors import PyqlError
from pyql.registry import UnknownNameError, lookup

__all__ = [
    "ANSWER_CHOICE_PROMPT",
    "FORGOTTEN_OBSERVATION",
    "PRESETS",
    "Preset",
    "PresetError",
    "UnknownPresetError",
    "dataset_family",
    "get_preset",
    "PAPER_METRICS",
    "PAPER_TEMPERATURES",
    "preset_ranker",
    "preset_temperature",
    "primary_metric",
]

#: the original code, as cited in :attr:`Preset.sources`
ORIGINAL = "cdhx/QueryAgent@5364b3e"

#: what the original shows instead of an observation older than two steps
#: (ag_utils.py:316 ``get_dynamic_history``)
FORGOTTEN_OBSERVATION = "It's not important. Focus on recent observations."

#: the original's last call when the loop ended without ``execute()`` (GRAIL.py:115, WebQSP.py:119,
#: GRAPHQ.py:116): the model picks the answer variable from the current results
ANSWER_CHOICE_PROMPT = (
    "I will give you a question and some results. Your only job is to choose a variable from "
    "the results that best matches the question and output set_answer(?variable_name). Note "
    "that all variables start with a question mark '?'. \nHere is an example:\nQuestion : what "
    "taylor swift album called \nResult : The value of variable ?date is ['2012-08', '2012-07', "
    "'2012-12', '2009-01']. The value of variable ?album is [' Red', ' Speak Now', ' Fearless']"
    "\nOutput : set_answer(?album)\nQuestion : {question}\nResult : {result}\nOutput : "
)

History = Literal["full", "paper"]
OnStop = Literal["execute_current", "choose_answer", "execute"]


class PresetError(PyqlError, LookupError):
    """An unknown preset, or a preset that has no setting for the dataset."""


class UnknownPresetError(UnknownNameError, PresetError):
    """An unknown preset name (``known``: the presets there are)."""


@dataclass(frozen=True)
class Preset:
    """One dataset's loop settings (see the module docstring)."""

    name: str
    dataset: str
    max_steps: int
    #: ``full``: every observation stays in the prompt; ``paper``: observations older than two
    #: steps become :data:`FORGOTTEN_OBSERVATION`, and the one two steps back too when it is an
    #: error longer than 250 characters (ag_utils.py:297-327)
    history: History = "full"
    #: give the question up when the prompt exceeds this many tokens (None: only the model's
    #: context window ends the loop)
    context_budget: int | None = None
    #: when the loop ends without an accepted ``execute()``: ``execute_current`` runs the current
    #: query if it has an answer (pyql's default); ``choose_answer`` asks the model which
    #: variable is the answer (:data:`ANSWER_CHOICE_PROMPT`) and executes with it (the
    #: original on Freebase); ``execute`` executes the current query as it is (the original on
    #: MetaQA and WikiSQL)
    on_stop: OnStop = "execute_current"
    #: ``ties`` (argmax keeps every tied row) or ``limit`` (``ORDER BY ... LIMIT 1``, the original)
    extremum_mode: Literal["ties", "limit"] = "ties"
    #: relation ranker: bm25 | openai | minilm | hybrid
    ranker: str = "bm25"
    #: prompt profile name (:func:`pyql.agent.strategies.queryagent.prompts.get_prompt_profile`)
    prompt: str | None = None
    #: sent as the request's temperature under ``request="paper"`` (the original's ``llm()``
    #: sends 0); pyql's own request leaves it to the client
    temperature: float = 0.0
    #: ``chat``: pyql's request (system message, then alternating turns); ``paper``: the
    #: original's (one user message ending in ``Thought n:``, stop ``\nObservation n:``,
    #: ``max_tokens`` 256, an unparsable reply regenerated within the step:
    #: :mod:`pyql.agent.strategies.queryagent.paper_request`)
    request: Literal["chat", "paper"] = "chat"
    #: the budget of a model whose name has ``16k`` (the original: 4,090 tokens, else 16,090)
    context_budget_16k: int | None = None
    #: how the relations kept after ranking are listed: ``shuffled`` (the paper's text, B.3:
    #: the ranker's top-k shuffled by the seed, ``...`` where some were left out) or ``sorted``
    #: (the original code: alphabetically per direction, printed as the dict it is)
    relation_order: Literal["shuffled", "sorted"] = "shuffled"
    #: the original-only guideline pack (``pyql.guidelines.packs.original``, its groups for the
    #: dataset) joins the guidelines
    original_checks: bool = False
    #: the Session's semantics of the original environment (KBSession options, documented in
    #: docs/paper_preset.md): ``exclude_topic`` (``answer``: the answer is no linked entity;
    #: ``nodes``: no variable is), ``relation_filter`` (the administrative relations the
    #: original hides from get_relation: a :data:`pyql.profiles.RELATION_FILTERS` name)
    exclude_topic: Literal["off", "answer", "nodes"] = "off"
    relation_filter: str | None = None
    #: the original MetaQA tool set: ``get_relation()`` without an argument is the relations of
    #: the current node from the first step on (KBSession ``walk``)
    walk: bool = False
    #: the note on a result whose only variable holds unnamed compound nodes (KBSession
    #: ``cvt_note``; the original GraphQ environment's)
    cvt_note: bool = False
    #: an ``add_fact`` with an empty result is silently retried reversed, then alone as the
    #: whole query (KBSession ``fact_fallback``; the original on Freebase)
    fact_fallback: bool = False
    #: setting -> "file:line" of the original it reproduces
    sources: Mapping[str, str] = field(default_factory=dict)


def dataset_family(dataset: str) -> str:
    """``metaqa-3hop`` -> ``metaqa``; ``webqsp-predicted`` -> ``webqsp``; others as they are."""
    name = dataset.lower()
    for family in ("metaqa", "webqsp", "grailqa", "graphq", "wikisql", "spider", "cwq"):
        if name.startswith(family):
            return family
    return name


def _paper(dataset: str, **values: object) -> Preset:
    return Preset(name="paper", dataset=dataset, **values)  # type: ignore[arg-type]


#: the original's shared files, where the settings of every dataset are read
_AG_UTILS = "ag_src/agent_utils/ag_utils.py"
_PROMPT_LIST = "ag_src/agent_utils/prompt_list.py"

_FREEBASE_SOURCES = {
    "history": f"{_AG_UTILS}:297-327",
    "temperature": f"{_AG_UTILS}:141",
    "request": f"{_AG_UTILS}:128-146, {_AG_UTILS}:297-327",
    "relation_order": "ag_src/grail_src/wikienv.py:427-438",
    "extremum_mode": "ag_src/grail_src/sparql_generator.py:107-123",
    "ranker": "ag_src/agent_utils/config.py:29 (openai_embedding: True)",
}


def _freebase(dataset: str, steps: int, *, script: str, lines: tuple[str, str, str],
              prompt: str, relation_filter: str, exclude_topic: str,
              cvt_note: bool = False, budget_16k: bool = False, fact_fallback: str) -> Preset:
    """The original's loop on a Freebase dataset: the step cap, the files and GraphQ's CVT note
    differ. The step cap, the context budget and the stop are read in the dataset's ``script``
    at ``lines``; ``prompt`` and ``relation_filter`` are lines of the shared prompt_list.py and
    ag_utils.py; ``exclude_topic`` is the file:lines of the dataset's environment."""
    max_steps, context_budget, on_stop = (f"{script}:{n}" for n in lines)
    sources = {**_FREEBASE_SOURCES, "max_steps": max_steps, "context_budget": context_budget,
               "on_stop": on_stop, "prompt": f"{_PROMPT_LIST}:{prompt}",
               "relation_filter": f"{_AG_UTILS}:{relation_filter}",
               "exclude_topic": exclude_topic}
    if cvt_note:
        sources["cvt_note"] = "ag_src/graphq_src/wikienv_graphq.py:273-276"
    if budget_16k:
        sources["context_budget_16k"] = context_budget
    sources["fact_fallback"] = fact_fallback
    return _paper(
        dataset, max_steps=steps, cvt_note=cvt_note, history="paper", context_budget=4090,
        context_budget_16k=16090 if budget_16k else None, fact_fallback=True,
        on_stop="choose_answer", extremum_mode="limit", ranker="openai",
        prompt=f"paper-{dataset}", exclude_topic="answer", relation_filter=dataset,
        request="paper", relation_order="sorted",
        original_checks=dataset in ("graphq", "webqsp"), sources=sources)


#: the original's settings per dataset family
PRESETS: dict[str, dict[str, Preset]] = {
    "default": {},
    "paper": {
        "grailqa": _freebase(
            "grailqa", 7, script="ag_src/grail_src/GRAIL.py", lines=("41", "47", "112-126"),
            prompt="11-111", relation_filter="176-178", budget_16k=True,
            fact_fallback="ag_src/grail_src/wikienv.py:472-514",
            exclude_topic="ag_src/grail_src/wikienv.py:516-522"),
        "graphq": _freebase(
            "graphq", 8, script="ag_src/graphq_src/GRAPHQ.py", lines=("38", "43", "113-127"),
            prompt="113-187", relation_filter="179-183", cvt_note=True, budget_16k=True,
            fact_fallback="ag_src/graphq_src/wikienv_graphq.py:497-539",
            exclude_topic="ag_src/graphq_src/wikienv_graphq.py:541-547"),
        "webqsp": _freebase(
            "webqsp", 7, script="ag_src/webqsp_src/WebQSP.py", lines=("40", "46", "116-130"),
            prompt="190-248", relation_filter="170-175",
            fact_fallback="ag_src/webqsp_src/wikienv_webqsp.py:489-531",
            exclude_topic="ag_src/webqsp_src/wikienv_webqsp.py:534-540"),
        "metaqa": _paper(
            "metaqa", max_steps=7, history="paper", on_stop="execute", ranker="openai",
            prompt="paper-metaqa", exclude_topic="nodes", walk=True, request="paper",
            sources={"request": "ag_src/meta_src/META.py:45-92, "
                                f"{_AG_UTILS}:297-303",
                     "max_steps": "ag_src/meta_src/META.py:59",
                     "history": f"{_AG_UTILS}:297-327",
                     "on_stop": "ag_src/meta_src/META.py:109",
                     "exclude_topic": "ag_src/meta_src/wikienv_meta.py:129",
                     "walk": "ag_src/meta_src/wikienv_meta.py:67-90",
                     "temperature": f"{_AG_UTILS}:141",
                     "prompt": f"{_PROMPT_LIST}:250-328"}),
        "wikisql": _paper(
            "wikisql", max_steps=9, history="paper", context_budget=4090, on_stop="execute",
            ranker="openai", prompt="paper-wikisql", request="paper", original_checks=True,
            sources={"original_checks": "ag_src/wikisql_src/wikienv_wikisql.py",
                     "request": "ag_src/wikisql_src/WIKISQL.py:37-90, "
                                f"{_AG_UTILS}:304-306",
                     "max_steps": "ag_src/wikisql_src/WIKISQL.py:37",
                     "context_budget": "ag_src/wikisql_src/WIKISQL.py:43",
                     "history": f"{_AG_UTILS}:297-327",
                     "on_stop": "ag_src/wikisql_src/WIKISQL.py:100",
                     "temperature": f"{_AG_UTILS}:141",
                     "prompt": f"{_PROMPT_LIST}:330-459"}),
    },
}


def get_preset(name: str, dataset: str) -> Preset:
    """The preset ``name`` for ``dataset`` (a dataset name such as ``metaqa-3hop`` or a family).

    ``default`` gives pyql's own settings for any dataset. :class:`PresetError` names the
    datasets a preset covers when it has no setting for this one."""
    lookup(PRESETS, name, "preset", UnknownPresetError)
    family = dataset_family(dataset)
    if name == "default":
        return Preset(name="default", dataset=family, max_steps=20)
    table = PRESETS[name]
    if family not in table:
        raise PresetError(f"the {name!r} preset has no setting for {dataset!r}; it covers "
                          f"{', '.join(sorted(table))}")
    return table[family]


#: the headline KBQA metric of each strategy's paper, as the paper defines it: F1 for QueryAgent
#: and the baselines of its tables ("We use F1 as the evaluation metric on all datasets", 5.1),
#: Hit@1 of any answer for Readi ("whether the predicted answer is correct", Table 1) and SRP
#: (ToG's Hits@1); ``hit@1`` and ``hit@1_top1`` in :mod:`pyql.agent.evaluation.metrics`
PAPER_METRICS: dict[str, str] = {
    "queryagent": "f1", "queryagent-sc0": "f1", "queryagent-sc-few": "f1",
    "agentbench": "f1", "agentbench-eraser": "f1",
    "readi": "hit@1", "srp": "hit@1",
}


def primary_metric(default: str, *, metric: str, strategy: str, preset: str | None) -> str:
    """The headline score of a run: under ``preset="paper"`` on a KBQA dataset (``metric``
    ``kbqa``), the strategy's paper's own (:data:`PAPER_METRICS`); else the dataset's
    ``default`` (table datasets keep their accuracy, which every paper reports).

    >>> primary_metric("hit@1", metric="kbqa", strategy="queryagent", preset="paper")
    'f1'
    >>> primary_metric("f1", metric="kbqa", strategy="readi", preset="paper")
    'hit@1'
    >>> primary_metric("f1", metric="kbqa", strategy="readi", preset=None)
    'f1'
    """
    if preset == "paper" and metric == "kbqa":
        return PAPER_METRICS.get(strategy, default)
    return default


#: the sampling temperature each paper states for every module of its strategy, used under
#: ``preset="paper"`` when no ``--temperature`` is given: Readi 5.3 ("Temperature is 0.3 for all
#: modules"), SRP 4.1 ("Temperature is 0.3 for all modules"). QueryAgent's is :attr:`Preset.
#: temperature` (0, the original's ag_utils.py:141, the client's default).
PAPER_TEMPERATURES: dict[str, float] = {"readi": 0.3, "srp": 0.3}


def preset_ranker(preset: str | None, dataset: str | None = None) -> str | None:
    """The relation ranker ``preset`` sets for ``dataset``; without a dataset, the one every
    dataset of the preset shares (None: none, or they differ). An unknown preset, or one with no
    setting for ``dataset``, is :class:`PresetError` (:func:`get_preset`).

    >>> preset_ranker("paper"), preset_ranker("paper", "metaqa-2hop"), preset_ranker(None)
    ('openai', 'openai', None)
    """
    if preset is None:
        return None
    if dataset:
        return get_preset(preset, dataset).ranker
    lookup(PRESETS, preset, "preset", UnknownPresetError)
    rankers = {p.ranker for p in PRESETS.get(preset, {}).values()}
    return rankers.pop() if len(rankers) == 1 else None


def preset_temperature(preset: str | None, strategy: str) -> float | None:
    """The temperature ``preset`` sets for ``strategy``'s LLM client (None: the client's own,
    0).

    >>> preset_temperature("paper", "readi"), preset_temperature(None, "readi")
    (0.3, None)
    """
    if preset == "paper":
        return PAPER_TEMPERATURES.get(strategy)
    return None
