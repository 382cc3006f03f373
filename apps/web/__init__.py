"""``pyql serve``: a local web app to watch a question become a query, live, and to browse and
compare evaluation runs (see ``docs/serve.md``).

- **Ask** (``/``): a question, a strategy, an ``--llm`` spec and the strategy's options; every
  step streams to the page as the :class:`~pyql.agent.recorder.Recorder` finalises it
  (server-sent events), and the run is saved as an ordinary run directory with a permalink.
- **Runs** (``/runs``): any ``pyql eval`` run directory, followed while it runs; a question
  page; two runs compared question by question.
- **Playground** (``/playground``): DSL calls typed by hand against the KB/DB, with completion,
  undo and the compiled query.

:func:`create_app` builds the Starlette app from a :class:`ServeConfig`; ``pyql serve`` runs it
with uvicorn (:mod:`pyql.apps.web.cli`).
"""

from __future__ import annotations

from pyql.apps.web.app import ServeConfig, create_app

__all__ = ["ServeConfig", "create_app"]
