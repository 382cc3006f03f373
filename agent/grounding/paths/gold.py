"""The gold path of an evaluation item: its gold program read as a reasoning path (KB) or a
table path (SQL). Readi's and SRP's stand-ins play it; SRP's measures compare with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyql.agent.grounding.paths.path import PathFormatError, ReasoningPath, path_from_program
from pyql.agent.grounding.paths.table import TablePath, table_path_from_program

if TYPE_CHECKING:
    from pyql.agent.strategy import GoldItem

__all__ = ["gold_path"]


def gold_path(item: GoldItem) -> ReasoningPath | TablePath | None:
    """The gold path of an evaluation item (from its gold program), or None without one."""
    program = item.program
    if not program:
        return None
    try:
        if item.tools == "sql":
            return table_path_from_program(program)
        path = path_from_program(program, item.entities)
    except PathFormatError:
        return None
    return path if path.constraints else None
