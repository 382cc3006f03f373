"""DSL calls and programs.

A :class:`Call` is a frozen value: a function name and its arguments as lexical
:class:`~pyql.syntax.Atom` values. A :class:`Program` is a tuple of calls. Both parse from the
text an LLM writes, print back canonically, and replay onto an empty query.

Two input styles are accepted:

- agent style, one call per line: ``add_fact(m.0x, people.person.spouse_s, ?y)``
- the original PyQL Python style: ``a=PyQL()`` then ``a.add_fact('m.0x', 'people.person.spouse_s', 'x0')``

The functions, their parameters and what each parameter accepts are *declared* in
:data:`TOOLSETS` (one :class:`Signature` per function); validation, tool documentation and the JSON
schemas for native tool-calling are all derived from those declarations.

>>> p = Program.parse("a=PyQL()\\na.add_fact('m.03_r3', 'location.country.languages_spoken', 'x0')\\na.set_answer('x0')")
>>> print(p)
add_fact(m.03_r3, location.country.languages_spoken, ?x0)
set_answer(?x0)
>>> Program.parse(str(p)) == p
True
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_validator

from pyql.errors import (
    ArityError,
    ParseError,
    ProgramTooLongError,
    ToolsetError,
    UnknownFunctionError,
)
from pyql.registry import lookup
from pyql.resolve import Slot
from pyql.syntax import (
    Atom,
    AtomKind,
    iri_token_end,
    lex_atom,
    quote_string,
    read_arguments,
    split_arguments,
)

if TYPE_CHECKING:
    from pyql.profiles import Profile
    from pyql.sparql import Sparql

__all__ = [
    "MAX_PROGRAM_CALLS",
    "ParamKind",
    "Param",
    "Signature",
    "Toolset",
    "TOOLSETS",
    "SPARQL_TOOLS",
    "SQL_TOOLS",
    "Call",
    "Program",
    "parse_call",
    "register_replay",
    "COMPARISON_OPS",
    "Alias",
    "PAPER_ALIASES",
    "paper_time_constrain",
]

#: comparison operators accepted by add_filter / add_condition (``<>`` is read as ``!=``)
COMPARISON_OPS = ("=", "!=", ">", "<", ">=", "<=")


class ParamKind(str, Enum):
    TERM = "term"  # a KB term; what kinds is given by Param.slot
    OP = "op"  # a comparison operator
    COLUMN = "column"  # a SQL column (optionally table.column)
    TABLE = "table"  # a SQL table
    VALUE = "value"  # a SQL value (string/number)
    AGG = "agg"  # an aggregation: None, MAX, MIN, COUNT, SUM, AVG
    DIRECTION = "direction"  # asc / desc
    INT = "int"  # a non-negative integer
    QUERY = "query"  # a stored SQL sub-query, written ?name


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind
    doc: str = ""
    slot: Slot | None = None
    optional: bool = False
    #: OP params: the operators allowed
    choices: tuple[str, ...] = ()

    @cached_property
    def _takes_var(self) -> bool:
        """Does the slot take variables (where original PyQL's bare ``x0`` is read as ``?x0``)?"""
        return self.slot is not None and Slot.VAR in self.slot


@dataclass(frozen=True)
class Signature:
    """One DSL function: its name, parameters, one-line doc and role.

    ``role`` is ``"env"`` for calls that ask the KB/DB without changing the query
    (``get_relation``, ``get_column``), ``"build"`` for calls that add to the query and
    ``"terminal"`` for ``execute``.
    """

    name: str
    params: tuple[Param, ...]
    doc: str
    role: str = "build"

    @cached_property
    def arity(self) -> tuple[int, int]:
        required = sum(1 for p in self.params if not p.optional)
        return required, len(self.params)

    def __str__(self) -> str:
        return f"{self.name}({', '.join(p.name for p in self.params)})"

    def accepts(self, arity: int) -> bool:
        lo, hi = self.arity
        return lo <= arity <= hi

    def check_arity(self, got: int) -> None:
        lo, hi = self.arity
        if not lo <= got <= hi:
            raise ArityError(self.name, lo if lo == hi else (lo, hi), got, str(self))


@dataclass(frozen=True)
class Alias:
    """Another spelling of a call, read as the canonical call it stands for.

    The original QueryAgent prompts write some tools differently (WebQSP's 3-argument
    ``add_time_constrain(var, relation, year)``, MetaQA's ``relate(relation)`` and
    ``get_relation()``). An alias is keyed by name and argument count. ``expand`` turns the
    arguments into the canonical call; contextual aliases (no ``expand``) need the environment's state
    (the current entity of a walk), so only a Session expands them
    (:meth:`pyql.environment.Environment.parse`), and parsing them elsewhere is an error.
    """

    name: str
    arity: int
    doc: str
    #: the original code the spelling comes from
    source: str
    expand: Callable[[tuple[Atom, ...]], Call] | None = None

    @property
    def contextual(self) -> bool:
        return self.expand is None

    def __str__(self) -> str:
        return f"{self.name}/{self.arity}"


class Toolset(Mapping[str, Signature]):
    """An ordered, named set of signatures (the SPARQL or the SQL version of PyQL), and the
    :class:`Alias` spellings it also reads."""

    def __init__(self, name: str, signatures: Iterable[Signature],
                 aliases: Iterable[Alias] = ()) -> None:
        self.name = name
        self._by_name = {s.name: s for s in signatures}
        #: (name, argument count) -> the signature that accepts the call as written
        self._accepting = {(s.name, n): s for s in self._by_name.values()
                           for n in range(s.arity[0], s.arity[1] + 1)}
        self.aliases = {(a.name, a.arity): a for a in aliases}
        #: (text, contextual) -> the call :func:`parse_call` read from it (a call is a frozen
        #: value; agents write ``get_relation(?x1)`` or ``execute()`` question after question)
        self._parsed: dict[tuple[str, bool], Call] = {}

    def alias(self, name: str, arity: int) -> Alias | None:
        """The alias a call of ``name`` with ``arity`` arguments is, if any: a spelling the
        toolset's own signatures do not accept."""
        alias = self.aliases.get((name, arity)) if self.aliases else None
        if alias is None or (name in self._by_name and self._by_name[name].accepts(arity)):
            return None
        return alias

    def __getitem__(self, key: str) -> Signature:
        return self._by_name[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def signature(self, name: str) -> Signature:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownFunctionError(name, list(self._by_name)) from None

    def __repr__(self) -> str:
        return f"Toolset({self.name!r}, {list(self._by_name)})"


def _term(name: str, slot: Slot, doc: str, optional: bool = False) -> Param:
    return Param(name, ParamKind.TERM, doc, slot=slot, optional=optional)


_OP = Param("op", ParamKind.OP, "one of =, !=, >, <, >=, <=", choices=COMPARISON_OPS)

#: add_time_constrain(var, relation, year) of the original WebQSP environment: the relation
#: names one end of the period, the other end is derived from it (sparql_generator.py:100-122)
_PERIOD_ENDS = ((".from", ".to"), (".start_date", ".end_date"), (".from_date", ".to_date"))


def paper_time_constrain(args: tuple[Atom, ...]) -> Call:
    """``add_time_constrain(var, relation, year)`` as the 5-argument call it means.

    The original (ag_src/webqsp_src/sparql_generator.py:100-135) pairs the relation with its
    other end (``.from``/``.to``, ``.start_date``/``.end_date``, ``.from_date``/``.to_date``; a
    single-date relation such as ``.year`` or ``.release_date`` is both ends) and keeps ``var``
    whose period contains the year: start <= year and end >= year, compared at the year's
    precision.

    >>> print(paper_time_constrain(Call.of("x", "?team", "sports.sports_team_roster.to", "2010").args))
    add_time_constrain(?team, sports.sports_team_roster.from, sports.sports_team_roster.to, "2010", "2010")
    """
    var, relation, year = args
    start = end = relation.value
    for first, last in _PERIOD_ENDS:
        if relation.value.endswith(first):
            end = relation.value[: -len(first)] + last
            break
        if relation.value.endswith(last):
            start = relation.value[: -len(last)] + first
            break
    when = Atom(AtomKind.STRING, year.value)  # 2010 is a date here, not a number
    return Call(name="add_time_constrain",
                args=(var, Atom(relation.kind, start), Atom(relation.kind, end), when, when))


#: the spellings of the original prompts (the paper's demos), read as SPARQL calls
PAPER_ALIASES = (
    Alias("add_time_constrain", 3, "add_time_constrain(var, relation, year)",
          "ag_src/webqsp_src/wikienv_webqsp.py:184-197", paper_time_constrain),
    Alias("relate", 1, "relate(relation): walk from the current entity along the relation",
          "ag_src/meta_src/wikienv_meta.py:84-90"),
    Alias("get_relation", 0, "get_relation(): the relations of the current entity",
          "ag_src/meta_src/wikienv_meta.py:67-82"),
)

SPARQL_TOOLS = Toolset(
    "sparql",
    [
        Signature(
            "get_relation",
            (_term("node", Slot.VAR | Slot.ENTITY | Slot.LITERAL, "an entity id (m.02x1bx) or a variable (?computer)"),),
            "Get the one-hop relations (forward and backward) of an entity or a variable.",
            role="env",
        ),
        Signature(
            "add_fact",
            (
                _term("head", Slot.NODE, "an entity, a literal or a variable"),
                _term("relation", Slot.RELATION, "a relation from get_relation()"),
                _term("tail", Slot.NODE, "an entity, a literal or a variable"),
            ),
            "Add a triple pattern (head, relation, tail) to the query.",
        ),
        Signature(
            "add_type",
            (_term("var", Slot.VAR, "a variable"), _term("type", Slot.CLASS, "a type/class")),
            "Constrain a variable to instances of a type.",
        ),
        Signature(
            "add_filter",
            (
                _term("ob1", Slot.VALUE, "a variable"),
                _OP,
                _term("ob2", Slot.VALUE, "a number, date, entity or variable"),
            ),
            "Add a comparison constraint: the result must satisfy ob1 op ob2 (e.g. ?length > 10).",
        ),
        Signature(
            "add_time_constrain",
            (
                _term("var", Slot.VAR, "the node (often a CVT) that has the start and end relations"),
                _term("start_relation", Slot.RELATION, "relation to the start time"),
                _term("end_relation", Slot.RELATION, "relation to the end time"),
                _term("window_end", Slot.LITERAL, "latest allowed start (a date)"),
                _term("window_start", Slot.LITERAL, "earliest allowed end (a date)"),
            ),
            "Keep ?var whose [start, end] period overlaps the window: no start or start <= window_end, "
            "and no end or end >= window_start.",
        ),
        Signature("add_max", (_term("max_var", Slot.VAR, "a variable"),),
                  "Keep only the results where max_var is the largest."),
        Signature("add_min", (_term("min_var", Slot.VAR, "a variable"),),
                  "Keep only the results where min_var is the smallest."),
        Signature(
            "add_count",
            (_term("count_var", Slot.VAR, "the variable to count"),
             _term("new_var", Slot.VAR, "the variable that holds the count", optional=True)),
            "Count the distinct values of count_var into new_var (default ?count).",
        ),
        Signature(
            "add_sum",
            (_term("sum_var", Slot.VAR, "the variable to add up"),
             _term("new_var", Slot.VAR, "the variable that holds the sum", optional=True)),
            "Sum the values of sum_var into new_var (default ?sum).",
        ),
        Signature(
            "add_avg",
            (_term("avg_var", Slot.VAR, "the variable to average"),
             _term("new_var", Slot.VAR, "the variable that holds the average", optional=True)),
            "Average the values of avg_var into new_var (default ?avg).",
        ),
        Signature("set_answer", (_term("answer_var", Slot.VAR, "an existing variable"),),
                  "Set the variable that the query returns."),
        Signature("execute", (), "Execute the query and return the answers.", role="terminal"),
    ],
    aliases=PAPER_ALIASES,
)

_COLUMN = Param("column", ParamKind.COLUMN, "a column name (quote it if it has commas or parentheses)")
_QUERY = Param("query", ParamKind.QUERY, "a stored sub-query, ?name")

SQL_TOOLS = Toolset(
    "sql",
    [
        Signature("get_column", (_COLUMN,),
                  "Get the values stored in a column (distinct values with counts).", role="env"),
        Signature(
            "add_condition",
            (_COLUMN,
             Param("op", ParamKind.OP,
                   "one of =, !=, >, <, >=, <=, LIKE, NOT LIKE, contains, IN, NOT IN",
                   choices=(*COMPARISON_OPS, "LIKE", "NOT LIKE", "contains", "IN", "NOT IN")),
             Param("value", ParamKind.VALUE,
                   "a string or a number; ?name for a stored sub-query; with IN/NOT IN a list of "
                   "values a|b|c")),
            "Keep rows where `column op value` holds.",
        ),
        Signature(
            "set_answer",
            (_COLUMN,
             Param("aggregation", ParamKind.AGG, "None, MAX, MIN, COUNT, SUM or AVG", optional=True)),
            "Return a column, optionally aggregated (None, MAX, MIN, COUNT, SUM, AVG); call again "
            "for more answer columns.",
        ),
        Signature(
            "add_join",
            (Param("table", ParamKind.TABLE, "the table to join"),
             Param("left_column", ParamKind.COLUMN, "join column (default: a declared foreign key)", optional=True),
             Param("right_column", ParamKind.COLUMN, "join column of the new table", optional=True)),
            "Join another table, along a declared foreign key or the given columns.",
        ),
        Signature("add_group_by", (_COLUMN,), "Group the rows by a column."),
        Signature(
            "add_having",
            (_COLUMN,
             Param("aggregation", ParamKind.AGG, "MAX, MIN, COUNT, SUM or AVG"),
             Param("op", ParamKind.OP, "one of =, !=, >, <, >=, <=", choices=COMPARISON_OPS),
             Param("value", ParamKind.VALUE, "a number or string, or ?name (a stored sub-query)")),
            "Keep groups where `aggregation(column) op value` holds.",
        ),
        Signature(
            "add_order",
            (_COLUMN,
             Param("direction", ParamKind.DIRECTION, "asc or desc", optional=True),
             Param("limit", ParamKind.INT, "how many rows to keep", optional=True)),
            "Order the rows by a column (asc/desc), optionally keeping the first N.",
        ),
        Signature("set_distinct", (), "Return distinct rows only."),
        Signature(
            "begin_subquery",
            (Param("name", ParamKind.QUERY, "a new name for the sub-query, written ?name (?q1)"),),
            "Start a sub-query: the calls up to end_subquery() build it (its own table, "
            "conditions and answer).",
        ),
        Signature(
            "end_subquery", (),
            "Finish the sub-query and store it: ?name is then a value of add_condition/add_having "
            "or the argument of add_union/add_intersect/add_except.",
        ),
        Signature("add_union", (_QUERY,), "Add the rows of a stored query (UNION)."),
        Signature("add_intersect", (_QUERY,),
                  "Keep the rows that a stored query also returns (INTERSECT)."),
        Signature("add_except", (_QUERY,),
                  "Drop the rows that a stored query returns (EXCEPT)."),
        Signature("execute", (), "Execute the query and return the answers.", role="terminal"),
    ],
)

TOOLSETS: dict[str, Toolset] = {"sparql": SPARQL_TOOLS, "sql": SQL_TOOLS}


def _toolset(tools: str | Toolset) -> Toolset:
    if isinstance(tools, Toolset):
        return tools
    return lookup(TOOLSETS, tools, "toolset")


_BARE_VAR = re.compile(r"x\d+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_CALL_END = re.compile(r"[ \t]*(#[^\n]*)?(\r?\n|;|$)")
#: what separates calls: blanks, ``;`` and ``#`` comments (to the end of their line)
_BLANK = re.compile(r"(?:[ \t\r\n;]+|#[^\n]*\n?)*")
#: an agent-style call without parentheses in its argument list, the shape agents write nearly
#: always; _plain_arguments reads its arguments unless one needs the full scanner
_PLAIN_CALL = re.compile(r"([A-Za-z_]\w*)[ \t]*\(([^()]*)\)")
#: a text of one plain call and blanks (what ``_CALL_END`` and ``_BLANK`` accept around it)
_ONE_PLAIN_CALL = re.compile(
    r"[ \t\r\n;]*" + _PLAIN_CALL.pattern + r"(?:[ \t]*(?:\r?\n|;)[ \t\r\n;]*|[ \t]*)\Z")


_NAME, _VAR, _TERM = AtomKind.NAME, AtomKind.VAR, ParamKind.TERM  # looked up once


def _canonical(atom: Atom, param: Param) -> Atom:
    if atom.kind is _NAME:
        # Original PyQL names variables x0, x1 ...; where a variable is allowed, read them as such.
        if param._takes_var and _BARE_VAR.fullmatch(atom.value):
            return Atom(AtomKind.VAR, atom.value)
        if param.kind is ParamKind.OP and atom.value == "<>":
            return Atom(AtomKind.NAME, "!=")
    elif atom.kind is _VAR and param.kind is not _TERM:
        # only KB term slots have variables; elsewhere "?x" is text (e.g. a SQL header)
        return Atom(AtomKind.NAME, f"?{atom.value}")
    return atom


class Call(BaseModel):
    """One DSL call: a function name and its arguments as written (lexical atoms).

    >>> c = Call.parse('add_filter(?x, >=, "2015-08-10"^^xsd:dateTime)')
    >>> c.name, len(c.args)
    ('add_filter', 3)
    >>> str(c)
    'add_filter(?x, >=, "2015-08-10"^^xsd:dateTime)'
    """

    model_config = ConfigDict(frozen=True)

    name: str
    args: tuple[Atom, ...] = ()

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not _IDENTIFIER.fullmatch(v):
            raise ValueError(f"not a function name: {v!r}")
        return v

    def __str__(self) -> str:
        # made once: a call is frozen, and programs, prompts and trajectories print theirs often
        # (kept out of the fields: pydantic compares, hashes and dumps only those)
        text = self.__dict__.get("_text")
        if text is None:
            text = self.__dict__["_text"] = (
                f"{self.name}({', '.join([_render_arg(a) for a in self.args])})")
        return text

    def __copy__(self) -> Call:
        copied = super().__copy__()
        # model_copy(update=...) copies, then changes fields: the text of the old ones must go
        copied.__dict__.pop("_text", None)
        return copied

    def __repr__(self) -> str:
        return f"Call({str(self)!r})"

    @classmethod
    def of(cls, name: str, *args: str | Atom) -> Call:
        """Build a call from argument texts (each lexed as one atom)."""
        return cls(name=name, args=tuple(a if isinstance(a, Atom) else lex_atom(a) for a in args))

    @classmethod
    def parse(cls, text: str, tools: str | Toolset = "sparql") -> Call:
        """Parse exactly one call (agent or Python style)."""
        return parse_call(text, tools)

    def validate_against(self, tools: str | Toolset = "sparql") -> Signature:
        """The signature of this call; raises UnknownFunctionError / ArityError."""
        sig = _toolset(tools).signature(self.name)
        sig.check_arity(len(self.args))
        return sig


def _render_arg(atom: Atom) -> str:
    kind = atom.kind
    if kind is _NAME:
        # a name that would not lex back as one bare argument is written as a quoted string
        value = atom.value
        return value if _name_reads_back(value) else quote_string(value)
    if kind is _VAR:
        return "?" + atom.value
    return str(atom)


@lru_cache(maxsize=1 << 16)
def _name_reads_back(name: str) -> bool:
    """``_reads_back_bare`` of a name, remembered by its text (programs repeat their names)."""
    return _reads_back_bare(Atom(AtomKind.NAME, name))


def _reads_back_bare(atom: Atom) -> bool:
    """Does the atom (a name or an IRI) written bare in an argument list read back as itself?

    ``Ocean's Eleven`` and ``The Green Mile (film)`` do (a quote opens a string only at the start
    of an argument; balanced parentheses are kept), so they print bare and keep their meaning.
    """
    text = str(atom)
    if not text or text != text.strip() or text[0] in "\"'":
        return False
    try:
        pieces = split_arguments(text, 0, len(text))
        if len(pieces) != 1:
            return False
        lexed = lex_atom(pieces[0][0])
    except ParseError:
        return False
    # a name "?x" comes from a variable outside a term slot, where it is read back as a name
    return lexed == atom or (atom.kind is AtomKind.NAME and lexed.kind is AtomKind.VAR
                             and str(lexed) == text)


def _python_arg(piece: str, offset: int, source: str) -> Atom:
    """An argument of the original Python style: a Python literal whose content is an atom."""
    stripped = piece.strip()
    lead = offset + len(piece) - len(piece.lstrip())
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError):
        raise ParseError(f"expected a Python string literal, got {stripped!r}", source, lead) from None
    if isinstance(value, bool) or value is None:
        return Atom(AtomKind.NAME, str(value))
    if isinstance(value, (int, float)):
        return Atom(AtomKind.NUMBER, repr(value))
    if not isinstance(value, str):
        raise ParseError(f"expected a string argument, got {stripped!r}", source, lead)
    try:
        atom = lex_atom(value)
    except ParseError as exc:
        raise ParseError(exc.description, source, lead) from None
    if atom.kind in (AtomKind.NAME, AtomKind.IRI) and not (
            _name_reads_back(atom.value) if atom.kind is AtomKind.NAME else _reads_back_bare(atom)):
        # text the agent style can only write quoted (a comma, an unbalanced parenthesis): it is
        # a string here too, so that the program prints back to what it parsed from
        if atom.kind is AtomKind.IRI:
            raise ParseError(f"not a valid IRI: {value!r}", source, lead)
        return Atom(AtomKind.STRING, atom.value)
    return atom


def _call(name: str, atoms: tuple[Atom, ...], tools: Toolset, contextual: bool) -> Call:
    """The canonical call for a parsed function name and arguments (aliases expanded)."""
    sig = tools._accepting.get((name, len(atoms)))
    if sig is None:  # an alias, or an unknown function / an arity error
        alias = tools.alias(name, len(atoms))
        if alias is not None:
            if not alias.contextual:
                assert alias.expand is not None
                call = alias.expand(atoms)
                name, atoms = call.name, call.args
            elif contextual:  # expanded by the environment (Environment.parse)
                return Call(name=name, args=atoms)
            # else: without an environment it is an unknown function / an arity error as written
        sig = tools.signature(name)
        sig.check_arity(len(atoms))
    return _parsed_call(name, tuple([_canonical(a, p) for a, p in zip(atoms, sig.params)]))


def _parsed_call(name: str, args: tuple[Atom, ...]) -> Call:
    """``Call(name=name, args=args)`` for what the parser made: a function name that matched
    ``_IDENTIFIER`` (or came from an alias's expansion, a Call validated when made), and atoms.

    It sets what pydantic's ``model_construct`` sets, without validating again: half the
    constructor's time (``model_construct`` itself takes longer than the constructor).
    """
    call = _new_object(Call)
    _set_attribute(call, "__dict__", {"name": name, "args": args})
    _set_attribute(call, "__pydantic_fields_set__", {"name", "args"})
    _set_attribute(call, "__pydantic_extra__", None)
    _set_attribute(call, "__pydantic_private__", None)
    return call


_new_object = object.__new__
_set_attribute = object.__setattr__  # a frozen model's own __setattr__ refuses


def _parse_calls(text: str, tools: Toolset, contextual: bool = False) -> list[Call]:
    one = _ONE_PLAIN_CALL.match(text)
    if one is None:
        return _scan_calls(text, tools, contextual, _read_plain_call)
    atoms = _plain_arguments(text, one)
    if atoms is None:  # one call, with a string or an <IRI>: the fast path would only try again
        return _scan_calls(text, tools, contextual)
    return [_call(one[1], atoms, tools, contextual)]  # what _scan_calls makes, without its steps


def _scan_calls(text: str, tools: Toolset, contextual: bool = False,
                read: Callable[..., tuple[Call | None, int]] | None = None) -> list[Call]:
    """The calls written in ``text``, each read by ``read``: by default the full scanner
    (:func:`_read_call`), which reads any call; :func:`_parse_calls` passes its fast path."""
    read = read or _read_call
    receivers: set[str] = set()
    calls: list[Call] = []
    pos = _skip_blank(text, 0)
    while pos < len(text):
        call, pos = read(text, pos, receivers, tools, contextual)
        if call is not None:
            calls.append(call)
            if not _CALL_END.match(text, pos):
                raise ParseError("unexpected text after call", text, pos)
        pos = _skip_blank(text, pos)
    return calls


def _read_plain_call(text: str, pos: int, receivers: set[str], tools: Toolset,
                     contextual: bool) -> tuple[Call | None, int]:
    """:func:`_read_call` for a call ``_PLAIN_CALL`` matches and :func:`_plain_arguments`
    reads, without its steps; any other call it hands to :func:`_read_call`."""
    plain = _PLAIN_CALL.match(text, pos)
    if plain is not None:
        atoms = _plain_arguments(text, plain)
        if atoms is not None:
            return _call(plain[1], atoms, tools, contextual), plain.end()
    return _read_call(text, pos, receivers, tools, contextual)


def _plain_arguments(text: str, plain: re.Match[str]) -> tuple[Atom, ...] | None:
    """The atoms of a call matched by ``_PLAIN_CALL``, as the full scanner reads them.

    None when an argument starts with a quote or an ``<IRI>``: either may hold commas and
    parentheses, so the full scanner (:func:`_read_call`) reads the call.
    """
    inner = plain[2]
    if not inner.strip():
        return ()
    offset = plain.start(2)
    if ('"' in inner or "'" in inner or "<" in inner) and not _all_plain(text, inner, offset):
        return None
    atoms = []
    for piece in inner.split(","):
        atoms.append(lex_atom(piece, offset=offset, source=text))
        offset += len(piece) + 1
    return tuple(atoms)


def _all_plain(text: str, inner: str, offset: int) -> bool:
    """Does no argument in ``inner`` (found at ``text[offset]``) start with a quote or an
    ``<IRI>``, where the full scanner would read a string or an IRI?"""
    for piece in inner.split(","):
        lead = piece.lstrip()
        if lead[:1] in ('"', "'") or (
                lead[:1] == "<" and iri_token_end(text, offset + len(piece) - len(lead)) is not None):
            return False
        offset += len(piece) + 1
    return True


def _read_call(text: str, pos: int, receivers: set[str], tools: Toolset,
               contextual: bool) -> tuple[Call | None, int]:
    """The call written at ``text[pos]`` (None for ``a = PyQL()``, whose ``a`` is added to
    ``receivers``) and where its text ends."""
    start = pos
    name, pos = _identifier(text, pos)
    pos = _skip_inline(text, pos)
    if text.startswith("=", pos):  # a = PyQL()
        ctor_at = _skip_inline(text, pos + 1)
        ctor, pos = _identifier(text, ctor_at)
        pos = _skip_inline(text, pos)
        if ctor not in ("PyQL", "PyQL_SQL", "PyQLSQL") or not text.startswith("()", pos):
            raise ParseError("expected `name = PyQL()`", text, ctor_at)
        receivers.add(name)
        return None, pos + 2
    python_style = False
    if text.startswith(".", pos):
        if name not in receivers:
            raise ParseError(f"{name!r} is not a PyQL object (write `{name} = PyQL()` first)",
                             text, start)
        name, pos = _identifier(text, pos + 1)
        python_style = True
        pos = _skip_inline(text, pos)
    if not text.startswith("(", pos):
        raise ParseError(f"expected '(' after {name!r}", text, pos)
    pieces, close_at = read_arguments(text, pos)
    if python_style:
        atoms = [_python_arg(p, off, text) for p, off in pieces]
    else:
        atoms = [lex_atom(p, offset=off, source=text) for p, off in pieces]
    return _call(name, tuple(atoms), tools, contextual), close_at + 1


def _skip_blank(text: str, pos: int) -> int:
    blank = _BLANK.match(text, pos)
    assert blank is not None  # the pattern matches the empty text
    return blank.end()


def _identifier(text: str, pos: int) -> tuple[str, int]:
    m = _IDENTIFIER.match(text, pos)
    if not m:
        raise ParseError("expected a function call like add_fact(...)", text, pos)
    return m.group(0), m.end()


def _skip_inline(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def parse_call(text: str, tools: str | Toolset = "sparql", *, contextual: bool = False) -> Call:
    """Parse exactly one call; raises ParseError / UnknownFunctionError / ArityError.

    Alias spellings (:class:`Alias`) are read as their canonical call. A contextual alias
    (``relate(r)``) needs an environment: with ``contextual=True`` it is returned as written for
    the environment to expand; otherwise it is an :class:`~pyql.errors.UnknownFunctionError`.
    """
    toolset = _toolset(tools)
    key = (text, contextual)
    found = toolset._parsed.get(key)
    if found is not None:
        return found
    calls = _parse_calls(text, toolset, contextual)
    if len(calls) != 1:
        raise ParseError(f"expected one call, found {len(calls)}", text, 0,
                         kind="no_action" if not calls else "multiple_actions", found=len(calls))
    if len(text) <= _PARSED_TEXT_MAX:
        if len(toolset._parsed) >= _PARSED_MAX:
            toolset._parsed.clear()
        toolset._parsed[key] = calls[0]
    return calls[0]


#: calls a toolset remembers by their text, of at most _PARSED_TEXT_MAX characters (emptied
#: when full)
_PARSED_MAX = 4096
#: the most calls a program may have (:meth:`Program.parse`, ``pyql run``) and a session may
#: run (:attr:`pyql.environment.Environment.max_calls`)
MAX_PROGRAM_CALLS = 10_000
_PARSED_TEXT_MAX = 500


class Program(BaseModel):
    """A list of DSL calls: parses, prints back, replays.

    Equality is by calls and toolset, so ``Program.parse(str(p)) == p``.
    """

    model_config = ConfigDict(frozen=True)

    calls: tuple[Call, ...] = ()
    tools: str = "sparql"

    @classmethod
    def parse(cls, text: str, tools: str | Toolset = "sparql", *,
              max_calls: int | None = None) -> Program:
        """The program ``text`` writes; more than ``max_calls`` calls (default
        :data:`MAX_PROGRAM_CALLS`) is a :class:`~pyql.errors.ProgramTooLongError`."""
        limit = MAX_PROGRAM_CALLS if max_calls is None else max_calls
        toolset = _toolset(tools)
        calls = _parse_calls(text, toolset)
        if len(calls) > limit:
            raise ProgramTooLongError(len(calls), limit)
        return cls(calls=tuple(calls), tools=toolset.name)

    @classmethod
    def of(cls, calls: Sequence[Call | str], tools: str = "sparql") -> Program:
        return cls(
            calls=tuple(c if isinstance(c, Call) else parse_call(c, tools) for c in calls),
            tools=tools,
        )

    def __str__(self) -> str:
        return "\n".join([str(c) for c in self.calls])

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self) -> Iterator[Call]:  # type: ignore[override]
        return iter(self.calls)

    def __getitem__(self, index: int) -> Call:
        return self.calls[index]

    def append(self, call: Call) -> Program:
        # the calls are validated already: no model validation of the whole tuple a step
        return Program.model_construct(calls=(*self.calls, call), tools=self.tools)

    def to_query(
        self, profile: str | Profile = "freebase", entities: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Sparql:
        """Replay the program onto an empty SPARQL query (env calls add nothing).

        Only a SPARQL program replays onto a SPARQL query: a SQL program raises
        :class:`~pyql.errors.ToolsetError` (replay it in a SQL session instead).
        """
        replay = _REPLAYERS.get(self.tools)
        if self.tools != "sparql" or replay is None:
            raise ToolsetError(
                f"a {self.tools} program does not replay onto a SPARQL query; run it in a "
                f"session of its toolset (Session(db, table=...).run_program(program))",
                tools=self.tools, expected="sparql",
            )
        return replay(self, profile, entities, **options)  # type: ignore[no-any-return]

    def to_sparql(
        self, profile: str | Profile = "freebase", entities: Mapping[str, str] | None = None,
        **options: Any,
    ) -> str:
        """Replay and compile to SPARQL text (a SQL program raises ToolsetError)."""
        return self.to_query(profile, entities, **options).to_sparql()


#: toolset name -> ``replay(program, profile, entities, **options)``; each query package
#: registers its own (:mod:`pyql.sparql.apply` registers ``sparql``), so this module does not
#: import the query trees that import it
_REPLAYERS: dict[str, Callable[..., Any]] = {}


def register_replay(tools: str, replay: Callable[..., Any]) -> None:
    """Declare how programs of toolset ``tools`` replay onto a query (see Program.to_query)."""
    _REPLAYERS[_toolset(tools).name] = replay
