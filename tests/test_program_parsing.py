"""The parser's fast paths and the calls' kept text change nothing: on generated texts the fast
path gives the calls, or the errors (type, message, fields), of the full scanner it falls back to
(``_scan_calls``, which every call took before the fast path), lex_atom's memo gives what lexing
afresh gives, and a call prints its kept text as it printed it first."""

from __future__ import annotations

import copy
import os
import pickle
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyql.program as program
import pyql.syntax as syntax
from pyql.program import SPARQL_TOOLS, SQL_TOOLS, Call, Program, Toolset, parse_call
from pyql.syntax import Atom, AtomKind, _plain_atom, lex_atom

SCALE = float(os.environ.get("PYQL_FUZZ_SCALE", "1"))
MANY = settings(max_examples=int(600 * SCALE), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

#: arguments as agents write them, and the near misses around each branch of the scanner
ARGUMENTS = [
    "?x1", "?x", "?", "?1a", "?é", "? x", "?x y", "?x-1", "$x",
    "Temuera Morrison", "m.0x", "starred_actors", "people.person.spouse_s", "x0", "x12", "x",
    "Ocean's Eleven", "The Green Mile (film)", "(film)", "a (b", "a) b", "it's", 'say "hi"',
    "a<b", "<", "<=", ">", ">=", "!=", "=", "<>", "LIKE", "NOT IN", "None", "MAX", "desc",
    '"a, b"', "'x)'", '"(', '"unterminated', "'", '"', '""', '"esc \\" \\n \\u00e9 \\q"',
    '"bad \\u12"', '"2015-08-10"^^xsd:dateTime', '"x"^^<http://x.org/t>', '"x"^^<http://x',
    '"x"^^', '"en"@en', '"bad"@', '"a"b', "12", "-1.5", "+3", ".5", "1e3", "1e", "12^^xsd:int",
    "12@x", "12@", "1998-01-01", "1998^^http://www.w3.org/2001/XMLSchema#gYear",
    "<http://x.org/a,b>", "<http://x.org/a>", "<not iri>", "<a:b> x", "<a:b>)", "<a:b>, c",
    "a^^b", "a^b", "y1998^^xsd:gYear", "a^^http://x.org/t", "a^^<http://x.org/t>", "e@mail", "# not a comment", "a;b", "a\nb", "a\rb", "a\x00b", "\u00a0a",
    "",
]
ALPHABET = st.sampled_from(list("ax1 ?<>\"'(),;#^@.:\\-_\t\n\r\x00\u00a0é"))
PIECE = st.one_of(st.sampled_from(ARGUMENTS), st.text(ALPHABET, max_size=10))
BLANK = st.sampled_from(["", "", " ", "  ", "\t", "\u00a0", "\n"])
ARGUMENT = st.builds(lambda a, b, c: a + b + c, BLANK, PIECE, BLANK)
ARGUMENT_LIST = st.lists(ARGUMENT, max_size=5).map(",".join)
FUNCTIONS = st.one_of(
    st.sampled_from([*SPARQL_TOOLS, *SQL_TOOLS, "relate", "get_relation", "add_time_constrain",
                     "unknown_call", "PyQL", "a", "a.add_fact", "a.set_answer", "1x", "é", ""]),
    st.text(ALPHABET, max_size=6),
)
CALL = st.builds(lambda f, space, args, close: f"{f}{space}({args}{close}", FUNCTIONS,
                 st.sampled_from(["", " ", "\t", "\n"]), ARGUMENT_LIST,
                 st.sampled_from([")", ")", ")", "", "))", ") x", ")#c"]))
SEPARATOR = st.sampled_from(["\n", ";", " ; ", "\r\n", "  # note\n", "\r", " ", "", "\n\n",
                             "# a\n", "\n#"])
PREFIX = st.sampled_from(["", "", " ", "\n", ";", "# plan\n", "a = PyQL()\n", "a=PyQL_SQL();",
                          "b = Foo()\n", "\r"])
TEXT = st.one_of(
    st.builds(lambda prefix, calls, seps, end: prefix + "".join(
        c + s for c, s in zip(calls, seps)) + end,
        PREFIX, st.lists(CALL, max_size=3), st.lists(SEPARATOR, min_size=3, max_size=3),
        st.sampled_from(["", "", " ", "\n", " \n ", ";", "\r", " # end"])),
    st.text(ALPHABET, max_size=30),
)
TOOLS = st.sampled_from([SPARQL_TOOLS, SQL_TOOLS])

#: the four agent-style calls of the benchmark (benchmarks/call_parsing.py)
AGENT_CALLS = ["get_relation(Temuera Morrison)", "add_fact(?x1, starred_actors, Temuera Morrison)",
               "set_answer(?x1)", "execute()"]


#: one call of the fast path's shape with what may surround it
AROUND = st.builds(lambda before, call, after: before + call + after,
                   st.text(st.sampled_from(list(" \t\r\n;#x\x0b\u00a0")), max_size=3),
                   st.sampled_from(AGENT_CALLS),
                   st.text(st.sampled_from(list(" \t\r\n;#x)(\x0b\u00a0")), max_size=4))


def outcome(parse: Callable[..., Any], *args: Any, **options: Any) -> tuple[Any, ...]:
    """What ``parse(*args, **options)`` gives: its calls with their fields and texts (kept, and
    printed afresh by a copy), or its error's type, message and fields."""
    try:
        result = parse(*args, **options)
    except Exception as exc:  # every error must be the same, pyql's or not
        return ("error", type(exc), str(exc), _fields(exc))
    calls = result if isinstance(result, list) else [result]
    return ("calls", [(c.name, c.args, c.model_fields_set) for c in calls],
            [str(c) for c in calls], [str(copy.copy(c)) for c in calls])


def _fields(exc: Exception) -> dict[str, Any]:
    return {k: v for k, v in vars(exc).items() if not k.startswith("__")}


def scanned_call(text: str, tools: Toolset, *, contextual: bool) -> Call:
    """parse_call with every call read by the full scanner, on a toolset that remembers none."""
    fresh = Toolset(tools.name, tools.values(), tools.aliases.values())
    with mock.patch.object(program, "_parse_calls", program._scan_calls):
        return parse_call(text, fresh, contextual=contextual)


@MANY
@given(text=st.one_of(TEXT, AROUND), tools=TOOLS, contextual=st.booleans())
def test_parse_calls_agrees_with_the_full_scanner(text: str, tools: Toolset,
                                                  contextual: bool) -> None:
    assert outcome(program._parse_calls, text, tools, contextual) == outcome(
        program._scan_calls, text, tools, contextual)


@MANY
@given(text=st.one_of(CALL, TEXT, AROUND), tools=TOOLS, contextual=st.booleans())
def test_parse_call_agrees_with_the_full_scanner(text: str, tools: Toolset,
                                                 contextual: bool) -> None:
    scanned = outcome(scanned_call, text, tools, contextual=contextual)
    for _ in range(2):  # the second time from the memo (an error is never remembered)
        assert outcome(parse_call, text, tools, contextual=contextual) == scanned


@MANY
@given(text=st.one_of(ARGUMENT, st.text(ALPHABET, max_size=12)), offset=st.integers(0, 5),
       source=st.one_of(st.none(), st.just("f(0123456789)")))
def test_lex_atom_remembers_what_lexing_gives(text: str, offset: int, source: str | None) -> None:
    assert_lexes_as_afresh(text, offset, source)
    # the memo serves an argument's text wherever it is written
    assert_lexes_as_afresh(f" {text}\t", offset + 2, source)


def assert_lexes_as_afresh(text: str, offset: int, source: str | None) -> None:
    """lex_atom of ``text`` gives what ``_lex`` gives without the memo, the first time and from
    the memo; an error is never remembered."""
    stripped = text.strip()
    afresh = _lexed(syntax._lex, stripped, text, offset, source)
    syntax._LEXED.pop(stripped, None)
    for _ in range(2):  # the second time from the memo
        assert _lexed(lex_atom, text, offset=offset, source=source) == afresh
    remembered = afresh[0] == "atom" and len(stripped) <= syntax._LEXED_TEXT_MAX
    assert (stripped in syntax._LEXED) == remembered
    with mock.patch.object(syntax, "_NOT_PLAIN_FIRST", _EveryCharacter()):
        # what lex_atom decides by the first character alone, it decides as every branch would
        assert _lexed(syntax._lex, stripped, text, offset, source) == afresh
    if afresh[0] == "atom" and afresh[1].kind is not AtomKind.NAME:
        assert program._render_arg(afresh[1]) == str(afresh[1])


@pytest.mark.parametrize("text", ARGUMENTS)
def test_each_argument_lexes_and_parses_alike_on_both_paths(text: str) -> None:
    for written in (text, f" {text}\t"):
        assert_lexes_as_afresh(written, 3, None)
        for call in (f"get_relation({written})", f"add_fact(?x, r,{written})"):
            assert outcome(program._parse_calls, call, SPARQL_TOOLS) == outcome(
                program._scan_calls, call, SPARQL_TOOLS)


class _EveryCharacter:
    """A set of first characters holding every one: no argument is taken for a plain name by its
    first character."""

    def __contains__(self, character: object) -> bool:
        return True


def _lexed(lex: Callable[..., Atom], *args: Any, **options: Any) -> tuple[Any, ...]:
    try:
        atom = lex(*args, **options)
    except Exception as exc:
        return ("error", type(exc), str(exc), _fields(exc))
    return ("atom", atom, type(atom.kind), str(atom))


@MANY
@given(texts=st.lists(st.one_of(st.sampled_from(AGENT_CALLS), CALL), max_size=9))
def test_programs_print_their_kept_texts_as_they_printed_first(texts: list[str]) -> None:
    calls = []
    for text in texts:
        try:
            calls.append(parse_call(text, SPARQL_TOOLS))
        except Exception:
            continue
    first = str(Program(calls=tuple(Call(name=c.name, args=c.args) for c in calls)))
    p = Program(calls=tuple(calls))
    assert str(p) == first
    assert str(p) == first  # the texts kept by the calls


@pytest.mark.parametrize("text", [
    *AGENT_CALLS,
    "  add_fact(?x1, starred_actors, ?x2) ;\n",
    "add_filter(?x1, <, 1990)",
    "add_filter(?x1, !=, Ocean's Eleven)",
    "add_fact(m.0x, people.person.spouse_s, x0)",
    "relate(starred_actors)",
    "get_relation()",
    "get_relation(Temuera Morrison)\nadd_fact(?x1, starred_actors, Temuera Morrison)\nexecute()",
])
def test_agent_style_calls_take_the_fast_path(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    scanned = program._scan_calls(text, SPARQL_TOOLS, True)

    def full_scanner(*args: Any) -> Any:
        raise AssertionError("read by the full scanner")

    monkeypatch.setattr(program, "_read_call", full_scanner)
    assert program._parse_calls(text, SPARQL_TOOLS, True) == scanned


@pytest.mark.parametrize("text", [
    "execute()\r", "execute() \r", "execute()\r\n", "execute() ;\r", "execute()#c",
    "execute() # c\r", "\rexecute()", "execute()\x0b", "execute()\n\x0b", "execute();x",
])
def test_what_follows_a_call(text: str) -> None:
    for tools in (SPARQL_TOOLS, SQL_TOOLS):
        assert outcome(program._parse_calls, text, tools) == outcome(
            program._scan_calls, text, tools)


@pytest.mark.parametrize("text", [
    'add_fact(?x1, name, "a, b")', "get_relation(The Green Mile (film))",
    "add_fact(<http://x.org/a,b>, r, ?y)", "a = PyQL()\na.execute()", "execute(",
    "add_fact(?x, r, ?y) x",
])
def test_other_calls_take_the_full_scanner(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    scanned = outcome(program._scan_calls, text, SPARQL_TOOLS)
    read: list[int] = []
    full = program._read_call

    def full_scanner(*args: Any) -> Any:
        read.append(1)
        return full(*args)

    monkeypatch.setattr(program, "_read_call", full_scanner)
    assert outcome(program._parse_calls, text, SPARQL_TOOLS) == scanned
    assert read or text.endswith(" x")  # "unexpected text after call" is the loop's own check


def test_a_parsed_call_is_the_call_the_constructor_makes() -> None:
    args = (Atom(AtomKind.VAR, "x1"), Atom(AtomKind.NAME, "starred_actors"))
    made, built = program._parsed_call("add_fact", args), Call(name="add_fact", args=args)
    assert made == built and hash(made) == hash(built)
    assert made.__dict__ == built.__dict__
    assert made.model_fields_set == built.model_fields_set
    assert made.__pydantic_extra__ == built.__pydantic_extra__
    assert made.__pydantic_private__ == built.__pydantic_private__
    assert made.model_dump() == built.model_dump()
    assert pickle.loads(pickle.dumps(made)) == built


def test_a_plain_atom_is_the_atom_the_constructor_makes() -> None:
    for kind, value in [(AtomKind.NAME, "Temuera Morrison"), (AtomKind.VAR, "x1")]:
        made, built = _plain_atom(kind, value), Atom(kind, value)
        assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
        assert (made.datatype, made.lang) == (None, None)
        assert pickle.loads(pickle.dumps(made)) == built
        assert replace(made, value="y") == Atom(kind, "y")


def test_a_call_keeps_its_text_and_a_changed_copy_does_not() -> None:
    call = parse_call("add_fact(?x1, starred_actors, Temuera Morrison)", SPARQL_TOOLS)
    text = str(call)
    assert str(call) is text  # made once
    fresh = Call(name=call.name, args=call.args)
    assert call == fresh and fresh == call and hash(call) == hash(fresh)
    assert call.model_dump() == fresh.model_dump()
    assert call.model_dump_json() == fresh.model_dump_json()
    reverse = call.model_copy(update={"args": call.args[::-1]})
    assert str(reverse) == "add_fact(Temuera Morrison, starred_actors, ?x1)"
    deep = call.model_copy(update={"name": "add_type"}, deep=True)
    assert str(deep) == "add_type(?x1, starred_actors, Temuera Morrison)"
    assert str(copy.copy(call)) == str(copy.deepcopy(call)) == text
    assert str(pickle.loads(pickle.dumps(call))) == text
    assert repr(call) == f"Call({text!r})"
