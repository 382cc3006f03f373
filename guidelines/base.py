"""The guideline protocol: one small rule class per ERASER guideline.

A guideline looks at the :class:`~pyql.feedback.Feedback` of one Session step and either returns
a :class:`~pyql.feedback.Hint` (the step was wrong: say what happened and how to fix it) or None.
It is declared, sqlfluff-style, with class attributes that the registry validates at load time:

- ``code``: ``PY``/``KB``/``DB``/``RM`` and three digits (see :data:`CODE_PATTERN`). The prefix
  names the environment whose feedback *detects* the error (the paper's Table 8): ``PY`` the
  Python interpreter (parse/validation), ``KB`` the knowledge base, ``DB`` the SQL toolset's
  database, ``RM`` the reasoning memory. Codes ``x9xx`` are left to third-party plugins.
- ``name``: dotted, lower case (``kb.empty_fact_unlisted_relation``).
- ``needs``: which feedback it reads (``kb``, ``python``, ``memory``); ``{"kb", "memory"}`` is the
  paper's "KB+RM" class.
- ``triggers_on``: the functions and Python/KB statuses it looks at (:func:`on`), so the registry
  asks only the relevant guidelines.
- ``toolsets``: ``"sparql"``, ``"sql"`` or both; ``groups``: free tags for selection.
- the docstring: first line is the description; a ``Bad:`` and a ``Fixed:`` section (indented
  blocks, usually DSL steps) become the documentation.

Hints are data. A guideline never writes prompt mechanics ("re-generate only Thought N+1"): the
agent's renderer adds those.

>>> class NoAnswer(Guideline):
...     '''set_answer was called with nothing to answer.
...
...     Bad:
...         set_answer(?x)
...
...     Fixed:
...         add_fact(m.0x, people.person.spouse_s, ?x)
...     '''
...     code = "RM950"
...     name = "example.no_answer"
...     needs = frozenset({"memory"})
...     triggers_on = on("set_answer", python=ANY)
...     def check(self, feedback):
...         if not feedback.memory.variables:
...             return self.hint("There are no variables yet.")
...         return None
>>> NoAnswer.describe_triggers()
'set_answer; python: any'
>>> NoAnswer.examples()["bad"]
'set_answer(?x)'
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, get_args

from pyql.feedback import Feedback, Hint, KBStatus, PythonStatus

__all__ = [
    "ANY",
    "CODE_PATTERN",
    "NAME_PATTERN",
    "NEEDS",
    "TOOLSETS",
    "PYTHON_STATUSES",
    "KB_STATUSES",
    "Triggers",
    "on",
    "Guideline",
    "env_class",
    "parse_docstring",
]

#: guideline codes: environment prefix + three digits
CODE_PATTERN = re.compile(r"^(PY|KB|DB|RM)[0-9]{3}$")
#: dotted lower-case names (``kb.empty_after_filter``)
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
#: the feedback a guideline may read (the paper's environments)
NEEDS = frozenset({"kb", "python", "memory"})
TOOLSETS = frozenset({"sparql", "sql"})
PYTHON_STATUSES: frozenset[str] = frozenset(get_args(PythonStatus))
KB_STATUSES: frozenset[str] = frozenset(get_args(KBStatus))

#: "any value" for a trigger field
ANY = None

_ENV_ORDER = (("kb", "KB"), ("python", "Python"), ("memory", "RM"))


def env_class(needs: Iterable[str]) -> str:
    """The paper's Table 8 class of a guideline: ``KB``, ``Python``, ``RM``, ``KB+RM``, ...

    >>> env_class({"memory", "kb"}), env_class({"python", "memory"}), env_class({"python"})
    ('KB+RM', 'Python+RM', 'Python')
    """
    have = set(needs)
    return "+".join(label for key, label in _ENV_ORDER if key in have) or "none"


def _frozen(value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset({value})
    return frozenset(value)


@dataclass(frozen=True)
class Triggers:
    """What a guideline looks at: functions and Python/KB statuses (None: any)."""

    functions: frozenset[str] | None = None
    python: frozenset[str] | None = frozenset({"ok"})
    kb: frozenset[str] | None = None

    def matches(self, function: str | None, python: str, kb: str) -> bool:
        if self.functions is not None and function not in self.functions:
            return False
        if self.python is not None and python not in self.python:
            return False
        return self.kb is None or kb in self.kb

    def describe(self) -> str:
        """``add_fact; kb: empty`` (Python status ``ok`` is the default and not shown)."""
        parts = [", ".join(sorted(self.functions)) if self.functions is not None else "any action"]
        if self.python != frozenset({"ok"}):
            parts.append("python: " + (", ".join(sorted(self.python)) if self.python else "any"))
        if self.kb is not None:
            parts.append("kb: " + ", ".join(sorted(self.kb)))
        return "; ".join(parts)


def on(
    *functions: str,
    python: str | Iterable[str] | None = "ok",
    kb: str | Iterable[str] | None = ANY,
) -> Triggers:
    """Declare triggers: ``on("add_fact", kb="empty")``; no functions means any action.

    ``python`` defaults to ``"ok"`` (the action parsed and validated); pass ``ANY`` for any
    status or the statuses (``"arity"``, ``("bad_term", "query_error")``) a guideline reads.
    """
    return Triggers(frozenset(functions) if functions else None, _frozen(python), _frozen(kb))


_SECTION = re.compile(r"^(bad|fixed|anti-pattern|best practice|good)\s*:\s*(.*)$", re.IGNORECASE)
_SECTION_KEY = {"bad": "bad", "anti-pattern": "bad", "fixed": "fixed", "good": "fixed",
                "best practice": "fixed"}


def parse_docstring(doc: str | None) -> dict[str, str]:
    """Split a guideline docstring into ``description``, ``details``, ``bad`` and ``fixed``.

    ``Bad:``/``Fixed:`` (also ``Anti-pattern:``/``Best practice:``) start a section; its body is
    the indented block that follows (or the text after the colon).
    """
    out = {"description": "", "details": "", "bad": "", "fixed": ""}
    if not doc:
        return out
    lines = inspect.cleandoc(doc).splitlines()
    out["description"] = lines[0].strip() if lines else ""
    details: list[str] = []
    current: str | None = None
    blocks: dict[str, list[str]] = {"bad": [], "fixed": []}
    for line in lines[1:]:
        m = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if m:
            current = _SECTION_KEY[m.group(1).lower()]
            if m.group(2):
                blocks[current].append(m.group(2))
            continue
        if current is not None:
            if line.strip() and not line.startswith((" ", "\t")):
                current = None  # back to prose
            else:
                blocks[current].append(line)
                continue
        details.append(line)
    out["details"] = "\n".join(details).strip()
    for key, block in blocks.items():
        out[key] = textwrap.dedent("\n".join(block)).strip()
    return out


class Guideline:
    """Base class of ERASER guidelines. Subclass, set the class attributes, write ``check``."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    needs: ClassVar[frozenset[str]] = frozenset()
    triggers_on: ClassVar[Triggers] = Triggers()
    toolsets: ClassVar[frozenset[str]] = frozenset({"sparql"})
    groups: ClassVar[tuple[str, ...]] = ()

    def check(self, feedback: Feedback) -> Hint | None:  # pragma: no cover - abstract
        """Return a Hint when the step is wrong, else None."""
        raise NotImplementedError

    # -- helpers for subclasses -----------------------------------------------------------------
    def hint(self, message: str, suggestions: Iterable[str] = ()) -> Hint:
        """A Hint carrying this guideline's code and name."""
        return Hint(code=self.code, name=self.name, message=message,
                    suggestions=tuple(dict.fromkeys(suggestions)))

    def hint_options(self, message: str, options: Sequence[str], lead: str) -> Hint:
        """A Hint suggesting ``options`` whose message ends by naming them (`` {lead} a, b.``);
        the message alone when there are none.

        >>> hint = Guideline().hint_options("The query is empty.", ["get_relation(m.0x)"], "Try")
        >>> hint.message, hint.suggestions
        ('The query is empty. Try get_relation(m.0x).', ('get_relation(m.0x)',))
        >>> Guideline().hint_options("The query is empty.", [], "Try").message
        'The query is empty.'
        """
        named = f" {lead} {', '.join(options)}." if options else ""
        return self.hint(message + named, options)

    # -- documentation --------------------------------------------------------------------------
    @classmethod
    def docs(cls) -> dict[str, str]:
        return parse_docstring(cls.__doc__)

    @classmethod
    def description(cls) -> str:
        return cls.docs()["description"]

    @classmethod
    def examples(cls) -> dict[str, str]:
        d = cls.docs()
        return {"bad": d["bad"], "fixed": d["fixed"]}

    @classmethod
    def env_class(cls) -> str:
        return env_class(cls.needs)

    @classmethod
    def describe_triggers(cls) -> str:
        return cls.triggers_on.describe()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.code} {self.name}>"
