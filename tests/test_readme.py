"""The README's example and commands stay true."""

from __future__ import annotations

import re

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def run_example(section: str, capsys) -> str:
    """Run the Python block that opens the README section ``## <section>``; what it printed."""
    code = re.search(rf"## {re.escape(section)}\n\n```python\n(.*?)```", README, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    return capsys.readouterr().out


def test_thirty_second_example_runs(capsys):
    out = run_example("30 seconds", capsys)
    assert "SELECT DISTINCT ?cyclone" in out
    assert "add_fact(m.03_r3, location.country.languages_spoken, ?x0)" in out
    assert "execute() -> The value of variable ?film is ['Oppenheimer']" in out


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    test_command = next(c for c in commands if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()


def test_sql_example_runs(capsys):
    out = run_example("SQL", capsys)
    assert "SELECT [Nationality] FROM [players] WHERE [Player] = 'Terrence Ross'" in out
    assert "'Guard'" in out


def test_sql_example_runs_outside_the_checkout(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the database comes from pyql.sql.demo.demo_db_path()
    assert "'Guard'" in run_example("SQL", capsys)
