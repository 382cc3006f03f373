"""Mentions written in a program, linked to the KB by their exact label.

A person writing ``add_fact(Kismet, directed_by, ?d)`` for ``pyql run`` names an entity by its
label. :func:`unlinked_mentions` finds the arguments that no rule of
:func:`~pyql.resolve.resolve_atom` reads (not a variable, an id, a literal or a mention of the
entity table); :func:`link_by_label` looks them up in the KB's labels
(``profile.label_predicates``) with one query and links each label that names exactly one
entity.

This is the core's share of entity linking: exact labels of mentions the program spells out.
Finding mentions in a free-text question, fuzzy matching and ranking candidates belong to the
agent layer (:mod:`pyql.agent.grounding.linking`, used by ``pyql ask``).

>>> from pyql.kb import OxigraphKB
>>> from pyql.program import Program
>>> kb = OxigraphKB(profile="metaqa")
>>> kb.load_bytes(b'<http://pyql.dev/metaqa/entity/Kismet> '
...               b'<http://www.w3.org/2000/01/rdf-schema#label> "Kismet" .', format="ntriples")
>>> program = Program.parse("add_fact(Kismet, directed_by, ?d)")
>>> unlinked_mentions(program, kb.profile, {})
['Kismet']
>>> link_by_label(kb, ["Kismet", "Nobody"])
{'Kismet': 'Kismet'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyql.errors import PyqlError, UnknownEntityError
from pyql.kb.base import KB
from pyql.profiles import Profile
from pyql.program import Program
from pyql.resolve import Context, resolve_atom
from pyql.sparql.compile import compile_label_lookup
from pyql.syntax import AtomKind
from pyql.terms import Entity, Literal

__all__ = ["unlinked_mentions", "link_by_label"]


def unlinked_mentions(program: Program, profile: Profile, entities: Mapping[str, str]
                      ) -> list[str]:
    """The entity arguments of ``program`` that resolve to nothing (in order, once each)."""
    from pyql.program import SPARQL_TOOLS, ParamKind

    ctx = Context(profile, dict(entities))
    found: dict[str, None] = {}
    for call in program:
        try:
            sig = call.validate_against(SPARQL_TOOLS)
        except PyqlError:
            continue
        for param, atom in zip(sig.params, call.args):
            if param.kind is not ParamKind.TERM or atom.kind not in (AtomKind.NAME,
                                                                      AtomKind.STRING):
                continue
            assert param.slot is not None
            try:
                resolve_atom(atom, param.slot, ctx)
            except UnknownEntityError:
                found[atom.value] = None
            except PyqlError:
                continue
    return list(found)


def link_by_label(kb: KB, mentions: Sequence[str], *, timeout: float | None = None
                  ) -> dict[str, str]:
    """``mention -> id`` for each mention that is the label of exactly one entity of ``kb``:
    compared as written, a plain label or one in the profile's language; in an embedded store,
    a label in any language too (``"Inception"@en`` for ``Inception``)."""
    from pyql.kb.oxigraph import OxigraphKB

    profile = kb.profile
    if not mentions or not profile.label_predicates:
        return {}
    named: dict[str, set[str]] = {}
    passes = (False, True) if isinstance(kb, OxigraphKB) else (False,)
    for any_language in passes:
        wanted = [m for m in mentions if m not in named]
        if not wanted:
            break
        query = compile_label_lookup(wanted, profile, any_language=any_language)
        for label, entity in kb.select(query, timeout=timeout, purpose="label").rows:
            if isinstance(label, Literal) and isinstance(entity, Entity):
                named.setdefault(label.lexical, set()).add(entity.short)
    return {m: next(iter(named[m])) for m in mentions if len(named.get(m, ())) == 1}
