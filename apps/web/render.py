"""HTML of the web app: its Jinja2 templates (autoescaped: labels, observations and replies are
data), the report's templates and filters reused, and highlighted SPARQL/SQL.

Highlighting is Pygments' (it escapes every token it writes); everything else a template shows
is escaped by Jinja2's autoescape, and data for the page's scripts goes in
``<script type="application/json">`` through ``tojson`` (which escapes ``<``, ``>`` and ``&``).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

import jinja2
from markupsafe import Markup

from pyql.errors import PyqlError

__all__ = ["guideline_info", "highlight", "hint_info", "templates"]

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def templates() -> jinja2.Environment:
    """The app's templates, over the report's (``report/*.html.j2``: its summary and guideline
    tables), with the report's filters and globals."""
    from pyql.agent.evaluation.report import report_templates

    base = report_templates()
    env = base.overlay(loader=jinja2.ChoiceLoader([
        jinja2.PackageLoader("pyql.apps.web", "templates"), base.loader]))
    env.filters["highlight"] = highlight
    return env


def highlight(text: str, language: str) -> Markup:
    """``text`` as highlighted HTML (``<pre class="code">``): SPARQL or SQL by Pygments."""
    from pygments import highlight as pyg_highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import SparqlLexer, SqlLexer

    lexer = SqlLexer() if language == "sql" else SparqlLexer()
    html = pyg_highlight(text, lexer, HtmlFormatter(nowrap=True))
    return Markup(f'<pre class="code hl">{html}</pre>')  # noqa: S704 - Pygments escapes


@lru_cache(maxsize=1)
def guideline_info() -> dict[str, dict[str, str]]:
    """code -> name, class, description, anti-pattern and best practice of each installed
    guideline (empty when the registry cannot be loaded)."""
    try:
        from pyql.guidelines import default_registry
        from pyql.guidelines.base import parse_docstring

        registry = default_registry()
    except (ImportError, PyqlError) as exc:
        log.warning("guideline registry not available: %s", exc)
        return {}
    out = {}
    for g in registry:
        doc = parse_docstring(type(g).__doc__)
        out[g.code] = {"code": g.code, "name": g.name, "class": g.env_class(),
                       **{k: str(v) for k, v in doc.items() if isinstance(v, str)}}
    return out


def hint_info(code: str) -> dict[str, Any]:
    """What a hint shows: its code, the guideline's name and the link to its page."""
    info = guideline_info().get(code, {})
    return {"code": code, "name": info.get("name", ""), "link": f"/guidelines/{code}"}
