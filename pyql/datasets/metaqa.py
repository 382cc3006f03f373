"""MetaQA (WikiMovies KB + 1/2/3-hop questions): KB loader, question reader, gold programs.

The KB file has one ``subject|relation|object`` line per fact; MetaQA names entities by their
label, so every distinct name is one entity. :func:`load_kb` turns each line into a triple between
the entity IRIs of the :data:`~pyql.profiles.METAQA` profile (``METAQA.entity(label).iri``) and
adds one ``rdfs:label`` per entity; the whole KB loads in about a second, and with ``store_dir``
it is kept on disk and reopened in milliseconds.

Each question has a bracketed topic entity and a relation-path type
(``movie_to_director_to_movie_to_language``). :func:`gold_program` turns that type into the
program an agent would write: ``get_relation`` then ``add_fact`` along the path, an
``add_filter(?x, !=, Topic)`` where the path comes back to the topic's own type, ``set_answer``
and ``execute``.

>>> item = MetaQAItem(id="1", question="what movies did Temuera Morrison act in",
...                   topic="Temuera Morrison", answers=("Once Were Warriors",),
...                   qtype="actor_to_movie", hops=1)
>>> print(gold_program(item))
get_relation(Temuera Morrison)
add_fact(?x1, starred_actors, Temuera Morrison)
set_answer(?x1)
execute()
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal, NamedTuple

import pyoxigraph as ox
from pydantic import BaseModel, ConfigDict

from pyql.datasets.files import lines, question
from pyql.datasets.paths import cache_dir, default_data_dir
from pyql.errors import DatasetFileError, ParseError
from pyql.kb.oxigraph import OxigraphKB
from pyql.profiles import METAQA, RDFS
from pyql.program import Call, Program
from pyql.syntax import Atom, AtomKind, lex_atom

__all__ = [
    "MetaQAItem",
    "MetaQAPaths",
    "PathStep",
    "TopicExclusion",
    "RELATIONS",
    "metaqa_dir",
    "cache_store_dir",
    "paths",
    "kb_path",
    "load_kb",
    "read_triples",
    "load_questions",
    "relation_path",
    "paper_walk",
    "gold_program",
    "topic_atom",
]

log = logging.getLogger(__name__)

#: segment of a question type -> KB relation (``movie_to_X`` follows it forward, ``X_to_movie``
#: backward). ``tag``/``tags`` both occur (``tag_to_movie``, ``movie_to_tags``).
RELATIONS: dict[str, str] = {
    "actor": "starred_actors",
    "director": "directed_by",
    "writer": "written_by",
    "year": "release_year",
    "language": "in_language",
    "genre": "has_genre",
    "tag": "has_tags",
    "tags": "has_tags",
    "imdbvotes": "has_imdb_votes",
    "imdbrating": "has_imdb_rating",
}

_HUB = "movie"
_LOADER_VERSION = 1
_MANIFEST = "manifest.json"
_STORE_SUBDIR = "oxigraph"

TopicExclusion = Literal["same_type", "original", "none"]


# -- paths --------------------------------------------------------------------------------------
def metaqa_dir(data_dir: str | Path | None = None) -> Path:
    """The MetaQA directory: ``data_dir/metaqa`` if it exists, else ``data_dir`` itself."""
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    return base / "metaqa" if (base / "metaqa").is_dir() else base


class MetaQAPaths(NamedTuple):
    qa: Path
    qtype: Path


def paths(
    data_dir: str | Path | None = None, hop: int = 3, split: str = "dev", *, ntm: bool = False
) -> MetaQAPaths:
    """The question file and its aligned question-type file for ``hop`` and ``split``.

    ``ntm=True`` gives the paraphrased ("NTM") questions, which share the vanilla qtype file.

    >>> paths("/data", 3, "dev").qa.as_posix()
    '/data/3-hop/qa_dev.txt'
    """
    if hop not in (1, 2, 3):
        raise ValueError(f"MetaQA has 1-, 2- and 3-hop questions, not {hop}")
    root = metaqa_dir(data_dir) / f"{hop}-hop"
    qa = (root / "ntm" if ntm else root) / f"qa_{split}.txt"
    return MetaQAPaths(qa, root / f"qa_{split}_qtype.txt")


def kb_path(data_dir: str | Path | None = None) -> Path:
    """``kb.txt`` of the MetaQA directory."""
    return metaqa_dir(data_dir) / "kb.txt"


# -- KB -----------------------------------------------------------------------------------------
def read_triples(kb_txt: str | Path) -> list[tuple[str, str, str]]:
    """The ``(subject, relation, object)`` names of every line of ``kb.txt``; a line that is
    not ``subject|relation|object`` in UTF-8 is a :class:`~pyql.errors.DatasetFileError`."""
    kb_txt = Path(kb_txt)
    triples = []
    with kb_txt.open("rb") as handle:
        for number, raw in lines(handle, kb_txt):
            line = _decoded(raw, kb_txt, number).rstrip("\r\n")
            if not line:
                continue
            parts = line.split("|")
            if len(parts) != 3:
                raise DatasetFileError(kb_txt, number,
                                       f"expected subject|relation|object, got {line[:200]!r}")
            triples.append((parts[0], parts[1], parts[2]))
    return triples


def _decoded(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetFileError(path, number, f"not UTF-8 (byte {raw[exc.start]:#04x} at "
                                             f"column {exc.start + 1})") from None


def _quads(triples: Iterable[tuple[str, str, str]]) -> list[ox.Quad]:
    """pyoxigraph quads (pyoxigraph does all N-Triples escaping): facts, then one label each."""
    nodes: dict[str, ox.NamedNode] = {}
    relations: dict[str, ox.NamedNode] = {}

    def node(label: str) -> ox.NamedNode:
        found = nodes.get(label)
        if found is None:
            found = nodes[label] = ox.NamedNode(METAQA.entity(label).iri)
        return found

    quads = []
    for s, r, o in triples:
        rel = relations.get(r)
        if rel is None:
            rel = relations[r] = ox.NamedNode(METAQA.relation(r).iri)
        quads.append(ox.Quad(node(s), rel, node(o)))
    label = ox.NamedNode(RDFS + "label")
    quads.extend(ox.Quad(n, label, ox.Literal(text)) for text, n in nodes.items())
    return quads


def _source_stamp(kb_txt: Path) -> dict[str, object]:
    stat = kb_txt.stat()
    return {"source": str(kb_txt.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "loader": _LOADER_VERSION, "entity_base": METAQA.entity_base}


def cache_store_dir(kb_txt_path: str | Path, cache: Path | None = None) -> Path:
    """The directory of the cached on-disk store of one kb.txt (see :func:`load_kb`):
    ``<cache>/metaqa/<the first 12 hex digits of the SHA-256 of its resolved path>``, the one
    ``pyql eval`` builds too (``cache``: the cache directory, default :func:`cache_dir`)."""
    base = cache if cache is not None else cache_dir()
    source = str(Path(kb_txt_path).resolve())
    return base / "metaqa" / hashlib.sha256(source.encode()).hexdigest()[:12]


def load_kb(kb_txt_path: str | Path, *, store_dir: str | Path | None = None) -> OxigraphKB:
    """The MetaQA KB as an :class:`~pyql.kb.OxigraphKB` with the ``metaqa`` profile.

    Every ``subject|relation|object`` line becomes ``<entity/subject> <relation/relation>
    <entity/object>`` and every distinct name gets one ``rdfs:label``. Without ``store_dir`` the
    store is in memory (about a second for the full KB). With ``store_dir`` the store is built
    once under ``store_dir/oxigraph`` with a ``manifest.json`` (source path, size, mtime, triple
    count); later calls whose manifest matches the source and whose store holds the recorded
    number of triples reopen it read-only, otherwise it is rebuilt. When another process holds
    the store, the KB is loaded in memory instead.
    """
    kb_txt = Path(kb_txt_path)
    start = time.perf_counter()
    if store_dir is not None:
        reopened = _reopen(kb_txt, Path(store_dir))
        if reopened is not None:
            kb, triples = reopened
            log.info("reopened MetaQA store %s (%d triples) in %.2fs", store_dir, triples,
                     time.perf_counter() - start)
            return kb
    quads = _quads(read_triples(kb_txt))
    if store_dir is not None:
        try:
            kb = _build_on_disk(kb_txt, Path(store_dir), quads)
        except OSError as exc:  # locked by another process, read-only file system, ...
            log.warning("cannot build the MetaQA store in %s (%s); loading in memory", store_dir, exc)
        else:
            log.info("built MetaQA store %s (%d triples) in %.2fs", store_dir, len(quads),
                     time.perf_counter() - start)
            return kb
    store = ox.Store()
    store.bulk_extend(quads)
    log.info("loaded MetaQA KB %s (%d triples) in %.2fs", kb_txt, len(quads),
             time.perf_counter() - start)
    return OxigraphKB(store, profile=METAQA)


def _reopen(kb_txt: Path, store_dir: Path) -> tuple[OxigraphKB, int] | None:
    """The store and its triple count, when its manifest matches the source and the store holds
    the triples the manifest records (counting them is the store's longest read)."""
    manifest_file = store_dir / _MANIFEST
    if not manifest_file.is_file():
        return None
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    stamp = _source_stamp(kb_txt)
    if any(manifest.get(k) != v for k, v in stamp.items()):
        log.info("MetaQA store %s is stale (source changed); rebuilding", store_dir)
        return None
    try:
        kb = OxigraphKB(path=store_dir / _STORE_SUBDIR, profile=METAQA, read_only=True)
    except OSError as exc:
        log.info("cannot reopen MetaQA store %s (%s); rebuilding", store_dir, exc)
        return None
    triples = len(kb)
    if triples != manifest.get("triples"):
        log.info("MetaQA store %s is incomplete; rebuilding", store_dir)
        return None
    return kb, triples


def _build_on_disk(kb_txt: Path, store_dir: Path, quads: list[ox.Quad]) -> OxigraphKB:
    store_dir.mkdir(parents=True, exist_ok=True)
    manifest_file = store_dir / _MANIFEST
    manifest_file.unlink(missing_ok=True)  # no manifest = incomplete, whatever happens next
    db = store_dir / _STORE_SUBDIR
    if db.exists():
        shutil.rmtree(db)
    store = ox.Store(str(db))
    store.bulk_extend(quads)
    store.flush()
    store.optimize()
    count = len(store)
    del store  # closes the read-write store so it can be reopened read-only
    tmp = manifest_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({**_source_stamp(kb_txt), "triples": count}, indent=2),
                   encoding="utf-8")
    tmp.replace(manifest_file)
    return OxigraphKB(path=db, profile=METAQA, read_only=True)


# -- questions ----------------------------------------------------------------------------------
class MetaQAItem(BaseModel):
    """One MetaQA question. ``question`` has the brackets around the topic removed."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    topic: str
    answers: tuple[str, ...]
    qtype: str
    hops: int


_TOPIC = re.compile(r"\[([^\]]+)\]")


def load_questions(
    qa_file: str | Path, qtype_file: str | Path, *, id_prefix: str | None = None
) -> Iterator[MetaQAItem]:
    """Read ``question-with-[topic]<TAB>a1|a2|...`` lines with their aligned question types.

    Ids are ``{prefix}-{line index}``; the prefix defaults to ``{hop}hop-{split}`` (the split
    from a ``qa_{split}.txt`` file name, ``-ntm`` added for the paraphrased questions). A line
    that is not so — no tab or more than one, not exactly one ``[topic]``, not UTF-8, a
    question type that is not a MetaQA path — or files of different lengths are a
    :class:`~pyql.errors.DatasetFileError` naming the file and the line.
    """
    qa_path, qtype_path = Path(qa_file), Path(qtype_file)
    with qa_path.open("rb") as qa, qtype_path.open("rb") as qt:
        qa_lines = (raw for _, raw in lines(qa, qa_path))
        qt_lines = (raw for _, raw in lines(qt, qtype_path))
        for index, (raw, raw_type) in enumerate(_zip_strict(qa_lines, qt_lines, qa_path,
                                                            qtype_path)):
            number = index + 1
            fields = _decoded(raw, qa_path, number).rstrip("\r\n").split("\t")
            qtype = _decoded(raw_type, qtype_path, number).strip()
            if len(fields) != 2:
                found = "no tab" if len(fields) == 1 else f"{len(fields) - 1} tabs"
                raise DatasetFileError(qa_path, number, "expected 'question with [topic]<TAB>"
                                       f"answer|answer|...', found {found}")
            text, answers = fields
            question(text, qa_path, number)
            m = _TOPIC.search(text)
            if m is None or text.count("[") != 1 or text.count("]") != 1:
                raise DatasetFileError(qa_path, number, "expected one [topic] in the question, "
                                       f"got {text[:200]!r}")
            try:
                relation_path(qtype)
            except ValueError:
                raise DatasetFileError(qtype_path, number,
                                       f"not a MetaQA question type: {qtype[:200]!r}") from None
            hops = len(qtype.split("_to_")) - 1
            prefix = id_prefix if id_prefix is not None else _id_prefix(qa_path, hops)
            yield MetaQAItem(
                id=f"{prefix}-{index}",
                question=text[: m.start()] + m.group(1) + text[m.end():],
                topic=m.group(1),
                answers=tuple(answers.split("|")) if answers else (),
                qtype=qtype,
                hops=hops,
            )


def _zip_strict(a: Iterable[bytes], b: Iterable[bytes], pa: Path, pb: Path
                ) -> Iterator[tuple[bytes, bytes]]:
    ia, ib = iter(a), iter(b)
    sentinel = object()
    number = 0
    while True:
        x, y = next(ia, sentinel), next(ib, sentinel)
        number += 1
        if x is sentinel and y is sentinel:
            return
        if x is sentinel or y is sentinel:
            ended, other = (pa, pb) if x is sentinel else (pb, pa)
            raise DatasetFileError(other, number, f"{ended.name} has only {number - 1} lines: "
                                   "the question and question-type files must be aligned")
        yield x, y  # type: ignore[misc]


def _id_prefix(qa_path: Path, hops: int) -> str:
    m = re.fullmatch(r"qa_(\w+)\.txt", qa_path.name)
    split = m.group(1) if m else qa_path.stem
    return f"{hops}hop-{split}" + ("-ntm" if qa_path.parent.name == "ntm" else "")


# -- gold programs ------------------------------------------------------------------------------
class PathStep(NamedTuple):
    """One hop of a question type: the relation, whether it is followed forward (from the
    movie), and the type of the node it reaches."""

    relation: str
    forward: bool
    reaches: str


def relation_path(qtype: str) -> tuple[str, list[PathStep]]:
    """The topic's type and the hops of a question type.

    >>> relation_path("actor_to_movie_to_director")
    ('actor', [PathStep(relation='starred_actors', forward=False, reaches='movie'), \
PathStep(relation='directed_by', forward=True, reaches='director')])
    """
    parts = qtype.split("_to_")
    if len(parts) < 2:
        raise ValueError(f"not a MetaQA question type: {qtype!r}")
    steps = []
    for here, there in zip(parts, parts[1:], strict=False):
        if here == _HUB and there in RELATIONS:
            steps.append(PathStep(RELATIONS[there], True, there))
        elif there == _HUB and here in RELATIONS:
            steps.append(PathStep(RELATIONS[here], False, there))
        else:
            raise ValueError(f"unknown hop {here}_to_{there} in question type {qtype!r}")
    return parts[0], steps


def _canonical_type(segment: str) -> str:
    return "tag" if segment == "tags" else segment


def topic_atom(label: str) -> Atom:
    """The atom that writes the entity ``label`` in a program, reading back as that label.

    A plain name stays bare (``Kismet``); a name that would read back as something else — a
    number (``1984``), a variable (``x1``), text with quotes, commas or parentheses — is quoted.
    """
    try:
        bare = lex_atom(label)
    except ParseError:  # e.g. a control character: quoted
        bare = None
    if (
        bare is not None
        and bare.kind is AtomKind.NAME
        and bare.value == label
        and not re.fullmatch(r"x\d+", label)
        and not any(c in label for c in ",()\"'#;")
    ):
        return bare
    return Atom(AtomKind.STRING, label)


def paper_walk(item: MetaQAItem) -> str:
    """The gold path in the original QueryAgent's MetaQA spelling (prompts/paper/metaqa.txt):
    ``relate(relation)`` per hop with ``get_relation()`` between hops, then ``execute()``. No
    topic filter: the original environment drops the topic entity at every hop itself (the
    Session's ``exclude_topic="nodes"``). A Session reads it as canonical calls
    (:class:`pyql.program.Alias`).

    >>> item = MetaQAItem(id="1", question="q", topic="Kismet", answers=(), hops=2,
    ...                   qtype="movie_to_director_to_movie")
    >>> print(paper_walk(item))
    relate(directed_by)
    get_relation()
    relate(directed_by)
    execute()
    """
    _, steps = relation_path(item.qtype)
    lines: list[str] = []
    for i, step in enumerate(steps):
        if i:
            lines.append("get_relation()")
        lines.append(f"relate({step.relation})")
    lines.append("execute()")
    return "\n".join(lines)


def gold_program(item: MetaQAItem, *, topic_exclusion: TopicExclusion = "same_type") -> Program:
    """The agent-style program that answers ``item`` by following its question type.

    Variables are ``?x1 .. ?xN`` (one per hop). ``topic_exclusion`` says where
    ``add_filter(?xi, !=, Topic)`` goes:

    - ``"same_type"`` (default): after each hop that reaches the topic's own type (the topic
      movie is not one of "the movies that share an actor with it"). This is the natural
      program; it misses the dataset's habit of also dropping the topic when a *person* comes
      back in another role (an actor who directs their films), see :mod:`pyql.datasets.gold`.
    - ``"original"``: what MetaQA's generator did: 2-hop drops the topic from the answers, 3-hop
      from every hop, 1-hop never. Reproduces the 2-/3-hop gold answers exactly.
    - ``"none"``: no filter.
    """
    topic_type, steps = relation_path(item.qtype)
    topic = topic_atom(item.topic)
    calls: list[Call] = []
    node: Atom = topic
    n = len(steps)
    for i, step in enumerate(steps, 1):
        var = Atom(AtomKind.VAR, f"x{i}")
        calls.append(Call.of("get_relation", node))
        rel = Atom(AtomKind.NAME, step.relation)
        calls.append(Call.of("add_fact", node, rel, var) if step.forward
                     else Call.of("add_fact", var, rel, node))
        if topic_exclusion == "same_type":
            exclude = _canonical_type(step.reaches) == _canonical_type(topic_type)
        elif topic_exclusion == "original":
            exclude = (n == 2 and i == n) or n >= 3
        else:
            exclude = False
        if exclude:
            calls.append(Call.of("add_filter", var, Atom(AtomKind.NAME, "!="), topic))
        node = var
    calls.append(Call.of("set_answer", node))
    calls.append(Call.of("execute"))
    return Program(calls=tuple(calls))
