"""KB profiles: how a knowledge base names entities and relations, labels nodes, and shows
compound (CVT/blank) nodes.

A profile is data, not an if-chain: the compiler, the terms parser and the Session ask it.

- :data:`FREEBASE`: ``ns:`` prefix, ``m.``/``g.`` ids, ``type.object.name`` (English) labels; a
  node without a name is a CVT shown as ``UnName_Entity``.
- :data:`GENERIC`: any RDF; entities are IRIs or prefixed names, labels are ``rdfs:label``.
- :data:`METAQA`: generic RDF where one entity has one label and the id *is* the label
  (``Kismet``); IRIs are minted under ``http://pyql.dev/metaqa/``.
- :data:`WIKIDATA`: ``wd:Q42`` entities written ``Q42``, truthy ``wdt:P161`` relations written
  ``P161``, statements through ``p:``/``ps:``/``pq:`` (``psv:``/``pqv:`` for value nodes), labels
  ``rdfs:label`` in English, classes ``Q5`` with membership ``wdt:P31/wdt:P279*``.

>>> FREEBASE.entity("m.0crbvqz").iri
'http://rdf.freebase.com/ns/m.0crbvqz'
>>> METAQA.entity("The Green Mile").iri
'http://pyql.dev/metaqa/entity/The_Green_Mile'
>>> METAQA.compact(METAQA.entity("The Green Mile").iri)
'The Green Mile'
>>> WIKIDATA.relation("P161").iri, WIKIDATA.relation("pq:P453").short
('http://www.wikidata.org/prop/direct/P161', 'pq:P453')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import quote, unquote

from pyql.errors import ProfileError, TermError
from pyql.registry import UnknownNameError, lookup
from pyql.terms import RDF_TYPE, XSD, Entity, Relation, RelationPath, validate_iri

__all__ = [
    "Profile",
    "FREEBASE",
    "GENERIC",
    "METAQA",
    "WIKIDATA",
    "get_profile",
    "PROFILES",
    "RelationFilter",
    "RELATION_FILTERS",
    "get_relation_filter",
    "UnknownProfileError",
]

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
FB = "http://rdf.freebase.com/ns/"
METAQA_BASE = "http://pyql.dev/metaqa/"
WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
SKOS = "http://www.w3.org/2004/02/skos/core#"
SCHEMA = "http://schema.org/"
#: the Wikidata RDF namespaces (https://www.mediawiki.org/wiki/Wikibase/Indexing/RDF_Dump_Format)
WIKIDATA_PREFIXES = {
    "wd": WD,
    "wds": WD + "statement/",
    "wdv": "http://www.wikidata.org/value/",
    "wdt": WDT,
    "p": "http://www.wikidata.org/prop/",
    "ps": "http://www.wikidata.org/prop/statement/",
    "psv": "http://www.wikidata.org/prop/statement/value/",
    "pq": "http://www.wikidata.org/prop/qualifier/",
    "pqv": "http://www.wikidata.org/prop/qualifier/value/",
    "wikibase": "http://wikiba.se/ontology#",
    "schema": SCHEMA,
    "skos": SKOS,
}

_STANDARD_PREFIXES = {"rdf": RDF, "rdfs": RDFS, "xsd": XSD, "owl": OWL}
_PREFIXED = re.compile(r"([A-Za-z][\w\-.]*)?:([^\s<>\"{}|^`\\]*)")
#: a property path written in a relation position: ``P131+``, ``P279*``, ``P22|P25``
_PATH = re.compile(r"(?P<one>[\w:.\-]+)(?P<closure>[+*])|[\w:.\-]+(?:\|[\w:.\-]+)+")


#: how many entities/relations a profile remembers having made
_TERM_CACHE = 1 << 16


@dataclass(frozen=True)
class Profile:
    """How one KB names and shows things. Frozen; derive variants with :meth:`with_prefixes`."""

    name: str
    prefixes: Mapping[str, str] = field(default_factory=lambda: dict(_STANDARD_PREFIXES))
    #: namespace of short entity ids (``m.0x`` -> ``ns:m.0x``); None: ids must be IRIs/prefixed
    entity_base: str | None = None
    #: how ids are turned into IRI local names: "raw" (validated as is) or "label" (percent-encoded
    #: with spaces as underscores, reversible)
    id_encoding: str = "raw"
    #: regex of texts that are entity ids by themselves (``m.0x``); None: only via the entity table
    entity_id_pattern: str | None = None
    relation_base: str | None = None
    relation_pattern: str | None = None
    label_predicates: tuple[str, ...] = (RDFS + "label",)
    label_lang: str | None = None
    #: more names of an entity, for entity linking only (Wikidata's ``skos:altLabel``)
    alias_predicates: tuple[str, ...] = ()
    type_predicate: str = RDF_TYPE
    #: how a node without a label is shown (Freebase CVT nodes); None: show its short id
    unnamed_label: str | None = None
    #: relations never listed by get_relation (labels, bookkeeping)
    hidden_relations: frozenset[str] = frozenset()
    #: restrict literal answers to this language (the WebQSP gold queries do)
    answer_lang: str | None = None
    #: the prefix used when printing SPARQL (e.g. ``ns``)
    display_prefix: str | None = None
    #: more prefixes used when printing SPARQL (Wikidata: ``wd wdt p ps pq ...``), declared in
    #: the prologue with :attr:`display_prefix`
    display_prefixes: tuple[str, ...] = ()
    #: class membership goes up this predicate too: ``?x type/subclass* C`` (Wikidata's
    #: ``wdt:P31/wdt:P279*``); None: ``?x type C``
    subclass_predicate: str | None = None
    #: a short id written as a class (``add_type(?x, Q5)``) names an entity (``wd:Q5``); else
    #: classes are relation names (Freebase ``film.film``)
    classes_are_entities: bool = False
    #: ids are opaque (Wikidata's ``P161``, ``Q42``): a model is shown each with its label,
    #: ``P161 (cast member)``, ``Q42 (Douglas Adams)``
    labelled_ids: bool = False
    #: namespaces whose local name is a property id labelled on ``entity_base + id`` (Wikidata:
    #: ``wdt:P161``, ``p:P161``, ``ps:P161``, ``pq:P453`` are labelled on ``wd:P161``)
    property_bases: tuple[str, ...] = ()
    #: terms made by :meth:`entity` / :meth:`relation` (terms are frozen values)
    _terms: dict[tuple[str, str], Entity | Relation] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    #: short forms made by :meth:`compact` (results and relation lists repeat the same IRIs)
    _short: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    # -- naming -------------------------------------------------------------------------------
    def is_entity_id(self, text: str) -> bool:
        return self.entity_id_pattern is not None and re.fullmatch(self.entity_id_pattern, text) is not None

    def expand_prefixed(self, text: str) -> str | None:
        """The IRI for a prefixed name with a known prefix, else None."""
        m = _PREFIXED.fullmatch(text)
        if not m or text.startswith(("http:", "https:")):
            return None
        base = self.prefixes.get(m.group(1) or "")
        if base is None:
            return None
        try:
            return validate_iri(base + m.group(2))
        except TermError:
            return None

    def _encode(self, local: str) -> str:
        if self.id_encoding == "label":
            # quote first ('%' -> %25, ' ' -> %20), then '_' -> %5F and spaces -> '_', so that
            # _decode (unquote after '_' -> ' ') is the exact inverse
            try:
                encoded = quote(local, safe="-.~!$&'()*+,;=:@")
            except UnicodeEncodeError:  # a lone surrogate
                raise TermError(f"{local!r} is not valid unicode text", text=local,
                                expected="an entity name") from None
            return encoded.replace("_", "%5F").replace("%20", "_")
        return local

    def _decode(self, local: str) -> str:
        if self.id_encoding == "label":
            return unquote(local.replace("_", " "))
        return local

    def entity(self, kb_id: str) -> Entity:
        """The entity named ``kb_id`` (a short id, a prefixed name or a full IRI)."""
        found = self._terms.get(("e", kb_id))
        if found is None:
            found = self._remember(("e", kb_id), self._entity(kb_id))
        return found  # type: ignore[return-value]

    def relation(self, name: str) -> Relation:
        """The relation called ``name`` (short name, prefixed name or full IRI)."""
        found = self._terms.get(("r", name))
        if found is None:
            found = self._remember(("r", name), self._relation(name))
        return found  # type: ignore[return-value]

    def _remember(self, key: tuple[str, str], term: Entity | Relation) -> Entity | Relation:
        if len(self._terms) < _TERM_CACHE:
            self._terms[key] = term
        return term

    def _entity(self, kb_id: str) -> Entity:
        if kb_id.startswith("<") and kb_id.endswith(">"):
            return Entity(validate_iri(kb_id[1:-1]), self.compact(kb_id[1:-1]))
        if kb_id.startswith(("http://", "https://", "urn:")):
            return Entity(validate_iri(kb_id), self.compact(kb_id))
        if self.entity_base is not None:
            if self.entity_id_pattern is not None and ":" in kb_id and not self.is_entity_id(kb_id):
                prefixed = self.expand_prefixed(kb_id)  # wd:Q42, wds:Q42-...
                if prefixed is not None:
                    return Entity(prefixed, self.compact(prefixed))
            return Entity(validate_iri(self.entity_base + self._encode(kb_id)), kb_id)
        expanded = self.expand_prefixed(kb_id)
        if expanded is not None:
            return Entity(expanded, kb_id)
        raise TermError(
            f"{kb_id!r} is not an entity of the {self.name} profile (use an IRI or a prefixed name)",
            text=kb_id, expected="an IRI or prefixed name",
        )

    def _relation(self, name: str) -> Relation:
        path = _PATH.fullmatch(name) if self.property_bases else None
        if path is not None:  # P22|P25, P131+, P279* (profiles of property ids: Wikidata)
            if path.group("closure"):
                parts = (self.relation(path.group("one")),)
                op = path.group("closure")
            else:
                parts = tuple(self.relation(part) for part in name.split("|"))
                op = "|"
            return RelationPath(parts[0].iri, name, parts=parts, op=op)
        if name.startswith("<") and name.endswith(">"):
            return Relation(validate_iri(name[1:-1]), self.compact(name[1:-1]))
        if name.startswith(("http://", "https://", "urn:")):
            return Relation(validate_iri(name), self.compact(name))
        expanded = self.expand_prefixed(name) if ":" in name else None
        if expanded is not None:
            return Relation(expanded, name)
        if (self.classes_are_entities and self.entity_base is not None and self.is_entity_id(name)
                and not (self.relation_pattern and re.fullmatch(self.relation_pattern, name))):
            return Relation(validate_iri(self.entity_base + name), name)  # a class: wd:Q5
        if self.relation_base is not None:
            if self.relation_pattern is not None and not re.fullmatch(self.relation_pattern, name):
                raise TermError(
                    f"{name!r} is not a relation name", text=name,
                    expected=f"a relation like {self._relation_example()}",
                )
            return Relation(validate_iri(self.relation_base + name), name)
        raise TermError(
            f"{name!r} is not a relation of the {self.name} profile (use an IRI or a prefixed name)",
            text=name, expected="an IRI or prefixed name",
        )

    def _relation_example(self) -> str:
        if self.name == "wikidata":
            return "P161 (wdt:P161), p:P161, ps:P161 or pq:P453"
        return "people.person.spouse_s" if self is FREEBASE or self.name == "freebase" else "directed_by"

    def compact(self, iri: str) -> str:
        """The short form an LLM reads and writes for ``iri``."""
        found = self._short.get(iri)
        if found is None:
            found = self._compact(iri)
            if len(self._short) < _TERM_CACHE:
                self._short[iri] = found
        return found

    def _compact(self, iri: str) -> str:
        if self.entity_base and iri.startswith(self.entity_base):
            local = iri[len(self.entity_base):]
            if self.id_encoding == "label" or self.is_entity_id(local) or self.entity_id_pattern is None:
                return self._decode(local)
        if self.relation_base and iri.startswith(self.relation_base):
            return iri[len(self.relation_base):]
        for prefix, base in self.prefixes.items():
            # a namespace inside the entity base (Wikidata's wds: statements) is kept
            if (base != self.entity_base and iri.startswith(base)
                    and re.fullmatch(r"[\w\-.]*", iri[len(base):])):
                return f"{prefix}:{iri[len(base):]}"
        if self.entity_base and iri.startswith(self.entity_base):
            return iri[len(self.entity_base):]
        return f"<{iri}>"

    def labelled_by(self, iri: str) -> str | None:
        """The IRI whose label names the term ``iri`` to a model: the property entity of a
        relation in :attr:`property_bases` (``wdt:P161`` -> ``wd:P161``), the IRI itself for an
        entity id, else None.

        >>> WIKIDATA.labelled_by("http://www.wikidata.org/prop/qualifier/P453")
        'http://www.wikidata.org/entity/P453'
        """
        if self.entity_base is None:
            return None
        for base in self.property_bases:
            if iri.startswith(base):
                local = iri[len(base):]
                if self.relation_pattern and re.fullmatch(self.relation_pattern, local):
                    return self.entity_base + local
        if iri.startswith(self.entity_base) and self.is_entity_id(iri[len(self.entity_base):]):
            return iri
        return None

    def with_prefixes(self, **prefixes: str) -> Profile:
        """A copy with more prefixes (``GENERIC.with_prefixes(ex="http://example.org/")``)."""
        for base in prefixes.values():
            validate_iri(base)
        return replace(self, prefixes={**self.prefixes, **prefixes})


FREEBASE = Profile(
    name="freebase",
    prefixes={**_STANDARD_PREFIXES, "ns": FB},
    entity_base=FB,
    entity_id_pattern=r"[mg]\.[0-9a-z_]+",
    relation_base=FB,
    relation_pattern=r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+",
    label_predicates=(FB + "type.object.name",),
    label_lang="en",
    type_predicate=FB + "type.object.type",
    unnamed_label="UnName_Entity",
    hidden_relations=frozenset({FB + "type.object.name", RDFS + "label"}),
    answer_lang="en",
    display_prefix="ns",
)

GENERIC = Profile(
    name="generic",
    hidden_relations=frozenset({RDFS + "label"}),
)

METAQA = Profile(
    name="metaqa",
    prefixes={**_STANDARD_PREFIXES, "e": METAQA_BASE + "entity/", "r": METAQA_BASE + "relation/"},
    entity_base=METAQA_BASE + "entity/",
    id_encoding="label",
    relation_base=METAQA_BASE + "relation/",
    relation_pattern=r"[A-Za-z_][A-Za-z0-9_]*",
    hidden_relations=frozenset({RDFS + "label"}),
)

WIKIDATA = Profile(
    name="wikidata",
    prefixes={**_STANDARD_PREFIXES, **WIKIDATA_PREFIXES},
    entity_base=WD,
    entity_id_pattern=r"[QPL][1-9][0-9]*",
    relation_base=WDT,
    relation_pattern=r"P[1-9][0-9]*",
    label_predicates=(RDFS + "label",),
    label_lang="en",
    alias_predicates=(SKOS + "altLabel",),
    type_predicate=WDT + "P31",
    subclass_predicate=WDT + "P279",
    classes_are_entities=True,
    labelled_ids=True,
    property_bases=tuple(WIKIDATA_PREFIXES[p] for p in ("wdt", "p", "ps", "pq", "psv", "pqv")),
    hidden_relations=frozenset({RDFS + "label", SKOS + "altLabel", SCHEMA + "description",
                                SCHEMA + "name", SKOS + "prefLabel"}),
    answer_lang="en",
    display_prefix="wd",
    display_prefixes=("wdt", "p", "ps", "pq", "psv", "pqv", "wds"),
)


class UnknownProfileError(UnknownNameError, ProfileError):
    """An unknown KB profile or relation filter name (``what`` says which)."""


PROFILES: dict[str, Profile] = {p.name: p for p in (FREEBASE, GENERIC, METAQA, WIKIDATA)}


def get_profile(profile: str | Profile) -> Profile:
    """A profile by name (``"freebase"``, ``"generic"``, ``"metaqa"``, ``"wikidata"``) or as
    given."""
    if isinstance(profile, Profile):
        return profile
    return lookup(PROFILES, profile, "KB profile", UnknownProfileError)


@dataclass(frozen=True)
class RelationFilter:
    """Relations that ``get_relation`` does not list (by their short name): administrative ones
    the original QueryAgent environment hid from the model.

    >>> get_relation_filter("grailqa").hides("type.object.type")
    True
    >>> get_relation_filter("webqsp").hides("type.type.instance"), get_relation_filter("webqsp").hides("owl#sameAs")
    (False, True)
    """

    name: str
    exact: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    #: where the list comes from
    source: str = ""

    def hides(self, relation: str) -> bool:
        return (relation in self.exact or relation.startswith(self.prefixes)
                or any(part in relation for part in self.contains))


#: the original's per-dataset lists: ``abandon_rels`` in cdhx/QueryAgent
#: ag_src/agent_utils/ag_utils.py:168-185 (WebQSP and GraphQ share one, GrailQA hides ``type.*``)
RELATION_FILTERS: dict[str, RelationFilter] = {
    "webqsp": RelationFilter(
        "webqsp", exact=frozenset({"type.object.type", "type.object.name"}),
        prefixes=("common.", "freebase."), contains=("sameAs",),
        source="ag_src/agent_utils/ag_utils.py:170-175"),
    "grailqa": RelationFilter(
        "grailqa", prefixes=("type.", "common.", "freebase."),
        source="ag_src/agent_utils/ag_utils.py:176-178"),
    "graphq": RelationFilter(
        "graphq", exact=frozenset({"type.object.type", "type.object.name"}),
        prefixes=("common.", "freebase."), contains=("sameAs",),
        source="ag_src/agent_utils/ag_utils.py:179-183"),
}


def get_relation_filter(name: str | RelationFilter) -> RelationFilter:
    """A relation filter by name (``webqsp``, ``grailqa``, ``graphq``) or as given."""
    if isinstance(name, RelationFilter):
        return name
    return lookup(RELATION_FILTERS, name, "relation filter", UnknownProfileError)
