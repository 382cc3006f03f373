"""``pyql kb``: load RDF dumps into an on-disk store and drive a local Virtuoso; and
``pyql fidelity sparql``: gold SPARQL -> PyQL coverage and equivalence (command plugins of the
``pyql.commands`` entry-point group).

- ``pyql kb load SOURCE... --store DIR``: :func:`pyql.kb.loader.load_store` with a progress bar;
- ``pyql kb info DIR``: the store's manifest (``--json``);
- ``pyql kb virtuoso init|load|start|stop|status --dir DIR``: :class:`pyql.kb.virtuoso.Virtuoso`;
- ``pyql fidelity sparql webqsp|cwq|grailqa``: :mod:`pyql.datasets.sparql_fidelity`.

A store or a Virtuoso endpoint is then a ``--kb`` of ``pyql run``, ``pyql ask`` and ``pyql eval``.
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from pyql.cli.errors import CliError, reported
from pyql.cli.output import counted, print_json, printable, stderr
from pyql.cli.plugins import group

__all__ = ["register", "register_fidelity"]

DirOpt = Annotated[Path, typer.Option("--dir", help="The Virtuoso database directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def load_command(
    sources: Annotated[list[Path], typer.Argument(help="N-Triples / N-Quads / Turtle files "
                                                  "(.nt, .nq, .ttl; optionally .gz or .bz2).")],
    store: Annotated[Path, typer.Option("--store", metavar="DIR",
                                        help="The store directory (created, or "
                                        "added to).")],
    force: Annotated[bool, typer.Option("--force", help="Load a file again even if the store "
                                        "holds it already (same content).")] = False,
    labels: Annotated[list[str] | None, typer.Option(
        "--labels", help="Then write the label index of this profile (e.g. wikidata: "
        "rdfs:label and skos:altLabel) next to the store, for offline entity linking; "
        "repeatable.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Bulk-load RDF files into an on-disk Oxigraph store, streamed, with a manifest.

    A file whose content the store holds already is refused (loading it again would copy its
    blank nodes and list it twice), unless --force."""
    from pyql.kb.loader import SourceAlreadyLoadedError, load_store

    console = stderr()
    with reported(as_json=as_json):
        try:
            if console.is_terminal and not as_json:
                columns = (TextColumn("loading"), BarColumn(), DownloadColumn(),
                           TransferSpeedColumn(), TimeElapsedColumn())
                with Progress(*columns, console=console, transient=True) as bar:
                    task = bar.add_task("load", total=None)
                    manifest = load_store(sources, store, force=force,
                                          progress=lambda done, total: bar.update(
                                              task, completed=done, total=total))
            else:
                manifest = load_store(sources, store, force=force)
        except SourceAlreadyLoadedError as exc:
            raise CliError(str(exc), hint="nothing was loaded; drop the file, or pass --force "
                           "to load it again") from None
        from pyql.kb.labels import write_label_index

        indexes = [write_label_index(store, name) for name in labels or ()]
    if as_json:
        print_json({**manifest.model_dump(),
                    "label_indexes": [{"path": str(p), "labels": n} for p, n in indexes]})
        return
    for path, n in indexes:
        typer.echo(f"label index: {path} ({n:,} labels)")
    rate = manifest.triples / manifest.seconds if manifest.seconds else 0.0
    typer.echo(f"{store}: {counted(manifest.triples, 'triple')} from "
               f"{counted(len(manifest.sources), 'file')}, "
               f"{manifest.source_bytes:,} bytes, in {manifest.seconds:.1f} s ({rate:,.0f} "
               "triples/s)")


def info_command(
    store: Annotated[Path, typer.Argument(help="A store directory made by `pyql kb load`.")],
    as_json: JsonOpt = False,
) -> None:
    """Show a store's manifest: its sources, sizes and triple count."""
    from pyql.kb.loader import store_info

    with reported(as_json=as_json):
        manifest = store_info(store)
    if as_json:
        print_json(manifest.model_dump())
        return
    typer.echo(f"{store}: {counted(manifest.triples, 'triple')} (pyoxigraph {manifest.pyoxigraph}, "
               f"built {manifest.created}, {manifest.seconds:.1f} s)")
    for s in manifest.sources:  # a path may hold anything a file name can
        typer.echo(f"  {printable(s.path)}  {s.bytes:,} bytes  {s.format}"
                   f"{' ' + (s.compression or 'gzip') if s.compressed else ''}"
                   f"  {counted(s.triples, 'triple')}  {s.seconds:.1f} s")


def virtuoso_init(
    directory: DirOpt,
    http_port: Annotated[int, typer.Option("--http-port", help="SPARQL/HTTP port on "
                                           "127.0.0.1.")] = 8890,
    sql_port: Annotated[int, typer.Option("--sql-port", help="SQL (isql) port on "
                                          "127.0.0.1.")] = 1111,
    memory: Annotated[float, typer.Option("--memory", help="Buffer pool budget in GB.")] = 2.0,
) -> None:
    """Make a Virtuoso database directory (virtuoso.ini on loopback ports)."""
    from pyql.kb.virtuoso import Virtuoso, VirtuosoSettings

    with reported():
        db = Virtuoso.init(directory, VirtuosoSettings(sql_port=sql_port, http_port=http_port,
                                                       memory_gb=memory))
    typer.echo(f"{db.directory}: ready; `pyql kb virtuoso start --dir {directory}`, then "
               f"--kb {db.sparql_url}")


def virtuoso_start(
    directory: DirOpt,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait until it "
                                           "answers.")] = 120.0,
) -> None:
    """Start the server (detached) and wait until /sparql answers."""
    from pyql.kb.virtuoso import Virtuoso

    with reported():
        db = Virtuoso(directory)
        db.start(timeout=timeout)
    typer.echo(f"Virtuoso runs (pid {db.pid()}): {db.sparql_url}")


def virtuoso_load(
    directory: DirOpt,
    sources: Annotated[list[Path], typer.Argument(help="RDF files (.nt, .ttl, .nq; "
                                                  "optionally .gz).")],
    graph: Annotated[str, typer.Option("--graph", help="The graph IRI to load into.")
                     ] = "http://rdf.freebase.com/",
    loaders: Annotated[int, typer.Option("--loaders", min=1, help="Parallel "
                                         "rdf_loader_run() sessions.")] = 2,
) -> None:
    """Bulk-load files with Virtuoso's loader (ld_add, rdf_loader_run, checkpoint)."""
    import time

    from pyql.kb.virtuoso import Virtuoso

    with reported():
        db = Virtuoso(directory)
        started = time.perf_counter()
        count = db.load(sources, graph, loaders=loaders)
    typer.echo(f"<{graph}>: {counted(count, 'triple')} ({time.perf_counter() - started:.1f} s)")


def virtuoso_stop(directory: DirOpt) -> None:
    """Checkpoint and shut the server down."""
    from pyql.kb.virtuoso import Virtuoso

    with reported():
        stopped = Virtuoso(directory).stop()
    typer.echo("stopped" if stopped else "not running")


def virtuoso_status(directory: DirOpt) -> None:
    """Whether the server runs, and its endpoint."""
    from pyql.kb.virtuoso import Virtuoso

    with reported():
        db = Virtuoso(directory)
        pid = db.pid()
    typer.echo(f"running (pid {pid}): {db.sparql_url}" if pid else "not running")


class SparqlDataset(str, Enum):
    webqsp = "webqsp"
    cwq = "cwq"
    grailqa = "grailqa"
    wwq = "wwq"


def sparql_fidelity_command(
    dataset: Annotated[SparqlDataset, typer.Argument(help="The dataset.")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="The first N.")] = None,
    sample: Annotated[int | None, typer.Option("--sample", min=1, help="N at random.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --sample's draw.")] = 0,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="The shared data "
                                                  "directory.")] = None,
    slice_path: Annotated[Path | None, typer.Option(
        "--slice", help="Write the synthesized graphs of the queries that agree to this "
        "N-Triples file: a KB slice for 'pyql eval --llm gold' ('pyql kb load' it).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Gold SPARQL -> PyQL: coverage, unsupported constructs, equivalence on synthesized
    graphs."""
    from pyql.datasets.sparql_fidelity import sparql_fidelity

    logging.getLogger("rdflib").setLevel(logging.ERROR)
    with reported():
        report = sparql_fidelity(dataset.value, data_dir=data_dir, limit=limit, sample=sample,
                                 seed=seed, slice_path=slice_path)
    if as_json:
        print_json(report.summary())
    else:
        typer.echo(printable(report.format()))


def register(app: typer.Typer) -> None:
    """Add ``pyql kb`` (the ``pyql.commands`` entry point ``kb``)."""
    kb = group(app, "kb", help="Load RDF dumps into a store; drive a local Virtuoso.")
    kb.command("load")(load_command)
    kb.command("info")(info_command)
    virtuoso = typer.Typer(help="A local Virtuoso 7: init, load, start, stop, status.",
                           no_args_is_help=True)
    virtuoso.command("init")(virtuoso_init)
    virtuoso.command("load")(virtuoso_load)
    virtuoso.command("start")(virtuoso_start)
    virtuoso.command("stop")(virtuoso_stop)
    virtuoso.command("status")(virtuoso_status)
    kb.add_typer(virtuoso, name="virtuoso")


def register_fidelity(app: typer.Typer) -> None:
    """Add ``pyql fidelity sparql`` (the ``pyql.commands`` entry point ``fidelity-sparql``)."""
    group(app, "fidelity").command("sparql")(sparql_fidelity_command)
