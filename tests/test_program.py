"""Calls and programs: both input styles, literals with punctuation, errors with positions,
arity per function, and ``str(program)`` round-trips."""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from pyql.errors import ArityError, CallError, ParseError, UnknownFunctionError
from pyql.program import SPARQL_TOOLS, SQL_TOOLS, Call, Program, Signature, parse_call
from pyql.syntax import Atom, AtomKind

AGENT = """\
add_fact(m.03_r3, location.country.languages_spoken, ?x0)
add_filter(?x0, !=, m.03_r3)
set_answer(?x0)
"""

PYTHON = """\
a=PyQL()
a.add_fact('m.03_r3', 'location.country.languages_spoken', 'x0')
a.add_filter('x0', '!=', 'm.03_r3')
a.set_answer('x0')
"""


def test_both_styles_parse_to_the_same_program() -> None:
    agent, python = Program.parse(AGENT), Program.parse(PYTHON)
    assert agent == python
    assert [c.name for c in agent] == ["add_fact", "add_filter", "set_answer"]
    assert agent[0].args[2] == Atom(AtomKind.VAR, "x0")  # bare x0 is a variable where allowed
    assert str(python) == AGENT.rstrip("\n")


def test_python_style_variants() -> None:
    text = (
        "q = PyQL()\n"
        'q.add_fact("m.0x", "people.person.spouse_s", "x1")  # a comment\n'
        "q.add_filter('x1', '>', 3)\n"
        "q.add_filter('x1', '<', 2.5)\n"
        "q.add_time_constrain('x1', 'people.marriage.from', 'people.marriage.to', "
        "'\"2015-08-10\"^^xsd:dateTime', '\"2015-08-10\"^^xsd:dateTime')\n"
    )
    p = Program.parse(text)
    assert len(p) == 4
    assert p[1].args[2] == Atom(AtomKind.NUMBER, "3")
    assert p[2].args[2] == Atom(AtomKind.NUMBER, "2.5")
    assert p[3].args[3] == Atom(AtomKind.STRING, "2015-08-10", datatype="xsd:dateTime")
    assert Program.parse(str(p)) == p


def test_separators_comments_and_blank_lines() -> None:
    text = "# plan\n\nadd_fact(m.0x, a.b, ?y);  set_answer(?y)  # done\n\n   execute()\n"
    assert [c.name for c in Program.parse(text)] == ["add_fact", "set_answer", "execute"]
    assert Program.parse("") == Program()
    assert Program.parse("  \n# nothing\n") == Program()


def test_multiline_call() -> None:
    p = Program.parse("add_fact(\n  m.0x,\n  a.b,\n  ?y\n)")
    assert str(p) == "add_fact(m.0x, a.b, ?y)"


LITERALS = [
    ('"a, b"', "a, b"),
    ('"f(x), g(y)"', "f(x), g(y)"),
    ('"unbalanced ( paren"', "unbalanced ( paren"),
    ('"close ) paren"', "close ) paren"),
    ("'single, quoted'", "single, quoted"),
    ('"it\'s"', "it's"),
    ("'say \"hi\"'", 'say "hi"'),
    ('"esc \\"q\\" and \\\\"', 'esc "q" and \\'),
    ('"multi\\nline"', "multi\nline"),
    ('"# not a comment"', "# not a comment"),
    ('"; not a separator"', "; not a separator"),
]


@pytest.mark.parametrize(("written", "value"), LITERALS, ids=[w for w, _ in LITERALS])
def test_punctuation_inside_literals(written: str, value: str) -> None:
    p = Program.parse(f"add_filter(?x, =, {written})\nset_answer(?x)")
    assert len(p) == 2
    assert p[0].args[2] == Atom(AtomKind.STRING, value)
    assert Program.parse(str(p)) == p


@pytest.mark.parametrize(("written", "value"), LITERALS, ids=[w for w, _ in LITERALS])
def test_punctuation_inside_python_literals(written: str, value: str) -> None:
    py = f"a=PyQL()\na.add_filter('x0', '=', {written!r})"
    p = Program.parse(py)
    assert p[0].args[2] == Atom(AtomKind.STRING, value)


ROUND_TRIPS = [
    AGENT,
    PYTHON,
    "add_fact(Ocean's Eleven, film.film.directed_by, ?d)",
    "add_fact(The Green Mile (film), film.film.directed_by, ?d)",
    'add_fact("The Green Mile", film.film.directed_by, ?d)',
    "add_fact(<http://example.org/a>, <http://example.org/p>, $y)",
    'add_filter(?x, >=, "2015-08-10"^^xsd:dateTime)',
    "add_filter(?x, <=, 1.0^^http://www.w3.org/2001/XMLSchema#float)",
    "add_filter(?x, <>, 3)",
    'add_filter(?x, =, "Green Mile"@en)',
    "add_filter(?x, >, -1.5e3)",
    "add_type(?x, film.film)",
    'add_time_constrain(?m, people.marriage.from, people.marriage.to, "2015-08-10", 2015-01-01)',
    "add_max(?n)\nadd_min(?n)",
    "add_count(?x)\nadd_count(?x, ?n)\nadd_sum(?x, ?s)\nadd_avg(?x)",
    "get_relation(m.0x)\nexecute()",
    'add_filter(?x, =, "tab\\tnew\\nline \\u00e9 \\\\")',
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_str_round_trips(text: str) -> None:
    p = Program.parse(text)
    printed = str(p)
    assert Program.parse(printed) == p
    assert str(Program.parse(printed)) == printed  # printing is canonical


def test_not_equal_operator_is_canonical() -> None:
    assert str(Program.parse("add_filter(?x, <>, 3)")) == "add_filter(?x, !=, 3)"


def test_name_that_cannot_be_written_bare_is_quoted() -> None:
    call = Call(
        name="add_fact",
        args=(Atom(AtomKind.NAME, "a, b"), Atom(AtomKind.NAME, "r.s"), Atom(AtomKind.VAR, "y")),
    )
    assert str(call) == 'add_fact("a, b", r.s, ?y)'
    assert len(Call.parse(str(call)).args) == 3


# -- errors ---------------------------------------------------------------------------------------


def _parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        Program.parse(text)
    assert info.value.text == text
    return info.value


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ('add_fact(m.0x, r.s.t, "unterminated)', '"unterminated'),
        ("add_fact(m.0x, r.s.t, 'unterminated)", "'unterminated"),
        ("a=PyQL()\na.add_fact('m.0x', 'r.s.t', 'x0)", "'x0)"),
    ],
)
def test_unterminated_string_position(text: str, marker: str) -> None:
    exc = _parse_error(text)
    assert exc.position == text.index(marker)
    assert exc.line == text[: exc.position].count("\n") + 1


def test_error_position_on_a_later_line() -> None:
    text = 'add_fact(m.0x, r.s.t, ?y)\n  add_fact(?y, r.s.t, "oops)'
    exc = _parse_error(text)
    assert (exc.line, exc.col) == (2, text.split("\n")[1].index('"') + 1)
    assert exc.highlight.endswith("^")


def test_missing_close_paren() -> None:
    text = "add_fact(m.0x, r.s.t, ?y\nset_answer(?y"
    exc = _parse_error(text)
    assert exc.position == text.index("(")


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("add_fact(m.0x, r.s.t, ?y) set_answer(?y)", 25),  # two calls on a line
        ("add_fact(m.0x, r.s.t, ?y))", 25),
        ("just some text", 5),
        ("(m.0x)", 0),
        ("b.add_fact('m.0x', 'r.s', 'x0')", 0),  # b was never PyQL()
        ("a = Foo()\na.add_fact('m.0x', 'r.s', 'x0')", 4),
        ("a=PyQL()\na.add_fact(m.0x, 'r.s', 'x0')", 20),  # not a Python literal
        ("a=PyQL()\na.add_fact(['m.0x'], 'r.s', 'x0')", 20),
        ("add_fact(?bad-var, r.s, ?y)", 9),
        ('add_fact(m.0x, r.s, "x" y)', 23),
        ("add_fact(m.0x, (r.s, ?y)", 8),  # the call's '(' is never closed
    ],
)
def test_parse_errors_have_positions(text: str, position: int) -> None:
    exc = _parse_error(text)
    assert exc.position == position
    assert exc.description


def test_unknown_function() -> None:
    with pytest.raises(UnknownFunctionError) as info:
        Program.parse("add_fact(m.0x, a.b, ?y)\nadd_relation(?y)")
    assert info.value.function == "add_relation"
    assert set(info.value.available) == set(SPARQL_TOOLS)
    assert isinstance(info.value, CallError)


def test_unknown_function_in_python_style() -> None:
    with pytest.raises(UnknownFunctionError) as info:
        Program.parse("a=PyQL()\na.add_join('x0')")
    assert info.value.function == "add_join"  # an SQL function is not a SPARQL one


def _arity_cases() -> list[tuple[str, Signature, int]]:
    cases = []
    for tools in (SPARQL_TOOLS, SQL_TOOLS):
        for sig in tools.values():
            lo, hi = sig.arity
            cases.append((tools.name, sig, hi + 1))
            if lo > 0:
                cases.append((tools.name, sig, lo - 1))
    return cases


@pytest.mark.parametrize(
    ("tools", "sig", "got"), _arity_cases(), ids=[f"{t}.{s.name}/{n}" for t, s, n in _arity_cases()]
)
def test_wrong_arity_per_function(tools: str, sig: Signature, got: int) -> None:
    text = f"{sig.name}({', '.join(['?a'] * got)})"
    with pytest.raises(ArityError) as info:
        Program.parse(text, tools=tools)
    exc = info.value
    lo, hi = sig.arity
    assert exc.function == sig.name
    assert exc.got == got
    assert exc.expected == (lo if lo == hi else (lo, hi))
    assert exc.signature == str(sig)
    with pytest.raises(ArityError):
        Call.of(sig.name, *["?a"] * got).validate_against(tools)


@pytest.mark.parametrize("sig", list(SPARQL_TOOLS.values()), ids=list(SPARQL_TOOLS))
def test_every_function_accepts_its_arity(sig: Signature) -> None:
    lo, hi = sig.arity
    for n in range(lo, hi + 1):
        call = parse_call(f"{sig.name}({', '.join(['?a'] * n)})")
        assert call.validate_against() is sig
        assert len(call.args) == n


def test_arity_error_for_python_style() -> None:
    with pytest.raises(ArityError) as info:
        Program.parse("a=PyQL()\na.set_answer('x0', 'x1')")
    assert (info.value.expected, info.value.got) == (1, 2)


# -- calls and programs as values -----------------------------------------------------------------


def test_parse_call_needs_exactly_one_call() -> None:
    assert parse_call("execute()") == Call(name="execute")
    for text in ("", "execute()\nexecute()"):
        with pytest.raises(ParseError):
            parse_call(text)


def test_call_values() -> None:
    call = Call.of("add_fact", "m.0x", "a.b", "?y")
    assert call == Call.parse("add_fact(m.0x, a.b, ?y)")
    assert hash(call) == hash(Call.parse("add_fact( m.0x , a.b , ?y )"))
    assert repr(call) == "Call('add_fact(m.0x, a.b, ?y)')"
    with pytest.raises(ValueError):
        Call(name="not a name")
    with pytest.raises(ValueError):  # frozen
        call.name = "x"  # type: ignore[misc]


def test_program_is_immutable() -> None:
    p = Program.parse("add_fact(m.0x, a.b, ?y)")
    q = p.append(Call.parse("set_answer(?y)"))
    assert len(p) == 1 and len(q) == 2
    assert Program.of(["add_fact(m.0x, a.b, ?y)", Call.parse("set_answer(?y)")]) == q
    assert list(q)[1].name == "set_answer"


def test_programs_differ_by_toolset() -> None:
    sparql = Program.parse("execute()")
    sql = Program.parse("execute()", tools="sql")
    assert sparql != sql
    assert sql.tools == "sql"
    with pytest.raises(ValueError):
        Program.parse("execute()", tools="cypher")


def test_sql_toolset_parses_its_own_calls() -> None:
    p = Program.parse(
        'add_condition("Player, Name", =, "Terrence Ross")\nset_answer(Nationality)', tools="sql"
    )
    assert p[0].args[0] == Atom(AtomKind.STRING, "Player, Name")
    assert Program.parse(str(p), tools="sql") == p
    with pytest.raises(UnknownFunctionError):
        Program.parse("add_fact(m.0x, a.b, ?y)", tools="sql")


def test_program_to_sparql_with_entities() -> None:
    p = Program.parse("add_fact(Jamaica, location.country.languages_spoken, ?x)\nset_answer(?x)")
    text = p.to_sparql(entities={"Jamaica": "m.03_r3"})
    assert "ns:m.03_r3" in text
    ox.Store().query(text)
    assert p.to_query(entities={"Jamaica": "m.03_r3"}).answer is not None


def test_toolset_mapping() -> None:
    assert "add_fact" in SPARQL_TOOLS and len(SPARQL_TOOLS) == 12
    assert SPARQL_TOOLS["execute"].role == "terminal"
    assert SPARQL_TOOLS["get_relation"].role == "env"
    assert str(SPARQL_TOOLS["add_count"]) == "add_count(count_var, new_var)"
    assert SPARQL_TOOLS["add_count"].arity == (1, 2)
    assert "sparql" in repr(SPARQL_TOOLS)
    with pytest.raises(UnknownFunctionError):
        SPARQL_TOOLS.signature("nope")


def test_parse_call_remembers_what_a_text_read_as_per_toolset_and_context() -> None:
    call = parse_call("get_relation(?x1)")
    assert call is parse_call("get_relation(?x1)") and call == Call.of("get_relation", "?x1")
    # a contextual alias is left to the environment only when asked: one reading never
    # answers for the other
    assert parse_call("relate(directed_by)", contextual=True) == Call.of("relate", "directed_by")
    with pytest.raises(UnknownFunctionError):
        parse_call("relate(directed_by)")
    assert parse_call("relate(directed_by)", contextual=True).name == "relate"
    for _ in range(2):  # errors are raised every time, never remembered
        with pytest.raises(ParseError):
            parse_call("get_relation(?x1) execute()")
    long_text = f'get_relation("{"x" * 600}")'
    assert parse_call(long_text) == parse_call(long_text)
    assert (long_text, False) not in SPARQL_TOOLS._parsed  # long texts are not kept
