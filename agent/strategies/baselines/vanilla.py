"""One-call query generation: the "vanilla" baseline of every paper compared here.

The LLM reads the question (with its topic entities, or the table's columns, or the database
schema) and writes the whole SPARQL or SQL query in one reply; the query is run once, as
written; its result is the answer. No exploration, no feedback, no retry:

- ``vanilla`` (zero-shot): the instruction only;
- ``vanilla-few`` (few-shot): the instruction and worked examples of the KB/DB family
  (``prompts/vanilla_shots_*.md``: MetaQA, Freebase, WikiSQL, Spider).

The prompts are package data (``prompts/vanilla_sparql.md``, ``prompts/vanilla_sql.md``: jinja
templates); the system message depends only on the family and the shots, so it is the same for
every question. The generated query is untrusted text: it reaches the engine only through the
backends' read-only guards (:meth:`pyql.kb.KB.select`, :meth:`pyql.db.DB.execute`). What can go
wrong with it is an *outcome* of the question (``Step.data["outcome"]``, also the stop reason),
never a crash:

============== =====================================================================
``ok``         the query ran and returned answers
``empty``      the query ran and returned nothing
``no_query``   the reply holds no query
``refused``    the read-only guard refused it (an update, several statements, ...)
``query_error`` the engine rejected it (syntax, unknown table or column, not a SELECT)
``timeout``    the engine did not finish in time
============== =====================================================================

An unreachable backend is an outage (``env_status="backend_error"``), as for every strategy.

The trajectory has three steps: ``prompt`` (the target language, the prompt family, the shots,
the table and dialect: what a stand-in reads, never the prompt's wording), ``generate`` (the
one LLM call; ``action`` is the query read from the reply) and ``execute``.

``--llm gold`` (:mod:`pyql.agent.evaluation.standins.vanilla`) answers with the item's gold
program compiled to the target language without a session: SPARQL by replaying it onto a query tree
(:meth:`pyql.program.Program.to_sparql` with the item's entities), SQL with
:func:`pyql.sql.apply.program_to_sql` (no schema, hence none of the SqlSession's value
coercions). It measures what one perfect call can reach through this route.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import jinja2

from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.clients import LLM
from pyql.agent.llm.structured import Constrain, constrain_level, query_format
from pyql.agent.recorder import Recorder
from pyql.agent.strategies.queryagent.prompts import format_schema, read_prompt
from pyql.agent.strategy import Result, StrategyConfig
from pyql.agent.trajectory import Step, Trajectory
from pyql.db.base import DB
from pyql.errors import (
    BackendQueryError,
    BackendTimeoutError,
    BackendUnavailableError,
    ReadOnlyError,
)
from pyql.kb.base import KB
from pyql.program import Program
from pyql.terms import BlankNode, Entity
from pyql.terms import Literal as RdfLiteral

__all__ = ["Outcome", "Vanilla", "VanillaFew", "extract_query"]

Outcome = Literal["ok", "empty", "no_query", "refused", "query_error", "timeout"]

#: KB profile -> the family of its examples (``vanilla_shots_<family>.md``)
_KB_FAMILIES = {"metaqa": "metaqa", "freebase": "freebase", "generic": "freebase"}
#: the relations of a KB are listed in the prompt when there are at most this many
MAX_LISTED_RELATIONS = 60
#: a relation of each family, shown as the KB's compiler writes it: in full, since an embedded
#: store (Oxigraph) rejects prefixed names with two dots (``ns:a.b.c``)
_RELATION_EXAMPLES = {"freebase": "people.person.spouse_s", "metaqa": "directed_by"}


@cache
def _template(name: str) -> jinja2.Template:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                             autoescape=False)  # noqa: S701 - prompt text, not HTML
    return env.from_string(read_prompt(name))


_FENCE = re.compile(r"```[ \t]*(?:sparql|sql|SPARQL|SQL)?[ \t]*\n(.*?)```", re.DOTALL)
_START = {"sparql": re.compile(r"(?is)\b(?:PREFIX|BASE|SELECT|ASK|CONSTRUCT|DESCRIBE)\b.*"),
          "sql": re.compile(r"(?is)\b(?:WITH|SELECT)\b.*")}


def extract_query(text: str, language: str) -> str:
    """The query of a reply: the first fenced code block, else the text from the first query
    keyword on (``""`` when there is none).

    >>> extract_query("Here:\\n```sql\\nSELECT 1\\n```\\nDone.", "sql")
    'SELECT 1'
    >>> extract_query("Query: SELECT ?x WHERE { ?x ?p ?o }", "sparql")
    'SELECT ?x WHERE { ?x ?p ?o }'
    >>> extract_query("I cannot answer that.", "sql")
    ''
    """
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    found = _START[language].search(text)
    return found.group(0).strip() if found else ""


@dataclass(frozen=True)
class _Context:
    """What the prompt shows besides the question, and where the query runs."""

    language: Literal["sparql", "sql"]
    family: str
    kb: KB | None = None
    db: DB | None = None
    table: str | None = None
    dialect: str = "sqlite"
    #: the user message's lines after the question
    lines: tuple[str, ...] = ()
    prefixes: tuple[tuple[str, str], ...] = ()
    relations: tuple[str, ...] = ()
    relation_example: str = ""
    record: dict[str, Any] = field(default_factory=dict)


class Vanilla:
    """One-call query generation (module docstring); ``shots``: 0 (zero-shot) or ``"few"``.

    >>> from pyql.agent.llm.clients import ScriptedLLM
    >>> from pyql.kb import OxigraphKB
    >>> kb = OxigraphKB(profile="metaqa")
    >>> kb.load_bytes(b'<http://pyql.dev/metaqa/entity/Kismet> <http://pyql.dev/metaqa/relation/directed_by> <http://pyql.dev/metaqa/entity/William_Dieterle> .', format="ntriples")
    >>> llm = ScriptedLLM(["```sparql\\nSELECT ?d WHERE { <http://pyql.dev/metaqa/entity/Kismet> "
    ...                    "<http://pyql.dev/metaqa/relation/directed_by> ?d }\\n```"])
    >>> result = Vanilla(llm, kb).run("who directed [Kismet]", {"Kismet": "Kismet"})
    >>> result.answers, result.stop_reason, [s.kind for s in result.steps]
    (('William Dieterle',), 'ok', ['prompt', 'generate', 'execute'])
    """

    name = "vanilla"
    #: the class's default shots (``vanilla-few`` overrides it)
    default_shots: int | str = 0

    def __init__(self, llm: LLM, backend: KB | DB | Any, *, shots: int | str | None = None,
                 profile: str | None = None, table: str | None = None, timeout: float = 60.0,
                 token_counter: TokenCounter | None = None,
                 price_table: PriceTable | Mapping[str, Any] | None = None,
                 on_step: Callable[[Step], None] | None = None,
                 constrain: Constrain | bool = "auto") -> None:
        shots = self.default_shots if shots is None else shots
        if shots not in (0, "0", "few"):
            raise ValueError(f"shots must be 0 or 'few', not {shots!r}")
        self.llm = llm
        self.backend = backend
        self.shots = "few" if shots == "few" else 0
        self.profile = profile
        self.table = table
        self.timeout = timeout
        self.on_step = on_step
        #: the query is constrained to ``{"query": ...}`` when the client takes schemas
        #: (no slot of a whole query is enumerable: ``grounded`` sends the same schema as
        #: ``format``)
        self.level = constrain_level(constrain, llm)
        self.constrained = bool(self.level)
        self.price_table = PriceTable.of(price_table)
        self.token_counter = (token_counter if token_counter is not None
                              else TokenCounter.for_llm(llm))

    @classmethod
    def from_config(cls, llm: LLM, backend: Any, config: StrategyConfig) -> Vanilla:
        """The strategy factory (entry point ``pyql.strategies``): ``profile``, ``table``, token
        counter and prices from ``config``; ``options``: ``shots`` (0 or few), ``timeout``."""
        options = config.typed_options()
        kwargs: dict[str, Any] = {"table": config.table, "profile": config.profile,
                                  "token_counter": config.token_counter,
                                  "price_table": config.price_table,
                                  "constrain": config.constrain}
        if "shots" in options:
            kwargs["shots"] = options["shots"]
        if "timeout" in options:
            kwargs["timeout"] = float(options["timeout"])
        return cls(llm, backend, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(llm={self.llm!r}, shots={self.shots!r})"

    # -- one question -----------------------------------------------------------------------
    def run(self, question: str, entities: Mapping[str, str] | None = None, *,
            table: str | None = None, schema: Any = None, meta: Mapping[str, Any] | None = None,
            on_step: Callable[[Step], None] | None = None, **context: Any) -> Result:
        """Answer one question: one LLM call, one query (module docstring)."""
        entities = dict(entities or {})
        rec = Recorder(self.llm, question, counter=self.token_counter,
                       price_table=self.price_table, constrain=self.level,
                       on_step=on_step if on_step is not None else self.on_step)
        ctx = self._context(entities, table or self.table, schema)
        rec.add(Step(n=1, kind="prompt", action=ctx.language, data=ctx.record))
        call = rec.llm(self._messages(ctx, question), format=query_format(ctx.language))
        query = extract_query(call.text, ctx.language)
        rec.add(Step(n=2, kind="generate", action=query, thought=call.text if not query else "",
                     status="ok" if query else "error", accepted=bool(query),
                     format_issue=None if query else "no_query", **call.step_fields()))
        answers: tuple[Any, ...] = ()
        if query:
            answers, execute = self._execute(ctx, query)
            rec.add(execute)
            outcome = str(execute.data["outcome"])
        else:
            outcome = "no_query"
        trajectory = Trajectory(
            question=question, entities=entities, strategy=self.name, profile=ctx.family,
            mode="text", tools=ctx.language, model=call.model, steps=tuple(rec.steps),
            answers=answers, query=query, program="", finished=outcome in ("ok", "empty"),
            stop_reason=outcome, usage=rec.finish_usage(), meta=dict(meta or {}))
        return Result(trajectory=trajectory, program=Program(tools=ctx.language))

    # -- the prompt -------------------------------------------------------------------------
    def _context(self, entities: Mapping[str, str], table: str | None, schema: Any) -> _Context:
        backend = self.backend
        if isinstance(backend, KB):
            return self._kb_context(backend, entities)
        if isinstance(backend, DB):
            from pyql.sql.session import SqlSession

            return self._sql_context(SqlSession(backend, table=table), table, schema)
        if callable(backend):  # a session factory (the evaluation's per-question view)
            session = backend(entities=dict(entities), guidelines=None, table=table)
            kb = getattr(session, "kb", None)
            if isinstance(kb, KB):
                return self._kb_context(kb, entities)
            return self._sql_context(session, table, schema)
        raise TypeError(f"{self.name} runs on a pyql KB, a SqlDB or a session factory, not "
                        f"{type(backend).__name__}")

    def _kb_context(self, kb: KB, entities: Mapping[str, str]) -> _Context:
        from pyql.sparql.compile import render_term

        profile = kb.profile
        family = _KB_FAMILIES.get(self.profile or "", _KB_FAMILIES.get(profile.name, "freebase"))
        shown = {mention: render_term(profile.entity(kb_id), profile)
                 for mention, kb_id in entities.items()}
        prefixes = ((profile.display_prefix, profile.prefixes[profile.display_prefix]),) if (
            profile.display_prefix) else ()
        relations: tuple[str, ...] = ()
        if family != "freebase":  # a small KB: its relations are part of what the model sees
            from pyql.agent.grounding.paths import RelationVocabulary

            vocabulary = RelationVocabulary.of_kb(kb).relations
            if len(vocabulary) <= MAX_LISTED_RELATIONS:
                relations = tuple(render_term(profile.relation(r), profile) for r in vocabulary)
        line = "Topic entities: " + "; ".join(f"{m}: {t}" for m, t in shown.items())
        example = relations[0] if relations else (
            render_term(profile.relation(_RELATION_EXAMPLES[profile.name]), profile)
            if profile.name in _RELATION_EXAMPLES else "")
        return _Context("sparql", family, kb=kb, lines=(line,), prefixes=prefixes,
                        relations=relations, relation_example=example,
                        record={"language": "sparql", "family": family, "shots": self.shots,
                                "profile": profile.name, "entities": shown})

    def _sql_context(self, session: Any, table: str | None, schema: Any) -> _Context:
        db = session.db
        dialect = db.dialect or "sqlite"
        family = self.profile if self.profile in ("wikisql", "spider") else (
            "wikisql" if table else "spider")
        if table:
            memory = getattr(session, "memory", None)
            columns = tuple(getattr(memory, "columns", ()) or getattr(session, "columns", ()) or ())
            lines = (f"Table: {table}", "Columns: " + ", ".join(f'"{c}"' for c in columns))
        else:
            schema = schema if schema is not None else db.schema()
            lines = ("Database schema:", format_schema(schema))
        return _Context("sql", family, db=db, table=table, dialect=dialect, lines=lines,
                        record={"language": "sql", "family": family, "shots": self.shots,
                                "table": table, "dialect": dialect})

    def _messages(self, ctx: _Context, question: str) -> list[dict[str, Any]]:
        shots = (read_prompt(f"vanilla_shots_{ctx.family}.md").strip()
                 if self.shots == "few" else "")
        if ctx.language == "sparql":
            system = _template("vanilla_sparql.md").render(
                prefixes=ctx.prefixes, relations=ctx.relations,
                relation_example=ctx.relation_example, shots=shots)
        else:
            system = _template("vanilla_sql.md").render(
                dialect=_DIALECT_NAMES.get(ctx.dialect, ctx.dialect), shots=shots)
        user = "\n".join([f"Question: {question.strip()}", *ctx.lines])
        return [{"role": "system", "content": system.strip() + "\n"},
                {"role": "user", "content": user}]

    # -- the one query ------------------------------------------------------------------------
    def _execute(self, ctx: _Context, query: str) -> tuple[tuple[Any, ...], Step]:
        backend: Any = ctx.kb if ctx.kb is not None else ctx.db
        before = backend.query_count
        start = time.perf_counter()
        answers: tuple[Any, ...] = ()
        error: str | None = None
        env_status = "ok"
        text = query
        bounded: dict[str, Any] = {}
        try:
            if ctx.kb is not None:
                text = _with_prefixes(query, ctx.prefixes)
                rs = ctx.kb.select(text, timeout=self.timeout)
                answers = tuple(dict.fromkeys(_kb_value(row[0]) for row in rs.rows
                                              if row and row[0] is not None))
            else:
                rs = ctx.db.execute(query)  # type: ignore[union-attr]
                answers = tuple(row[0] if len(row) == 1 else tuple(row) for row in rs.rows)
            if rs.truncated or rs.cells_cut:  # the backend bounded the result: say so
                bounded = {"truncated": rs.truncated, "cells_cut": rs.cells_cut}
            outcome: Outcome = "ok" if answers else "empty"
        except ReadOnlyError as exc:
            outcome, error, env_status = "refused", str(exc), ""
        except BackendQueryError as exc:
            outcome, error, env_status = "query_error", str(exc), "error"
        except BackendTimeoutError as exc:
            outcome, error, env_status = "timeout", str(exc), "timeout"
        except BackendUnavailableError as exc:  # an outage, not the model's query
            outcome, error, env_status = "query_error", str(exc), "backend_error"
        status = {"ok": "ok", "empty": "empty", "timeout": "timeout"}.get(outcome, "error")
        if env_status == "backend_error":
            status = "backend_error"
        step = Step(n=3, kind="execute", action=text, observation=_observation(answers, error),
                    status=status, env_status=env_status, error=error,
                    accepted=outcome in ("ok", "empty"), query=text,
                    env_latency=time.perf_counter() - start,
                    kb_queries=backend.query_count - before,
                    data={"outcome": outcome, "answers": [str(a) for a in answers[:50]],
                          "answer_count": len(answers), **bounded})
        return answers, step


_DIALECT_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "duckdb": "DuckDB",
                  "mysql": "MySQL", "tsql": "T-SQL"}
_DECLARED = re.compile(r"(?i)\bPREFIX\s+([A-Za-z][\w.-]*)?\s*:")


def _with_prefixes(query: str, prefixes: Sequence[tuple[str, str]]) -> str:
    """``query`` with the declarations of the prompt's prefixes it uses and does not declare."""
    declared = {m.group(1) or "" for m in _DECLARED.finditer(query)}
    missing = [f"PREFIX {name}: <{iri}>" for name, iri in prefixes
               if name not in declared and f"{name}:" in query]
    return "\n".join([*missing, query]) if missing else query


def _kb_value(cell: Any) -> Any:
    """An answer as the Session gives it: an entity's short id (its label for label-id
    profiles), a literal's lexical form."""
    if isinstance(cell, Entity):
        return cell.short
    if isinstance(cell, RdfLiteral):
        return cell.lexical
    if isinstance(cell, BlankNode):
        return str(cell)
    return cell if isinstance(cell, (int, float)) else str(cell)


def _observation(answers: Sequence[Any], error: str | None) -> str:
    if error is not None:
        return f"Error: {error}"
    if not answers:
        return "The query returned nothing."
    shown = [str(a) for a in answers[:20]]
    more = f" (and {len(answers) - 20} more)" if len(answers) > 20 else ""
    return f"The answer is {shown}{more}"


class VanillaFew(Vanilla):
    """``vanilla-few``: :class:`Vanilla` with the family's worked examples."""

    name = "vanilla-few"
    default_shots = "few"
