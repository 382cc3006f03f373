"""``pyql eval``: run the agent (or a gold stand-in) over a dataset into a resumable run directory.

::

    pyql eval --dataset metaqa-3hop --split dev --llm gold --out runs/m3-gold
    pyql eval --dataset wikisql --llm openai:gpt-4o-mini --sample 200 --seed 1 \\
              --concurrency 8 --llm-cache ~/.cache/pyql/llm.sqlite --out runs/wikisql-4o-mini
    pyql eval --resume runs/wikisql-4o-mini          # after a crash or Ctrl-C
    pyql eval --dataset metaqa-2hop --llm noisy-gold:0.3 --ablation --out runs/m2-ablation
    pyql eval --dataset metaqa-1hop --strategy onefact --option key=value --llm gold --out r

Questions that end in an outage (``backend_error``, ``llm_error``, ``llm_timeout``) are counted
apart from wrong answers; after ``--max-outages`` in a row the run stops with a one-line reason,
and ``--resume`` runs them again.

At the end the metrics table is printed (``--json``: the metrics as JSON on stdout). Errors are
one ``error:`` line on stderr (with a ``hint:``) and exit code 1; a run that stopped (an
authentication error, an unknown model...) exits 1 too, and can be resumed once fixed. Bad
usage (a missing ``--out``, an unknown dataset, a malformed or out-of-range ``--option``, a bad
``--llm`` spec) exits 2 before a run directory is made. Progress is a bar on a terminal and
whole log lines elsewhere (:class:`~pyql.agent.evaluation.progress.RunProgress`).

``register(app)`` adds the command to ``pyql`` (the ``pyql.commands`` entry point ``eval``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pyql.agent.commands import options as opts
from pyql.cli import CliError, fail, print_json
from pyql.cli.errors import EXIT_USAGE
from pyql.cli.output import make_console, shared_stderr
from pyql.registry import UnknownNameError, lookup

__all__ = ["register", "eval_command", "render_metrics"]

log = logging.getLogger(__name__)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


#: what the two Hit@1 scores mean (metrics.py's module docstring), shown beside their names
_SCORE_MEANINGS = {"hit@1": "any answer", "hit@1_top1": "top-1 answer"}


def _tokens_label(estimated: float | None, counted: bool = True) -> str:
    """``tokens / question``, saying when (some of) the counts are estimates, or that a
    stand-in run did not count them."""
    if not counted:
        return "tokens / question (not counted: --token-estimates)"
    if not estimated:
        return "tokens / question"
    if estimated >= 1.0:
        return "tokens / question (estimated)"
    return f"tokens / question ({estimated:.0%} estimated)"


def render_metrics(metrics: dict[str, Any], console: Console) -> None:
    """Print the metrics as tables: scores and costs, guideline classes, the first breakdown."""
    run = metrics.get("run", {})
    title = " ".join(str(run.get(k, "")) for k in ("dataset", "split", "llm")).strip()
    table = Table(title=title or "metrics", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows: list[tuple[str, Any, int]] = [("questions", metrics.get("n"), 0)]
    outages = metrics.get("outages") or {}
    if metrics.get("outage_total"):
        rows.append(("scored (outages left out)", metrics.get("scored"), 0))
    for name in ("hit@1", "f1", "em", "hit@1_top1", "accuracy"):
        if metrics.get(name) is not None:
            label = f"{name} ({_SCORE_MEANINGS[name]})" if name in _SCORE_MEANINGS else name
            label = f"{label} (primary)" if name == metrics.get("primary") else label
            rows.append((label, metrics[name], 4))
    counted = metrics.get("tokens_counted") is not False  # None: no question scored yet
    rows += [
        ("errors", metrics.get("errors"), 0),
        *((f"outages: {status}", count, 0) for status, count in outages.items() if count),
        ("finished (execute accepted)", metrics.get("finished"), 3),
        ("TPQ: seconds / question", metrics.get("tpq"), 3),
        ("QPQ: KB/DB queries / question", metrics.get("qpq"), 2),
        ("QPQ as the paper counts it (no label lookups)", metrics.get("qpq_paper"), 2),
        ("CPQ: US$ / question", metrics.get("cpq"), 5),
        ("LLM calls / question", metrics.get("llm_calls"), 2),
        ("constrained LLM calls / question", metrics.get("constrained_calls"), 2),
        ("parse failures (unreadable replies)", metrics.get("parse_failures_total"), 0),
        ("cached share of prompt tokens", metrics.get("cached_share"), 3),
        (_tokens_label(metrics.get("tokens_estimated"), counted),
         metrics.get("tokens") if counted else None, 0),
        ("total cost (US$)", metrics.get("cost"), 4),
    ]
    guidelines = metrics.get("guidelines") or {}
    rows.append(("guideline triggers / question", guidelines.get("per_question"), 3))
    session = run.get("this_session") or {}
    if session:
        rows.append(("wall time of this session (s)", session.get("wall_seconds"), 1))
    if run.get("rate_limit_pauses"):
        rows.append(("rate-limit pauses", run.get("rate_limit_pauses"), 0))
    for label, value, digits in rows:
        if isinstance(value, float) and digits == 0:
            value = round(value)
        table.add_row(label, _fmt(value, digits))
    console.print(table)
    stand_in = metrics.get("stand_in")
    if stand_in:
        st = Table(title="stand-in assumptions (no model)", header_style="bold", min_width=40)
        st.add_column("parameter")
        st.add_column("value", justify="right")
        st.add_row("stand-in", str(stand_in.get("name")))
        for name, value in (stand_in.get("parameters") or {}).items():
            st.add_row(name, _fmt(value, 3))
        console.print(st)
    classes = guidelines.get("by_class") or {}
    if guidelines.get("triggers"):
        gt = Table(title="guideline triggers by environment", header_style="bold")
        for col in ("class", "triggers", "share", "questions", "corrected", "correction rate"):
            gt.add_column(col, justify="left" if col == "class" else "right")
        for cls, s in classes.items():
            gt.add_row(cls, str(s["triggers"]), _fmt(s["share"], 3), str(s["questions"]),
                       str(s["corrected"]), _fmt(s["correction_rate"], 3))
        console.print(gt)
    by = metrics.get("by") or {}
    for key in ("hops", "agg", "expressible"):
        groups = by.get(key)
        if not groups:
            continue
        bt = Table(title=f"by {key}", header_style="bold")
        bt.add_column(key)
        bt.add_column("n", justify="right")
        names = [n for n in ("hit@1", "f1", "accuracy") if any(n in g for g in groups.values())]
        for name in names:
            bt.add_column(name, justify="right")
        bt.add_column("errors", justify="right")
        for value, g in groups.items():
            bt.add_row(value, str(g["n"]), *(_fmt(g.get(n)) for n in names), str(g["errors"]))
        console.print(bt)
    if run and not run.get("complete", True):
        console.print(Text(f"incomplete: {run.get('done')} of {run.get('items')} questions "
                           "done; resume with pyql eval --resume RUN_DIR", style="yellow"))


def render_ablation(summary: dict[str, Any], console: Console) -> None:
    """Print the combined table of an ablation run (ERASER on and off)."""
    from pyql.agent.evaluation.ablation import format_table

    console.print(format_table({summary.get("llm", "run"): summary}), markup=False)


def _options(pairs: list[str] | None) -> dict[str, Any]:
    """``--option key=value`` pairs; values read as JSON when they are (numbers, booleans,
    lists), else kept as text."""
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            _usage(f"--option {pair!r} is not KEY=VALUE", hint="e.g. --option max_edits=3")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def eval_command(
    dataset: Annotated[str | None, typer.Option(
        "--dataset", "-d", help="metaqa-1hop, metaqa-2hop, metaqa-3hop, wikisql, spider, "
        "webqsp, webqsp-el, grailqa, grailqa-el, cwq (docs/freebase.md), graphq, graphq-el "
        "(docs/baselines.md), wwq, qald (docs/wikidata.md), or one a plugin registers")
    ] = None,
    split: Annotated[str | None, typer.Option(
        help="the split (default: dev; webqsp: test)")] = None,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", help="the shared data directory (default: $PYQL_DATA or ../shared/data)")
    ] = None,
    llm: Annotated[str | None, typer.Option(
        "--llm", metavar="SPEC",
        help="openai:MODEL, local[:PATH.gguf] (llama.cpp in this process), "
        "replay:PATH, ranker (the no-model baseline: it only chooses, --choose on), "
        "gold[:K=V,...] or noisy-gold:RATE[:TYPES][:K=V,...] (K: a stand-in "
        "parameter, e.g. judge_accuracy)")] = None,
    base_url: opts.BaseUrlOpt = None,
    limit: Annotated[int | None, typer.Option(help="the first N questions", min=1)] = None,
    sample: Annotated[int | None, typer.Option(
        help="N random questions (of the first --limit)", min=1)] = None,
    seed: Annotated[int, typer.Option(help="seed of --sample and of noisy-gold")] = 0,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "-k", help="questions in flight (default 1)", min=1)] = None,
    kb: Annotated[str | None, typer.Option(
        metavar="PATH_OR_URL",
        help="KB override: a SPARQL endpoint URL, an Oxigraph store dir or an RDF file")] = None,
    db: Annotated[str | None, typer.Option(
        metavar="URL", help="database override: a SQLAlchemy URL or a SQLite file")] = None,
    no_guidelines: opts.NoGuidelinesOpt = False,
    mode: opts.ModeOpt = "text",
    max_steps: opts.MaxStepsOpt = None,
    preset: Annotated[str | None, typer.Option(
        "--preset", help="default (pyql's settings) or paper (the original code's settings per "
        "dataset: steps, history, prompts, ranker, argmax; docs/paper_preset.md)")] = None,
    ranker: opts.RankerOpt = None,
    extremum: Annotated[str | None, typer.Option(
        "--extremum", metavar="ties|limit", help="argmax/argmin: keep ties, or ORDER BY ... "
        "LIMIT 1 as the original (default: the preset's; ties)")] = None,
    llm_cache: Annotated[Path | None, typer.Option(
        "--llm-cache", help="SQLite file caching LLM replies")] = None,
    kb_cache: Annotated[Path | None, typer.Option(
        "--kb-cache", help="SQLite file caching KB/DB query results")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", metavar="RUN_DIR",
                                             help="the run directory")] = None,
    resume_dir: Annotated[Path | None, typer.Option(
        "--resume", metavar="RUN_DIR", help="finish the run in this directory")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the metrics as JSON")
                           ] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="no progress bar")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log more")] = False,
    strategy: opts.StrategyOpt = None,
    option: opts.StrategyOptionOpt = None,
    exclude_ids: Annotated[Path | None, typer.Option(
        "--exclude-ids", help="a file of question ids (one per line) to leave out, before "
        "--limit/--sample (e.g. a reference base's source_ids.txt)")] = None,
    references: Annotated[Path | None, typer.Option(
        "--references", help="a reference base directory (pyql references build), for "
        "strategies that use one (srp); its source questions are left out of the run")] = None,
    ablation: Annotated[bool, typer.Option(
        "--ablation", help="run ERASER on and off (sub-runs eraser_on/ and eraser_off/) and "
        "print the combined table")] = False,
    llm_timeout: opts.LlmTimeoutOpt = None,
    max_retries: Annotated[int | None, typer.Option(
        "--max-retries", help="retries per LLM call (rate limits, server errors)", min=0)
    ] = None,
    deadline: opts.DeadlineOpt = None,
    kb_timeout: opts.KbTimeoutOpt = None,
    max_outages: Annotated[int, typer.Option(
        "--max-outages", help="stop after N questions in a row end in an outage (KB or LLM "
        "down); 0 never stops", min=0)] = 5,
    processes: Annotated[int | None, typer.Option(
        "--processes", help="worker processes (default: the cores for a long gold/noisy-gold/"
        "replay run, else 1)", min=1)] = None,
    constrain: opts.ConstrainOpt = "auto",
    choose: opts.ChooseOpt = "off",
    max_tokens: opts.MaxTokensOpt = None,
    temperature: opts.TemperatureOpt = None,
    token_estimates: Annotated[bool, typer.Option(
        "--token-estimates", help="estimate the tokens of a stand-in's (gold, noisy-gold) "
        "prompts and replies with tiktoken; off, they count 0 (a model's tokens are the "
        "server's, or estimated when it reports none)")] = False,
) -> None:
    """Evaluate the agent (or gold programs) on a dataset: metrics, progress, resumable results.

    Results go to --out RUN_DIR (config.json, results.jsonl, trajectories.jsonl, metrics.json);
    `pyql eval --resume RUN_DIR` finishes an interrupted run, running each missing question once.
    """
    from rich.logging import RichHandler

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s",
                        handlers=[RichHandler(console=shared_stderr(), show_path=False)])
    metrics = _run(
        dataset=dataset, split=split, data_dir=data_dir, llm=llm, base_url=base_url, limit=limit,
        sample=sample, seed=seed, concurrency=concurrency, kb=kb, db=db,
        guidelines=not no_guidelines, mode=mode, max_steps=max_steps, preset=preset,
        ranker=ranker, extremum=extremum, llm_cache=llm_cache,
        kb_cache=kb_cache, out=out, resume_dir=resume_dir, progress=not no_progress,
        strategy=strategy, options=_with_references(_options(option), references),
        exclude_ids=_readable(exclude_ids, "--exclude-ids"),
        ablation=ablation,
        llm_timeout=llm_timeout, max_retries=max_retries, deadline=deadline,
        max_outages=max_outages, processes=processes, constrain=constrain, choose=choose,
        max_tokens=max_tokens, kb_timeout=kb_timeout, temperature=temperature,
        token_estimates=token_estimates,
    )
    if json_output:
        print_json(metrics)
    elif "settings" in metrics:
        render_ablation(metrics, make_console(highlight=False))
    else:
        render_metrics(metrics, make_console(highlight=False))
    run = metrics.get("run") or {}
    if not run.get("complete", True) or not metrics.get("complete", True):
        raise typer.Exit(1)


def _run(*, dataset: str | None, split: str | None, data_dir: Path | None, llm: str | None,
         base_url: str | None, limit: int | None, sample: int | None, seed: int,
         concurrency: int | None, kb: str | None, db: str | None, guidelines: bool, mode: str,
         max_steps: int | None, preset: str | None = None, ranker: str | None = None,
         extremum: str | None = None, llm_cache: Path | None, kb_cache: Path | None, out: Path | None,
         resume_dir: Path | None, progress: bool, strategy: str | None = None,
         options: dict[str, Any] | None = None, exclude_ids: Path | None = None,
         ablation: bool = False,
         llm_timeout: float | None = None, max_retries: int | None = None,
         deadline: float | None = None, max_outages: int = 5,
         processes: int | None = None, constrain: str = "auto", choose: str = "off",
         max_tokens: int | None = None, kb_timeout: float | None = None,
         temperature: float | None = None, token_estimates: bool = False) -> dict[str, Any]:
    from pyql import __version__
    from pyql.agent.evaluation.datasets import DATASETS, dataset_names
    from pyql.agent.evaluation.llm_spec import LLMSpecError, parse_llm_spec
    from pyql.agent.evaluation.records import RunConfig
    from pyql.agent.evaluation.runner import EvalAbort, evaluate, resume
    from pyql.agent.evaluation.standins import stand_in_assumptions
    from pyql.agent.strategy import UnknownStrategyError
    from pyql.datasets.paths import default_data_dir
    from pyql.errors import PyqlError

    if mode not in ("text", "tools"):
        _usage(f"--mode must be text or tools, not {mode!r}")
    from pyql.agent.llm.structured import CONSTRAIN_MODES

    if constrain not in CONSTRAIN_MODES:
        _usage(f"--constrain must be one of {', '.join(CONSTRAIN_MODES)}, not {constrain!r}")
    if choose not in ("on", "off"):
        _usage(f"--choose must be on or off, not {choose!r}")
    try:
        if resume_dir is not None:
            given = [name for name, value in (
                ("--dataset", dataset), ("--split", split), ("--data-dir", data_dir),
                ("--llm", llm), ("--base-url", base_url), ("--limit", limit),
                ("--sample", sample), ("--kb", kb), ("--db", db), ("--llm-cache", llm_cache),
                ("--kb-cache", kb_cache), ("--out", out), ("--strategy", strategy),
                ("--option", options or None), ("--ablation", ablation or None),
                ("--llm-timeout", llm_timeout), ("--max-retries", max_retries),
                ("--deadline", deadline), ("--max-tokens", max_tokens),
                ("--temperature", temperature),
                ("--timeout", kb_timeout), ("--token-estimates", token_estimates or None),
                ("--constrain", None if constrain == "auto" else constrain),
                ("--choose", None if choose == "off" else choose))
                if value is not None]
            if given:
                _usage(f"--resume continues a run as it was configured; {', '.join(given)} "
                      "cannot change it", hint="start a new run with --out to change options "
                      "(only --concurrency may differ when resuming)")
            return resume(resume_dir, progress=progress, concurrency=concurrency)
        missing = [name for name, value in (("--dataset", dataset), ("--llm", llm),
                                            ("--out", out)) if value is None]
        if missing:
            _usage(f"missing {', '.join(missing)}", hint="pyql eval --dataset NAME --llm SPEC "
                  "--out RUN_DIR, or pyql eval --resume RUN_DIR")
        assert dataset is not None and llm is not None and out is not None
        try:
            lookup(dict.fromkeys(dataset_names()), dataset, "dataset")
        except UnknownNameError as exc:
            _usage(str(exc))
        try:  # a bad rate or parameter fails before the run directory
            spec = parse_llm_spec(llm)
        except LLMSpecError as exc:
            _usage(str(exc))
        if constrain not in ("auto", "off") and spec.kind not in ("openai", "local"):
            _usage(f"--constrain {constrain} needs a model that takes JSON schemas "
                   f"(openai:MODEL or local), not the {spec.kind} stand-in")
        if choose == "on" and spec.kind in ("gold", "noisy-gold", "replay"):
            _usage(f"--choose on needs a client that scores candidates (local, ranker, a "
                   f"server with log-probabilities), not the {spec.kind} stand-in")
        options = _checked_options(strategy or "queryagent", options or {})
        try:  # what the strategy's stand-in cannot play, or a strategy without one, too
            stand_in_assumptions(spec, strategy or "queryagent")
        except LLMSpecError as exc:
            _usage(str(exc))
        _check_settings(dataset, preset, ranker, extremum)
        if data_dir is None:
            try:
                data_dir = default_data_dir()
            except FileNotFoundError as exc:
                fail(str(exc), hint="pass --data-dir DIR or set $PYQL_DATA")
        default_split = DATASETS[dataset].default_split
        config = RunConfig(
            dataset=dataset, split=split or default_split,
            data_dir=str(data_dir.expanduser().resolve()), llm=llm,
            base_url=base_url, kb=_absolute(kb), db=_absolute(db), limit=limit, sample=sample,
            seed=seed, concurrency=concurrency or 1, guidelines=guidelines,
            max_steps=max_steps, mode=mode,  # type: ignore[arg-type]
            preset=preset, ranker=ranker, extremum=extremum,  # type: ignore[arg-type]
            llm_cache=str(llm_cache.expanduser().resolve()) if llm_cache else None,
            kb_cache=str(kb_cache.expanduser().resolve()) if kb_cache else None,
            strategy=strategy or "queryagent", options=options or {}, ablation=ablation,
            exclude_ids=_absolute(str(exclude_ids)) if exclude_ids else None,
            llm_timeout=llm_timeout, max_retries=max_retries, question_deadline=deadline,
            kb_timeout=kb_timeout, max_outages=max_outages, processes=processes,
            constrain=constrain, choose=choose == "on",  # type: ignore[arg-type]
            max_tokens=max_tokens,
            temperature=temperature, token_estimates=token_estimates,
            pyql_version=__version__,
        )
        return evaluate(config, out, progress=progress)
    except EvalAbort as exc:
        fail(f"the run stopped: {exc}", hint=_resume_hint(resume_dir or out, "fix the cause, then"))
    except UnknownStrategyError as exc:
        _usage(str(exc))
    except LLMSpecError as exc:  # the model cannot run (a missing extra or file)
        fail(str(exc))
    except (PyqlError, OSError) as exc:
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
        fail(f"{where}{exc}")
    except KeyboardInterrupt:
        fail("interrupted; questions in flight finish and are saved",
             hint=_resume_hint(resume_dir or out, "to run the rest:"))


def _checked_options(strategy: str, options: dict[str, Any]) -> dict[str, Any]:
    """The strategy's options read as the types it declares; an unknown option or an ill-typed
    value is a usage error (exit 2) before a run directory is made."""
    from pyql.agent.strategy import StrategyOptionError, check_options

    try:
        return check_options(strategy, options)
    except StrategyOptionError as exc:
        _usage(str(exc))


def _usage(message: str, hint: str | None = None) -> NoReturn:
    """A usage error of ``pyql eval``: one ``error:`` line, exit status 2."""
    fail(CliError(message, hint=hint, code=EXIT_USAGE))


def _readable(path: Path | None, flag: str) -> Path | None:
    """A file the run will read, checked before a run directory is made."""
    if path is not None and not path.is_file():
        fail(f"{path}: no such file ({flag})")
    return path


def _with_references(options: dict[str, Any], references: Path | None) -> dict[str, Any]:
    """``--references DIR`` is the strategy option ``references`` (an absolute path, so a
    resumed run finds it)."""
    if references is None:
        return options
    if not (references / "manifest.json").is_file():
        fail(f"{references}: not a reference base (no manifest.json)",
             hint="build one with pyql references build --dataset D --split S --out DIR")
    return {**options, "references": str(references.expanduser().resolve())}


def _check_settings(dataset: str, preset: str | None, ranker: str | None,
                    extremum: str | None) -> None:
    """Preset, ranker and argmax semantics are checked before a run directory is made."""
    from pyql.agent.grounding.ranking import RankerKeyError, check_run_ranker
    from pyql.agent.strategies.queryagent.presets import PresetError, get_preset

    try:
        if preset is not None:
            get_preset(preset, dataset)  # an unknown preset, or none for this dataset
    except PresetError as exc:
        _usage(str(exc))
    if ranker is not None:
        try:
            lookup(dict.fromkeys(RANKERS), ranker, "ranker")
        except UnknownNameError as exc:
            _usage(str(exc))
    try:
        check_run_ranker(ranker, preset, dataset)
    except RankerKeyError as exc:
        fail(str(exc), hint=exc.hint)
    if extremum is not None and extremum not in ("ties", "limit"):
        _usage(f"--extremum must be ties or limit, not {extremum!r}")


#: the ranker specs :func:`pyql.agent.grounding.ranking.get_ranker` takes by name
RANKERS = opts.RANKERS


def _resume_hint(run_dir: Path | None, lead: str) -> str:
    """``--resume RUN_DIR`` when the run can be resumed (its config was written), else how to
    start again: never a --resume that would fail."""
    if run_dir is not None and (run_dir / "config.json").is_file():
        return f"{lead} pyql eval --resume {run_dir} (finished questions are kept)"
    return "nothing was run yet: fix the cause and start the run again"


def _absolute(spec: str | None) -> str | None:
    """A local path made absolute (so --resume works from anywhere); URLs as they are."""
    if spec is None or "://" in spec:
        return spec
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.exists() else spec


def register(app: typer.Typer) -> None:
    """Add ``pyql eval`` to the ``pyql`` command line."""
    app.command("eval", no_args_is_help=True)(eval_command)
