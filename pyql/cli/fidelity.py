"""``pyql fidelity``: a dataset's gold programs run through pyql and scored against the
dataset's own answers (what pyql can reach: the ceiling an agent is held to).

- ``pyql fidelity gold metaqa``: MetaQA gold relation paths through a Session, Hit@1/F1 per hop
  (:func:`pyql.datasets.gold.metaqa_fidelity`).
- ``pyql fidelity sql wikisql|spider``: SQL gold programs through a SqlSession against the
  dataset's own execution (:mod:`pyql.datasets.sql_fidelity`).

Other packages add runners under ``pyql fidelity`` with
:func:`pyql.cli.plugins.group` (``group(app, "fidelity").command("sparql")(...)``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from pyql.cli.errors import CliError, reported
from pyql.cli.output import print_json, printable, stderr
from pyql.cli.plugins import group

__all__ = ["FIDELITY_HELP", "gold_command", "register", "sql_command"]

FIDELITY_HELP = "Run a dataset's gold programs through pyql and score them (fidelity)."

DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", "--data", help="The shared data directory (default: $PYQL_DATA "
                 "or ../shared/data)."),
]
SplitOpt = Annotated[str, typer.Option("--split", help="The split (dev, test, ...).")]
SampleOpt = Annotated[
    int | None, typer.Option("--sample", min=1, metavar="N", help="A seeded sample of N questions.")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="The seed of --sample.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


class GoldDataset(str, Enum):
    metaqa = "metaqa"


class TopicExclusion(str, Enum):
    same_type = "same_type"
    original = "original"
    none = "none"


class SqlDataset(str, Enum):
    wikisql = "wikisql"
    spider = "spider"


def _hops(values: list[str] | None) -> tuple[int, ...]:
    hops: list[int] = []
    for value in values or ["1,2,3"]:
        for part in value.replace(" ", ",").split(","):
            if not part:
                continue
            if part not in ("1", "2", "3"):
                raise typer.BadParameter(f"expected 1, 2 or 3, got {part!r}", param_hint="--hops")
            hops.append(int(part))
    return tuple(dict.fromkeys(hops))


def gold_command(
    dataset: Annotated[GoldDataset, typer.Argument(help="The dataset.")],
    hops: Annotated[list[str] | None, typer.Option(
        "--hops", metavar="1,2,3", help="Hops to run: comma-separated or repeated (default all).")
    ] = None,
    split: SplitOpt = "dev",
    limit: Annotated[int | None, typer.Option("--limit", min=1, metavar="N",
                                              help="The first N questions per hop.")] = None,
    sample: SampleOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
    store_dir: Annotated[Path | None, typer.Option(
        "--store-dir", help="Keep the KB in an on-disk store here (reopens fast next time).")
    ] = None,
    topic_exclusion: Annotated[TopicExclusion, typer.Option(
        "--topic-exclusion", help="Which answers equal to the topic entity are dropped.")
    ] = TopicExclusion.same_type,
    failures: Annotated[bool, typer.Option("--failures", help="List imperfect questions.")
                        ] = False,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each hop.")] = False,
) -> None:
    """MetaQA gold relation paths through the Session: Hit@1 / F1 per hop."""
    from pyql.datasets.gold import format_table, metaqa_fidelity

    chosen = _hops(hops)
    _logging(verbose)
    with reported(), _missing_data():
        report = metaqa_fidelity(
            data_dir, hops=chosen, split=split, limit=limit, sample=sample, seed=seed,
            store_dir=store_dir, topic_exclusion=topic_exclusion.value,
        )
    if as_json:
        print_json(report)
        return
    typer.echo(printable(format_table(report)))
    if failures:
        for hop, h in report["hops"].items():
            for f in h["failures"]:
                typer.echo(printable(f"{hop}-hop {f['id']} {f['qtype']} f1={f['f1']} "
                                     f"missing={f['missing']} extra={f['extra']}"
                                     + (f" error={f['error']}" if f["error"] else "")))


def sql_command(
    dataset: Annotated[SqlDataset, typer.Argument(help="The dataset.")],
    split: SplitOpt = "dev",
    sample: SampleOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
    cache_dir: Annotated[Path | None, typer.Option(
        "--cache-dir", help="WikiSQL: reuse the built database kept here.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """SQL gold programs through SqlSession, compared with the dataset's own execution."""
    from pyql.datasets.sql_fidelity import spider_fidelity, wikisql_fidelity

    _logging(False)
    console = stderr()

    def progress(done: int, total: int) -> None:
        if not as_json and (done % 500 == 0 or done == total):
            console.print(f"  {done}/{total}")

    with reported(), _missing_data():
        if dataset is SqlDataset.wikisql:
            report = wikisql_fidelity(data_dir, split=split, sample=sample, seed=seed,
                                      cache_dir=cache_dir, progress=progress)
        else:
            if cache_dir is not None:
                raise typer.BadParameter("only WikiSQL builds a database to cache",
                                         param_hint="--cache-dir")
            report = spider_fidelity(data_dir, split=split, sample=sample, seed=seed,
                                     progress=progress)
    if as_json:
        print_json(report.to_dict())
    else:
        typer.echo(printable(report.render()))


def _logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


@contextmanager
def _missing_data() -> Iterator[None]:
    """A missing dataset file as one ``error:`` line with the data-directory hint."""
    try:
        yield
    except FileNotFoundError as exc:
        where = exc.filename or str(exc)
        raise CliError(f"dataset file not found: {where}",
                       hint="pass --data-dir DIR or set $PYQL_DATA") from None


def register(app: typer.Typer) -> None:
    fidelity = group(app, "fidelity", help=FIDELITY_HELP)
    fidelity.command("gold")(gold_command)
    fidelity.command("sql")(sql_command)
