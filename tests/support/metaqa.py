"""Small in-memory MetaQA knowledge bases for tests."""

from __future__ import annotations

from pyql.kb import OxigraphKB
from pyql.profiles import METAQA


def metaqa_kb(lines: str) -> OxigraphKB:
    """An in-memory MetaQA-profile KB from ``head|relation|tail`` lines."""
    triples = []
    for line in lines.splitlines():
        if line.strip():
            head, relation, tail = line.split("|")
            triples.append(f"<{METAQA.entity(head).iri}> <{METAQA.relation(relation).iri}> "
                           f"<{METAQA.entity(tail).iri}> .")
    kb = OxigraphKB(profile="metaqa")
    kb.load_bytes("\n".join(triples).encode(), format="ntriples")
    return kb
