"""The lexical layer: atoms, quoting, argument splitting, and error positions."""

from __future__ import annotations

import pytest

from pyql.errors import ParseError
from pyql.syntax import Atom, AtomKind, lex_atom, quote_string, read_arguments, split_arguments

V, IRI, S, N, NAME = AtomKind.VAR, AtomKind.IRI, AtomKind.STRING, AtomKind.NUMBER, AtomKind.NAME
XSD = "http://www.w3.org/2001/XMLSchema#"

NAMES = [
    "m.0crbvqz",
    "people.person.spouse_s",
    "ns:m.0crbvqz",
    "The Green Mile",
    "  The Green Mile  ",
    "Ocean's Eleven",
    "2015-08-10",  # a date is a name lexically; terms give it meaning
    "12abc",
    ">=",
    "<>",
    "x0",
]

LEXED = [
    ("?x", Atom(V, "x")),
    ("$x", Atom(NAME, "$x")),  # only ? starts a variable
    ("  ?x1  ", Atom(V, "x1")),
    ("?été", Atom(V, "été")),
    ("<http://example.org/a>", Atom(IRI, "http://example.org/a")),
    ('"The Green Mile"', Atom(S, "The Green Mile")),
    ("'The Green Mile'", Atom(S, "The Green Mile")),
    ('"a, b (c)"', Atom(S, "a, b (c)")),
    ('"say \\"hi\\""', Atom(S, 'say "hi"')),
    ("'it\\'s'", Atom(S, "it's")),
    ('"tab\\there\\nnew"', Atom(S, "tab\there\nnew")),
    ('"\\u00e9\\U0001F600"', Atom(S, "é😀")),
    ('"C:\\path"', Atom(S, "C:\\path")),  # an unknown escape keeps its backslash
    ('"Green Mile"@en', Atom(S, "Green Mile", lang="en")),
    ('"x"@en-GB', Atom(S, "x", lang="en-GB")),
    ('"1.0"^^xsd:float', Atom(S, "1.0", datatype="xsd:float")),
    ('"1.0"^^<http://www.w3.org/2001/XMLSchema#float>', Atom(S, "1.0", datatype=XSD + "float")),
    ('"2015-08-10"^^xsd:dateTime', Atom(S, "2015-08-10", datatype="xsd:dateTime")),
    ("12", Atom(N, "12")),
    ("-1.5", Atom(N, "-1.5")),
    ("1e3", Atom(N, "1e3")),
    (".5", Atom(N, ".5")),
    ("1.0^^xsd:float", Atom(N, "1.0", datatype="xsd:float")),
    ("1.0^^http://www.w3.org/2001/XMLSchema#float", Atom(N, "1.0", datatype=XSD + "float")),
    ("1.0^^<http://www.w3.org/2001/XMLSchema#float>", Atom(N, "1.0", datatype=XSD + "float")),
    # any other text is a name: itself, without the space around it
    *[(text, Atom(NAME, text.strip())) for text in NAMES],
]


@pytest.mark.parametrize(("text", "atom"), LEXED, ids=[t for t, _ in LEXED])
def test_lex_atom(text: str, atom: Atom) -> None:
    assert lex_atom(text) == atom


@pytest.mark.parametrize(("text", "atom"), LEXED, ids=[t for t, _ in LEXED])
def test_atom_str_lexes_back(text: str, atom: Atom) -> None:
    assert lex_atom(str(atom)) == atom


def test_atom_str_forms() -> None:
    assert str(Atom(V, "x")) == "?x"
    assert str(Atom(IRI, "http://a/b")) == "<http://a/b>"
    assert str(Atom(S, 'a "b"')) == '"a \\"b\\""'
    assert str(Atom(S, "x", lang="en")) == '"x"@en'
    assert str(Atom(S, "1", datatype="xsd:int")) == '"1"^^xsd:int'
    assert str(Atom(N, "1", datatype=XSD + "int")) == f"1^^<{XSD}int>"


LEX_ERRORS = [
    # (text, position of the error)
    ("", 0),
    ("   ", 3),
    ('"unterminated', 0),
    ("'unterminated", 0),
    ('"trailing backslash\\', 19),
    ('"bad \\u12"', 5),
    ('"bad \\U0000zz00"', 5),
    ('"\\uD800"', 1),  # a surrogate escape is not a character
    ('"x"@', 3),
    ('"x"^^', 5),
    ('"x"^^<http://a', 5),
    ('"x" y', 3),
    ("?bad-name", 0),
    ("?x y", 0),
    ("a\nb", 0),
    ("nul\x00", 0),
]


@pytest.mark.parametrize(("text", "position"), LEX_ERRORS, ids=[repr(t) for t, _ in LEX_ERRORS])
def test_lex_errors_have_positions(text: str, position: int) -> None:
    with pytest.raises(ParseError) as info:
        lex_atom(text)
    exc = info.value
    assert exc.description
    assert exc.position == position
    assert exc.text == text


def test_lex_error_position_is_relative_to_the_source() -> None:
    source = 'add_fact(?x, r.s.t, "oops)'
    with pytest.raises(ParseError) as info:
        lex_atom(source[19:], offset=19, source=source)
    assert info.value.text == source
    assert info.value.position == 20
    assert (info.value.line, info.value.col) == (1, 21)


def test_parse_error_line_col_and_highlight() -> None:
    text = "first line\nsecond $%^ line"
    exc = ParseError("boom", text, text.index("$"))
    assert (exc.line, exc.col) == (2, 8)
    assert exc.highlight == "second $%^ line\n       ^"
    assert ParseError("no text").line == 1
    assert ParseError("clamped", "ab", 99).position == 2


@pytest.mark.parametrize(
    "value",
    [
        "",
        "plain",
        'q"uote',
        "back\\slash",
        "new\nline",
        "\r\t\b\f",
        "\x00\x01\x1f\x7f",
        "é 中文 😀",
        "\u2028",
        "'single'",
    ],
)
def test_quote_string_round_trips(value: str) -> None:
    quoted = quote_string(value)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert all(ord(c) >= 0x20 and c != "\x7f" for c in quoted)
    assert lex_atom(quoted) == Atom(S, value)


def test_split_arguments_protects_quotes_and_parentheses() -> None:
    text = "f(a, \"b, c\", (d, e), 'x)', g(h, i))"
    pieces = split_arguments(text, 2, len(text) - 1)
    assert [p.strip() for p, _ in pieces] == ["a", '"b, c"', "(d, e)", "'x)'", "g(h, i)"]
    for piece, offset in pieces:
        assert text[offset : offset + len(piece)] == piece


def test_split_arguments_quote_inside_a_name_is_text() -> None:
    text = "Ocean's Eleven, r.s.t, ?y"
    pieces = split_arguments(text, 0, len(text))
    assert [p.strip() for p, _ in pieces] == ["Ocean's Eleven", "r.s.t", "?y"]


def test_split_arguments_empty() -> None:
    assert split_arguments("f()", 2, 2) == []
    assert split_arguments("f(  )", 2, 4) == []
    assert [p for p, _ in split_arguments("f(a,)", 2, 4)] == ["a", ""]


@pytest.mark.parametrize(
    ("text", "position"),
    [("a, (b", 0), ("a), b", 1), ('a, "b', 3)],
)
def test_split_arguments_errors(text: str, position: int) -> None:
    with pytest.raises(ParseError) as info:
        split_arguments(text, 0, len(text))
    assert info.value.position == position


def test_read_arguments_stops_at_the_closing_paren() -> None:
    text = "f(a, \"b)\", <http://x.org/p,q>, g(h, i)) # rest (with a paren"
    pieces, close = read_arguments(text, 1)
    assert close == text.index(") #")
    assert [p.strip() for p, _ in pieces] == ["a", '"b)"', "<http://x.org/p,q>", "g(h, i)"]
    assert read_arguments("f()", 1) == ([], 2)


@pytest.mark.parametrize(
    ("text", "description", "position"),
    [("f(a, g(b)", "missing ')'", 1), ('f(a, "b)', "unterminated string", 5)],
)
def test_read_arguments_errors(text: str, description: str, position: int) -> None:
    with pytest.raises(ParseError) as info:
        read_arguments(text, 1)
    assert (info.value.description, info.value.position) == (description, position)
