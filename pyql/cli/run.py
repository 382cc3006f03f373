"""``pyql run``: a program call by call against a KB (``--kb``) or a database (``--db``).

Each step is printed as soon as it has run (a long program streams; with ``--json`` on a
terminal a progress bar counts the calls on stderr), then the final query, printed whole, and
the answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from pyql.cli.backends import check_one_backend, open_kb, open_sql_session
from pyql.cli.errors import ENTITY_HINT, TIMEOUT_HINT, CliError, fail, prefix_hint, reported
from pyql.cli.inputs import check_extremum, entities, pairs, parse_program, read_program
from pyql.cli.options import (
    DbOpt,
    EntitiesFileOpt,
    EntityOpt,
    ExtremumOpt,
    JsonOpt,
    KbOpt,
    PrefixOpt,
    ProfileOpt,
    ProgramArg,
    QueryTimeoutOpt,
    TableOpt,
)
from pyql.cli.output import print_json, print_query, shared_stderr, stdout, warnings_shown
from pyql.echo import clip, clip_echoes, echoed_inputs
from pyql.profiles import Profile
from pyql.program import Call, Program
from pyql.session import Observation

__all__ = ["run_command", "run_calls", "register", "shown_answers"]

#: characters of an action shown on the terminal (the JSON has it whole)
SHOWN_ACTION = 300

#: one step: its observation and whether pyql added the call (an execute() at the end)
StepRecord = tuple[Observation, bool]


def run_command(
    program: ProgramArg,
    kb: KbOpt = None,
    db: DbOpt = None,
    profile: ProfileOpt = None,
    entity: EntityOpt = None,
    entities_file: EntitiesFileOpt = None,
    prefix: PrefixOpt = None,
    extremum: ExtremumOpt = "ties",
    table: TableOpt = None,
    max_values: Annotated[
        int, typer.Option("--max-values", min=1, help="Values shown per variable.")
    ] = 10,
    timeout: QueryTimeoutOpt = None,
    keep_going: Annotated[
        bool, typer.Option("--keep-going", help="Run the remaining calls after a failed one.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a program call by call against a KB (or a DB) and print what each step observed.

    The Session rolls back a failed call; the run stops there unless --keep-going. A program
    without execute() is executed at the end. A mention that is neither an id nor given with
    --entity is linked when it is the exact label of one KB entity (Kismet on MetaQA). Files with @prefix lines (.ttl) declare their
    prefixes, so ex:Film works as written. Steps are printed as they run; the final query is
    printed whole (never wrapped or cut), ready to copy.
    """
    with warnings_shown(), reported(as_json=as_json):
        check_extremum(extremum)
        check_one_backend(kb, db)
        text, source = read_program(program)
        linked = entities(entity, entities_file)
        explicit = pairs(prefix, "--prefix", "NAME=IRI")
        session: Any
        by_label: dict[str, str] = {}
        if db is not None:
            prog = parse_program(text, "sql", source)
            session = open_sql_session(db, table, max_values, timeout)
            location, language, profile_name = db, "sql", None
        else:
            assert kb is not None
            prog = parse_program(text, "sparql", source)
            backend = open_kb(kb, profile, explicit)
            from pyql.mentions import link_by_label, unlinked_mentions
            from pyql.session import Session

            by_label = link_by_label(backend, unlinked_mentions(prog, backend.profile, linked),
                                     timeout=timeout)
            session = Session(backend, entities={**by_label, **linked}, max_values=max_values,
                              timeout=timeout, extremum_mode=extremum)
            location, language, profile_name = kb, "sparql", backend.profile.name
        if as_json:
            added = 0 if any(call.name == "execute" for call in prog) else 1
            with _progress(len(prog) + added) as advance:
                steps = run_calls(session, prog, keep_going, advance)
        else:
            out = stdout()
            for mention, kb_id in by_label.items():
                out.print(Text.assemble(("linked ", "dim"), mention, " → ", (kb_id, "cyan"),
                                        ("  (KB label)", "dim")))
            failures: list[Observation] = []

            def show(obs: Observation, implicit: bool) -> None:
                # the first failure is the run's error line: its reason is printed there, once
                below = not obs.ok and not failures
                if not obs.ok:
                    failures.append(obs)
                _show_step(out, obs, implicit, reason_below=below)

            steps = run_calls(session, prog, keep_going, show)
    _show_run(steps, location, language, profile_name, session, as_json, by_label)


def run_calls(
    session: Any,
    program: Program,
    keep_going: bool,
    on_step: Callable[[Observation, bool], None] | None = None,
) -> list[StepRecord]:
    """Run ``program`` in ``session``, calling ``on_step`` after each step; an execute() is
    added when the program has none and built a query."""
    steps: list[StepRecord] = []

    def record(obs: Observation, implicit: bool) -> None:
        steps.append((obs, implicit))
        if on_step is not None:
            on_step(obs, implicit)

    for call in program:
        obs = session.run(call)
        record(obs, False)
        if not obs.ok and not keep_going:
            return steps
    has_execute = any(call.name == "execute" for call in program)
    if not has_execute and steps and steps[-1][0].query:
        record(session.run(Call.of("execute")), True)
    return steps


@contextmanager
def _progress(total: int) -> Iterator[Callable[[Observation, bool], None]]:
    """A progress bar of the calls on stderr when it is a terminal (``--json`` keeps stdout for
    the JSON); elsewhere nothing."""
    console = shared_stderr()  # the warnings' console: a warning prints above the bar
    if not console.is_terminal:
        yield lambda obs, implicit: None
        return
    columns = (TextColumn("calls"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("run", total=total)
        yield lambda obs, implicit: progress.advance(task)


def _show_step(out: Console, obs: Observation, implicit: bool, *,
               reason_below: bool = False) -> None:
    """One step: its action and observation; ``reason_below``: the step whose failure the
    ``error:`` line reports, which says why (the reason is printed once)."""
    out.print(
        Text.assemble(
            (f"{obs.step:>2}  ", "bold"),
            (clip(obs.action, SHOWN_ACTION), "cyan"),
            (" (added: the program has no execute())" if implicit else "", "dim"),
        )
    )
    if reason_below:
        out.print(Text("    failed: the error line says why", style="red"))
    else:
        out.print(Text("    " + obs.text, style="green" if obs.ok else "red"))


def _answer_labels(observations: Sequence[Observation]) -> tuple[list[Any] | None, list[str]]:
    for obs in reversed(observations):
        if obs.call is not None and obs.call.name == "execute" and obs.ok:
            labels = [str(v) for vv in obs.values.values() for v in vv.values]
            return list(obs.answers or ()), labels
    return None, []


def shown_answers(answers: Sequence[Any], labels: Sequence[str], unnamed: str | None) -> list[str]:
    """The answers as people read them: each label, and beside a nameless node's placeholder
    (``UnName_Entity``) its id, which is all that tells two of them apart. ``labels`` are the
    first answers' labels, in the answers' order."""
    placeholders = {"UnName_Entity", unnamed} - {None}
    return [f"{label} ({answer})" if label in placeholders and str(answer) != label else label
            for label, answer in zip(labels, answers)]


def _failure_hint(obs: Observation, profile: Profile | None) -> str | None:
    python = obs.feedback.python
    if python.status == "bad_term" and python.arg_text:
        hint = prefix_hint(python.arg_text, profile)
        if hint:
            return hint
    if python.error_type == "UnknownEntityError":
        return ENTITY_HINT
    if python.suggestions:
        return "try: " + ", ".join(python.suggestions[:5])
    if obs.hint is not None and obs.hint.suggestions:
        return "try: " + ", ".join(obs.hint.suggestions[:5])
    if obs.feedback.backend.status == "timeout":
        return TIMEOUT_HINT
    return None


def _show_run(
    steps: list[StepRecord],
    location: str,
    language: str,
    profile_name: str | None,
    session: Any,
    as_json: bool,
    by_label: Mapping[str, str],
) -> None:
    observations = [obs for obs, _ in steps]
    query_text = next((obs.query for obs in reversed(observations) if obs.query), "")
    answers, labels = _answer_labels(observations)
    failed = next((obs for obs in observations if not obs.ok), None)
    if as_json:
        print_json({**_as_json(steps, location, profile_name, session, language, query_text,
                               answers, labels, failed is None), "linked": dict(by_label)})
    else:
        out = stdout()
        if query_text:
            print_query(out, query_text, language)
        if failed is not None:
            pass  # the error line below says why there are no answers
        elif answers is None:
            out.print(Text("No answers: the program did not execute.", style="yellow"))
        elif not answers:
            out.print(Text("No answers: the query result is empty.", style="yellow"))
        else:
            more = f" ({len(answers)} in total)" if len(answers) > len(labels) else ""
            profile = getattr(session, "profile", None)
            unnamed = profile.unnamed_label if isinstance(profile, Profile) else None
            shown = shown_answers(answers, labels, unnamed)
            out.print(Text.assemble(("Answers: ", "bold"), ", ".join(shown) + more))
    if failed is not None:
        profile = getattr(session, "profile", None)
        args = failed.call.args if failed.call is not None else ()
        reason = clip_echoes(failed.error or failed.text, echoed_inputs(failed.action, args))
        fail(
            CliError(
                f"step {failed.step} failed: {clip(failed.action, SHOWN_ACTION)}: {reason}",
                hint=_failure_hint(failed, profile if isinstance(profile, Profile) else None),
            )
        )


def _as_json(steps: list[StepRecord], location: str, profile_name: str | None, session: Any,
             language: str, query_text: str, answers: list[Any] | None, labels: list[str],
             ok: bool) -> Mapping[str, Any]:
    return {
        "ok": ok,
        "source": location,
        "profile": profile_name,
        "steps": [
            {
                "step": obs.step,
                "action": obs.action,
                "status": obs.status,
                "ok": obs.ok,
                "text": obs.text,
                "implicit": implicit,
            }
            for obs, implicit in steps
        ],
        "program": str(session.program),
        language: query_text,
        "answers": answers,
        "labels": labels,
    }


def register(app: typer.Typer) -> None:
    app.command("run")(run_command)
