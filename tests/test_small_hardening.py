"""The small ones of issue 36, item 17: a capped syntax-error excerpt, no temporary file left
by a failed write, `kb load` of a huge literal as a typed error, and a store a failed load left
behind refused instead of opened as empty. (The dataset BOM is in test_bounded_datasets.py.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pyql.errors import ParseError
from pyql.kb import open_kb
from pyql.kb.loader import INCOMPLETE, IncompleteStoreError, StoreError, load_store, open_store
from pyql.program import Program


def _pyql(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyql", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_a_syntax_error_shows_an_excerpt_of_a_long_line(tmp_path: Path) -> None:
    program = tmp_path / "parens.pyql"
    program.write_text("(" * 1_000_000 + "\n")
    done = _pyql("compile", f"@{program}", cwd=tmp_path)
    assert done.returncode != 0
    assert len(done.stderr) < 1000, len(done.stderr)
    with pytest.raises(ParseError) as caught:
        Program.parse("get_relation(a)\nadd_fact(" + "x" * 10_000 + ", )")
    shown, caret = caught.value.highlight.splitlines()
    assert len(shown) <= ParseError.HIGHLIGHT_WIDTH + 6 and caret.endswith("^")


def test_a_long_argument_is_clipped_in_a_cli_error(tmp_path: Path) -> None:
    program = tmp_path / "long.pyql"
    program.write_text("get_relation(" + "a" * 1_000_000 + " b)\n")
    done = _pyql("compile", f"@{program}", cwd=tmp_path)
    assert done.returncode != 0 and len(done.stderr) < 5000, len(done.stderr)


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    # a real write failure: the file size limit (RLIMIT_FSIZE) makes write() fail with EFBIG,
    # as a full disk makes it fail with ENOSPC
    script = textwrap.dedent(f"""
        import resource, signal
        from pathlib import Path
        from pyql.agent.evaluation.rundir import write_json_atomic
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
        try:
            write_json_atomic(Path({str(tmp_path)!r}) / "metrics.json", {{"x": "y" * 100_000}})
        except OSError as exc:
            print("failed", exc.errno)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.startswith("failed"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _huge(path: Path) -> Path:
    with path.open("w") as f:
        f.write('<http://e/a> <http://e/p> "ok" .\n')
        f.write('<http://e/a> <http://e/q> "' + "x" * (17 << 20) + '" .\n')  # over 16 MiB
    return path


def test_kb_load_of_a_huge_literal_is_a_typed_error_and_keeps_nothing(tmp_path: Path) -> None:
    source = _huge(tmp_path / "huge.nt")
    with pytest.raises(StoreError) as caught:
        load_store([source], tmp_path / "store")
    assert caught.value.path == str(source) and "too large" in str(caught.value)
    assert not (tmp_path / "store").exists()  # a new store that failed is removed
    done = _pyql("kb", "load", str(source), "--store", str(tmp_path / "store2"), cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert done.stderr.startswith("error: ") and "too large" in done.stderr


def test_a_store_a_failed_load_added_to_is_refused(tmp_path: Path) -> None:
    ok = tmp_path / "ok.nt"
    ok.write_text('<http://e/a> <http://e/p> "ok" .\n')
    store = tmp_path / "store"
    load_store([ok], store)
    assert not (store / INCOMPLETE).exists() and len(open_store(store)) == 1
    with pytest.raises(StoreError):
        load_store([_huge(tmp_path / "huge.nt")], store)
    assert (store / INCOMPLETE).exists()
    with pytest.raises(IncompleteStoreError):
        open_store(store)
    with pytest.raises(IncompleteStoreError):
        open_kb(str(store))
    done = _pyql("run", "--kb", str(store), "get_relation(<http://e/a>)", cwd=tmp_path)
    assert done.returncode != 0 and "incomplete" in done.stderr
    assert "Traceback" not in done.stderr
