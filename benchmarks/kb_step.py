"""How long one Session step takes on the embedded store, against raw SPARQL on other engines.

Runs the gold programs of ``--n`` sampled MetaQA 3-hop dev questions step by step through
``pyql.Session`` on the embedded Oxigraph store (the full MetaQA KB) and times every
``Session.run`` call. Then runs each question's *final* SPARQL (the query ``execute()`` sends)
raw on:

- pyoxigraph (``Store.query`` on the same in-memory store, results consumed);
- rdflib (``Graph.query``, results consumed) on a *subset* KB: the triples the sampled
  questions' relation paths traverse (every triple matching each hop's relation from the
  previous hop's nodes, starting at the topic), plus the labels of those nodes. The final
  queries give the same answers on it as on the full KB (checked), and loading the full KB
  into rdflib would take minutes;
- Virtuoso over HTTP (``/sparql``, one keep-alive connection, SPARQL JSON results parsed), the
  full KB loaded as N-Triples into a throw-away server started with
  ``tests/support/virtuoso.py``. Skipped with a note when virtuoso-t or the helper is missing.

Usage (from the repository root)::

    python benchmarks/kb_step.py [--n 200] [--seed 0] [--repeat 3] [--no-virtuoso] [--profile]

The Session runs twice, without and with the ERASER guidelines; for each, every step's time is
split into the engine's share (``OxigraphKB.engine_seconds``: pyoxigraph evaluating the queries
and handing over their solutions) and the framework's (the rest: parsing, resolving, building,
compiling, converting cells, summarising, guidelines, the observation), per step and per
question, with the engine queries per step.

Targets: Session step p50 <= 1 ms; raw Virtuoso p50 / Session step p50 >= 2; framework overhead
<= 0.10 ms per step with the guidelines on.
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import json
import logging
import pstats
import random
import statistics
import sys
import tempfile
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import pyoxigraph as ox  # noqa: E402

from pyql import Session  # noqa: E402
from pyql.datasets import metaqa  # noqa: E402
from pyql.datasets.metaqa import MetaQAItem  # noqa: E402
from pyql.kb import OxigraphKB  # noqa: E402
from pyql.profiles import METAQA, RDFS  # noqa: E402

log = logging.getLogger("kb_step")

Triple = tuple[str, str, str]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100)."""
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95),
            "mean": statistics.fmean(values) if values else float("nan")}


# -- Session --------------------------------------------------------------------------------------
class SessionTimes:
    """Wall time, engine time and engine queries of every step and every question."""

    def __init__(self) -> None:
        self.steps: dict[str, list[float]] = defaultdict(list)  # by call name, "all"
        self.framework: dict[str, list[float]] = defaultdict(list)  # step minus engine time
        self.engine: list[float] = []
        self.queries: list[int] = []
        self.question: list[float] = []
        self.question_framework: list[float] = []
        #: per round, the (step, framework) times of every step in order
        self.rounds: list[list[tuple[float, float]]] = []

    def best_of_rounds(self) -> tuple[list[float], list[float]]:
        """Each step's least disturbed (step, framework) time over the rounds: on a shared
        machine a step is sometimes preempted, which the minimum of identical runs filters."""
        steps = [min(r[i][0] for r in self.rounds) for i in range(len(self.rounds[0]))]
        framework = [min(r[i][1] for r in self.rounds) for i in range(len(self.rounds[0]))]
        return steps, framework


def run_sessions(
    kb: OxigraphKB, items: Sequence[MetaQAItem], repeat: int, *, guidelines: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[SessionTimes, dict[str, str], dict[str, frozenset[str]]]:
    """Step and question times (with the engine's share), final SPARQL and answers per question.

    The engine's share of a step is what ``kb.engine_seconds`` grew by during it: pyoxigraph
    evaluating the queries and handing over their solutions. The rest is the framework's. Both
    are read on ``clock``: wall time (``perf_counter``) or this thread's CPU time
    (``thread_time``, which time slices given to other processes do not inflate).
    """
    times = SessionTimes()
    final: dict[str, str] = {}
    answers: dict[str, frozenset[str]] = {}
    kb.engine_clock = clock
    for round_ in range(repeat):
        times.rounds.append([])
        for item in items:
            program = metaqa.gold_program(item)
            session = Session(kb, entities={item.topic: item.topic}, guidelines=guidelines)
            total = framework = 0.0
            for call in program:
                engine, queries = kb.engine_seconds, kb.query_count
                start = clock()
                obs = session.run(call)
                elapsed = clock() - start
                engine = kb.engine_seconds - engine
                times.steps[call.name].append(elapsed)
                times.steps["all"].append(elapsed)
                times.framework[call.name].append(elapsed - engine)
                times.framework["all"].append(elapsed - engine)
                times.engine.append(engine)
                times.queries.append(kb.query_count - queries)
                times.rounds[-1].append((elapsed, elapsed - engine))
                total += elapsed
                framework += elapsed - engine
            times.question.append(total)
            times.question_framework.append(framework)
            if round_ == 0:
                final[item.id] = session.query.to_sparql()
                answers[item.id] = frozenset(str(a) for a in obs.answers or ())
    return times, final, answers


def profile_sessions(kb: OxigraphKB, items: Sequence[MetaQAItem], top: int = 30, *,
                     guidelines: bool = False) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    run_sessions(kb, items, 1, guidelines=guidelines)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# -- raw engines ----------------------------------------------------------------------------------
def time_queries(
    run: Callable[[str], frozenset[str]], queries: dict[str, str], repeat: int,
    expected: dict[str, frozenset[str]],
) -> tuple[list[float], int]:
    """Per-query wall times (``repeat`` rounds after one warm-up) and answer mismatches."""
    mismatches = 0
    for qid, text in queries.items():  # warm-up + correctness
        if run(text) != expected[qid]:
            mismatches += 1
    times = []
    clock = time.perf_counter
    for _ in range(repeat):
        for text in queries.values():
            start = clock()
            run(text)
            times.append(clock() - start)
    return times, mismatches


def oxigraph_runner(store: ox.Store) -> Callable[[str], frozenset[str]]:
    def run(text: str) -> frozenset[str]:
        return frozenset(METAQA.compact(s[0].value) for s in store.query(text))

    return run


def subset_triples(triples: Sequence[Triple], items: Sequence[MetaQAItem]) -> set[Triple]:
    """The triples the items' relation paths traverse, from their topics."""
    forward: dict[tuple[str, str], list[Triple]] = defaultdict(list)
    backward: dict[tuple[str, str], list[Triple]] = defaultdict(list)
    for t in triples:
        forward[(t[0], t[1])].append(t)
        backward[(t[2], t[1])].append(t)
    keep: set[Triple] = set()
    for item in items:
        _, steps = metaqa.relation_path(item.qtype)
        nodes = {item.topic}
        for step in steps:
            index = forward if step.forward else backward
            found = [t for node in nodes for t in index.get((node, step.relation), ())]
            keep.update(found)
            nodes = {t[2] if step.forward else t[0] for t in found}
    return keep


def rdflib_runner(subset: set[Triple]) -> tuple[Callable[[str], frozenset[str]], float]:
    import rdflib

    start = time.perf_counter()
    graph = rdflib.Graph()
    names: set[str] = set()
    label = rdflib.URIRef(RDFS + "label")
    for s, r, o in subset:
        graph.add((rdflib.URIRef(METAQA.entity(s).iri), rdflib.URIRef(METAQA.relation(r).iri),
                   rdflib.URIRef(METAQA.entity(o).iri)))
        names.update((s, o))
    for name in names:
        graph.add((rdflib.URIRef(METAQA.entity(name).iri), label, rdflib.Literal(name)))
    load = time.perf_counter() - start

    def run(text: str) -> frozenset[str]:
        return frozenset(METAQA.compact(str(row[0])) for row in graph.query(text))

    return run, load


class VirtuosoRunner:
    """Raw SPARQL over HTTP on one keep-alive connection; SPARQL JSON results parsed."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.path = parts.path
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)

    def __call__(self, text: str) -> frozenset[str]:
        body = urllib.parse.urlencode({"query": text})
        self.conn.request("POST", self.path, body=body, headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/sparql-results+json",
        })
        response = self.conn.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"virtuoso HTTP {response.status}: {payload[:300]!r}")
        data = json.loads(payload)
        var = data["head"]["vars"][0]
        return frozenset(METAQA.compact(b[var]["value"]) for b in data["results"]["bindings"]
                         if var in b)

    def close(self) -> None:
        self.conn.close()


def start_virtuoso(kb: OxigraphKB) -> tuple[Any, str, float] | str:
    """(server, sparql url, load seconds), or the reason the column is skipped."""
    try:
        from tests.support.virtuoso import VirtuosoError, VirtuosoServer
    except ImportError as exc:
        return f"tests/support/virtuoso.py not importable ({exc})"
    try:
        server = VirtuosoServer.start()
    except VirtuosoError as exc:
        return f"virtuoso not started: {str(exc).splitlines()[0]}"
    try:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="pyql-bench-") as tmp:
            nt = Path(tmp) / "metaqa.nt"
            kb.store.dump(str(nt), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
            server.load(nt)
        return server, server.sparql_url, time.perf_counter() - start
    except Exception:
        server.stop()
        raise


# -- main -----------------------------------------------------------------------------------------
def fmt_ms(seconds: float) -> str:
    return f"{1000 * seconds:8.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="3-hop dev questions to sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (after a warm-up)")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--no-virtuoso", action="store_true")
    parser.add_argument("--no-rdflib", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the Session steps")
    parser.add_argument("--cpu", action="store_true",
                        help="time the Session steps in thread CPU time (busy machines)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    start = time.perf_counter()
    kb = metaqa.load_kb(metaqa.kb_path(args.data_dir))
    kb_load = time.perf_counter() - start
    items = list(metaqa.load_questions(*metaqa.paths(args.data_dir, 3, "dev")))
    items = random.Random(args.seed).sample(items, min(args.n, len(items)))
    print(f"MetaQA 3-hop dev: {len(items)} questions (seed {args.seed}); full KB {len(kb)} "
          f"triples loaded in {kb_load:.2f}s; {args.repeat} timed rounds after a warm-up")

    run_sessions(kb, items[: min(20, len(items))], 1, guidelines=True)  # warm-up
    clock = time.thread_time if args.cpu else time.perf_counter
    plain, final, answers = run_sessions(kb, items, args.repeat, clock=clock)
    checked, _, checked_answers = run_sessions(kb, items, args.repeat, guidelines=True,
                                               clock=clock)
    if checked_answers != answers:
        print("WARNING: the answers differ with guidelines on")
    session = summary(plain.steps["all"])
    rows: list[tuple[str, dict[str, float], str]] = [("Session.run step (all)", session, "")]
    for name in ("get_relation", "add_fact", "add_filter", "set_answer", "execute"):
        if plain.steps.get(name):
            rows.append((f"  step: {name}", summary(plain.steps[name]), ""))
    overhead: dict[str, dict[str, Any]] = {}
    for label, run in (("guidelines off", plain), ("guidelines on", checked)):
        overhead[label] = {
            "step": summary(run.steps["all"]), "engine": summary(run.engine),
            "framework": summary(run.framework["all"]),
            "framework_by_call": {k: summary(v) for k, v in run.framework.items()},
            "question": summary(run.question),
            "question_framework": summary(run.question_framework),
            "queries_per_step": statistics.fmean(run.queries),
        }
        best_step, best_framework = run.best_of_rounds()
        overhead[label]["best_step"] = summary(best_step)
        overhead[label]["best_framework"] = summary(best_framework)

    raw: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    ox_times, bad = time_queries(oxigraph_runner(kb.store), final, args.repeat, answers)
    raw["pyoxigraph"] = summary(ox_times)
    rows.append(("raw final SPARQL: pyoxigraph", raw["pyoxigraph"], f"{bad} mismatches"))

    if not args.no_rdflib:
        subset = subset_triples(metaqa.read_triples(metaqa.kb_path(args.data_dir)), items)
        run, load = rdflib_runner(subset)
        rd_times, bad = time_queries(run, final, 1, answers)
        raw["rdflib"] = summary(rd_times)
        rows.append(("raw final SPARQL: rdflib (subset)", raw["rdflib"],
                     f"{bad} mismatches; {len(subset)} path triples, loaded in {load:.1f}s"))

    if args.no_virtuoso:
        notes.append("Virtuoso skipped (--no-virtuoso)")
    else:
        started = start_virtuoso(kb)
        if isinstance(started, str):
            notes.append(f"Virtuoso skipped: {started}")
        else:
            server, url, load = started
            runner = VirtuosoRunner(url)
            try:
                vt_times, bad = time_queries(runner, final, args.repeat, answers)
            finally:
                runner.close()
                server.stop()
            raw["virtuoso"] = summary(vt_times)
            rows.append(("raw final SPARQL: Virtuoso HTTP", raw["virtuoso"],
                         f"{bad} mismatches; full KB loaded in {load:.1f}s"))

    print()
    print(f"{'what':36} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}  note")
    for name, s, note in rows:
        print(f"{name:36} {s['n']:>6} {fmt_ms(s['p50'])} {fmt_ms(s['p95'])} {fmt_ms(s['mean'])}  "
              f"{note}")
    for note in notes:
        print(note)
    print()
    print("The framework's own share (Session.run time minus time inside pyoxigraph), "
          f"{'thread CPU' if args.cpu else 'wall'} time:")
    print(f"{'':16} {'per step: all':>14} {'engine':>8} {'framework':>10} {'fw p50':>8} "
          f"{'per question':>13} {'framework':>10} {'queries/step':>13}")
    for label, o in overhead.items():
        print(f"{label:16} {fmt_ms(o['step']['mean']):>14} {fmt_ms(o['engine']['mean'])} "
              f"{fmt_ms(o['framework']['mean']):>10} {fmt_ms(o['framework']['p50'])} "
              f"{fmt_ms(o['question']['mean']):>13} {fmt_ms(o['question_framework']['mean']):>10}"
              f" {o['queries_per_step']:>13.3f}")
    print("(means in ms; 'fw p50' is the median framework time of a step)")
    for label, o in overhead.items():
        print(f"  best of {args.repeat} rounds per step, {label}: step mean "
              f"{1000 * o['best_step']['mean']:.3f} p50 {1000 * o['best_step']['p50']:.3f}; "
              f"framework mean {1000 * o['best_framework']['mean']:.3f} "
              f"p50 {1000 * o['best_framework']['p50']:.3f} ms")
    for label, o in overhead.items():
        by_call = ", ".join(f"{k} {1000 * v['mean']:.3f}" for k, v in o["framework_by_call"].items()
                            if k != "all")
        print(f"  framework ms per call, {label}: {by_call}")
    fw = overhead["guidelines on"]["best_framework"]
    for stat in ("p50", "mean"):
        print(f"framework overhead with guidelines on, {stat} = {1000 * fw[stat]:.3f} ms per step "
              f"(target <= 0.10 ms): {'OK' if fw[stat] <= 0.0001 else 'MISSED'}")
    print()
    p50 = session["p50"]
    ok = p50 <= 0.001
    print(f"Session step p50 = {1000 * p50:.3f} ms (target <= 1 ms): {'OK' if ok else 'MISSED'}")
    for engine, s in raw.items():
        ratio = s["p50"] / p50
        target = " (target >= 2: " + ("OK" if ratio >= 2 else "MISSED") + ")" \
            if engine == "virtuoso" else ""
        print(f"raw {engine} p50 / Session step p50 = {ratio:.2f}{target}")
    if args.profile:
        print()
        print(profile_sessions(kb, items, guidelines=True))
    if args.json is not None:
        args.json.write_text(json.dumps({
            "n_questions": len(items), "seed": args.seed, "repeat": args.repeat,
            "session": session, "steps": {k: summary(v) for k, v in plain.steps.items()},
            "overhead": overhead,
            "raw": raw, "notes": notes,
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
