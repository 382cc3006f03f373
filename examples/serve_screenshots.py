"""The screenshots of ``pyql serve`` in the docs, taken with headless Chromium (Playwright on the
system browser: ``PYQL_CHROMIUM`` or ``chromium`` on PATH; nothing is downloaded).

::

    python examples/serve_screenshots.py                       # docs/serve-ask.png
    python examples/serve_screenshots.py --compare RUN_A RUN_B # and docs/serve-compare.png

The Ask page answers the demo's second tour on the bundled movie KB with ``--llm gold`` (no
model, no network); ``--compare`` serves two run directories and shows their comparison.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.web.support import chromium, movies_workspace, serve  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", nargs=2, metavar="RUN_DIR", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    browser_path = chromium()
    if browser_path is None:
        raise SystemExit("no Chromium: apt-get install -y chromium, or set PYQL_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as driver:
        runs = Path(scratch) / "runs"
        runs.mkdir()
        for name, run_dir in zip(("a", "b"), args.compare or ()):
            shutil.copytree(run_dir, runs / name)
        browser = driver.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        with serve(movies_workspace(), Path(scratch) / "out", [runs]) as served:
            page.goto(served.url + "/")
            page.select_option("#example", "1")
            page.click("#ask-button")
            page.wait_for_selector("#live[data-state=done]")
            page.screenshot(path=str(args.out / "serve-ask.png"))
            if args.compare:
                page.goto(served.url + "/compare?a=1/a&b=1/b")
                page.screenshot(path=str(args.out / "serve-compare.png"))
        browser.close()


if __name__ == "__main__":
    main()
