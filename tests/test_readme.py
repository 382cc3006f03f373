"""The README's example and commands stay true."""

from __future__ import annotations

import re

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def test_thirty_second_example_runs(capsys):
    code = re.search(r"## 30 seconds\n\n```python\n(.*?)```", README, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "SELECT DISTINCT ?cyclone" in out
    assert "add_fact(m.03_r3, location.country.languages_spoken, ?x0)" in out
    assert "execute() -> The value of variable ?film is ['Oppenheimer']" in out


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    test_command = next(c for c in commands if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()


def test_sql_example_runs(capsys):
    code = re.search(r"## SQL\n\n```python\n(.*?)```", README, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "SELECT [Nationality] FROM [players] WHERE [Player] = 'Terrence Ross'" in out
    assert "'Guard'" in out
