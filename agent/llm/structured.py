"""Constrained output: what each kind of LLM call must answer, as a JSON schema.

A :class:`ReplyFormat` is the schema of one kind of reply (QueryAgent's next action, Readi's
path, SRP's relation check, plan, judge verdict, edit, the reader's answers) and the reading of a
conforming JSON reply back as what the strategy parses anyway: the text its parser reads (the
paper's ``Path: {...}``, ``('relation', 0.8)``, ``<HAVE_ANSWER>``, ``{answer}``), or, for
QueryAgent, one tool call. So a strategy has one parser for constrained and free replies alike,
and a constrained reply fails only where a free one would (a reply cut at ``max_tokens``, a
relation the KB does not have): such failures are counted, never crashes.

The schema is sent as OpenAI structured outputs (``response_format: {"type": "json_schema"}``),
which llama.cpp's server, vLLM, Ollama and OpenAI accept; llama.cpp turns it into a grammar, so a
small local model cannot write anything else. Schemas use ``maxLength``/``maxItems`` to keep a
looping small model inside ``max_tokens`` and are therefore sent non-strict (OpenAI's strict mode
does not take those keywords).

``--constrain off|format|grounded|auto`` (:data:`Constrain`, resolved by
:func:`constrain_level` into a :class:`ConstrainLevel`):

- ``off`` never sends a schema: replies are free text;
- ``format`` sends each reply kind's schema built from the DSL's signatures alone: a reply is
  always JSON of the right shape (one function, its arguments typed), but an argument may name
  anything (``on`` is kept as an alias of ``format``);
- ``grounded`` narrows each schema to what the environment offers now
  (:mod:`pyql.agent.grounding.candidates`): relation, entity, variable, column and table slots are ``enum``
  s of the candidates, and the function is one legal now; a slot without candidates stays a
  bounded string;
- ``auto`` (default) is ``grounded`` for a client that declares ``structured_output = True``
  (:class:`~pyql.agent.llm.clients.OpenAIChat` does) and ``off`` for one that does not; a server that
  refuses a schema falls back to free replies with a warning.

An explicit level (``format``, ``grounded``, ``on``) needs a client that takes schemas
(:class:`ConstrainError` when the strategy is made) and a server that does not refuse one:
a refusal is :class:`ConstrainRefusedError` on the first call, not a silent unconstrained run.

**Every schema-valid reply reads back** (issue 37 item 7): free argument strings have
``minLength`` 1, and a constrained argument is one JSON string, so a value that does not lex as
a term is read as a quoted literal (:func:`pyql.agent.strategies.queryagent.prompts.call_from_arguments`,
``literal_fallback``) instead of being refused; and :meth:`ReplyFormat.token_bound` is the
longest reply the grammar admits (every string at its ``maxLength``, llama.cpp's whitespace at
its most), so the recorder raises a call's ``max_tokens`` to it and a constrained reply closes
its JSON (counting a token per character: a model that escapes characters, ``\u00e9``, can
still need more).

>>> fmt = answers_format()
>>> fmt.read_text('{"thought": "Kismet was directed by him.", "answers": ["William Dieterle"]}')
'Kismet was directed by him. So, the answer is {William Dieterle}.'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pyql.agent.errors import LLMError
from pyql.agent.grounding.paths.path import ARROWS

if TYPE_CHECKING:
    from pyql.agent.grounding.candidates import Grounding

__all__ = [
    "CONSTRAIN_MODES",
    "Constrain",
    "ConstrainError",
    "ConstrainLevel",
    "ConstrainRefusedError",
    "ReplyFormat",
    "action_format",
    "constrain_level",
    "grounded_action_format",
    "answer_text",
    "answers_format",
    "edit_chains_format",
    "judge_format",
    "kb_path_format",
    "HopChoices",
    "plan_format",
    "query_format",
    "relation_check_format",
    "resolve_constrain",
    "table_path_format",
]

Constrain = Literal["auto", "off", "format", "grounded", "on"]
CONSTRAIN_MODES: tuple[str, ...] = ("auto", "off", "format", "grounded", "on")
#: the levels, weakest first
Level = Literal["off", "format", "grounded"]

#: a thought longer than this is cut by the grammar: small models loop inside strings
#: (SmolLM2-135M writes ``1.1.1.…``, a token per character), and a reply cut at ``max_tokens``
#: is no longer JSON. At 120 a thought looped to its end still leaves QueryAgent's action room
#: inside its 256-token cap (at 240 it did not: 11 of 40 replies of a WikiSQL run were cut);
#: a reply with two runaway strings (the thought and an argument) can still be cut
THOUGHT_CHARS = 120
#: an argument, a relation, an answer
VALUE_CHARS = 120


class ConstrainError(ValueError):
    """``--constrain`` asks for what the client cannot do (``mode``, ``model``)."""

    def __init__(self, message: str, *, mode: str, model: str = "") -> None:
        super().__init__(message)
        self.mode = mode
        self.model = model


class ConstrainRefusedError(LLMError):
    """The server refused ``response_format`` under an explicit ``--constrain`` level
    (``mode``); ``auto`` falls back to free replies instead."""

    def __init__(self, message: str, *, mode: str, model: str = "") -> None:
        super().__init__(message, model=model, code="response_format_refused")
        self.mode = mode


@dataclass(frozen=True)
class ConstrainLevel:
    """A resolved ``--constrain``: the ``level`` in force and whether it was asked for
    explicitly (``required``: a server's refusal is then an error). True when constrained."""

    level: Level = "off"
    required: bool = False

    def __bool__(self) -> bool:
        return self.level != "off"

    @property
    def grounded(self) -> bool:
        return self.level == "grounded"


def constrain_level(mode: str | bool | ConstrainLevel, llm: Any) -> ConstrainLevel:
    """The level of ``mode`` for ``llm`` (checked when a strategy is made; module docstring):
    ``on`` is ``format``; ``auto`` is ``grounded`` where the client takes schemas, else ``off``;
    an explicit level the client cannot take is :class:`ConstrainError`. A bool is a decision
    already taken (True: ``format``)."""
    if isinstance(mode, ConstrainLevel):
        return mode
    if isinstance(mode, bool):
        return ConstrainLevel("format" if mode else "off")
    if mode not in CONSTRAIN_MODES:
        raise ConstrainError(f"constrain must be one of {', '.join(CONSTRAIN_MODES)}, not "
                             f"{mode!r}", mode=str(mode))
    supported = bool(getattr(llm, "structured_output", False))
    if mode == "off":
        return ConstrainLevel("off")
    if mode == "auto":
        return ConstrainLevel("grounded" if supported else "off")
    if not supported:
        raise ConstrainError(
            f"--constrain {mode}: {type(llm).__name__} does not take structured output (an "
            "OpenAI-compatible server does: --llm local, --base-url ...)", mode=mode,
            model=str(getattr(llm, "model", "")))
    return ConstrainLevel("format" if mode == "on" else mode, required=True)  # type: ignore[arg-type]


def resolve_constrain(mode: str | bool | ConstrainLevel, llm: Any) -> bool:
    """Whether calls to ``llm`` send schemas under ``mode`` (:func:`constrain_level`)."""
    if isinstance(mode, bool):
        return mode
    return bool(constrain_level(mode, llm))


def _string(limit: int = VALUE_CHARS, *, min_length: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", "maxLength": limit}
    if min_length:
        out["minLength"] = min_length
    return out


def _bounded(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A tool parameter's schema with its free strings bounded and never empty (an empty
    argument is no argument); ``type: [string, number]`` as an ``anyOf`` of the two."""
    spec = dict(spec)
    kind = spec.get("type")
    if "enum" in spec or "const" in spec:
        return spec
    if kind == "string":
        return {**spec, **_string(min_length=1)}
    if isinstance(kind, list):
        return {"anyOf": [_string(min_length=1) if k == "string" else {"type": k}
                          for k in kind]}
    return spec


def _enum(items: Sequence[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(items)}


@dataclass(frozen=True)
class HopChoices:
    """A relation path's options hop by hop (grounded Readi paths): ``first`` the relations at
    the topic entity, ``second`` per first relation the relations at the nodes it reaches (the
    ones the grounding fetched), ``rest`` the relations a third or fourth hop may name (the KB's
    vocabulary around the entity: those nodes were not fetched)."""

    first: Sequence[str]
    second: Mapping[str, Sequence[str]]
    rest: Sequence[str]


def _hop_chain(hops: HopChoices, max_items: int = 4) -> dict[str, Any]:
    """The schema of one path under :class:`HopChoices`: an ``anyOf`` of fixed-length arrays
    (``prefixItems``, which llama.cpp's grammar turns into a tuple), so the second relation is
    one the KB has at the node the first reaches — a flat enum let SmolLM2 write
    ``starred_actors → release_year`` from a movie (an actor has no release year), Readi's
    ``irrelevant_relation`` on 10 of 18 paths of a 1-hop run. A first relation whose nodes were
    not fetched goes one hop only."""
    branches: list[dict[str, Any]] = [
        {"type": "array", "prefixItems": [_enum(hops.first)], "minItems": 1, "maxItems": 1}]
    rest = _enum(hops.rest) if hops.rest else None
    for first in hops.first:
        seconds = hops.second.get(first)
        if not seconds:
            continue
        prefix: list[dict[str, Any]] = [{"type": "string", "const": first}, _enum(seconds)]
        while len(prefix) <= max_items:
            branches.append({"type": "array", "prefixItems": list(prefix),
                             "minItems": len(prefix), "maxItems": len(prefix)})
            if rest is None:
                break
            prefix.append(rest)
    return {"anyOf": branches}


#: what llama.cpp's grammar lets a model put between two JSON tokens (``"\n"{1,2} [ \t]{0,20}``)
_SEPARATOR = 22


def _worst(schema: Mapping[str, Any]) -> int:
    """The longest JSON text ``schema`` admits, in characters, with whitespace at its most
    between tokens and every string at its ``maxLength``, each of its characters written as
    itself (one token at most: what a grammar-bound model writes when it loops, ``1.1.1.…``;
    a character it escapes, ``\u00e9``, takes up to six)."""
    if "const" in schema:
        return len(json.dumps(schema["const"], ensure_ascii=False))
    if "enum" in schema:
        return max((len(json.dumps(e, ensure_ascii=False)) for e in schema["enum"]),
                   default=2)
    if "anyOf" in schema:
        return max((_worst(s) for s in schema["anyOf"]), default=0)
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        body = sum(len(json.dumps(k, ensure_ascii=False)) + 1 + 2 * _SEPARATOR + _worst(v)
                   for k, v in properties.items())
        return 2 + body + len(properties) + _SEPARATOR
    if kind == "array" and "prefixItems" in schema:
        return 2 + sum(_worst(item) + 1 + 2 * _SEPARATOR for item in schema["prefixItems"])
    if kind == "array":
        items = schema.get("maxItems", 10)
        return 2 + items * (_worst(schema.get("items", {})) + 1 + 2 * _SEPARATOR)
    if kind == "string":
        return 2 + int(schema.get("maxLength", 2000))
    if kind in ("number", "integer"):
        return 32
    return 8


def _object(properties: Mapping[str, Any], required: Sequence[str] | None = None
            ) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties),
            "required": list(properties if required is None else required),
            "additionalProperties": False}


@dataclass(frozen=True)
class ReplyFormat:
    """The JSON schema of one kind of reply and how a conforming reply reads back.

    ``render(value)`` turns the decoded JSON into the text the strategy's parser reads;
    ``tool_call`` formats (QueryAgent) read back as one tool call instead (``{"thought",
    "action": {"name", "arguments"}}``). A reply that is not JSON of the schema's shape reads as
    itself (:meth:`read_text` returns None).
    """

    name: str
    schema: Mapping[str, Any]
    render: Callable[[Any], str] | None = field(default=None, compare=False)
    tool_call: bool = False

    def token_bound(self) -> int:
        """The longest reply the schema admits, in characters (:func:`_worst`): a bound on its
        tokens while the model writes each character as itself, so a call whose
        ``max_tokens`` is at least this closes its JSON (module docstring)."""
        return _worst(self.schema)

    def response_format(self) -> dict[str, Any]:
        """The request's ``response_format`` (OpenAI structured outputs)."""
        return {"type": "json_schema",
                "json_schema": {"name": self.name, "schema": dict(self.schema), "strict": False}}

    def decode(self, text: str) -> Any:
        """The JSON value of a reply, or None when it is not JSON."""
        try:
            return json.loads(text)
        except (json.JSONDecodeError, TypeError):
            return None

    def read_text(self, text: str) -> str | None:
        """The parser's text for a conforming reply; None when the reply does not conform."""
        value = self.decode(text)
        if value is None or self.render is None:
            return None
        try:
            return self.render(value)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return None

    def read_action(self, text: str) -> tuple[str, str, str] | None:
        """``(thought, function, arguments JSON)`` of a conforming action reply, else None."""
        value = self.decode(text)
        try:
            action = value["action"]
            name, arguments = action["name"], action.get("arguments", {})
            if not isinstance(name, str) or not isinstance(arguments, dict):
                return None
            return (str(value.get("thought", "")), name,
                    json.dumps(arguments, ensure_ascii=False))
        except (KeyError, TypeError, AttributeError):
            return None


# -- QueryAgent --------------------------------------------------------------------------------


def action_format(tools: Sequence[Mapping[str, Any]]) -> ReplyFormat:
    """One thought and one DSL call, from the DSL's tool schemas
    (:func:`pyql.agent.strategies.queryagent.prompts.tool_schemas`): the action is one of the functions with its
    typed arguments."""
    choices = []
    for tool in tools:
        fn = tool["function"]
        parameters = dict(fn["parameters"])
        properties = {name: {k: v for k, v in spec.items() if k != "description"}
                      for name, spec in parameters.get("properties", {}).items()}
        properties = {name: _bounded(spec) for name, spec in properties.items()}
        choices.append(_object({"name": {"const": fn["name"]},
                                "arguments": _object(properties, parameters.get("required"))}))
    schema = _object({"thought": _string(THOUGHT_CHARS), "action": {"anyOf": choices}})
    return ReplyFormat("action", schema, tool_call=True)


def grounded_action_format(tools: Sequence[Mapping[str, Any]], grounding: Grounding
                           ) -> ReplyFormat:
    """:func:`action_format` narrowed to ``grounding`` (:mod:`pyql.agent.grounding.candidates`): only the
    functions legal now, each slot with candidates an ``enum`` of them, and ``add_fact`` one
    branch per fetched node and direction (the node at its end, a relation the KB listed for
    it in that direction, the other end a variable, the fresh variable or a linked entity);
    SQL ``add_condition`` one branch per column whose few values are known. Without any legal
    function the ungrounded format is returned."""
    legal = set(grounding.functions.items)
    by_name = {t["function"]["name"]: t for t in tools}
    choices: list[dict[str, Any]] = []
    for name in grounding.functions.items:
        tool = by_name.get(name)
        if tool is None:
            continue
        parameters = tool["function"]["parameters"]
        required = parameters.get("required")
        properties: dict[str, Any] = {}
        for param, spec in parameters.get("properties", {}).items():
            spec = {k: v for k, v in spec.items() if k != "description"}
            found = grounding.slot(name, param)
            properties[param] = _enum(found.items) if found else _bounded(spec)
        if name == "add_fact" and grounding.facts:
            for fact in grounding.facts:
                end, other = _enum([fact.node]), _enum(fact.others.items)
                head, tail = (end, other) if fact.direction == "forward" else (other, end)
                arguments = _object({"head": head, "relation": _enum(fact.relations.items),
                                     "tail": tail})
                choices.append(_object({"name": {"const": name}, "arguments": arguments}))
            continue
        if name == "add_condition" and grounding.values:
            for column, values in grounding.values.items():
                arguments = _object({**properties, "column": {"const": column},
                                     "value": _enum(values.items)}, required)
                choices.append(_object({"name": {"const": name}, "arguments": arguments}))
        choices.append(_object({"name": {"const": name},
                                "arguments": _object(properties, required)}))
    if not choices or not legal:
        return action_format(tools)
    schema = _object({"thought": _string(THOUGHT_CHARS), "action": {"anyOf": choices}})
    return ReplyFormat("action", schema, tool_call=True)


# -- paths (Readi) -----------------------------------------------------------------------------


def _thought_line(value: Mapping[str, Any], label: str = "Thought") -> str:
    thought = str(value.get("thought", "")).replace("\n", " ").strip()
    return f"{label}: {thought}\n" if thought else ""


#: what the path text reserves (list brackets, braces, arrows, quotes): a relation the JSON
#: gives as one item would otherwise read back cut, or not at all ("... the film
#: [film_genre_1] ...", written by SmolLM2)
_PATH_SYNTAX = re.compile("|".join([r'[\[\]{}"]', *map(re.escape, ARROWS)]))


def _path_relation(relation: Any) -> str:
    """One relation of a constrained path as the path text can hold it: the reserved
    characters become spaces (the binder reads a relation by its words)."""
    return " ".join(_PATH_SYNTAX.sub(" ", str(relation)).split())


def kb_path_format(mentions: Sequence[str],
                   relations: Mapping[str, Sequence[str] | HopChoices] | None = None
                   ) -> ReplyFormat:
    """Readi's reasoning path over a KB: per topic entity, the relations towards the answer
    (read back as ``Path: { "m": [ m → r1 → r2 ] }``). ``relations`` (grounded): per topic
    entity the KB's vocabulary around it (:func:`pyql.agent.grounding.candidates.kb_path_options`),
    its path's only relations — a flat list (any relation at any hop), or :class:`HopChoices`
    (hop by hop: :func:`_hop_chain`)."""
    from pyql.agent.grounding.paths.path import ReasoningPath

    def chain(mention: str) -> dict[str, Any]:
        offered = (relations or {}).get(mention)
        if isinstance(offered, HopChoices):
            if offered.first:
                return _hop_chain(offered)
            offered = offered.rest  # nothing at the entity: the vocabulary, or free
        return {"type": "array", "items": _enum(offered) if offered else _string(),
                "maxItems": 4}

    path = _object({m: chain(m) for m in mentions})

    def render(value: Mapping[str, Any]) -> str:
        # a relation of nothing but syntax is no relation
        mapping = {m: [r for r in map(_path_relation, value["path"][m]) if r] for m in mentions}
        return _thought_line(value) + str(ReasoningPath.of(mapping))

    return ReplyFormat("reasoning_path", _object({"thought": _string(THOUGHT_CHARS),
                                                  "path": path}), render)


_TABLE_OPS = ("=", "!=", ">", "<", ">=", "<=", "LIKE")


def table_path_format(columns: Sequence[str]) -> ReplyFormat:
    """Readi's path over a table: columns, row conditions and the answer column (read back as
    ``Path: {"columns": [...], "rows": [[column, op, value]], "answer": ...}``)."""
    column = {"type": "string", "enum": list(columns)} if columns else _string()
    row = _object({"column": column, "op": {"type": "string", "enum": list(_TABLE_OPS)},
                   "value": {"anyOf": [_string(), {"type": "number"}]}})
    path = _object({"columns": {"type": "array", "items": column, "maxItems": 4},
                    "rows": {"type": "array", "items": row, "maxItems": 3},
                    "answer": _string()})

    def render(value: Mapping[str, Any]) -> str:
        p = value["path"]
        body = {"columns": list(p["columns"]),
                "rows": [[r["column"], r["op"], r["value"]] for r in p["rows"]],
                "answer": p["answer"]}
        return _thought_line(value) + "Path: " + json.dumps(body, ensure_ascii=False)

    return ReplyFormat("table_path", _object({"thought": _string(THOUGHT_CHARS), "path": path}),
                       render)


def answer_text(*answers: Any, thought: str = "") -> str:
    """The reader's reply text of ``answers`` (``So, the answer is {a}, {b}.``), as the
    papers' parser reads it: what a constrained reply reads back as, and what choose mode
    scores per retrieved value."""
    cleaned = [str(a).replace("{", "(").replace("}", ")").strip() for a in answers]
    braced = ", ".join(f"{{{a}}}" for a in cleaned if a) or "{}"
    return f"{thought.strip()} So, the answer is {braced}.".strip()


def answers_format(values: Sequence[str] | None = None) -> ReplyFormat:
    """A reader's answers (Readi and SRP), read back in the papers' ``{answer}`` form; an empty
    list is ``{}`` (no answer). ``values`` (grounded): the retrieved values, the only answers
    admitted."""

    def render(value: Mapping[str, Any]) -> str:
        return answer_text(*value["answers"], thought=str(value.get("thought", "")))

    item = _enum(values) if values else _string()
    schema = _object({"thought": _string(THOUGHT_CHARS),
                      "answers": {"type": "array", "items": item, "maxItems": 10}})
    return ReplyFormat("answers", schema, render)


# -- SRP ---------------------------------------------------------------------------------------


def relation_check_format(candidates: Sequence[str], count: int) -> ReplyFormat:
    """SRP's relation check: ``count`` candidates with a score each (read back as the paper's
    ``('relation', 0.8)`` lines)."""
    item = _object({"relation": {"type": "string", "enum": list(candidates)},
                    "score": {"type": "number"}})

    def render(value: Mapping[str, Any]) -> str:
        return "\n".join(f"{i}. ({json.dumps(str(r['relation']))}, {float(r['score']):g})"
                         for i, r in enumerate(value["relations"], 1))

    schema = _object({"relations": {"type": "array", "items": item, "minItems": 1,
                                    "maxItems": max(1, count)}})
    return ReplyFormat("relation_check", schema, render)


def _chains(topic: str, relations: Any) -> str:
    return " -> ".join([topic, *(str(r) for r in relations)])


def plan_format(topics: Sequence[str],
                relations: Mapping[str, Sequence[str]] | None = None) -> ReplyFormat:
    """SRP's plan: per topic entity one or more relation paths (read back as ``Path: {"t":
    ["t -> r1 -> r2", ...]}``). ``relations`` (grounded): per topic the relations its paths may
    use (the checked relations and the KB's vocabulary around it)."""

    def chain(topic: str) -> dict[str, Any]:
        offered = (relations or {}).get(topic)
        return {"type": "array", "items": _enum(offered) if offered else _string(),
                "minItems": 1, "maxItems": 4}

    paths = _object({t: {"type": "array", "items": chain(t), "minItems": 1, "maxItems": 3}
                     for t in topics})

    def render(value: Mapping[str, Any]) -> str:
        body = {t: [_chains(t, rels) for rels in value["paths"][t]] for t in topics}
        return _thought_line(value) + "Path: " + json.dumps(body, ensure_ascii=False)

    return ReplyFormat("plan", _object({"thought": _string(THOUGHT_CHARS), "paths": paths}),
                       render)


def judge_format(sequences: int) -> ReplyFormat:
    """SRP's judge: the thinking, the verdict, and per triplet sequence the triples kept
    (read back as ``... <HAVE_ANSWER>`` and ``Retained sequences:`` lines)."""
    triple = {"type": "array", "items": _string(), "minItems": 3, "maxItems": 3}
    kept = {"type": "array", "items": triple, "maxItems": 10}
    schema = _object({"thinking": _string(THOUGHT_CHARS),
                      "verdict": {"type": "string", "enum": ["HAVE_ANSWER", "NO_ANSWER"]},
                      "retained": {"type": "array", "items": kept, "maxItems": max(1, sequences)}})

    def render(value: Mapping[str, Any]) -> str:
        verdict = value["verdict"]
        if verdict not in ("HAVE_ANSWER", "NO_ANSWER"):
            raise ValueError(verdict)
        lines = [f"{str(value['thinking']).strip()} <{verdict}>", "Retained sequences:"]
        lines += [f"{i}. {json.dumps([list(map(str, t)) for t in seq], ensure_ascii=False)}"
                  for i, seq in enumerate(value["retained"], 1)]
        return "\n".join(lines)

    return ReplyFormat("judge", schema, render)


def edit_chains_format(topics: Sequence[str]) -> ReplyFormat:
    """SRP's path edit: goal, thought and the corrected paths (read back as ``Goal:``,
    ``Thought:`` and ``Final Path: t -> r1 -> r2`` lines)."""
    path = _object({"topic": {"type": "string", "enum": list(topics)},
                    "relations": {"type": "array", "items": _string(), "minItems": 1,
                                  "maxItems": 4}})
    schema = _object({"goal": _string(THOUGHT_CHARS), "thought": _string(THOUGHT_CHARS),
                      "paths": {"type": "array", "items": path, "minItems": 1, "maxItems": 4}})

    def render(value: Mapping[str, Any]) -> str:
        chains = [_chains(p["topic"], p["relations"]) for p in value["paths"]]
        return (f"Goal: {str(value['goal']).strip()}\nThought: {str(value['thought']).strip()}\n"
                "Final Path: " + "\n".join(chains))

    return ReplyFormat("edit", schema, render)


# -- one-call query generation -------------------------------------------------------------------


def query_format(language: str) -> ReplyFormat:
    """The whole query of a one-call baseline (read back as a fenced ``language`` block)."""

    def render(value: Mapping[str, Any]) -> str:
        return f"```{language}\n{str(value['query']).strip()}\n```"

    return ReplyFormat("query", _object({"query": _string(2000)}), render)
