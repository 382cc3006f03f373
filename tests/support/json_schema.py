"""Hypothesis strategies for the JSON values a reply schema admits.

Covers the keywords pyql's reply formats use (``type`` object/array/string/number/integer/
boolean, ``properties``/``required``/``additionalProperties: false``, ``items``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``, ``enum``, ``const``,
``anyOf``, ``prefixItems`` as a fixed-length tuple); any other keyword is an error, so a format that starts using one is noticed here.
(hypothesis-jsonschema would be the library for this, but its release does not run on the
hypothesis this project pins.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

__all__ = ["from_schema"]

_KNOWN = {"type", "properties", "required", "additionalProperties", "items", "minItems",
          "maxItems", "minLength", "maxLength", "enum", "const", "anyOf", "pattern",
          "description", "prefixItems"}


def from_schema(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under ``schema`` (see the module docstring)."""
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"keywords not covered: {sorted(unknown)}")
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fields = {k: from_schema(v) for k, v in properties.items() if k in required}
        optional = {k: from_schema(v) for k, v in properties.items() if k not in required}
        return st.fixed_dictionaries(fields, optional=optional)
    if kind == "array" and "prefixItems" in schema:
        return st.tuples(*(from_schema(s) for s in schema["prefixItems"])).map(list)
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {"type": "string"})),
                        min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 5))
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda s: schema.get("minLength", 0) <= len(s) <= schema.get("maxLength", 10**6))
        return st.text(min_size=schema.get("minLength", 0),
                       max_size=min(schema.get("maxLength", 200), 200))
    if kind == "number":
        return st.one_of(st.integers(-10**6, 10**6),
                         st.floats(allow_nan=False, allow_infinity=False))
    if kind == "integer":
        return st.integers(-10**6, 10**6)
    if kind == "boolean":
        return st.booleans()
    raise ValueError(f"schema without a type this strategy knows: {dict(schema)}")
