"""``pyql references``: build and inspect SRP reference bases.

::

    pyql references build --dataset metaqa-1hop --split dev --fraction 0.5 --out refs/m1
    pyql references build --dataset metaqa-1hop --dataset metaqa-2hop --dataset metaqa-3hop \\
        --split dev --fraction 0.5 --embedding bm25 --size 100 --clusters 10 --out refs/mqa
    pyql references show refs/mqa --question "who directed [Kismet]" --entity Kismet

``build`` reads the labelled questions of ``--split`` of each ``--dataset`` (their gold relation
paths come from the gold programs), keeps the reference part (``--fraction``: the ids whose
salted hash falls in that share of the range; evaluate on the rest), clusters them and writes the
base (:mod:`pyql.agent.strategies.srp.references`). ``--json`` prints the manifest. Errors are one
``error:`` line on stderr and exit code 1.

``register(app)`` adds the command group to ``pyql`` (entry point ``references`` of the
``pyql.commands`` group).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from pyql.cli.errors import EXIT_USAGE, CliError, fail
from pyql.cli.output import make_console, print_json

__all__ = ["register", "references_app"]

references_app = typer.Typer(
    name="references", help="SRP reference bases: build one from a labelled split, inspect it.",
    no_args_is_help=True, add_completion=False)


@references_app.command("build")
def build_command(
    dataset: Annotated[list[str], typer.Option("--dataset", "-d", help="a labelled dataset "
                                               "(repeat to mix several: metaqa-1hop ...)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="the directory to write")],
    split: Annotated[str | None, typer.Option(
        help="the split to build from (default: train where every dataset has one, as the "
        "paper; else the dataset's default split)")] = None,
    fraction: Annotated[float, typer.Option(help="share of the split (by id hash) that "
                                            "references come from; evaluate on the rest")] = 1.0,
    salt: Annotated[str, typer.Option(help="salt of the id hash")] = "srp",
    embedding: Annotated[str, typer.Option(help="auto, minilm, openai[:MODEL] or bm25")] = "auto",
    size: Annotated[int, typer.Option(help="references kept")] = 100,
    clusters: Annotated[int, typer.Option(help="k-means clusters")] = 10,
    pool: Annotated[int, typer.Option(help="questions clustered (a seeded sample)")] = 2000,
    seed: Annotated[int, typer.Option(help="seed of the sample, k-means and the draw")] = 0,
    data_dir: Annotated[Path | None, typer.Option(help="datasets directory "
                                                  "(default $PYQL_DATA)")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace a base already there")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the manifest as JSON")] = False,
) -> None:
    """Build a reference base from a labelled split and write it to --out."""
    from pyql.agent.evaluation.compare import reference_part, reference_split
    from pyql.agent.strategies.srp.references import ReferenceBaseError, build_reference_base
    from pyql.errors import PyqlError

    if not 0.0 < fraction <= 1.0:
        fail(CliError(f"--fraction must be in (0, 1], not {fraction}", code=EXIT_USAGE))
    try:
        split = split or reference_split(dataset, data_dir)
        questions, ids = reference_part(dataset, split, fraction=fraction, salt=salt,
                                        data_dir=data_dir)
        base = build_reference_base(questions, datasets=dataset, split=split, fraction=fraction,
                                    salt=salt, source_ids=ids, embedding=embedding, size=size,
                                    clusters=clusters, pool=pool, seed=seed)
        base.save(out, overwrite=overwrite)
    except (PyqlError, OSError, ValueError) as exc:
        exists = isinstance(exc, ReferenceBaseError) and exc.reason == "exists"
        hint = "pass --overwrite" if exists else None
        fail(str(exc), hint)
    m = base.manifest
    if as_json:
        print_json(m.model_dump(mode="json"))
        return
    make_console(highlight=False).print(
        f"{m.size} references ({m.clusters} clusters x {m.per_cluster}) from {m.pool} of "
        f"{m.source_size} labelled questions of {m.source}; {m.embedding}:{m.model} -> {out}")


@references_app.command("show")
def show_command(
    directory: Annotated[Path, typer.Argument(help="a reference base directory")],
    question: Annotated[str | None, typer.Option(help="retrieve the top-k for this "
                                                 "question")] = None,
    entity: Annotated[list[str] | None, typer.Option(help="a mention to mask in "
                                                     "--question")] = None,
    k: Annotated[int, typer.Option(help="references retrieved")] = 4,
) -> None:
    """Print a base's manifest, or the references retrieved for --question."""
    from pyql.agent.strategies.srp.prompts import render_reference_path
    from pyql.agent.strategies.srp.references import ReferenceBase
    from pyql.errors import PyqlError

    try:
        base = ReferenceBase.open(directory)
        console = make_console(highlight=False, soft_wrap=True)
        if question is None:
            console.print(json.dumps(base.manifest.model_dump(mode="json"), indent=2,
                                     ensure_ascii=False))
            return
        for hit in base.retrieve(question, k, mentions=entity or ()):
            ref = hit.reference
            console.print(f"{hit.score:.3f}  {ref.question}  |  {render_reference_path(ref)}")
    except (PyqlError, OSError) as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    app.add_typer(references_app, name="references")
