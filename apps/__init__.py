"""``pyql.apps``: the applications on top of pyql — the layer above the agent and the evaluation.

An app may import anything below it (the core, the guidelines, the agent, the evaluation);
nothing below imports an app. :mod:`pyql.apps.web` is ``pyql serve``, the local web app.
"""
