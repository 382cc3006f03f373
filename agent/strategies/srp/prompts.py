"""SRP's prompts (the paper's Appendix C, Tables 6-10) and the parsers of their replies.

Five LLM calls, each a system message (the paper's instruction and a demonstration for the KB
family: ``prompts/srp_<stage>.md`` and ``prompts/srp_<stage>_<profile>.md``, ``freebase`` or
``metaqa``) and a user message (the retrieved references, then the question's input):

==================  ======================================  =====================================
stage               the model writes                        parsed into
==================  ======================================  =====================================
relation check      ``1. ('relation', 0.4): why``           :class:`RelationCheck`
(Table 6)           one line per relation
path planning       ``Thought: ...`` then ``Path: {"topic":  :class:`PlanReply` (path texts)
(Table 7)           ["topic -> r1 -> r2", ...]}``
sequence judge      ``Thinking Process: ... <HAVE_ANSWER>``  :class:`Judgement`
(Table 8)           or ``<NO_ANSWER>``, then ``Retained
                    sequences:`` ``1. [("h", "r", "t")]``
path edit           ``Goal: ...`` ``Thought: ...``          :class:`EditReply` (path texts)
(Table 9)           ``Final Path: topic -> r1 -> r2``
answering           chain of thought ending ``So, the       the answers (:func:`parse_answer`)
(Table 10)          answer is {X}, {Y}.``
==================  ======================================  =====================================

Path texts (``topic -> r1 -> r2``) are returned as written: reading them into a reasoning path
is the path core's job (:mod:`pyql.agent.grounding.paths`), as it is for Readi.

Malformed replies raise :class:`SRPParseError` with the stage, a reason code and the text, never
a guess: the strategy decides what a malformed reply costs (a retry, an empty verdict).

Departures from the paper's wording, each to make a reply parseable: the relation-check
instruction adds "only rate relations from the candidate relations"; the path-planning and edit
instructions state the output format their demonstrations use; the answering demonstration
encloses its answer in braces, as its own instruction asks ("Use {} to enclose the answer!")
while the paper's demonstration does not; triples are written with double quotes (JSON string
escapes) so that names with quotes or commas read back.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any, Literal

from pyql.agent.strategies.srp.references import Reference
from pyql.errors import InputError

__all__ = [
    "Triple",
    "SRPParseError",
    "ScoredRelation",
    "RelationCheck",
    "PlanReply",
    "Judgement",
    "EditReply",
    "PROFILES",
    "render_triple",
    "render_reference_path",
    "relation_check_messages",
    "parse_relation_check",
    "plan_messages",
    "parse_plan",
    "judge_messages",
    "parse_judge",
    "edit_messages",
    "parse_edit",
    "answer_messages",
    "parse_answer",
    "STAGES",
    "stage_of",
    "read_triples",
]

Triple = tuple[str, str, str]
Stage = Literal["relation_check", "plan", "judge", "edit", "answer"]
Message = dict[str, Any]

#: the KB families with a demonstration per stage
PROFILES = ("freebase", "metaqa")
#: the LLM calls of SRP, in the order they happen
STAGES: tuple[Stage, ...] = ("relation_check", "plan", "judge", "edit", "answer")
HAVE_ANSWER = "HAVE_ANSWER"
NO_ANSWER = "NO_ANSWER"
#: answers of a reference shown in the judge prompt
_MAX_REFERENCE_ANSWERS = 5


class SRPParseError(InputError):
    """A reply of the model that does not have the stage's output format.

    ``stage``: ``relation_check``, ``plan``, ``judge``, ``edit`` or ``answer``; ``reason``: a
    short code (``no_relations``, ``no_path``, ``no_verdict``, ``bad_sequence``,
    ``no_answer``); ``text``: the reply."""

    def __init__(self, stage: Stage, reason: str, text: str, detail: str = "") -> None:
        self.stage = stage
        self.reason = reason
        self.text = text
        self.detail = detail
        super().__init__(f"{stage}: {reason}" + (f" ({detail})" if detail else ""))


# -- templates ----------------------------------------------------------------------------------


@cache
def _read(name: str) -> str:
    return resources.files("pyql.prompts").joinpath(name).read_text(encoding="utf-8").strip()


def _system(stage: str, profile: str, **values: Any) -> Message:
    if profile not in PROFILES:
        raise ValueError(f"SRP has prompts for {', '.join(PROFILES)}, not {profile!r}")
    instruction = Template(_read(f"srp_{stage}.md")).substitute(**values)
    demo = _read(f"srp_{stage}_{profile}.md")
    return {"role": "system", "content": f"{instruction}\n\nDemonstration Example\n{demo}"}


def stage_of(messages: Sequence[Mapping[str, Any]]) -> Stage | None:
    """Which SRP stage a prompt is (by its system message), or None (stand-ins read it)."""
    system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
    if not isinstance(system, str):
        return None
    for stage in STAGES:
        head = _read(f"srp_{stage}.md").split("$", 1)[0]
        if system.startswith(head):
            return stage
    return None


def render_triple(triple: Triple) -> str:
    """``("h", "r", "t")`` with JSON string escapes.

    >>> render_triple(('Don\\'t Go', 'directed_by', 'A "B"'))
    '("Don\\'t Go", "directed_by", "A \\\\"B\\\\"")'
    """
    return "(" + ", ".join(json.dumps(part, ensure_ascii=False) for part in triple) + ")"


def render_reference_path(reference: Reference) -> str:
    """``topic -> r1 -> r2``: a reference's gold relation path as the prompts write paths.

    >>> render_reference_path(Reference(id="1", question="q", topic="Kismet",
    ...                                 path=("directed_by", "^directed_by", "has_genre")))
    'Kismet -> directed_by -> ^directed_by -> has_genre'
    """
    return " -> ".join([reference.topic, *reference.path])


def _references(references: Sequence[Reference], *, answers: bool = False) -> str:
    if not references:
        return ""
    what = "questions, associated relation path and answer of question" if answers else \
        "questions and associated relation paths which connect to correct answer of question"
    lines = [f"Here are {len(references)} examples of {what}:"]
    for ref in references:
        lines += [f"Question: {ref.question}", f"Relation Path: {render_reference_path(ref)}"]
        if answers:
            shown = list(ref.answers[:_MAX_REFERENCE_ANSWERS])
            more = " ..." if len(ref.answers) > _MAX_REFERENCE_ANSWERS else ""
            lines.append(f"Answer: {', '.join(shown)}{more}")
    return "\n".join(lines) + "\n\n"


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


# -- relation check (Table 6) -------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredRelation:
    relation: str
    score: float


@dataclass(frozen=True)
class RelationCheck:
    """The relations the model rated, best first (only candidates), and the names it wrote that
    are not candidates."""

    relations: tuple[ScoredRelation, ...]
    unknown: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.relation for r in self.relations)


def relation_check_messages(question: str, topic: str, candidates: Sequence[str],
                            references: Sequence[Reference] = (), *, count: int = 3,
                            profile: str = "freebase") -> list[Message]:
    """The relation-check prompt: rate ``count`` of the topic's one-hop ``candidates``."""
    return [
        _system("relation_check", profile, count=count),
        _user(_references(references) + f"Question: {question}\nTopic Entity: {topic}\n"
              f"Candidate Relations: {'; '.join(candidates)}\nAnswer:"),
    ]


_QUOTES = "'\"‘’“”`"
_SCORED = re.compile(
    r"\(\s*[" + _QUOTES + r"]?\s*([^()" + _QUOTES + r",]+?)\s*[" + _QUOTES + r"]?\s*,\s*"
    r"([0-9]*\.?[0-9]+)\s*\)")


def parse_relation_check(text: str, candidates: Sequence[str], *, count: int | None = None
                         ) -> RelationCheck:
    """The ``('relation', score)`` pairs of a relation-check reply, candidates only (matched
    without case, a ``ns:`` prefix ignored), best first (ties in the order written; a relation
    written twice keeps its first score), at most ``count``. :class:`SRPParseError`
    (``no_relations``) when no candidate was rated.

    >>> parse_relation_check("1. ('directed_by', 0.7): yes\\n2. (‘has_tags’, 0.1): maybe\\n"
    ...                      "3. ('made_up', 0.2)", ["directed_by", "has_tags"]).names
    ('directed_by', 'has_tags')
    """
    known = {c.casefold(): c for c in reversed(candidates)}  # the first spelling wins
    found: dict[str, float] = {}
    unknown: list[str] = []
    for match in _SCORED.finditer(text):
        written, score = match.group(1).strip(), float(match.group(2))
        name = known.get(written.casefold()) or known.get(written.split(":", 1)[-1].casefold())
        if name is not None:
            found.setdefault(name, score)
        elif written not in unknown:
            unknown.append(written)
    if not found:
        raise SRPParseError("relation_check", "no_relations", text,
                            f"no ('relation', score) pair names a candidate; unknown: {unknown}"
                            if unknown else "no ('relation', score) pair")
    order = sorted(found, key=lambda name: -found[name])  # sorted() is stable: ties as written
    kept = order[:count] if count is not None else order
    return RelationCheck(tuple(ScoredRelation(n, found[n]) for n in kept), tuple(unknown))


# -- path planning (Table 7) --------------------------------------------------------------------


@dataclass(frozen=True)
class PlanReply:
    """The thought and the path texts of a planning reply, as ``(topic, path text)`` pairs."""

    thought: str
    paths: tuple[tuple[str, str], ...]


def plan_messages(question: str, relations: Mapping[str, Sequence[str]],
                  references: Sequence[Reference] = (), *, profile: str = "freebase"
                  ) -> list[Message]:
    """The path-planning prompt: ``relations`` maps each topic entity to its checked relations."""
    topics = ", ".join(relations)
    valuable = json.dumps({t: list(r) for t, r in relations.items()}, ensure_ascii=False)
    return [
        _system("plan", profile),
        _user(_references(references) + f"Question: {question}\nTopic Entity: {topics}\n"
              f"Valuable Relations: {valuable}\nThought:"),
    ]


_ARROW = re.compile(r"\s*(?:->|→|=>)\s*")


def _block(text: str, label: str) -> str | None:
    """What follows the last ``label:`` of ``text`` (None when there is none)."""
    matches = list(re.finditer(rf"(?im)^\W*{label}\s*:", text))
    return text[matches[-1].end():] if matches else None


def _literal(text: str) -> Any:
    """A JSON or Python literal at the start of ``text`` (curly quotes normalised)."""
    plain = text.translate(str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"}))
    start = plain.find("{")
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(plain)):
        depth += {"{": 1, "}": -1}.get(plain[i], 0)
        if depth == 0:
            chunk = plain[start:i + 1]
            for reader in (json.loads, ast.literal_eval):
                try:
                    return reader(chunk)
                except (ValueError, SyntaxError):
                    continue
            return None
    return None


def _path_lines(text: str) -> list[str]:
    """Lines of ``text`` that read as ``topic -> relation ...`` (quotes, commas, list marks
    trimmed)."""
    out = []
    for line in text.splitlines():
        line = line.strip().strip(",").strip()
        line = re.sub(r"^(?:[-*]|\d+[.)])\s+", "", line).strip().strip(_QUOTES).strip()
        if _ARROW.search(line):
            out.append(_ARROW.sub(" -> ", line))
    return out


def parse_plan(text: str) -> PlanReply:
    """The thought and the paths of a planning reply. The paths are read from the ``Path:``
    mapping (JSON or a Python literal) or, failing that, from the ``->`` lines after ``Path:``.
    :class:`SRPParseError` (``no_path``) when there is no path.

    >>> reply = parse_plan('Thought: the director.\\nPath: {\\n"Kismet": [\\n'
    ...                    '"Kismet -> directed_by"\\n]\\n}')
    >>> reply.thought, reply.paths
    ('the director.', (('Kismet', 'Kismet -> directed_by'),))
    """
    body = _block(text, "Path")
    thought_block = _block(text.split("Path:")[0] if body is not None else text, "Thought")
    thought = (thought_block if thought_block is not None else text.split("Path:")[0]).strip()
    if body is None:
        raise SRPParseError("plan", "no_path", text, "no 'Path:'")
    paths: list[tuple[str, str]] = []
    value = _literal(body)
    if isinstance(value, Mapping):
        for topic, items in value.items():
            for item in [items] if isinstance(items, str) else items or ():
                if isinstance(item, str) and _ARROW.search(item):
                    paths.append((str(topic), _ARROW.sub(" -> ", item.strip())))
    if not paths:
        paths = [(_ARROW.split(line, 1)[0], line) for line in _path_lines(body)]
    if not paths:
        raise SRPParseError("plan", "no_path", text, "no 'topic -> relation' path after 'Path:'")
    return PlanReply(thought, tuple(paths))


# -- sequence judge (Table 8) -------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """A judge reply: the verdict, the thinking process, and per triplet sequence the retained
    triples (``()`` for ``[]``; a sequence the reply does not mention keeps nothing)."""

    verdict: Literal["HAVE_ANSWER", "NO_ANSWER"]
    thinking: str
    retained: tuple[tuple[Triple, ...], ...]
    #: retained triples that were not in the sequence shown (dropped)
    unknown: tuple[Triple, ...] = ()
    #: the verdict is not the model's (nothing to judge, or an unreadable reply)
    auto: bool = False

    @property
    def have_answer(self) -> bool:
        return self.verdict == HAVE_ANSWER

    @property
    def kept(self) -> tuple[Triple, ...]:
        """Every retained triple, in order, once."""
        return tuple(dict.fromkeys(t for seq in self.retained for t in seq))

    def message(self) -> str:
        """The judge message for path edit: the verdict's reasoning and the retained triples."""
        lines = [f"Current Information is not enough. {self.thinking}".strip()]
        for i, seq in enumerate(self.retained, 1):
            lines.append(f"Retained sequence {i}: [{', '.join(map(render_triple, seq))}]")
        return "\n".join(lines)


def judge_messages(question: str, sequences: Sequence[Sequence[Triple]],
                   references: Sequence[Reference] = (), *, profile: str = "freebase"
                   ) -> list[Message]:
    """The sequence-judge prompt over the triplet sequences retrieved along the plan."""
    rendered = "\n".join(f"{i}. [{', '.join(map(render_triple, seq))}]"
                         for i, seq in enumerate(sequences, 1))
    return [
        _system("judge", profile),
        _user(_references(references, answers=True)
              + f"Question: {question}\nTriplet sequences:\n{rendered}\nThinking Process:"),
    ]


_VERDICT = re.compile(r"<\s*(HAVE_ANSWER|NO_ANSWER)\s*>|\b(HAVE_ANSWER|NO_ANSWER)\b")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')


def read_triples(text: str) -> list[Triple] | None:
    """The triples of one written sequence ``[("h", "r", "t"), ...]``: as a Python/JSON literal,
    else as groups of three quoted strings; None when unreadable.

    >>> read_triples('[("Kismet", "directed_by", "William Dieterle")]')
    [('Kismet', 'directed_by', 'William Dieterle')]
    """
    plain = text.strip().translate(str.maketrans({"“": '"', "”": '"'}))
    try:
        value = ast.literal_eval(plain)
    except (ValueError, SyntaxError):
        value = None
    if isinstance(value, (list, tuple)) and all(
            isinstance(t, (list, tuple)) and len(t) == 3 for t in value):
        return [tuple(str(x) for x in t) for t in value]  # type: ignore[misc]
    if plain in ("[]", ""):
        return []
    out: list[Triple] = []
    for group in re.findall(r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)", plain):
        parts = [json.loads(f'"{m.group(1)}"') if m.group(1) is not None else m.group(2)
                 for m in _STRING.finditer(group)]
        if len(parts) != 3:
            return None
        out.append((parts[0], parts[1], parts[2]))
    return out or None


def parse_judge(text: str, sequences: Sequence[Sequence[Triple]]) -> Judgement:
    """The verdict (the last ``<HAVE_ANSWER>``/``<NO_ANSWER>`` of the thinking process) and the
    retained sequences of a judge reply. Retained triples that were not in the sequence shown
    are dropped (and reported in ``unknown``). :class:`SRPParseError`: ``no_verdict``, or
    ``bad_sequence`` for a retained line that is not a list of triples.

    >>> j = parse_judge('I can answer. <HAVE_ANSWER>\\nRetained sequences:\\n'
    ...                 '1. [("A", "r", "B")]\\n2. []', [[("A", "r", "B")], [("A", "s", "C")]])
    >>> j.verdict, j.retained
    ('HAVE_ANSWER', ((('A', 'r', 'B'),), ()))
    """
    retained_at = re.search(r"(?im)^\W*Retained sequences?\s*:", text)
    thinking_text = text[:retained_at.start()] if retained_at else text
    verdicts = [m.group(1) or m.group(2) for m in _VERDICT.finditer(thinking_text)]
    if not verdicts:  # some models put the tag after the sequences
        verdicts = [m.group(1) or m.group(2) for m in _VERDICT.finditer(text)]
    if not verdicts:
        raise SRPParseError("judge", "no_verdict", text, "no <HAVE_ANSWER> or <NO_ANSWER>")
    thinking = _VERDICT.sub("", re.sub(r"(?i)^\s*Thinking Process\s*:", "", thinking_text))
    retained: list[tuple[Triple, ...]] = [() for _ in sequences]
    unknown: list[Triple] = []
    if retained_at:
        for line in text[retained_at.end():].splitlines():
            m = re.match(r"\s*(\d+)\s*[.):]\s*(.*)$", line)
            if not m:
                continue
            index = int(m.group(1)) - 1
            triples = read_triples(m.group(2))
            if triples is None:
                raise SRPParseError("judge", "bad_sequence", text, f"line {line.strip()!r}")
            if not 0 <= index < len(sequences):
                unknown.extend(triples)
                continue
            shown = set(map(tuple, sequences[index]))
            retained[index] = tuple(t for t in triples if t in shown)
            unknown.extend(t for t in triples if t not in shown)
    verdict: Any = verdicts[-1]  # HAVE_ANSWER or NO_ANSWER, by the pattern
    return Judgement(verdict, " ".join(thinking.split()), tuple(retained), tuple(unknown))


# -- path edit (Table 9) ------------------------------------------------------------------------


@dataclass(frozen=True)
class EditReply:
    goal: str
    thought: str
    paths: tuple[str, ...]


def edit_messages(question: str, initial_paths: Sequence[str], errors: Sequence[str],
                  instantiated: Sequence[str], candidates: Mapping[str, Sequence[str]],
                  references: Sequence[Reference] = (), *, profile: str = "freebase"
                  ) -> list[Message]:
    """The path-edit prompt: the current paths, the error messages (instantiation errors and
    the judge's message), what was instantiated and the candidate relations at the stuck points."""
    errs = "\n".join(f"{i}. {e}" for i, e in enumerate(errors, 1)) or "1. none"
    inst = "\n".join(instantiated) or "none"
    cands = json.dumps({k: list(v) for k, v in candidates.items()}, ensure_ascii=False)
    return [
        _system("edit", profile),
        _user(_references(references) + f"Question: {question}\n"
              f"Initial Path: {chr(10).join(initial_paths)}\n>> Error Message\n{errs}\n"
              f">> Instantiation Context\nInstantiate Paths: {inst}\n"
              f"Candidate Relations: {cands}\n>> Corrected Path\nGoal:"),
    ]


def parse_edit(text: str) -> EditReply:
    """Goal, thought and the path texts after ``Final Path:`` (one per line).
    :class:`SRPParseError` (``no_path``) when there is none.

    >>> parse_edit("Goal: g\\nThought: t\\nFinal Path: A -> r1 -> r2").paths
    ('A -> r1 -> r2',)
    """
    body = _block(text, "Final Path")
    if body is None:
        raise SRPParseError("edit", "no_path", text, "no 'Final Path:'")
    paths = _path_lines(body)
    if not paths:
        raise SRPParseError("edit", "no_path", text, "no 'topic -> relation' after 'Final Path:'")
    goal = (_block(text.split("Thought:")[0], "Goal") or "").strip()
    thought_block = _block(text.split("Final Path:")[0], "Thought")
    return EditReply(goal, (thought_block or "").strip(), tuple(paths))


# -- answering (Table 10) -----------------------------------------------------------------------


def answer_messages(question: str, triples: Sequence[Triple], *, profile: str = "freebase"
                    ) -> list[Message]:
    """The chain-of-thought answering prompt over the kept triples."""
    knowledge = ", ".join(map(render_triple, triples)) or "none"
    return [_system("answer", profile),
            _user(f"Q: {question}\nKnowledge Triplets: {knowledge}\nA:")]


_BRACED = re.compile(r"\{([^{}]+)\}")
_ANSWER_IS = re.compile(r"(?i)the answer is\s*:?\s*(.+?)\s*\.?\s*$", re.MULTILINE)


def parse_answer(text: str) -> tuple[str, ...]:
    """The answers of an answering reply: every ``{...}`` (in order, once); ``()`` when the
    reply encloses nothing (``{}``: no answer); else what follows the last "the answer is".
    :class:`SRPParseError` (``no_answer``) when none of these is there.

    >>> parse_answer("So, the answer is {Jerry Paris}, {Walter Hill}.")
    ('Jerry Paris', 'Walter Hill')
    """
    braced = [m.group(1).strip() for m in _BRACED.finditer(text) if m.group(1).strip()]
    if braced:
        return tuple(dict.fromkeys(braced))
    if re.search(r"\{\s*\}", text):
        return ()
    plain = _ANSWER_IS.findall(text)
    if plain and plain[-1].strip():
        return (plain[-1].strip(),)
    raise SRPParseError("answer", "no_answer", text, "no {answer} and no 'the answer is'")
