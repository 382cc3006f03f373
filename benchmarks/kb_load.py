"""Time and peak memory of loading a KB: ``pyql kb load`` (Oxigraph bulk load) on MetaQA and on a
generated Freebase-shaped file, and Virtuoso's bulk loader on the same Freebase-shaped file.

Each ``pyql kb load`` runs in its own process (``python -m pyql kb load``); a wrapper process
reports its child's peak resident set size (``getrusage(RUSAGE_CHILDREN).ru_maxrss``). Virtuoso's figures are the server's own: the
load's wall time (``ld_add`` + parallel ``rdf_loader_run()`` + ``checkpoint``) and the server
process's peak RSS (``VmHWM``) after the load, with the buffer pool set by ``--virtuoso-memory``.

The extrapolation to the full Freebase dump (1.9 billion triples, 22 GB gzipped, 250 GB of
N-Triples: Google's data-dump page) divides by the measured throughput: a lower bound on time,
since both loaders slow down once the store outgrows the page cache.

    python benchmarks/kb_load.py [--triples 2000000] [--virtuoso-memory 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyql.datasets.freebase_sample import write_sample

FULL_FREEBASE = 1_900_000_000
_TRIPLES_PER_PERSON = 21.7  # measured on the generator: people -> triples

_WRAPPER = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter(); r = subprocess.run(sys.argv[1:]); t = time.perf_counter() - t\n"
    "print(r.returncode, t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def measure_pyql_load(sources: list[Path], store: Path) -> dict[str, float]:
    """Wall time and peak RSS (MB) of ``pyql kb load`` in its own process."""
    cmd = [sys.executable, "-c", _WRAPPER, sys.executable, "-m", "pyql", "kb", "load",
           *map(str, sources), "--store", str(store), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    code, seconds, rss_kb = out[-1].split()
    if code != "0":
        raise RuntimeError(f"pyql kb load failed: {out}")
    manifest = json.loads((store / "pyql-manifest.json").read_text())
    return {"triples": manifest["triples"], "seconds": float(seconds),
            "peak_rss_mb": int(rss_kb) / 1024, "store_mb": _size_mb(store),
            "source_mb": sum(s.stat().st_size for s in sources) / 2**20}


def measure_virtuoso_load(source: Path, memory_gb: float) -> dict[str, float] | None:
    from pyql.kb.virtuoso import Virtuoso, VirtuosoSettings, free_port

    if shutil.which("virtuoso-t") is None:
        return None
    directory = Path(tempfile.mkdtemp(prefix="pyql-bench-virtuoso-"))
    try:
        db = Virtuoso.init(directory, VirtuosoSettings(
            sql_port=free_port(), http_port=free_port(), memory_gb=memory_gb))
        t0 = time.perf_counter()
        db.start(timeout=120)
        startup = time.perf_counter() - t0
        t0 = time.perf_counter()
        count = db.load([source], "http://rdf.freebase.com/", loaders=2)
        seconds = time.perf_counter() - t0
        peak = _vm_hwm_mb(db.pid())
        db.stop()
        return {"triples": count, "seconds": seconds, "startup_seconds": startup,
                "peak_rss_mb": peak, "store_mb": _size_mb(directory, "*.db"),
                "memory_gb": memory_gb}
    finally:
        if (directory / "pyql-virtuoso.json").exists():
            Virtuoso(directory).kill()
        shutil.rmtree(directory, ignore_errors=True)


def _vm_hwm_mb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _size_mb(path: Path, pattern: str = "**/*") -> float:
    return sum(f.stat().st_size for f in path.glob(pattern) if f.is_file()) / 2**20


def _metaqa_nt(data: Path, out: Path) -> Path | None:
    import pyoxigraph as ox

    from pyql.datasets import metaqa

    kb_txt = data / "metaqa" / "kb.txt"
    if not kb_txt.exists():
        return None
    kb = metaqa.load_kb(kb_txt)
    kb.store.dump(str(out), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=2_000_000,
                        help="size of the generated Freebase-shaped file (about)")
    parser.add_argument("--virtuoso-memory", type=float, default=2.0, help="GB of buffers")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "PYQL_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pyql-bench-load-"))
    results: dict[str, object] = {"cpus": os.cpu_count()}
    try:
        metaqa_nt = _metaqa_nt(args.data, work / "metaqa.nt")
        if metaqa_nt is not None:
            results["metaqa_oxigraph"] = measure_pyql_load([metaqa_nt], work / "metaqa-store")
        fb = work / "freebase-shaped.nt.gz"
        t0 = time.perf_counter()
        n = write_sample(fb, people=int(args.triples / _TRIPLES_PER_PERSON), seed=1)
        results["generated"] = {"triples": n, "seconds": time.perf_counter() - t0,
                                "gz_mb": fb.stat().st_size / 2**20}
        results["freebase_oxigraph"] = measure_pyql_load([fb], work / "fb-store")
        virtuoso = measure_virtuoso_load(fb, args.virtuoso_memory)
        if virtuoso is not None:
            results["freebase_virtuoso"] = virtuoso
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for key in ("metaqa_oxigraph", "freebase_oxigraph", "freebase_virtuoso"):
        r = results.get(key)
        if isinstance(r, dict):
            r["triples_per_s"] = r["triples"] / r["seconds"]
            r["full_freebase_hours"] = FULL_FREEBASE / r["triples_per_s"] / 3600
    text = json.dumps(results, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
