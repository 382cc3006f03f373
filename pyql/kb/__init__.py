"""KB backends: the embedded Oxigraph store and SPARQL endpoints."""

from pyql.kb.base import KB, ensure_read_only
from pyql.kb.oxigraph import OxigraphKB

__all__ = ["KB", "OxigraphKB", "SparqlEndpointKB", "ensure_read_only", "open_kb"]


def __getattr__(name: str):  # httpx2 is imported only when an endpoint is used
    if name == "SparqlEndpointKB":
        from pyql.kb.endpoint import SparqlEndpointKB

        return SparqlEndpointKB
    raise AttributeError(name)


def open_kb(location: str, *, profile: str = "generic") -> KB:
    """A KB from a location: an http(s) URL is an endpoint, a directory an on-disk store, a file
    is loaded into memory."""
    from pathlib import Path

    if location.startswith(("http://", "https://")):
        from pyql.kb.endpoint import SparqlEndpointKB

        return SparqlEndpointKB(location, profile=profile)
    path = Path(location)
    if path.is_dir():
        return OxigraphKB(path=path, profile=profile, read_only=True)
    return OxigraphKB.from_file(path, profile=profile)
