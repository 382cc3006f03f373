"""pyql in 30 seconds: build SPARQL by chaining, then answer a question step by step.

Run it from a checkout or anywhere pyql is installed (no server, no key, no network)::

    python examples/quickstart.py
"""

from __future__ import annotations

from dataclasses import replace

from pyql import Program, Session, Sparql
from pyql.demo import movies_path
from pyql.kb import OxigraphKB
from pyql.profiles import GENERIC


def build() -> None:
    # Every call returns a new, immutable query (Freebase profile by default).
    q = (
        Sparql()
        .add_fact("m.0crbvqz", "meteorology.tropical_cyclone.category", "?category")
        .add_fact("?cyclone", "meteorology.tropical_cyclone.category", "?category")
        .add_fact("?cyclone", "meteorology.tropical_cyclone.formed", "?time")
        .add_max("?time")
        .set_answer("?cyclone")
    )
    print(q.to_sparql())
    print()

    # Programs are data: the original PyQL style and the agent style both parse.
    p = Program.parse(
        "a=PyQL()\n"
        "a.add_fact('m.03_r3', 'location.country.languages_spoken', 'x0')\n"
        "a.set_answer('x0')"
    )
    print(p)
    print()


def answer() -> tuple[str, ...]:
    # The movie KB bundled with pyql (80 triples, Turtle); `ex:` names its films and people.
    # display_prefix makes the SPARQL print ex:Film rather than full IRIs.
    profile = replace(GENERIC.with_prefixes(ex="http://example.org/movies/"), display_prefix="ex")
    kb = OxigraphKB.from_file(movies_path(), profile=profile)

    # One question, its linked entities, and the calls an agent would make.
    print("Q: Which film by Christopher Nolan released before 2015 is the longest?")
    s = Session(kb, entities={"Christopher Nolan": "ex:Christopher_Nolan"})
    for action in [
        "get_relation(Christopher Nolan)",
        "add_fact(?film, ex:directed_by, Christopher Nolan)",
        "add_fact(?film, ex:release_year, ?year)",
        "add_filter(?year, <, 2015)",
        "add_fact(?film, ex:runtime_minutes, ?minutes)",
        "add_max(?minutes)",
        "set_answer(?film)",
    ]:
        print(f"{action}\n    -> {s.run(action).text}")

    final = s.run("execute()")
    print(final.text)
    print(s.to_sparql())
    print("answers:", list(final.answers or ()))
    return final.answers or ()


if __name__ == "__main__":
    build()
    answer()
