"""pyql's built-in guideline packs, registered through the ``pyql.guidelines`` entry points.

- :mod:`~pyql.guidelines.packs.python`: the shape of an action (both toolsets);
- :mod:`~pyql.guidelines.packs.kb`: the SPARQL toolset over a knowledge base;
- :mod:`~pyql.guidelines.packs.sql`: the SQL toolset over a database.
"""

from __future__ import annotations

__all__: list[str] = []
