"""Bounded work in a session (issue 36, item 3): memory linear in the number of calls, and a
cap on program length with a typed error."""

from __future__ import annotations

import gc
import pickle
import subprocess
import sys
import tracemalloc

import pyoxigraph as ox
import pytest

from pyql import Session
from pyql.errors import ProgramTooLongError
from pyql.kb import OxigraphKB
from pyql.memory import History, Memory
from pyql.program import MAX_PROGRAM_CALLS, Call, Program


def _kb() -> OxigraphKB:
    kb = OxigraphKB(profile="generic")
    kb.store.add(ox.Quad(ox.NamedNode("http://e/a"), ox.NamedNode("http://e/p"),
                         ox.NamedNode("http://e/b")))
    return kb


def _retained(calls: int) -> int:
    """Bytes a session keeps after ``calls`` get_relation steps (observations included)."""
    kb = _kb()
    gc.collect()
    tracemalloc.start()
    session = Session(kb, entities={"a": "<http://e/a>"})
    call = Call.parse("get_relation(a)")
    for _ in range(calls):
        session.run(call)
    gc.collect()
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(session.observations) == calls
    return size


def test_session_memory_grows_linearly_with_the_calls() -> None:
    small, large = _retained(400), _retained(1600)
    # linear: 4x the calls keep about 4x the bytes; each step copying the calls so far made it
    # grow with the square (16x)
    assert large / small < 6, (small, large)


def test_every_step_shares_the_history_before_it() -> None:
    session = Session(_kb(), entities={"a": "<http://e/a>"})
    for _ in range(3):
        session.run("get_relation(a)")
    first, last = session.observations[1].feedback.memory, session.memory
    assert len(first.calls) == 1 and len(last.calls) == 3
    assert last.calls == tuple(Call.parse("get_relation(a)") for _ in range(3))


def test_history_is_a_sequence_that_pickles_flat() -> None:
    h = History()
    for i in range(5000):  # deeper than the recursion limit if pickled cell by cell
        h = h.append(i)
    assert pickle.loads(pickle.dumps(h)) == tuple(range(5000))
    assert h[0] == 0 and h[-1] == 4999 and h[10:12] == (10, 11)
    assert Memory(calls=(1, 2)).calls == (1, 2)
    assert isinstance(Memory().with_(calls=[1]).calls, History)


def test_program_longer_than_the_cap_is_a_typed_error() -> None:
    text = "get_relation(a)\n" * (MAX_PROGRAM_CALLS + 1)
    with pytest.raises(ProgramTooLongError) as caught:
        Program.parse(text)
    assert (caught.value.calls, caught.value.limit) == (MAX_PROGRAM_CALLS + 1, MAX_PROGRAM_CALLS)
    assert len(Program.parse("get_relation(a)\n" * 3, max_calls=3)) == 3


def test_session_past_its_cap_raises_the_typed_error() -> None:
    session = Session(_kb(), entities={"a": "<http://e/a>"})
    session.max_calls = 2
    session.run("get_relation(a)")
    session.run("get_relation(a)")
    with pytest.raises(ProgramTooLongError):
        session.run("get_relation(a)")
    session.reset()
    assert session.run("get_relation(a)").ok


def test_pyql_run_refuses_a_program_past_the_cap_in_one_line(tmp_path) -> None:
    kb = tmp_path / "kb.nt"
    kb.write_text("<http://e/a> <http://e/p> <http://e/b> .\n")
    program = tmp_path / "long.pyql"
    program.write_text("get_relation(<http://e/a>)\n" * (MAX_PROGRAM_CALLS + 1))
    done = subprocess.run([sys.executable, "-m", "pyql", "run", "--kb", str(kb), f"@{program}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "at most 10,000 are allowed" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 3
