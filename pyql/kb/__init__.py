"""KB backends: the embedded Oxigraph store and SPARQL endpoints."""

from pyql.errors import LocationError, ProfileError
from pyql.kb.base import KB, ensure_read_only
from pyql.kb.oxigraph import OxigraphKB

__all__ = ["KB", "OxigraphKB", "SparqlEndpointKB", "ensure_read_only", "open_kb"]


def __getattr__(name: str):  # httpx2 is imported only when an endpoint is used
    if name == "SparqlEndpointKB":
        from pyql.kb.endpoint import SparqlEndpointKB

        return SparqlEndpointKB
    raise AttributeError(name)


def open_kb(location: str, *, profile: str | None = None, timeout: float | None = None) -> KB:
    """A KB from a location: an http(s) URL is an endpoint, a directory an on-disk store,
    MetaQA's ``kb.txt`` (a ``.txt`` file of ``head|relation|tail`` lines) the MetaQA KB, and any
    other file RDF loaded into memory (its format told by its extension).

    ``profile`` defaults to ``metaqa`` for a kb.txt and ``generic`` for anything else; a kb.txt
    takes no other profile (:class:`~pyql.errors.ProfileError`). Anything else is a
    :class:`~pyql.errors.LocationError`. ``timeout`` is the wall-clock seconds a query gets
    (None: an endpoint's default; the embedded store's queries then have no time limit, and with
    one each runs in a child process that is stopped when the time is up). Every ``--kb`` goes
    through here (``pyql run``, ``pyql ask``, ``pyql eval``, ``pyql mcp``)."""
    from pathlib import Path

    if location.startswith(("http://", "https://")):
        from pyql.kb.endpoint import SparqlEndpointKB

        options = {} if timeout is None else {"timeout": timeout}
        return SparqlEndpointKB(location, profile=profile or "generic", **options)
    path = Path(location).expanduser()
    if not path.exists():
        raise LocationError(location, kind="kb")
    if path.is_dir():
        from pyql.kb.loader import check_complete

        check_complete(path)  # a store a `pyql kb load` did not finish is not opened as is
        return OxigraphKB(path=path, profile=profile or "generic", read_only=True, timeout=timeout)
    if path.suffix == ".txt" and path.is_file():
        if profile not in (None, "metaqa"):
            raise ProfileError(
                f"a .txt KB is read as MetaQA's kb.txt (profile metaqa), not {profile!r}"
            )
        from pyql.datasets.metaqa import cache_store_dir, load_kb

        # parsed once into a cached store, then reopened (pyql.datasets.metaqa.cache_store_dir)
        kb = load_kb(path, store_dir=cache_store_dir(path))
    else:
        kb = OxigraphKB.from_file(path, profile=profile or "generic")
    kb.timeout = timeout
    return kb
