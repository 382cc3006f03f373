"""The two kinds of path Readi's one loop runs on: a reasoning path over a KB (:class:`KBPaths`)
and a table path over a SQL database (:class:`TablePaths`).

Readi's loop (:meth:`pyql.agent.strategies.readi.Readi.run`: generate → instantiate → edit, then answer) is
written once; what differs per kind is the small :class:`PathKind` protocol: how a path is made
(empty, corrupted, parsed from a reply), instantiated, shown stuck to the editor, read back from
an edit, and answered. Adding a kind of path (a document, an API) means implementing it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pyql.agent.grounding.candidates import PathOptions, kb_path_options
from pyql.agent.grounding.paths import (
    Instantiation,
    PathFormatError,
    PathInstantiator,
    PathStuck,
    ReasoningPath,
    parse_chain,
    parse_path,
)
from pyql.agent.grounding.paths.table import (
    TableInstantiation,
    TableInstantiator,
    TablePath,
    TableStuck,
    parse_table_path,
)
from pyql.agent.llm.structured import (
    HopChoices,
    ReplyFormat,
    kb_path_format,
    table_path_format,
)
from pyql.agent.strategies.readi import prompts
from pyql.program import Program

if TYPE_CHECKING:
    from pyql.agent.recorder import Recorder

__all__ = ["Answerer", "Instantiated", "KBPaths", "Path", "PathKind", "Stuck", "TablePaths"]

Messages = list[dict[str, Any]]


class Stuck(Protocol):
    """Why a path could not be instantiated (:class:`PathStuck`, :class:`TableStuck`)."""

    @property
    def reason(self) -> str: ...

    def render(self) -> str:
        """The error block the edit prompt shows."""
        ...

    def to_dict(self) -> dict[str, Any]: ...


class Instantiated(Protocol):
    """A path instantiated (:class:`Instantiation`, :class:`TableInstantiation`)."""

    @property
    def complete(self) -> bool: ...

    @property
    def program(self) -> Program: ...

    @property
    def query(self) -> str: ...

    @property
    def kb_queries(self) -> int: ...

    def to_dict(self) -> dict[str, Any]: ...


class Answerer(Protocol):
    """What a kind's answer step asks of Readi: the program's answers, or the LLM's."""

    answer_mode: str

    def program_answer(self, run: Recorder, answers: Sequence[Any], data: dict[str, Any]
                       ) -> tuple[Any, ...]: ...

    def llm_answer(self, run: Recorder, messages: Messages, data: dict[str, Any],
                   values: Sequence[str] = ()
                   ) -> tuple[Any, ...]: ...


class Path(Protocol):
    """A path of any kind: printable in its text format, and as a record's data."""

    def as_dict(self) -> dict[str, Any]: ...


P = TypeVar("P", bound=Path)
I = TypeVar("I", bound=Instantiated)  # noqa: E741 - the instantiation's type


class PathKind(Protocol, Generic[P, I]):
    """The per-kind parts of Readi's loop, for one question (``P``: the path, ``I``: its
    instantiation)."""

    def empty(self) -> P:
        """The path with no step (the start ``initial_path="empty"``; an unreadable reply)."""
        ...

    def corrupt(self, rng: random.Random, length: int) -> P:
        """``length`` random steps (the start ``initial_path="corrupt"``)."""
        ...

    def generation(self) -> tuple[Messages, ReplyFormat]:
        """The prompt that asks for the first path, and its reply's format."""
        ...

    def parse(self, text: str) -> P:
        """The path a generation reply writes (:class:`PathFormatError` if none)."""
        ...

    def instantiate(self, path: P, *, allow_empty: bool = False) -> I: ...

    def stuck(self, inst: I) -> Stuck | None:
        """The error the editor is shown (None: nothing to edit)."""
        ...

    def edit(self, stuck: Stuck, path: P) -> tuple[Messages, ReplyFormat]:
        """The prompt that asks to edit ``path`` stuck on ``stuck``, and its reply's format."""
        ...

    def read_edit(self, text: str, path: P) -> tuple[P, str | None]:
        """The edited path and the format problem of the reply (``path`` when unreadable)."""
        ...

    def insists(self, stuck: Stuck) -> bool:
        """An unchanged edit of ``stuck`` means the model insists and the path is instantiated
        once more with ``allow_empty`` (an empty result can be the answer)."""
        ...

    def answer(self, inst: I, edits: int) -> tuple[Any, ...]: ...


def counts(edits: int, complete: bool, retrieved: int) -> dict[str, float]:
    """The per-question numbers of a Readi run that evaluation averages (``step_usage``); the
    answer step adds ``answered_by_llm``."""
    return {"edits": float(edits), "instantiated": float(complete),
            "retrieved": float(retrieved)}


class _OneQuestion:
    """What a kind runs with for one question: Readi (the answer step), the question's recorder
    and the prompt profile."""

    def __init__(self, readi: Answerer, run: Recorder, profile: str) -> None:
        self.readi = readi
        self.run = run
        self.profile = profile

    def _by_program(self, sound: bool) -> bool:
        """Whether the program answers (Readi's ``answer`` mode ``program``, or ``auto`` with
        a ``sound`` instantiation) rather than the LLM reading what was retrieved."""
        mode = self.readi.answer_mode
        return mode == "program" or (mode == "auto" and sound)


class KBPaths(_OneQuestion):
    """Reasoning paths (one constraint per topic entity) instantiated on a KB."""

    def __init__(self, readi: Answerer, run: Recorder, instantiator: PathInstantiator,
                 entities: Mapping[str, str], profile: str) -> None:
        super().__init__(readi, run, profile)
        self.instantiator = instantiator
        self.entities = entities
        self.mentions = list(entities)
        self._options: dict[str, PathOptions] | None = None

    # -- grounding (--constrain grounded, choose mode) ----------------------------------------
    def _grounded(self) -> bool:
        level = getattr(self.readi, "level", None)
        return bool(level is not None and level.grounded)

    def path_options(self) -> dict[str, PathOptions]:
        """Per topic entity, the KB's paths around it (fetched once per question, its KB
        queries counted)."""
        if self._options is None:
            question = self.run.question
            ranker = self.instantiator.binder.ranker

            def work() -> dict[str, PathOptions]:
                return {m: kb_path_options(self.instantiator.session(self.entities), m,
                                           question, ranker=ranker) for m in self.mentions}

            self._options, _, queries = self.run.env(work, backend=self.instantiator.kb)
            self.run.add_queries(queries)
        return self._options

    def _relations(self, mentions: Sequence[str]) -> dict[str, Sequence[str] | HopChoices] | None:
        """Grounded: per topic entity its path's options hop by hop (:class:`HopChoices`: the
        relations at the entity, at the nodes the fetched ones reach, then the vocabulary)."""
        if not self._grounded():
            return None
        options = self.path_options()
        return {m: HopChoices(first=options[m].first.items,
                              second={r: c.items for r, c in options[m].second.items()},
                              rest=options[m].vocabulary.items)
                for m in mentions if m in options}

    def choices(self) -> list[str] | None:
        """Choose mode's first paths: the KB's 1- and 2-hop paths from the one topic entity
        (best first), as the path text the parser reads; None with several topic entities."""
        if len(self.mentions) != 1:
            return None
        mention = self.mentions[0]
        paths = self.path_options()[mention].paths()
        return [str(ReasoningPath.of({mention: list(p)})) for p in paths] or None

    def empty(self) -> ReasoningPath:
        return ReasoningPath.empty(self.mentions)

    def corrupt(self, rng: random.Random, length: int) -> ReasoningPath:
        vocab = self.instantiator.binder.vocabulary.relations
        if not vocab:
            return self.empty()
        return ReasoningPath.of({m: [rng.choice(vocab) for _ in range(length)]
                                 for m in self.mentions})

    def generation(self) -> tuple[Messages, ReplyFormat]:
        return (prompts.generation_messages(self.profile, self.run.question, self.mentions),
                kb_path_format(self.mentions, self._relations(self.mentions)))

    def parse(self, text: str) -> ReasoningPath:
        path = parse_path(text, entities=self.mentions)
        return path if path.constraints else self.empty()

    def instantiate(self, path: ReasoningPath, *, allow_empty: bool = False) -> Instantiation:
        return self.instantiator.instantiate(path, self.entities, self.run.question)

    def stuck(self, inst: Instantiation) -> PathStuck | None:
        return inst.stuck[0] if inst.stuck else None

    def _mentions_of(self, path: ReasoningPath) -> list[str]:
        return [c.entity for c in path.constraints] or self.mentions

    def edit(self, stuck: Stuck, path: ReasoningPath) -> tuple[Messages, ReplyFormat]:
        mentions = self._mentions_of(path)
        return (prompts.edit_messages(self.profile, self.run.question, stuck.render()),
                kb_path_format(mentions, self._relations(mentions)))

    def read_edit(self, text: str, path: ReasoningPath) -> tuple[ReasoningPath, str | None]:
        """A whole path (``{...}``) or one constraint (a ``Final Path:`` chain)."""
        mentions = self._mentions_of(path)
        if "{" in text:
            try:
                return parse_path(text, entities=mentions), None
            except PathFormatError:
                pass
        try:
            constraint = parse_chain(text, entities=mentions)
        except PathFormatError as exc:
            return path, exc.reason
        return path.replace(constraint), None

    def insists(self, stuck: Stuck) -> bool:
        return False

    def answer(self, inst: Instantiation, edits: int) -> tuple[Any, ...]:
        instances = inst.instances
        data = {"instances": list(instances[:500]), "instance_count": len(instances),
                "retrieved": len(inst.triples), "complete": inst.complete,
                "counts": {**counts(edits, inst.complete, len(inst.triples)),
                           **inst.features()}}
        if self._by_program(inst.complete and bool(inst.answers)):
            return self.readi.program_answer(self.run, inst.answers, data)
        messages = prompts.answer_messages(self.profile, self.run.question, triples=inst.triples)
        topics = set(self.mentions) | set(self.entities.values())
        values = [*map(str, instances), *(x for t in inst.triples for x in (t[2], t[0]))]
        return self.readi.llm_answer(self.run, messages, data,
                                     [v for v in values if v not in topics])


class TablePaths(_OneQuestion):
    """Table paths (columns, row conditions, the answer) instantiated on one table;
    ``retrieval``: the generation prompt shows a randomly sampled row (the paper's Appendix A)."""

    def __init__(self, readi: Answerer, run: Recorder, instantiator: TableInstantiator,
                 table: str | None, profile: str, *, seed: int, retrieval: bool) -> None:
        super().__init__(readi, run, profile)
        self.instantiator = instantiator
        self.table = table
        self.seed = seed
        self.retrieval = retrieval
        self.columns = instantiator.columns()

    def empty(self) -> TablePath:
        return TablePath(())

    def corrupt(self, rng: random.Random, length: int) -> TablePath:
        return TablePath(tuple(rng.sample(list(self.columns), min(len(self.columns), length))))

    def generation(self) -> tuple[Messages, ReplyFormat]:
        rng = random.Random(f"{self.seed}:{self.run.question}") if self.retrieval else None
        example = self.instantiator.example_row(self.columns, rng)
        return (prompts.generation_messages(self.profile, self.run.question, table=self.table,
                                            columns=self.columns, example_row=example),
                table_path_format(self.columns))

    def parse(self, text: str) -> TablePath:
        return parse_table_path(text)

    def instantiate(self, path: TablePath, *, allow_empty: bool = False) -> TableInstantiation:
        return self.instantiator.instantiate(path, self.run.question, allow_empty=allow_empty)

    def stuck(self, inst: TableInstantiation) -> TableStuck | None:
        return inst.stuck

    def edit(self, stuck: Stuck, path: TablePath) -> tuple[Messages, ReplyFormat]:
        return (prompts.edit_messages(self.profile, self.run.question, stuck.render(),
                                      columns=self.columns),
                table_path_format(self.columns))

    def read_edit(self, text: str, path: TablePath) -> tuple[TablePath, str | None]:
        try:
            return parse_table_path(text), None
        except PathFormatError as exc:
            return path, exc.reason

    def insists(self, stuck: Stuck) -> bool:
        # the model insists on rows that match nothing: an empty result can be the answer (as
        # a result-based hint is given once, pyql.environment.HintPolicy)
        return stuck.reason == "no_matching_row"

    def answer(self, inst: TableInstantiation, edits: int) -> tuple[Any, ...]:
        data = {"retrieved": len(inst.rows), "complete": inst.complete,
                "instances": list(inst.instances[:500]), "instance_count": len(inst.instances),
                "counts": counts(edits, inst.complete, len(inst.rows))}
        if self._by_program(inst.complete and not inst.dropped):
            return self.readi.program_answer(self.run, inst.answers, data)
        messages = prompts.answer_messages(self.profile, self.run.question, columns=inst.columns,
                                           rows=inst.rows)
        answers = self.readi.llm_answer(self.run, messages, data)
        return tuple(table_value(a, inst.rows) for a in answers)


def table_value(text: str, rows: Sequence[Sequence[Any]]) -> Any:
    """A reader's answer on a table as a value of the table: the retrieved cell it names (as the
    database typed it; without case), else a number when it reads as one (a count, a sum the
    reader computed), else the text.

    >>> table_value("guard", [("Guard", 3)]), table_value("3", [("Guard", 3.0)])
    ('Guard', 3.0)
    >>> table_value("2", [("Guard",)]), table_value("Lake Tuz", [])
    (2, 'Lake Tuz')
    """
    folded = text.strip().casefold()
    for row in rows:
        for cell in row:
            if cell is not None and str(cell).strip().casefold() == folded:
                return cell
            if isinstance(cell, (int, float)) and not isinstance(cell, bool):
                try:
                    if float(folded) == float(cell):
                        return cell
                except ValueError:
                    pass
    try:
        number = float(folded)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in folded else number
