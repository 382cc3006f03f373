"""The report in a real browser: headless Chromium runs the page's JS and takes a screenshot.

Skipped only when no Chromium binary is found (Debian: ``apt-get install -y chromium``; or set
``PYQL_CHROMIUM`` to a Chrome/Chromium executable).
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest

from pyql.agent.evaluation.report import PAGE_SIZE, write_report
from tests.evaluation_report.support import copy_run, results, write_results
from tests.support.chromium import SKIP_REASON, chromium

CHROMIUM = chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)


def _run(url: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", *args, url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _dom(url: str, profile: Path) -> str:
    done = _run(url, profile, "--virtual-time-budget=500", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def test_the_script_runs_in_chromium(tmp_path: Path) -> None:
    page = write_report(copy_run(tmp_path))
    dom = _dom(page.as_uri(), tmp_path / "profile")
    assert re.search(r'<html[^>]*class="js"', dom)
    assert re.search(r'id="q-toolbar"[^>]*data-ready="1"', dom)
    assert re.search(r'id="q-count"[^>]*data-count="12"', dom)
    assert "12 questions" in dom
    assert dom.count('style="display: none;"') == 0  # one page: every question shown


def test_paging_and_deep_links(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    rows = results(run)
    write_results(run, [dict(rows[i % len(rows)], id=f"q{i}") for i in range(120)])
    page = write_report(run)
    dom = _dom(page.as_uri() + "#q-110", tmp_path / "profile")
    hidden = len(re.findall(r'<details id="q-\d+" class="q[^"]*"[^>]*style="display: none;"', dom))
    shown = 120 - hidden
    assert shown == 120 - 2 * PAGE_SIZE  # the link to q-110 opened the last page
    assert "page 3 of 3" in dom
    tag = re.search(r'<details id="q-110"[^>]*>', dom)
    assert tag is not None and " open" in tag.group(0)


def test_a_screenshot(tmp_path: Path) -> None:
    page = write_report(copy_run(tmp_path))
    png = tmp_path / "report.png"
    done = _run(page.as_uri(), tmp_path / "profile", f"--screenshot={png}",
                "--window-size=1280,2000", "--hide-scrollbars")
    assert done.returncode == 0, done.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2000)
    assert len(data) > 60_000  # a rendered page, not a blank one
