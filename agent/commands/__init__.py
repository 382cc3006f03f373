"""The command-line commands of the agent layer, each a ``pyql.commands`` entry point:
``ask`` (one question, live), ``eval`` (a dataset, with metrics and resumable results),
``report`` (a run's HTML report), ``prompts`` (prompt statistics) and ``references`` (SRP's
reference base). ``options`` holds the options several of them share. They are the top layer:
they may import anything below, nothing below imports them."""
