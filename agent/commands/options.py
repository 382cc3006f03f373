"""Options ``pyql ask`` and ``pyql eval`` share, declared once so their names, help, bounds and
defaults agree (the core commands' shared options are in :mod:`pyql.cli.options`)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = [
    "RANKERS",
    "BaseUrlOpt",
    "ChooseOpt",
    "ConstrainOpt",
    "MaxTokensOpt",
    "DeadlineOpt",
    "KbTimeoutOpt",
    "LlmTimeoutOpt",
    "MaxStepsOpt",
    "ModeOpt",
    "NoGuidelinesOpt",
    "RankerOpt",
    "StrategyOpt",
    "StrategyOptionOpt",
    "TemperatureOpt",
]

#: the ranker specs :func:`pyql.agent.grounding.ranking.get_ranker` takes by name (``--ranker``)
RANKERS = ("bm25", "openai", "minilm", "hybrid", "hybrid:openai")

StrategyOpt = Annotated[
    str | None,
    typer.Option("--strategy", metavar="NAME",
                 help="The reasoning strategy: queryagent (the default), or any installed in the "
                 "pyql.strategies entry-point group."),
]
StrategyOptionOpt = Annotated[
    list[str] | None,
    typer.Option("--option", metavar="KEY=VALUE",
                 help="A strategy's own option (repeatable); VALUE is read as JSON when it "
                 "parses (3, true, [1,2]), else as text."),
]
RankerOpt = Annotated[
    str | None,
    typer.Option("--ranker", help="Relation ranker: bm25, openai, minilm, hybrid, hybrid:openai "
                 "(default: the preset's; bm25)."),
]
MaxStepsOpt = Annotated[
    int | None,
    typer.Option("--max-steps", min=1,
                 help="Most steps per question (QueryAgent: LLM calls; default: the preset's; "
                 "20)."),
]
ModeOpt = Annotated[
    str,
    typer.Option("--mode", metavar="text|tools",
                 help="text: Thought/Action lines; tools: native function calling."),
]
NoGuidelinesOpt = Annotated[
    bool,
    typer.Option("--no-guidelines", help="Turn ERASER off: raw errors are the observations."),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", metavar="URL",
                 help="An OpenAI-compatible API (default: $OPENAI_BASE_URL, else OpenAI)."),
]
LlmTimeoutOpt = Annotated[
    float | None,
    typer.Option("--llm-timeout", min=0.001, metavar="SECONDS",
                 help="Wall-clock seconds one LLM request may take (default 30)."),
]
DeadlineOpt = Annotated[
    float | None,
    typer.Option("--deadline", min=0.001, metavar="SECONDS",
                 help="Seconds of LLM time for each question: the wall clock while its LLM "
                 "calls run, retries included (time before and between the calls does not "
                 "count; each call's --llm-timeout still holds); default: each LLM call ends "
                 "within a minute."),
]
ConstrainOpt = Annotated[
    str,
    typer.Option("--constrain", metavar="off|format|grounded|auto",
                 help="Constrain replies to JSON schemas (structured output): off (free text); "
                 "format (the reply's shape and the DSL's types; 'on' is an alias); grounded "
                 "(also every relation, entity, column and function one the environment "
                 "offers now); auto (grounded where the client takes schemas, else off; a "
                 "server that refuses one gets free text). An explicit level fails when the "
                 "server refuses the schema."),
]
ChooseOpt = Annotated[
    str,
    typer.Option("--choose", metavar="on|off",
                 help="Choose mode: where a step's options are enumerable (the KB's relations, "
                 "paths, retrieved values), the model scores each (log-likelihood) and the best "
                 "is taken instead of generating; needs a client that scores (--llm local, a "
                 "server with log-probabilities)."),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-tokens", min=1, metavar="N",
                 help="Longest LLM reply, in tokens (default: the strategy's; QueryAgent 256, "
                 "Readi/SRP 512)."),
]
TemperatureOpt = Annotated[
    float | None,
    typer.Option("--temperature", min=0.0, max=2.0, metavar="T",
                 help="Sampling temperature of every LLM call (default: the preset's; Readi and "
                 "SRP under --preset paper 0.3, their papers'; else 0)."),
]
KbTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", "--kb-timeout", min=0.001, metavar="SECONDS",
                 help="Wall-clock seconds one KB query may take (default 30 on a SPARQL "
                 "endpoint, none on the embedded store, whose timed queries run in a child "
                 "process); a query that runs out is the KB's failure, not an answer. The "
                 "--timeout of pyql run and pyql mcp; --kb-timeout is an alias."),
]
