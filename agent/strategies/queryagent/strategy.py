"""QueryAgent: the ReAct loop of the paper (Algorithm 1, appendix B.1) over a pyql Session.

::

    prompt <- I + Q + E                                     system message + question message
    while t <= T:
        thought, action <- LLM(prompt)                      one LLM call, one step
        kb_fb, py_fb <- Execute(action)                     Session.run(action)
        error <- Detect_and_Distinguish_Err(env_fb)         ERASER, inside the Session
        obs <- guideline if error (step rolled back) else execution result
        prompt <- prompt + thought + action + observation
        if action = execute(): break                        only when execute() was accepted

The Session does the executing, the guideline checks and the rollback; this module asks the
model, reads its output (text or tool calls), renders the observation and keeps the records.

**Format errors of the model are observations, never crashes.** In text mode, a reply without an
action or with several actions is handed to the Session as is (nothing, or the actions one per
line), so the Session's Python feedback (``no_action`` / ``multiple_actions``) reaches the
guidelines; with guidelines off the raw error is the observation. In tools mode each DSL function
is a tool; several tool calls in one reply are refused the same way (``multiple_actions``), and
arguments that are not a JSON object become Python feedback ``parse_error``.

**The original's request** (a preset with ``request="paper"``, e.g. ``preset="paper"``): the
prompt is one user message rebuilt at each step as the original code builds it, the reply is read
with the original's parser, and one that does not parse gets the original's regeneration call
within the same step (:mod:`pyql.agent.strategies.queryagent.paper_request`); text mode only.

**When the loop ends without an accepted execute()** (``max_steps`` reached, or the prompt outgrew
the context window), the result has ``finished=False`` and its answers are those of executing the
current query if it has an answer (``set_answer`` or an aggregation), else ``()``.

Errors of the framework (authentication, unknown model, exhausted retries) are raised.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pyql.agent.errors import LLMContextLengthError
from pyql.agent.grounding.candidates import (
    CallOption,
    call_options,
    check_choose,
    ground_step,
)
from pyql.agent.grounding.ranking import TOP_K, RelationRanker, get_ranker
from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.clients import LLM, AccountedCall, LLMReply, ToolCall
from pyql.agent.llm.ranker import overlap_priors
from pyql.agent.llm.structured import (
    Constrain,
    ReplyFormat,
    action_format,
    constrain_level,
    grounded_action_format,
)
from pyql.agent.recorder import Recorder
from pyql.agent.strategies.queryagent.paper_request import (
    MAX_TOKENS,
    first_line,
    paper_head,
    paper_prompt,
    paper_request,
    parse_paper_reply,
    regeneration_request,
)
from pyql.agent.strategies.queryagent.presets import (
    ANSWER_CHOICE_PROMPT,
    FORGOTTEN_OBSERVATION,
    Preset,
    PresetError,
    dataset_family,
    get_preset,
)
from pyql.agent.strategies.queryagent.prompts import (
    STOP_SEQUENCES,
    PromptProfile,
    cap_text,
    get_prompt_profile,
    parse_reply,
    question_message,
    render_observation,
    system_prompt,
    verbatim_prompt,
)
from pyql.agent.strategy import Result, StrategyConfig, StrategyOption
from pyql.agent.trajectory import Step, Trajectory
from pyql.db.base import DB
from pyql.environment import Environment, render_values, resolve_guidelines
from pyql.errors import InputError, ParseError
from pyql.kb.base import KB
from pyql.program import Call, Program, Signature
from pyql.schemas import call_from_arguments, tool_schemas
from pyql.session import Observation, Session
from pyql.sparql import Sparql
from pyql.syntax import lex_atom

if TYPE_CHECKING:
    from pyql.sql.schema import Schema

__all__ = ["QueryAgent", "Result", "SessionFactory"]

log = logging.getLogger(__name__)

Mode = Literal["text", "tools"]


class SessionFactory(Protocol):
    """Makes the environment of one question (anything with the Session's ``run`` contract)."""

    def __call__(self, *, entities: Mapping[str, str], guidelines: Any, table: str | None
                 ) -> Environment: ...


@dataclass(frozen=True)
class _Decision:
    """What one reply asks the environment to do."""

    thought: str
    #: a Call (tools mode), text (text mode), or an input error to report (bad tool call)
    action: Call | str | InputError
    action_text: str
    issue: str | None = None


#: (id of the profile, mode) -> (the profile, kept so that its id is not reused; the prompt)
_SYSTEM_PROMPTS: dict[tuple[int, str], tuple[PromptProfile, str]] = {}


def _system_prompt(profile: PromptProfile, mode: str) -> str:
    """The system prompt of (profile, mode), rendered once: every question shares it."""
    key = (id(profile), mode)
    found = _SYSTEM_PROMPTS.get(key)
    if found is None or found[0] is not profile:
        if len(_SYSTEM_PROMPTS) >= 64:
            _SYSTEM_PROMPTS.clear()
        found = _SYSTEM_PROMPTS[key] = (profile, system_prompt(profile, mode))
    return found[1]


class _Default:
    """The type of :data:`DEFAULT`: an argument left to the preset (or pyql's default)."""

    def __repr__(self) -> str:
        return "DEFAULT"


#: an argument left to the preset
DEFAULT = _Default()


def _preset(preset: str | Preset | None, dataset: str | None, backend: Any) -> Preset:
    """The preset in force: ``None`` is pyql's ``default``; a name needs the dataset, else it
    is guessed from the backend's KB profile (``metaqa``) or SQL (``wikisql``)."""
    if isinstance(preset, Preset):
        return preset
    name = preset or "default"
    if dataset is None:
        profile = getattr(getattr(backend, "profile", None), "name", None)
        dataset = "metaqa" if profile == "metaqa" else ("wikisql" if isinstance(backend, DB) else "")
        if name != "default" and not dataset:
            raise PresetError(f"the {name!r} preset is per dataset: pass dataset= (grailqa, "
                              "graphq, webqsp, metaqa, wikisql)")
    return get_preset(name, dataset or "default")


class QueryAgent:
    """The QueryAgent of the paper over a KB, a SQL database, or any Session factory.

    ``backend`` is a :class:`pyql.kb.KB` (each question gets a :class:`pyql.Session`), a
    ``pyql.db.SqlDB`` (each question gets a ``pyql.sql.session.SqlSession(db, table=...)``), or
    a :class:`SessionFactory`. ``guidelines``: ``True`` (ERASER's default registry), ``None``
    (off: raw errors are observations — the paper's "w/o ERASER"), or a registry.
    ``mode="text"`` reads ``Thought n``/``Action n`` from text; ``mode="tools"`` offers one tool
    per DSL function. ``ranker`` ranks relation lists longer than ``top_k`` (``"bm25"``,
    ``"openai"``, ``"minilm"``, a :class:`~pyql.agent.grounding.ranking.RelationRanker`, or None to keep
    the first ``top_k`` — the paper's "w/o RR"). ``profile`` picks the prompt (default: from the
    backend's KB profile; ``"wikisql"`` for SQL). ``on_step`` is called with each
    :class:`~pyql.agent.trajectory.Step` as soon as it is recorded (a live view of the run).

    ``preset`` (``"default"``, ``"paper"``, or a :class:`~pyql.agent.strategies.queryagent.presets.Preset`) with
    ``dataset`` chooses the settings left unset: ``max_steps`` (20 by default), the prompt, the
    ranker (``"bm25"`` by default), the argmax semantics (``extremum_mode``: ``"ties"`` or
    ``"limit"``), and how the loop shows its history, bounds the prompt and ends without
    ``execute()`` — ``preset="paper"`` is the original code's setting for the dataset
    (``docs/paper_preset.md``). On a KB the preset also sets the original environment's silent
    semantics (:class:`~pyql.session.KBSession` options ``exclude_topic`` and
    ``relation_filter``); ``exclude_topic=`` / ``relation_filter=`` override it (``"off"``
    turns either off), and ``session_options`` override everything.

    The tokens of a client that reports no usage (a stand-in, a local server) are estimated with
    ``token_counter`` (tiktoken); a counter made with ``estimates=False`` leaves them uncounted
    (0, not estimated) and still counts prompts against a context budget.

    >>> from pyql.agent.llm.clients import ScriptedLLM
    >>> from pyql.kb import OxigraphKB
    >>> kb = OxigraphKB(profile="metaqa")
    >>> kb.load_bytes(b'<http://pyql.dev/metaqa/entity/Kismet> <http://pyql.dev/metaqa/relation/directed_by> <http://pyql.dev/metaqa/entity/William_Dieterle> .', format="ntriples")
    >>> llm = ScriptedLLM([
    ...     "Thought 1 : find the director.\\nAction 1 : add_fact(Kismet, directed_by, ?d)",
    ...     "Thought 2 : that is the answer.\\nAction 2 : set_answer(?d)",
    ...     "Thought 3 : done.\\nAction 3 : execute()",
    ... ])
    >>> result = QueryAgent(llm, kb, guidelines=None).run("who directed [Kismet]", {"Kismet": "Kismet"})
    >>> result.answers, result.finished
    (('William Dieterle',), True)
    """

    name = "queryagent"
    #: the original's ``max_tokens`` (one thought and one action)
    max_reply_tokens = MAX_TOKENS
    #: what ``--option`` may set: constructor keywords (see the class docstring)
    declared_options: ClassVar[Mapping[str, StrategyOption]] = {
        "guidelines": StrategyOption(bool, "ERASER on or off"),
        "max_steps": StrategyOption(int, "most LLM calls per question", ge=1),
        "mode": StrategyOption(Literal["text", "tools"], "Thought/Action text or tool calls"),
        "ranker": StrategyOption(str | None, "relation ranker: bm25, openai, minilm, hybrid"),
        "top_k": StrategyOption(int, "relations shown after ranking", ge=1),
        "seed": StrategyOption(int, "seed of the ranker's ties"),
        "profile": StrategyOption(str, "prompt profile"),
        "table": StrategyOption(str, "the SQL table"),
        "max_observation_chars": StrategyOption(int, "observations cut to this length", ge=1),
        "session_options": StrategyOption(dict[str, Any], "KBSession/SqlSession keywords"),
        "execute_on_stop": StrategyOption(bool, "run execute() when the steps run out"),
        "preset": StrategyOption(str, "default or paper"),
        "dataset": StrategyOption(str, "the dataset the preset is for"),
        "extremum_mode": StrategyOption(Literal["ties", "limit"], "argmax/argmin semantics"),
        "exclude_topic": StrategyOption(str, "the topic exclusion of the session (off: none)"),
        "relation_filter": StrategyOption(str, "the relation filter of the session (off)"),
        "relation_order": StrategyOption(Literal["shuffled", "sorted"],
                                         "relations listed shuffled (the paper) or sorted (its code)"),
        "temperature": StrategyOption(float, "sent with every request", ge=0, le=2),
        "choose": StrategyOption(bool, "score the legal calls instead of generating (choose "
                                 "mode)"),
        "prior_weight": StrategyOption(float, "choose mode: weight of the word-overlap prior "
                                       "(the ranker baseline's rule) added to the model's "
                                       "log-likelihood", ge=0),
    }

    def __init__(
        self,
        llm: LLM,
        backend: KB | Any,
        *,
        guidelines: Any = True,
        max_steps: int | None = None,
        mode: Mode = "text",
        ranker: RelationRanker | str | None | _Default = DEFAULT,
        top_k: int = TOP_K,
        seed: int = 0,
        profile: str | PromptProfile | None = None,
        table: str | None = None,
        max_observation_chars: int = 3000,
        price_table: PriceTable | Mapping[str, Any] | None = None,
        token_counter: TokenCounter | None = None,
        session_options: Mapping[str, Any] | None = None,
        execute_on_stop: bool = True,
        on_step: Callable[[Step], None] | None = None,
        preset: str | Preset | None = None,
        dataset: str | None = None,
        extremum_mode: str | None = None,
        exclude_topic: str | None = None,
        relation_filter: str | None = None,
        constrain: Constrain | bool = "auto",
        relation_order: str | None = None,
        temperature: float | None = None,
        choose: bool = False,
        prior_weight: float = 0.0,
    ) -> None:
        if mode not in ("text", "tools"):
            raise ValueError(f"mode must be 'text' or 'tools', not {mode!r}")
        self.preset = _preset(preset, dataset, backend)
        if max_steps is None:
            max_steps = self.preset.max_steps
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if profile is None and self.preset.prompt is not None:
            profile = self.preset.prompt
        if isinstance(ranker, _Default):
            ranker = self.preset.ranker
        extremum_mode = extremum_mode or self.preset.extremum_mode
        if isinstance(backend, KB):  # the preset's KB semantics; session_options still win
            preset_options: dict[str, Any] = {}
            if extremum_mode != "ties":
                preset_options["extremum_mode"] = extremum_mode
            exclude_topic = exclude_topic or self.preset.exclude_topic
            if exclude_topic != "off":
                preset_options["exclude_topic"] = exclude_topic
            relation_filter = relation_filter or self.preset.relation_filter
            if relation_filter not in (None, "off"):
                preset_options["relation_filter"] = relation_filter
            if self.preset.walk:
                preset_options["walk"] = True
            if self.preset.cvt_note:
                preset_options["cvt_note"] = True
            if self.preset.fact_fallback:
                preset_options["fact_fallback"] = True
            session_options = {**preset_options, **(session_options or {})}
        self.llm = llm
        self.backend = backend
        self.mode: Mode = mode
        self.max_steps = max_steps
        self.ranker = get_ranker(ranker)
        self.top_k = top_k
        self.seed = seed
        self.table = table
        self.max_observation_chars = max_observation_chars
        self.session_options = dict(session_options or {})
        self.execute_on_stop = execute_on_stop
        self.on_step = on_step
        self.profile = self._profile(profile)
        #: the original's request (``Preset.request``): one user message, text mode only
        self.paper_request = self.preset.request == "paper" and mode == "text"
        self.family = dataset_family(self.preset.dataset)
        self.relation_order = relation_order or self.preset.relation_order
        if self.relation_order not in ("shuffled", "sorted"):
            raise ValueError(f"relation_order must be 'shuffled' or 'sorted', not "
                             f"{self.relation_order!r}")
        #: sent with each request: given, else the preset's under the original's request (pyql's
        #: own request leaves it to the client)
        self.temperature = (temperature if temperature is not None
                            else self.preset.temperature if self.paper_request else None)
        if guidelines is True and self.preset.original_checks:
            guidelines = _with_original_checks(self.family)
        self.guidelines = resolve_guidelines(guidelines)
        self.price_table = PriceTable.of(price_table)
        self.token_counter = (token_counter if token_counter is not None
                              else TokenCounter.for_llm(llm))
        self.system = _system_prompt(self.profile, mode)
        self.tools: list[dict[str, Any]] | None = (
            tool_schemas(self.profile.signatures, self.profile) if mode == "tools" else None)
        #: replies are constrained to one thought and one DSL call (``constrain``, checked now);
        #: ``grounded``: to the calls the session offers at each step (:mod:`~pyql.agent.grounding.candidates`)
        # the original's free-text request is not constrained unless asked for ("on", True)
        self.level = constrain_level(
            False if self.paper_request and constrain == "auto" else constrain, llm)
        self.constrained = bool(self.level)
        self._tool_schemas = self.tools or tool_schemas(self.profile.signatures, self.profile)
        self.format = action_format(self._tool_schemas) if self.constrained else None
        #: choose mode: where the step's calls are enumerable, the model scores them
        #: (``llm.score``) and the best is taken; the client must score (checked now)
        self.choose = choose
        self.prior_weight = prior_weight
        if choose:
            if self.paper_request:
                raise ValueError("choose mode does not apply to the original's request "
                                 "(preset paper)")
            check_choose(llm)
        #: the toolset is itself a mapping of names to signatures (not copied per question)
        self._signatures: Mapping[str, Signature] = self.profile.toolset

    @classmethod
    def from_config(cls, llm: LLM, backend: KB | Any, config: StrategyConfig) -> QueryAgent:
        """The ``queryagent`` strategy factory (entry point ``pyql.strategies``): the common
        options of ``config``, and its ``options`` as keyword arguments of the constructor."""
        kwargs: dict[str, Any] = {
            "guidelines": True if config.guidelines else None, "mode": config.mode,
            "seed": config.seed, "table": config.table, "token_counter": config.token_counter,
            "price_table": config.price_table, "preset": config.preset,
            "dataset": config.dataset, "constrain": config.constrain,
            "choose": config.choose,
        }
        # a preset's prompt wins over the dataset's profile (``options`` can still name one)
        if config.profile is not None and config.preset is None:
            kwargs["profile"] = config.profile
        kwargs.update(config.given("ranker", "max_steps", "top_k"), **config.options)
        return cls(llm, backend, **kwargs)

    def __repr__(self) -> str:
        return (f"QueryAgent(llm={self.llm!r}, profile={self.profile.name!r}, mode={self.mode!r}, "
                f"guidelines={'on' if self.guidelines is not None else 'off'})")

    # -- setup ----------------------------------------------------------------------------------
    def _profile(self, profile: str | PromptProfile | None) -> PromptProfile:
        if isinstance(profile, PromptProfile):
            return profile
        if profile is not None:
            return get_prompt_profile(profile)
        if isinstance(self.backend, KB):
            name = self.backend.profile.name
            return get_prompt_profile(name if name in ("freebase", "metaqa") else "generic")
        if isinstance(self.backend, DB):
            return get_prompt_profile("wikisql")
        return get_prompt_profile("freebase")

    def new_session(self, entities: Mapping[str, str] | None = None, table: str | None = None
                    ) -> Environment:
        """The environment of one question, chosen from the backend."""
        entities = dict(entities or {})
        backend = self.backend
        options = {"functions": self.profile.functions, **self.session_options}
        if isinstance(backend, KB):
            return Session(backend, entities, guidelines=self.guidelines, **options)
        if isinstance(backend, DB):  # the Session factory makes the SqlSession
            return Session(backend, table=table or self.table, guidelines=self.guidelines,
                           **options)
        if callable(backend):
            return backend(entities=entities, guidelines=self.guidelines, table=table or self.table)
        raise TypeError(f"cannot make a session from {type(backend).__name__}: pass a pyql KB, "
                        "a pyql SqlDB or a session factory")

    # -- the loop -------------------------------------------------------------------------------
    def run(
        self,
        question: str,
        entities: Mapping[str, str] | None = None,
        *,
        table: str | None = None,
        columns: Sequence[str] | None = None,
        schema: Schema | None = None,
        meta: Mapping[str, Any] | None = None,
        on_step: Callable[[Step], None] | None = None,
        **context: Any,
    ) -> Result:
        """Answer one question (Algorithm 1). See the module docstring for how it ends.

        ``columns`` (a table header) and ``schema`` (a database's tables, columns and foreign keys,
        for profiles whose context is the schema, e.g. ``spider``) follow the question in the
        prompt; by default they are the session's. ``on_step`` (else the agent's own) is called
        with each step as soon as it is recorded. Other ``context`` keys (of the
        :class:`~pyql.agent.strategy.Strategy` contract) are not used by this strategy.
        """
        rec = Recorder(self.llm, question,
                       counter=self.token_counter,
                       price_table=self.price_table, constrain=self.level,
                       on_step=on_step if on_step is not None else self.on_step)
        entities = dict(entities or {})
        session = self.new_session(entities, table)
        backend = session.backend
        if columns is None:
            columns = session.memory.columns
        if schema is None and self.profile.context == "schema":
            # Here, not at module level: a KB run never loads sqlglot.
            from pyql.sql.session import SqlSession

            if isinstance(session, SqlSession):
                schema = session.schema
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": question_message(
                self.profile, question, entities=entities, columns=columns, schema=schema)},
        ]
        labels_before = backend.label_query_count if isinstance(backend, KB) else None
        prompt_tokens: _PromptTokens | None = None
        finished = False
        stop_reason = "max_steps"
        answers: tuple[Any, ...] = ()
        last_obs: Observation | None = None
        head = list(messages)
        turns: list[list[dict[str, Any]]] = []
        if self.paper_request:
            paper_base, _, topic_queries = rec.env(
                lambda: self._paper_head(session, question, entities, columns), backend=backend)
            rec.add_queries(topic_queries)
        for n in range(1, self.max_steps + 1):
            if self.paper_request:
                prompt = paper_prompt(verbatim_prompt(self.profile), paper_base, rec.steps)
                budget = self._paper_budget()
                over = budget is not None and self.token_counter.count(prompt) > budget
            else:
                if self.preset.history == "paper":
                    messages = head + _paper_history(turns, rec.steps)
                    prompt_tokens = None  # earlier messages change: count the prompt afresh
                if prompt_tokens is None:
                    prompt_tokens = _PromptTokens(self.token_counter, self.tools)
                budget = self.preset.context_budget
                # one count serves the budget and the call's estimate
                over = budget is not None and prompt_tokens(messages) > budget
            if over:
                log.info("step %d: the prompt is over the %d-token budget", n, budget)
                stop_reason = "context_budget"
                break
            try:
                if self.paper_request:
                    call, decision, fields = self._paper_step(rec, prompt, n)
                else:
                    grounding, grounded_seconds, grounded_queries = (None, 0.0, 0)
                    if self.choose or self.level.grounded:
                        grounding, grounded_seconds, grounded_queries = rec.env(
                            lambda: self._ground(session, question), backend=backend)
                    options = call_options(grounding) if self.choose and grounding else None
                    if options:
                        choice = rec.choose(messages, [f"Thought {n} : \nAction {n} : {o.text}"
                                                       for o in options],
                                            prior=self._prior(question, options, entities),
                                            prior_weight=self.prior_weight)
                        call = choice.call
                        decision, fields = self._decide(call.reply), call.step_fields()
                        fields["data"] = choice.step_data()
                    else:
                        call = rec.llm(messages,
                                       stop=STOP_SEQUENCES if self.mode == "text" else None,
                                       tools=self.tools, format=self._step_format(grounding),
                                       prompt_tokens=prompt_tokens, temperature=self.temperature)
                        decision, fields = (self._decide(call.reply, call.constrained),
                                            call.step_fields())
                    if grounding is not None:
                        fields.setdefault("data", {})["grounding"] = _grounding_data(grounding)
                    rec.add_queries(grounded_queries)
            except LLMContextLengthError as exc:
                log.warning("step %d: the prompt no longer fits the context window: %s", n, exc)
                stop_reason = "context_length"
                break
            reply = call.reply
            obs, env_seconds, kb_queries = rec.env(lambda d=decision: self._act(session, d),
                                                   backend=backend)
            observation = render_observation(
                obs, n, question=question, ranker=self.ranker, top_k=self.top_k, seed=self.seed,
                max_chars=self.max_observation_chars, relation_order=self.relation_order)
            step = rec.add(Step(
                n=n, thought=decision.thought, action=decision.action_text,
                observation=observation, hint=obs.hint.code if obs.hint else None,
                suggestions=tuple(obs.hint.suggestions) if obs.hint else (),
                status=obs.status, env_status=_env_status(obs), error=obs.error,
                accepted=obs.ok, format_issue=decision.issue, query=obs.query,
                env_latency=env_seconds, kb_queries=kb_queries, **fields,
            ))
            if not self.paper_request:
                turns.append(self._turn(step, reply))
                messages.extend(turns[-1])
            last_obs = obs
            log.debug("step %d: %s -> %s", n, step.action, step.status)
            executed = obs.call
            if executed is not None and executed.name == "execute" and obs.ok:
                finished = True
                stop_reason = "execute"
                answers = tuple(obs.answers or ())
                break
        if not finished and self.execute_on_stop:
            if self.preset.on_stop == "execute_current":
                answers, _, extra = rec.env(lambda: self._execute_current(session),
                                            backend=backend)
            else:
                answers, _, extra = rec.env(
                    lambda: self._finish(rec, session, question, messages), backend=backend)
            rec.add_queries(extra)
            last_obs = session.observations[-1] if session.observations else last_obs
        program: Program | None = session.program
        if program is None:
            program = Program(tools=self.profile.tools)
        labels_after = backend.label_query_count if isinstance(backend, KB) else None
        label_queries = (labels_after - labels_before if isinstance(labels_after, int)
                         and isinstance(labels_before, int) else 0)
        usage = rec.finish_usage(label_queries=label_queries)
        trajectory = Trajectory(
            question=question, entities=entities, strategy=self.name,
            profile=self.profile.name, mode=self.mode,
            tools=self.profile.tools, model=getattr(self.llm, "model", ""),
            steps=tuple(rec.steps), answers=answers,
            query=last_obs.query if last_obs is not None else "",
            program=str(program), finished=finished, stop_reason=stop_reason, usage=usage,
            meta=dict(meta or {}),
        )
        return Result(trajectory=trajectory, program=program)

    # -- the original's request (Preset.request == "paper") ---------------------------------------
    def _paper_head(self, session: Any, question: str, entities: Mapping[str, str],
                    columns: Sequence[str]) -> str:
        """The question block of the original's prompt; on MetaQA with the topic entity's
        relations (the original's order is a Python set's, arbitrary: pyql's is sorted)."""
        relations: list[str] = []
        if self.family == "metaqa":
            node = session.current_node() if hasattr(session, "current_node") else None
            if node is not None:
                found = session.relations_of(node)
                relations = sorted(set(found.forward) | set(found.backward))
        return paper_head(self.family, question, entities=entities, columns=columns,
                          relations=relations)

    def _paper_budget(self) -> int | None:
        """The original's budget: 16,090 tokens for a ``16k`` model where it has one, else
        4,090 (GRAIL.py:47, GRAPHQ.py:43)."""
        if self.preset.context_budget_16k is not None and "16k" in getattr(self.llm, "model", ""):
            return self.preset.context_budget_16k
        return self.preset.context_budget

    def _paper_step(self, rec: Recorder, prompt: str, n: int
                    ) -> tuple[AccountedCall, _Decision, dict[str, Any]]:
        """One step's calls as the original makes them: the request, and when the reply does
        not split into a thought and an action, the regeneration call of the same step."""
        temperature = self.temperature if self.temperature is not None else 0.0
        request = paper_request(prompt, n, temperature=temperature)
        call = rec.llm(request.messages, stop=request.stop, max_tokens=request.max_tokens,
                       temperature=temperature, format=self.format)
        fields = call.step_fields()
        parsed = parse_paper_reply(call.reply.text, n, self.family)
        issue = None
        if parsed is None:
            thought = first_line(call.reply.text)
            again = regeneration_request(prompt, n, thought, temperature=temperature)
            regenerated = rec.llm(again.messages, stop=again.stop, max_tokens=again.max_tokens,
                                  temperature=temperature)
            action = regenerated.reply.text.strip()
            issue = "regenerated"
            extra = regenerated.step_fields()
            fields["data"] = {"regenerated": regenerated.reply.text}
            for key in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost",
                        "llm_latency", "retries"):
                fields[key] += extra[key]
        else:
            thought, action = parsed
        # the original lower-cases the action's first letter for its environment (GRAIL.py:96)
        decision = _Decision(thought, action[:1].lower() + action[1:], action, issue)
        return call, decision, fields

    # -- one step -------------------------------------------------------------------------------
    def _ground(self, session: Environment, question: str) -> Any:
        """The grounding of the session's next step (None for an environment that is neither
        a KB nor a SQL session)."""
        if not hasattr(session, "memory") or session.tools not in ("sparql", "sql"):
            return None
        return ground_step(session, question, ranker=self.ranker, limit=self.top_k,
                           seed=self.seed, functions=self.profile.functions)

    def _step_format(self, grounding: Any) -> ReplyFormat | None:
        """This step's reply format: grounded in the session under ``grounded``."""
        if self.format is None or grounding is None or not self.level.grounded:
            return self.format
        return grounded_action_format(self._tool_schemas, grounding)

    def _prior(self, question: str, options: Sequence[CallOption],
               entities: Mapping[str, str]) -> list[float] | None:
        """Choose mode's prior of the candidate calls: the no-model baseline's word-overlap
        rule (:func:`~pyql.agent.llm.ranker.overlap_priors`, the linked mentions' words left
        out) on what each call is about (``CallOption.words``: a fact's relation, the node of
        ``get_relation``/``set_answer``, the answer of ``execute``), so that with a large
        ``prior_weight`` a shared word decides and the model breaks the ties (``combine``)."""
        if not self.prior_weight:
            return None
        return overlap_priors(question, [o.words for o in options], tuple(entities))

    def _decide(self, reply: LLMReply, constrained: bool = False) -> _Decision:
        functions = self.profile.functions
        if reply.tool_calls:  # tools mode, or a constrained reply read back as a call
            thought = parse_reply(reply.text).thought if reply.text.strip() else ""
            calls = reply.tool_calls
            if len(calls) > 1:  # refused as a whole: Python feedback "multiple_actions"
                rendered = [self._call_from_tool(c) for c in calls]
                text = "\n".join(str(r) if isinstance(r, Call) else f"{c.name}({c.arguments})"
                                 for r, c in zip(rendered, calls, strict=True))
                error = ParseError(f"expected one call, found {len(calls)}", text,
                                   kind="multiple_actions", found=len(calls))
                return _Decision(thought, error, text, "multiple_actions")
            call = self._call_from_tool(calls[0], constrained)
            if isinstance(call, InputError):
                text = f"{calls[0].name}({calls[0].arguments})"
                return _Decision(thought, call, text, "bad_tool_call")
            return _Decision(thought, call, str(call))
        parsed = parse_reply(reply.text, functions)
        return _Decision(parsed.thought, parsed.action_text, parsed.action_text, parsed.issue)

    def _call_from_tool(self, tool: ToolCall, constrained: bool = False) -> Call | InputError:
        """The DSL call a tool call stands for, or the input error it makes (a constrained
        reply's arguments are one JSON string each: read with ``literal_fallback``)."""
        try:
            arguments = tool.parsed_arguments()
        except ValueError as exc:
            return ParseError(str(exc), tool.arguments, 0)
        return call_from_arguments(tool.name, arguments, self._signatures, tool.arguments,
                                   literal_fallback=constrained)

    def _act(self, session: Environment, decision: _Decision) -> Observation:
        if isinstance(decision.action, InputError):
            return session.reject(decision.action_text, decision.action)
        return session.run(decision.action)

    def _turn(self, step: Step, reply: LLMReply) -> list[dict[str, Any]]:
        """The messages that record one step: the model's turn and the observation."""
        n = step.n
        # what the model wrote goes back capped: a runaway reply (a server that ignores
        # max_tokens) would otherwise be resent, whole, in every later request
        limit = self.max_observation_chars
        thought = f"Thought {n} : {cap_text(step.thought, limit)}"
        if self.mode == "tools" and reply.tool_calls:
            calls = [c.model_copy(update={"id": c.id or f"call_{n}_{i}",
                                          "arguments": cap_text(c.arguments, limit)})
                     for i, c in enumerate(reply.tool_calls)]
            out: list[dict[str, Any]] = [{
                "role": "assistant", "content": thought if step.thought else None,
                "tool_calls": [c.to_message() for c in calls],
            }]
            out += [{"role": "tool", "tool_call_id": c.id, "content": step.observation}
                    for c in calls]
            return out
        return [
            {"role": "assistant",
             "content": f"{thought}\nAction {n} : {cap_text(step.action, limit)}"},
            {"role": "user", "content": f"Observation {n} : {step.observation}"},
        ]

    def _execute_current(self, session: Environment) -> tuple[Any, ...]:
        """Answers of the current query when the loop ended without execute(): executed only
        if an answer was set (set_answer or an aggregation)."""
        query = session.query
        has_answer = bool(session.memory.answer) or (
            isinstance(query, Sparql) and query.aggregate is not None)
        if not has_answer:
            return ()
        return self._execute(session)

    def _execute(self, session: Environment) -> tuple[Any, ...]:
        obs = session.run(Call(name="execute"))
        if not obs.ok:
            log.info("the final execute() was not accepted: %s", obs.text)
            return ()
        return tuple(obs.answers or ())

    def _finish(self, rec: Recorder, session: Environment, question: str,
                messages: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
        """The original's end without execute() (the preset's ``on_stop``): ``execute`` runs the
        query as it is; ``choose_answer`` first asks the model which variable answers the
        question, from the last results (:data:`~pyql.agent.strategies.queryagent.presets.ANSWER_CHOICE_PROMPT`),
        and executes with it (the choice call is accounted by ``rec``)."""
        values = next((o.values for o in reversed(session.observations)
                       if o.ok and o.values), None)
        if self.preset.on_stop != "choose_answer" or not values:
            return self._execute(session)
        prompt = [{"role": "user", "content": ANSWER_CHOICE_PROMPT.format(
            question=question, result=render_values(values))}]
        sampling = ({"max_tokens": MAX_TOKENS, "temperature": self.preset.temperature}
                    if self.paper_request else {})  # the original's llm() (ag_utils.py:128-146)
        reply = rec.llm(prompt, stop=["\n"], **sampling).reply
        choice = _ANSWER_CHOICE.search(reply.text)
        if choice is not None:
            chosen = session.run(Call(name="set_answer", args=(lex_atom(choice.group(1)),)))
            log.info("answer variable chosen on stop: %s (%s)", choice.group(1), chosen.status)
        return self._execute(session)


def _with_original_checks(family: str) -> Any:
    """The installed guidelines plus the original environment's checks of ``family``
    (:mod:`pyql.guidelines.packs.original`)."""
    from pyql.guidelines import Registry, default_registry
    from pyql.guidelines.packs.original import DATASETS, for_dataset

    if family not in DATASETS:
        return True
    installed = default_registry()
    return Registry.from_classes([*(type(g) for g in installed), *for_dataset(family)])


def _paper_history(turns: Sequence[list[dict[str, Any]]], steps: Sequence[Step]
                   ) -> list[dict[str, Any]]:
    """The turns as the original shows them (ag_utils.py ``get_dynamic_history``): the
    observations of steps older than two are forgotten, and the one two steps back too when it
    is an error longer than 250 characters."""
    out: list[dict[str, Any]] = []
    last = len(turns) - 1
    for index, (turn, step) in enumerate(zip(turns, steps)):
        forget = index < last - 1 or (
            index == last - 1 and not step.accepted and len(step.observation) > 250)
        out += [_forgotten(m, step.n) for m in turn] if forget else turn
    return out


def _forgotten(message: dict[str, Any], n: int) -> dict[str, Any]:
    if message["role"] == "tool":
        return {**message, "content": FORGOTTEN_OBSERVATION}
    if message["role"] == "user":
        return {**message, "content": f"Observation {n} : {FORGOTTEN_OBSERVATION}"}
    return message


#: the original reads the chosen variable with this pattern (GRAIL.py:120)
_ANSWER_CHOICE = re.compile(r"set_answer\((\?\w+)\)")


class _PromptTokens:
    """The estimated prompt tokens of one question's growing message list (the agent only
    appends to it): each message is counted once, not again at every later step;
    the same total as ``TokenCounter.count_messages``."""

    def __init__(self, counter: TokenCounter, tools: Sequence[Mapping[str, Any]] | None) -> None:
        self.counter = counter
        self.tools = tools
        self.total = -1  # counted on the first call: most clients report usage
        self.counted = 0  # messages counted

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> int:
        if self.total < 0:
            self.total = self.counter.count_messages([], self.tools)
        count = self.counter.count_message
        for message in messages[self.counted:]:
            self.total += count(message)
        self.counted = len(messages)
        return self.total


def _grounding_data(grounding: Any) -> dict[str, Any]:
    """A step's record of what its grounding offered (sizes, and whether a list was cut)."""
    return {"functions": list(grounding.functions.items),
            "relations": {f"{f.node} {f.direction}": len(f.relations) for f in grounding.facts},
            "truncated": grounding.truncated}


def _env_status(obs: Observation) -> str:
    status = obs.feedback.backend.status
    return "" if status == "not_run" else status


