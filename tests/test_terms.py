"""Terms: every syntax an LLM writes, what it means for each slot, and that ``str()`` is SPARQL."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyoxigraph as ox
import pytest

from pyql.errors import PyqlError, TermError, UnknownEntityError
from pyql.profiles import FREEBASE, GENERIC, METAQA
from pyql.resolve import Context, Slot, parse_term
from pyql.terms import (
    XSD,
    BlankNode,
    Entity,
    Literal,
    Relation,
    Var,
    validate_iri,
)
from tests.support.sparql import embed

FB = "http://rdf.freebase.com/ns/"
ENTITIES = {"The Green Mile": "m.0green", "Tom Hanks": "m.0bxtg", "x7": "m.0x7"}
CTX = Context(FREEBASE, ENTITIES)
STORE = ox.Store()


def sparql_ok(query: str) -> None:
    """pyoxigraph parses ``query`` (raises SyntaxError otherwise)."""
    STORE.query(query)


# -- what each written form means --------------------------------------------------------------

#: plain numbers, bare dates and booleans: the text as written is the lexical form, and its form
#: gives the datatype
BARE_LITERALS = [
    ("12", "integer"),
    ("-3", "integer"),
    ("+5", "integer"),
    ("1.5", "decimal"),
    (".5", "decimal"),
    ("1e3", "double"),
    ("-2.5E-3", "double"),
    ("2015-08-10", "date"),
    ("2015-08-10T10:30:00", "dateTime"),
    ("2015-08-10T10:30:00Z", "dateTime"),
    ("true", "boolean"),
]

PARSED = [
    # variables: ?x, $x, and the original PyQL's bare x0 where a variable is allowed
    ("?x", Slot.NODE, Var("x")),
    ("?answer_1", Slot.VAR, Var("answer_1")),
    ("x0", Slot.NODE, Var("x0")),
    ("x12", Slot.VAR, Var("x12")),
    (" ?x ", Slot.VAR, Var("x")),
    ("?été", Slot.VAR, Var("été")),
    # Freebase ids
    ("m.0crbvqz", Slot.NODE, Entity(FB + "m.0crbvqz")),
    ("g.11b6dq", Slot.NODE, Entity(FB + "g.11b6dq")),
    ("m.0crbvqz", Slot.ENTITY, Entity(FB + "m.0crbvqz")),
    # linked mentions, bare or quoted, any case
    ("The Green Mile", Slot.NODE, Entity(FB + "m.0green")),
    ('"The Green Mile"', Slot.NODE, Entity(FB + "m.0green")),
    ("'The Green Mile'", Slot.ENTITY, Entity(FB + "m.0green")),
    ("the green mile", Slot.NODE, Entity(FB + "m.0green")),
    ("Tom Hanks", Slot.ENTITY | Slot.LITERAL, Entity(FB + "m.0bxtg")),
    # a mention in the entity table wins over the bare-variable reading
    ("x7", Slot.NODE, Entity(FB + "m.0x7")),
    # typed literals: prefixed datatype, GrailQA's bare full-IRI datatype, <IRI> datatype
    ('"1.0"^^xsd:float', Slot.VALUE, Literal("1.0", XSD + "float")),
    ("1.0^^http://www.w3.org/2001/XMLSchema#float", Slot.VALUE, Literal("1.0", XSD + "float")),
    ("1.0^^<http://www.w3.org/2001/XMLSchema#float>", Slot.VALUE, Literal("1.0", XSD + "float")),
    ("1.0^^xsd:float", Slot.LITERAL, Literal("1.0", XSD + "float")),
    ('"2015-08-10"^^xsd:dateTime', Slot.VALUE, Literal("2015-08-10", XSD + "dateTime")),
    ('"2015-08-10"^^xsd:date', Slot.LITERAL, Literal("2015-08-10", XSD + "date")),
    ('"1859"^^xsd:gYear', Slot.LITERAL, Literal("1859", XSD + "gYear")),
    ('"abc"^^<http://example.org/dt>', Slot.LITERAL, Literal("abc", "http://example.org/dt")),
    # plain numbers, bare dates and booleans, in both slots that take a literal
    *[(text, slot, Literal(text, XSD + datatype))
      for text, datatype in BARE_LITERALS for slot in (Slot.VALUE, Slot.LITERAL)],
    # strings
    ('"hello, world"', Slot.VALUE, Literal("hello, world")),
    ("'single quoted'", Slot.LITERAL, Literal("single quoted")),
    ('"Green Mile"@en', Slot.VALUE, Literal("Green Mile", lang="en")),
    ('"La milla verde"@es-MX', Slot.LITERAL, Literal("La milla verde", lang="es-MX")),
    ('"x"^^xsd:string', Slot.LITERAL, Literal("x")),
    # prefixed names and full IRIs
    ("ns:m.0crbvqz", Slot.NODE, Entity(FB + "m.0crbvqz")),
    ("rdfs:label", Slot.ENTITY, Entity("http://www.w3.org/2000/01/rdf-schema#label")),
    ("<http://example.org/a>", Slot.NODE, Entity("http://example.org/a")),
    ("<urn:isbn:0451450523>", Slot.ENTITY, Entity("urn:isbn:0451450523")),
    # relations and classes
    ("people.person.spouse_s", Slot.RELATION, Relation(FB + "people.person.spouse_s")),
    ("ns:people.person.spouse_s", Slot.RELATION, Relation(FB + "people.person.spouse_s")),
    (f"<{FB}people.person.spouse_s>", Slot.RELATION, Relation(FB + "people.person.spouse_s")),
    ('"people.person.spouse_s"', Slot.RELATION, Relation(FB + "people.person.spouse_s")),
    ("rdf:type", Slot.RELATION, Relation("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")),
    ("film.film", Slot.CLASS, Relation(FB + "film.film")),
]


@pytest.mark.parametrize(("text", "slot", "expected"), PARSED, ids=[p[0] for p in PARSED])
def test_parse_term(text: str, slot: Slot, expected: object) -> None:
    term = parse_term(text, slot, CTX)
    assert term == expected
    assert type(term) is type(expected)
    if isinstance(term, Literal):
        assert (term.datatype, term.lang) == (expected.datatype, expected.lang)  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "slot", "expected"), PARSED, ids=[p[0] for p in PARSED])
def test_str_of_every_parsed_term_is_sparql(text: str, slot: Slot, expected: object) -> None:
    sparql_ok(embed(parse_term(text, slot, CTX)))


def test_short_forms_are_what_the_llm_wrote() -> None:
    assert parse_term("m.0crbvqz", Slot.NODE, CTX).short == "m.0crbvqz"  # type: ignore[union-attr]
    assert parse_term("The Green Mile", Slot.NODE, CTX).short == "m.0green"  # type: ignore[union-attr]
    rel = parse_term(f"<{FB}people.person.spouse_s>", Slot.RELATION, CTX)
    assert rel.short == "people.person.spouse_s"  # type: ignore[union-attr]
    assert parse_term('"1.0"^^xsd:float', Slot.VALUE, CTX).short == "1.0"  # type: ignore[union-attr]


# -- text that is none of the accepted kinds -------------------------------------------------------

#: text in a slot that takes entities which is not linked, not an id and not a variable
NOT_LINKED = [
    ("hello world", Slot.NODE),
    ("Frank Darabont", Slot.ENTITY),  # not linked
    ("x", Slot.NODE),  # not a bare x<digits> variable
    ("$y", Slot.NODE),  # only ?x is a variable ($ starts SQL headers)
    ("X0", Slot.NODE),
    ("x0a", Slot.NODE),
    ("answer", Slot.NODE),
    ("x0", Slot.ENTITY),  # a variable is not allowed here
    ("Ocean's Eleven", Slot.NODE),
    ("2015-08", Slot.NODE),
]

#: text that is no term of the slot's kinds at all
NOT_A_TERM = [
    ("foo", Slot.VAR),
    ("m.0crbvqz", Slot.VAR),
    ('"x0"@en', Slot.VAR),
    ("?x", Slot.ENTITY),
    ("?x", Slot.LITERAL),
    ("12", Slot.ENTITY),
    ("12", Slot.VAR),
    ('"abc"@en', Slot.ENTITY),
    ("<http://example.org/a>", Slot.LITERAL),
    ("not a relation", Slot.RELATION),
    ("spouse", Slot.RELATION),  # Freebase relations are dotted
    ("", Slot.NODE),
    ("   ", Slot.NODE),
    ('"unterminated', Slot.NODE),
    ("?bad-name", Slot.NODE),
    ("?x²", Slot.NODE),  # \w, but not a SPARQL VARNAME
    ('"abc"^^xsd:integer', Slot.VALUE),
    ('"x"^^foo:bar', Slot.VALUE),  # unknown prefix
    ('"x"@en-a', Slot.VALUE),  # not BCP 47
    ("<relative/path>", Slot.NODE),
    ("<http://x.org/%zz>", Slot.NODE),  # bad percent-encoding
    ("<http://x.org/a#b#c>", Slot.NODE),
    ("<http://[bad/>", Slot.NODE),
    ("<http://x.org/a b>", Slot.NODE),
    ('"\ud800"', Slot.VALUE),  # a lone surrogate cannot be sent to any engine
    ("ns:a b", Slot.NODE),
]

REFUSED = [
    *[(text, slot, UnknownEntityError) for text, slot in NOT_LINKED],
    *[(text, slot, TermError) for text, slot in NOT_A_TERM],
]


@pytest.mark.parametrize(("text", "slot", "error"), REFUSED, ids=[repr(r[0]) for r in REFUSED])
def test_refused_text_raises_typed_error(text: str, slot: Slot, error: type[TermError]) -> None:
    with pytest.raises(error) as info:
        parse_term(text, slot, CTX)
    exc = info.value
    assert isinstance(exc, TermError)
    assert exc.expected  # says what was expected
    assert exc.text is not None


@pytest.mark.parametrize("word", ["x", "y", "answer", "X0", "xx0", "x0a", "film", "the_answer"])
def test_unknown_text_is_never_silently_a_variable(word: str) -> None:
    for slot in (Slot.NODE, Slot.VALUE, Slot.ENTITY, Slot.LITERAL):
        try:
            term = parse_term(word, slot, CTX)
        except PyqlError:
            continue
        assert not isinstance(term, Var), (word, slot)


def test_unknown_entity_error_says_what_was_expected() -> None:
    with pytest.raises(UnknownEntityError) as info:
        parse_term("Frank Darabont", Slot.NODE, CTX)
    assert info.value.text == "Frank Darabont"
    assert info.value.expected == Slot.NODE.describe()
    assert "variable" in Slot.NODE.describe() and "literal" in Slot.NODE.describe()


def test_expected_names_the_slot() -> None:
    with pytest.raises(TermError) as info:
        parse_term("foo", Slot.VAR, CTX)
    assert info.value.expected == Slot.VAR.describe()


# -- term values ------------------------------------------------------------------------------------


def test_terms_are_frozen_and_hashable() -> None:
    terms = [Var("x"), Entity(FB + "m.0x"), Relation(FB + "a.b"), Literal("1", XSD + "integer")]
    assert len(set(terms + terms)) == 4
    for term in terms:
        with pytest.raises((AttributeError, TypeError)):
            term.iri = "http://evil/"  # type: ignore[union-attr,misc]


def test_entity_equality_ignores_the_short_id() -> None:
    assert Entity(FB + "m.0x", "m.0x") == Entity(FB + "m.0x", "ns:m.0x")
    assert Relation(FB + "a.b", "a.b") == Relation(FB + "a.b")


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "no-scheme",
        "http://a b",
        "http://a/<x>",
        'http://a/"',
        "http://a/{x}",
        "http://a/|",
        "http://a/^",
        "http://a/`",
        "http://a/\\",
        "http://a/\n",
        "http://x.org/%zz",
        "a:b#c#d",
        "http://x:abc/",
        "http://x.org/\ufffe",
        "http://x.org/\ud800",
    ],
)
def test_invalid_iris_fail_at_construction(bad: str) -> None:
    with pytest.raises(TermError):
        validate_iri(bad)
    with pytest.raises(TermError):
        Entity(bad)
    with pytest.raises(TermError):
        Relation(bad)


@pytest.mark.parametrize(
    "good",
    [
        "http://example.org/a",
        "urn:x",
        "a:",
        "http://ex.org/é",
        "http://x/\U0001f600",
        "http://rdf.freebase.com/ns/m.0_x-y",
        "https://x.org/a?b=c#d",
    ],
)
def test_valid_iris_are_sparql(good: str) -> None:
    assert validate_iri(good) == good
    sparql_ok(embed(Entity(good)))
    sparql_ok(embed(Relation(good)))


@pytest.mark.parametrize("name", ["x", "x0", "_a", "été", "x٣", "ⅷ", "x_y_z", "0x", "a\u00b7b"])
def test_var_names_render_as_sparql(name: str) -> None:
    assert str(Var(name)) == f"?{name}"
    sparql_ok(embed(Var(name)))


@pytest.mark.parametrize("name", ["", "x y", "x-y", "x²", "ª", "𝟘", "x.y", "?x", "x\n"])
def test_invalid_var_names(name: str) -> None:
    with pytest.raises(TermError):
        Var(name)


NASTY = [
    'He said "hi"',
    "back\\slash",
    "trailing backslash \\",
    "new\nline",
    "cr\rlf\r\n",
    "tab\tstop",
    "bell\x07 nul\x00 esc\x1b del\x7f",
    "form\ffeed\bback",
    '"}; DROP ALL; #',
    "'single' quotes",
    '"""triple"""',
    "<http://x> } INSERT DATA { <a> <b> <c> }",
    "DELETE WHERE { ?s ?p ?o }",
    "unicode: é 中文 😀 \u2028 \u200b",
    "",
]


@pytest.mark.parametrize("text", NASTY, ids=[repr(t) for t in NASTY])
def test_literal_rendering_escapes_and_round_trips(text: str) -> None:
    for lit in (Literal(text), Literal(text, lang="en"), Literal(text, "http://example.org/dt")):
        rendered = str(lit)
        assert "\n" not in rendered and "\r" not in rendered
        rows = list(STORE.query(f"SELECT ?v WHERE {{ BIND({rendered} AS ?v) }}"))
        value = rows[0]["v"]
        assert value.value == text
        if lit.lang:
            assert value.language == "en"
        elif lit.datatype:
            assert value.datatype.value == "http://example.org/dt"


def test_literal_datatype_and_language() -> None:
    assert Literal("x", XSD + "string").datatype is None
    assert Literal("x", lang="en").datatype is None
    with pytest.raises(TermError):
        Literal("x", XSD + "integer", lang="en")
    with pytest.raises(TermError):
        Literal("x", lang="not a tag")
    with pytest.raises(TermError):
        Literal("x", "not an iri")


def test_literal_python_values() -> None:
    assert Literal("12", XSD + "integer").value == 12
    assert Literal("1.5", XSD + "decimal").value == Decimal("1.5")
    assert Literal("1.0", XSD + "float").value == 1.0
    assert Literal("2015-08-10", XSD + "date").value == dt.date(2015, 8, 10)
    assert Literal("2015-08-10T10:00:00Z", XSD + "dateTime").value == dt.datetime(
        2015, 8, 10, 10, tzinfo=dt.timezone.utc
    )
    assert Literal("abc", XSD + "integer").value == "abc"  # invalid lexical form: the text
    assert Literal("plain").value == "plain"
    assert Literal("1", XSD + "integer").is_numeric and not Literal("1").is_numeric
    assert Literal("1859", XSD + "gYear").is_temporal
    assert not Literal("1859", XSD + "integer").is_temporal


@pytest.mark.parametrize(
    ("value", "lexical", "datatype"),
    [
        (True, "true", XSD + "boolean"),
        (3, "3", XSD + "integer"),
        (1.5, "1.5", XSD + "double"),
        (Decimal("2.50"), "2.50", XSD + "decimal"),
        (dt.date(2015, 8, 10), "2015-08-10", XSD + "date"),
        (dt.datetime(2015, 8, 10, 1, 2, 3), "2015-08-10T01:02:03", XSD + "dateTime"),
        ("text", "text", None),
    ],
)
def test_literal_of(value: object, lexical: str, datatype: str | None) -> None:
    lit = Literal.of(value)
    assert (lit.lexical, lit.datatype) == (lexical, datatype)
    sparql_ok(embed(lit))


def test_literal_of_refuses_other_types() -> None:
    with pytest.raises(TermError):
        Literal.of(object())


def test_blank_node_renders() -> None:
    assert str(BlankNode("b0")) == "_:b0"


# -- profiles ---------------------------------------------------------------------------------------


def test_generic_profile_terms() -> None:
    ctx = Context(GENERIC.with_prefixes(ex="http://example.org/"), {"Kismet": "ex:kismet"})
    assert parse_term("ex:kismet", Slot.NODE, ctx) == Entity("http://example.org/kismet")
    assert parse_term("Kismet", Slot.NODE, ctx) == Entity("http://example.org/kismet")
    assert parse_term("<http://example.org/a>", Slot.ENTITY, ctx) == Entity("http://example.org/a")
    assert parse_term("ex:directed_by", Slot.RELATION, ctx) == Relation(
        "http://example.org/directed_by"
    )
    with pytest.raises(TermError):  # no relation namespace: a bare name is not a relation
        parse_term("directed_by", Slot.RELATION, ctx)
    with pytest.raises(UnknownEntityError):  # not an id the generic profile recognises
        parse_term("m.0crbvqz", Slot.NODE, ctx)


def test_metaqa_profile_terms() -> None:
    ctx = Context(METAQA, {"The Green Mile": "The Green Mile", "Kismet": "Kismet"})
    mile = parse_term('"The Green Mile"', Slot.NODE, ctx)
    assert mile == Entity("http://pyql.dev/metaqa/entity/The_Green_Mile")
    assert mile.short == "The Green Mile"  # type: ignore[union-attr]
    assert METAQA.compact(mile.iri) == "The Green Mile"  # type: ignore[union-attr]
    assert parse_term("directed_by", Slot.RELATION, ctx) == Relation(
        "http://pyql.dev/metaqa/relation/directed_by"
    )
    odd = METAQA.entity("Amélie (film) 100% under_score")
    assert METAQA.compact(odd.iri) == "Amélie (film) 100% under_score"
    sparql_ok(embed(odd))


def test_entity_table_values_are_ids() -> None:
    # a linked id written as itself is read as that entity
    ctx = Context(GENERIC, {"Kismet": "http://example.org/kismet"})
    assert parse_term("<http://example.org/kismet>", Slot.NODE, ctx) == Entity(
        "http://example.org/kismet"
    )
    assert ctx.is_linked_id("http://example.org/kismet")
    assert ctx.entity_for_mention("KISMET") == "http://example.org/kismet"
    assert ctx.entity_for_mention("nothing") is None


def test_resolution_names_live_in_resolve_only():
    """Slot, Context, parse_term and resolve_atom are pyql.resolve's; pyql.terms no longer
    forwards them (the alias made terms -> resolve -> profiles -> terms a cycle)."""
    import pyql.resolve
    import pyql.terms

    for name in ("Slot", "Context", "parse_term", "resolve_atom"):
        assert hasattr(pyql.resolve, name)
        assert not hasattr(pyql.terms, name)


def test_terms_are_equal_by_kind_and_iri_whatever_their_short_form() -> None:
    a, b = Entity("http://x.org/a", "a"), Entity("http://x.org/a", "other")
    r = Relation("http://x.org/a", "a")
    assert a == b and hash(a) == hash(b) and len({a, b, r}) == 2
    assert a != r  # the same IRI as a node and as a relation are different terms
    assert Var("x") == Var("x") and hash(Var("x")) == hash(Var("x")) and Var("x") != Var("y")
