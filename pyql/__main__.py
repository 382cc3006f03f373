"""``python -m pyql``: the same command line as the ``pyql`` script."""

from __future__ import annotations

from pyql.cli import main

if __name__ == "__main__":
    main()
