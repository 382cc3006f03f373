"""Prompts: what the model reads at each step, and how its output is read back.

The prompt of the paper (section 3.2, appendix D) has four parts: the task description, the
document of the functions, a one-shot example, and the new question. Here:

- the **system message** holds the first three. It depends only on the prompt profile and the
  mode, so the prefix before the question is byte-identical across questions (provider prompt
  caching). The tool document and the JSON schemas of tools mode are generated from the
  :class:`~pyql.program.Signature` declarations (:func:`tools_doc`, :func:`tool_schemas`);
- the first **user message** is the question and its entity linking (or the table header, or
  the database schema: tables, columns and foreign keys — :func:`format_schema`);
- each step adds the model's ``Thought n``/``Action n`` and the ``Observation n``
  (Algorithm 1, line 20). In tools mode the action is a tool call and the observation a tool
  message.

Observations are rendered compactly (:func:`render_observation`): relation lists longer than
``top_k`` are ranked and cut (appendix B.3), value lists are bounded by the Session, and any text
is capped. When a guideline fired, the observation is the hint followed by the retry wording
:data:`RETRY_WORDING` — the only place that wording lives (:func:`render_hint`).

Text-mode output is read by :func:`parse_reply`: it strips code fences, backticks and chatter,
takes the ``Action`` line, and reports a missing action or several actions so the Session can
turn them into Python feedback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from pyql.feedback import Hint
from pyql.program import TOOLSETS, Param, Signature, Toolset
from pyql.registry import lookup
from pyql.schemas import param_doc
from pyql.session import Observation

if TYPE_CHECKING:
    from pyql.sql.schema import Schema

__all__ = [
    "read_prompt",
    "RETRY_WORDING",
    "STOP_SEQUENCES",
    "cap_text",
    "PromptProfile",
    "ParsedReply",
    "get_prompt_profile",
    "prompt_profiles",
    "tools_doc",
    "system_prompt",
    "verbatim_prompt",
    "question_message",
    "format_entities",
    "format_columns",
    "format_schema",
    "parse_reply",
    "render_hint",
    "render_relations",
    "render_observation",
]

#: appended to a guideline's message; the step number is the one the model writes next
RETRY_WORDING = "Please re-generate only Thought {n} and Action {n}."
#: text mode: stop before the model writes an observation of its own
STOP_SEQUENCES = ("\nObservation",)

_PACKAGE = "pyql.prompts"
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten", "eleven", "twelve")


def read_prompt(name: str) -> str:
    """A prompt file shipped in ``pyql.prompts`` (package data), as text."""
    return resources.files(_PACKAGE).joinpath(name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class PromptProfile:
    """The prompt of one KB/DB family: task, tool set, documented functions, one-shot example.

    ``param_notes`` (``{"function.param": "doc"}``) replace a parameter's documentation where the
    Signature's wording (written for Freebase) would mislead, e.g. MetaQA's names-as-ids.
    ``context`` is what follows the question: ``entities`` (the entity linking), ``columns`` (a
    table header) or ``schema`` (a database's tables, columns and foreign keys); empty: by the
    tool set (``columns`` for SQL, else ``entities``).
    """

    name: str
    tools: str
    functions: tuple[str, ...]
    task: str
    example: str
    context_label: str = "Entity"
    param_notes: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    context: str = ""
    #: a prompt file shown verbatim as the whole system message (text mode), instead of
    #: task + tool document + format + example: the original papers' prompts (``paper-*``)
    verbatim: str = ""

    @property
    def toolset(self) -> Toolset:
        return TOOLSETS[self.tools]

    @property
    def signatures(self) -> list[Signature]:
        toolset = self.toolset
        return [toolset.signature(name) for name in self.functions]

    def note(self, function: str, param: Param) -> str:
        return self.param_notes.get(f"{function}.{param.name}", param.doc)


@lru_cache(maxsize=1)
def _profiles_json() -> dict[str, Any]:
    return json.loads(read_prompt("profiles.json"))


def prompt_profiles() -> list[str]:
    """The names of the shipped prompt profiles."""
    return list(_profiles_json())


@cache
def get_prompt_profile(name: str) -> PromptProfile:
    """A shipped prompt profile (``freebase``, ``generic``, ``metaqa``, ``wikisql``, ``spider``,
    and the original papers' prompts ``paper-grailqa``, ``paper-graphq``, ``paper-webqsp``,
    ``paper-metaqa``, ``paper-wikisql``, shown verbatim)."""
    spec = lookup(_profiles_json(), name, "prompt profile")
    profile = PromptProfile(
        name=name,
        tools=spec["tools"],
        functions=tuple(spec["functions"]),
        task=read_prompt(spec["task"]).strip(),
        example=read_prompt(spec["example"]).strip(),
        context_label=spec.get("context_label", "Entity"),
        param_notes=dict(spec.get("param_notes", {})),
        description=spec.get("description", ""),
        context=spec.get("context", ""),
        verbatim=read_prompt(spec["verbatim"]).strip() if spec.get("verbatim") else "",
    )
    profile.signatures  # noqa: B018 - validate the function names now
    return profile


def verbatim_prompt(profile: PromptProfile) -> str:
    """An original paper prompt as its file has it, byte for byte (``profile.verbatim`` is
    stripped; the original's request starts with its leading newline); a profile that is not
    a shipped paper prompt gives its text-mode system prompt."""
    spec = _profiles_json().get(profile.name, {})
    if spec.get("verbatim") and profile.verbatim:
        return _verbatim_file(spec["verbatim"])
    return system_prompt(profile, "text")


@cache
def _verbatim_file(name: str) -> str:
    return read_prompt(name)


# -- tool documents and schemas -----------------------------------------------------------------


def tools_doc(signatures: Sequence[Signature], profile: PromptProfile | None = None) -> str:
    """The numbered function document of the prompt, generated from the signatures."""
    count = len(signatures)
    word = _NUMBER_WORDS[count] if count < len(_NUMBER_WORDS) else str(count)
    lines = [f"You can only choose actions from these {word} actions:", ""]
    for i, sig in enumerate(signatures, 1):
        lines.append(f"{i}. {sig}")
        lines.append(sig.doc)
        for param in sig.params:
            lines.append(f"- {param.name}: {param_doc(sig, param, profile)}")
        lines.append("")
    return "\n".join(lines).rstrip()


# -- messages -----------------------------------------------------------------------------------


def system_prompt(profile: PromptProfile, mode: str = "text") -> str:
    """Task description + function document (text mode; tools mode has the tool schemas) +
    format instructions + the one-shot example.

    Depends only on (profile, mode): every question shares it byte for byte.
    """
    if mode not in ("text", "tools"):
        raise ValueError(f"mode must be 'text' or 'tools', not {mode!r}")
    if profile.verbatim:
        if mode != "text":
            raise ValueError(f"the {profile.name!r} prompt is an original paper prompt, shown "
                             "verbatim; it has no tools mode (use mode='text')")
        return profile.verbatim + "\n"
    if mode == "text":
        parts = [profile.task, tools_doc(profile.signatures, profile), read_prompt("format_text.md")]
    else:  # the functions are documented by the tool schemas
        parts = [profile.task, read_prompt("format_tools.md")]
    parts += ["Let's start with an example.", profile.example]
    return "\n\n".join(p.strip() for p in parts) + "\n"


def format_entities(entities: Mapping[str, str]) -> str:
    """The entity linking result as the paper's prompt shows it: ``{mention: id, ...}``."""
    return "{" + ", ".join(f"{mention}: {kb_id}" for mention, kb_id in entities.items()) + "}"


def format_columns(columns: Sequence[str]) -> str:
    return "[" + ", ".join(repr(c) for c in columns) + "]"


_BARE_NAME = re.compile(r"[^\s,()'\"](?:[^,()'\"]*[^\s,()'\"])?")


def _schema_name(name: str) -> str:
    """A table/column name as the model should write it: bare, or quoted when it has commas,
    parentheses or quotes."""
    return name if _BARE_NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def format_schema(schema: Schema) -> str:
    """A database schema for the prompt: one ``table(column, ...)`` line per table, then the
    declared foreign keys (``table.column = other_table.other_column``).

    >>> from pyql.sql.schema import Schema, TableInfo
    >>> print(format_schema(Schema((TableInfo("singer", ["Singer_ID", "Name"]),
    ...     TableInfo("concert", ["concert_ID", "Singer_ID"],
    ...               foreign_keys=[("Singer_ID", "singer", "Singer_ID")])))))
    singer(Singer_ID, Name)
    concert(concert_ID, Singer_ID)
    Foreign Keys : concert.Singer_ID = singer.Singer_ID
    """
    lines = []
    keys = []
    for table in schema:
        name = _schema_name(table.name)
        lines.append(f"{name}({', '.join(_schema_name(c) for c in table.column_names)})")
        for fk in table.foreign_keys:
            ref = schema.find_table(fk.ref_table)
            ref_name = _schema_name(ref.name if ref is not None else fk.ref_table)
            target = f"{ref_name}.{_schema_name(fk.ref_column)}" if fk.ref_column else ref_name
            keys.append(f"{name}.{_schema_name(fk.column)} = {target}")
    lines.append(f"Foreign Keys : {', '.join(dict.fromkeys(keys)) or 'none'}")
    return "\n".join(lines)


def question_message(profile: PromptProfile, question: str, *,
                     entities: Mapping[str, str] | None = None,
                     columns: Sequence[str] | None = None,
                     schema: Schema | None = None) -> str:
    """The first user message: the new question and its entity linking, table header or
    database schema (as the profile's ``context`` says; a ``schema`` profile without a schema
    shows the columns)."""
    kind = profile.context or ("columns" if profile.tools == "sql" else "entities")
    head = f"Question : {question.strip()}\n{profile.context_label} :"
    if kind == "schema" and schema is not None:
        return f"{head}\n{format_schema(schema)}"
    if kind in ("columns", "schema"):
        return f"{head} {format_columns(columns or ())}"
    return f"{head} {format_entities(entities or {})}"


# -- reading the model's output -----------------------------------------------------------------

_MARKER = re.compile(
    r"^[ \t>*_#\-]*(?:\*\*|__)?\s*(thought|action|observation)\s*(\d+)?\s*(?:\*\*|__)?\s*[:：]"
    r"(?:\s*(?:\*\*|__))?[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^[ \t]*(```|~~~)[\w+-]*[ \t]*$", re.MULTILINE)
_CALL_LINE = re.compile(r"^\s*`*\s*([A-Za-z_]\w*)\s*\(.*\)\s*`*\s*[.;]?\s*$")
_TRAILING = re.compile(r"^([A-Za-z_]\w*\s*\(.*\))\s+([^()]*)$")
_LANGUAGE = re.compile(r"^(?:python|pyql)\s+")


@dataclass(frozen=True)
class ParsedReply:
    """A text-mode reply: the thought, the action line(s) found, and a format issue."""

    thought: str
    actions: tuple[str, ...]

    @property
    def issue(self) -> str | None:
        if not self.actions:
            return "no_action"
        if len(self.actions) > 1:
            return "multiple_actions"
        return None

    @property
    def action_text(self) -> str:
        """What the Session is given: the action, all of them (one per line), or nothing."""
        return "\n".join(self.actions)


def _clean_action(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "`'\"" and text.count(text[0]) == 2:
        text = text[1:-1].strip()
    text = text.strip("`").strip()
    text = _LANGUAGE.sub("", text)
    text = text.rstrip(".;").rstrip()
    m = _TRAILING.match(text)
    if m and m.group(2).strip():  # "get_relation(m.0x) to get its relations"
        text = m.group(1)
    return text


def _action_lines(segment: str) -> str:
    """The action of an ``Action n :`` segment: its first non-empty line (fences removed)."""
    for line in segment.splitlines():
        if line.strip():
            return _clean_action(line)
    return ""


def parse_reply(text: str, functions: Sequence[str] = ()) -> ParsedReply:
    """Read ``Thought n : ...`` / ``Action n : ...`` from a reply.

    A reply read before (the same text and functions) is answered from memory: the reading is
    a frozen value, and a replayed or gold model writes ``Action 9 : execute()`` question after
    question.

    Chatter before the first marker and anything from an ``Observation`` marker on is dropped;
    repeated thoughts are joined. Without any ``Action`` marker, a line that is just a call of one
    of ``functions`` is taken as the action.

    >>> r = parse_reply("Sure!\\nThought 1 : look around.\\nAction 1 : `get_relation(m.0x)`\\nThanks")
    >>> r.thought, r.actions, r.issue
    ('look around.', ('get_relation(m.0x)',), None)
    >>> parse_reply("Thought 2: a\\nAction 2: add_fact(a, b, ?c)\\nThought 3: b\\nAction 3: set_answer(?c)").issue
    'multiple_actions'
    """
    if len(text) > _READ_TEXT_MAX:  # a long reply is not kept: the memory stays small
        return _parse_reply(text, functions)
    key = (text, tuple(functions))
    found = _READ.get(key)
    if found is None:
        found = _parse_reply(text, functions)
        if len(_READ) >= _READ_MAX:
            _READ.clear()
        _READ[key] = found
    return found


#: (reply, functions) -> its reading, for replies of at most _READ_TEXT_MAX characters (emptied
#: when full)
_READ: dict[tuple[str, tuple[str, ...]], ParsedReply] = {}
_READ_MAX = 4096
_READ_TEXT_MAX = 1000


def _parse_reply(text: str, functions: Sequence[str]) -> ParsedReply:
    body = _FENCE.sub("", text) if "```" in text or "~~~" in text else text
    markers = list(_MARKER.finditer(body))
    thoughts: list[str] = []
    actions: list[str] = []
    for i, m in enumerate(markers):
        kind = m.group(1).lower()
        end = markers[i + 1].start() if i + 1 < len(markers) else len(body)
        segment = body[m.end():end]
        if kind == "observation":
            break
        if kind == "thought":
            thoughts.append(segment.strip())
        else:
            action = _action_lines(segment)
            if action:
                actions.append(action)
    if not markers:
        thoughts.append(body.strip())
    if not actions and functions:
        known = set(functions)
        for line in body.splitlines():
            call = _CALL_LINE.match(line)
            if call and call.group(1) in known:
                actions.append(_clean_action(line))
    thought = "\n".join(t for t in thoughts if t)
    return ParsedReply(thought=thought, actions=tuple(actions))


# -- observations -------------------------------------------------------------------------------


def render_hint(hint: Hint, step: int) -> str:
    """A guideline's message plus the retry wording for the next step (``step + 1``)."""
    message = hint.text.strip()
    if message and message[-1] not in ".!?":
        message += "."
    return f"{message} {RETRY_WORDING.format(n=step + 1)}".strip()


def _list(items: Sequence[str], more: bool) -> str:
    shown = [repr(i) for i in items]
    if more:
        shown.append("...")
    return "[" + ", ".join(shown) + "]"


def render_relations(forward: Sequence[str], backward: Sequence[str], *,
                     forward_total: int | None = None, backward_total: int | None = None) -> str:
    """``{'forward': [...], 'backward': [...]}``, with ``...`` where relations were left out."""
    more_f = forward_total is not None and forward_total > len(forward)
    more_b = backward_total is not None and backward_total > len(backward)
    return f"{{'forward': {_list(forward, more_f)}, 'backward': {_list(backward, more_b)}}}"


def cap_text(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` (marked ``...``): what a reply may put back into a prompt,
    so one runaway reply cannot grow every later request."""
    return text if len(text) <= max_chars else text[: max_chars - 4].rstrip() + " ..."



def render_observation(
    obs: Observation,
    step: int,
    *,
    question: str = "",
    ranker: Any = None,
    top_k: int = 40,
    seed: int = 0,
    max_chars: int = 3000,
    relation_order: str = "shuffled",
) -> str:
    """The observation text of step ``step`` as the model reads it.

    A hint gives :func:`render_hint`; relations are ranked/cut to ``top_k`` with ``ranker``
    (:func:`pyql.agent.grounding.ranking.select_relations`) and listed in the ranker's shuffled order with
    ``...`` where some were left out, or (``relation_order="sorted"``, the original code's
    ``wikienv.py:437-438``) sorted per direction, as the original prints its dict; anything
    else is the Session's text, capped at ``max_chars``.
    """
    if obs.hint is not None:
        return render_hint(obs.hint, step)
    relations = obs.relations if obs.error is None else None
    if relations is not None:
        from pyql.agent.grounding.ranking import select_relations

        # opaque ids (Wikidata) are ranked and shown with their labels: P161 (cast member)
        shown = relations.shown
        fwd, bwd = select_relations(question, [shown(r) for r in relations.forward],
                                    [shown(r) for r in relations.backward], ranker,
                                    top_k=top_k, seed=seed)
        if relation_order == "sorted":
            return cap_text(str({"forward": sorted(fwd), "backward": sorted(bwd)}), max_chars)
        text = render_relations(fwd, bwd, forward_total=len(relations.forward),
                                backward_total=len(relations.backward))
        return cap_text(text, max_chars)
    return cap_text(obs.text, max_chars)
