"""A store's label index: every ``(entity id, label)`` pair of a profile, written next to the
store by ``pyql kb load --labels PROFILE`` and read back without a query (offline linking).

The pairs are the profile's labels *and aliases* (:attr:`~pyql.profiles.Profile.
alias_predicates`: Wikidata's ``skos:altLabel``), in the profile's language or untagged, as
:func:`pyql.sparql.compile.compile_label_scan` reads them; the id is the profile's short form
(``Q42``). Entity linking (:class:`pyql.agent.grounding.linking.LabelIndex`) normalises and indexes them
(exact, normalised and fuzzy matches); for a store that has this file it reads the file instead
of scanning the store.

The file is ``labels/<profile>.json.gz`` in the store directory: ``{"profile", "triples",
"entries": [[id, label], ...]}``, ``triples`` the store's size when it was written (an index of
a store loaded since is stale and ignored).

>>> from pyql.kb import OxigraphKB
>>> kb = OxigraphKB(profile="wikidata")
>>> kb.load_bytes(b'''@prefix wd: <http://www.wikidata.org/entity/> .
... wd:Q42 <http://www.w3.org/2000/01/rdf-schema#label> "Douglas Adams"@en , "Douglas Adams"@de ;
...     <http://www.w3.org/2004/02/skos/core#altLabel> "DNA"@en .''')
>>> sorted(label_pairs(kb))
[('Q42', 'DNA'), ('Q42', 'Douglas Adams')]
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyql.profiles import Profile, get_profile
from pyql.terms import Entity, Literal

if TYPE_CHECKING:
    from pyql.kb.base import KB

__all__ = ["label_pairs", "label_index_path", "write_label_index", "read_label_index"]

log = logging.getLogger(__name__)

LABELS_DIR = "labels"


def label_pairs(kb: KB) -> list[tuple[str, str]]:
    """``(short id, label)`` of every labelled (or aliased) entity of ``kb``, in one scan."""
    from pyql.sparql.compile import compile_label_scan

    profile = kb.profile
    if not profile.label_predicates:
        return []
    out: dict[tuple[str, str], None] = {}
    for entity, label in kb.select(compile_label_scan(profile), purpose="label").rows:
        if isinstance(entity, Entity) and isinstance(label, Literal) and label.lexical.strip():
            out[(entity.short, label.lexical)] = None
    return list(out)


def label_index_path(store_dir: str | Path, profile: str | Profile) -> Path:
    return Path(store_dir) / LABELS_DIR / f"{get_profile(profile).name}.json.gz"


def write_label_index(store_dir: str | Path, profile: str | Profile) -> tuple[Path, int]:
    """Scan the store at ``store_dir`` with ``profile`` and write its label index; the path and
    the number of pairs."""
    from pyql.kb.oxigraph import OxigraphKB

    prof = get_profile(profile)
    kb = OxigraphKB(path=store_dir, profile=prof, read_only=True)
    try:
        pairs = label_pairs(kb)
        triples = len(kb)
    finally:
        kb.close()
    path = label_index_path(store_dir, prof)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        json.dump({"profile": prof.name, "triples": triples, "entries": pairs}, handle,
                  ensure_ascii=False)
    tmp.replace(path)
    return path, len(pairs)


def read_label_index(kb: Any) -> list[tuple[str, str]] | None:
    """The pairs of the label index written for ``kb``'s store and profile, or None when
    ``kb`` is not an on-disk store, has no index for its profile, or was loaded since."""
    store_dir = getattr(kb, "path", None)
    if store_dir is None:
        return None
    path = label_index_path(store_dir, kb.profile)
    if not path.is_file():
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            payload = json.load(handle)
        if payload.get("triples") != len(kb):
            log.info("the label index %s is older than its store; not used", path)
            return None
        return [(str(i), str(label)) for i, label in payload["entries"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring the label index %s: %s", path, exc)
        return None
