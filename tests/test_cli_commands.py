"""The `dlbench` command (dlbench/cli.py, pyproject.toml's [project.scripts]), run as a user runs it: through the
console script that `pip install -e .` (scripts/setup.sh) puts beside this Python."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench import cli

DLBENCH = Path(sys.executable).with_name("dlbench")


def dlbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    assert DLBENCH.is_file(), (f"{DLBENCH} is missing: install the package (`{sys.executable} -m pip install "
                               "--no-deps -e .`, as scripts/setup.sh does)")
    return subprocess.run([str(DLBENCH), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def words(text: str) -> str:
    return " ".join(text.split())  # argparse wraps a description at the terminal's width


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_commands_help_says_what_it_does(name):
    proc = dlbench(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: dlbench {name} "), proc.stdout
    assert words(cli.COMMANDS[name].summary) in words(proc.stdout)


@pytest.mark.parametrize("args", [(), ("--help",)])
def test_dlbench_alone_lists_every_command_in_one_line_each(args):
    proc = dlbench(*args)
    assert proc.returncode == 0, proc.stderr
    for name, command in cli.COMMANDS.items():
        assert f"  {name}  " in proc.stdout and command.summary in proc.stdout, name


def test_an_unknown_command_names_the_valid_ones():
    proc = dlbench("estimate", "config/config.yaml")
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("dlbench: no command 'estimate'; the commands are ")
    assert all(name in line for name in cli.COMMANDS)


@pytest.mark.parametrize("text", ["frameworks: [pytorch]\nno_such_key: 1\n", "repeats: 1\nrepeats: 2\n", None])
def test_validate_a_bad_config_in_one_line(tmp_path, text):
    path = tmp_path / "study.yaml"
    if text is not None:  # None: no such file
        path.write_text(text)
    proc = dlbench("validate", str(path))
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.splitlines()  # every problem at once, one line each (the first text lacks `datasets` too)
    assert lines and all(line.startswith("dlbench: config error: ") for line in lines), lines
    assert len(lines) == (2 if text and "no_such_key" in text else 1), lines


def test_compare_without_results_says_so_in_one_line(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    proc = dlbench("compare", "a", "b", "--out", "cmp", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("dlbench: compare: a holds no results: "), line
    assert not (tmp_path / "cmp").exists()


def test_every_module_command_is_its_modules_main_and_python_m_names_it_too():
    for name, command in cli.COMMANDS.items():
        if command.module:
            assert callable(importlib.import_module(command.module).main), name
            spec = importlib.util.find_spec(command.python_m)
            assert spec is not None, name
            if spec.submodule_search_locations:  # a package: `python -m` runs its __main__
                assert importlib.util.find_spec(f"{command.python_m}.__main__") is not None, name


def test_docs_check_finds_the_generated_pages_current():
    assert cli.main(["docs", "--check"]) == 0, "run `dlbench docs`"


def test_version_is_the_one_every_record_carries():
    import dlbench as package
    from dlbench.record import provenance

    proc = dlbench("--version")
    assert proc.returncode == 0 and proc.stdout == f"dlbench {package.__version__}\n", proc
    assert provenance.dlbench_build()["dlbench_version"] == package.__version__


def _bad_input_cases(tmp: Path) -> list[tuple[tuple[str, ...], str]]:
    (tmp / "not.parquet").write_text("not a table")
    return [
        (("runs-table", str(tmp / "missing.parquet"), str(tmp / "runs.html")), "no file"),
        (("runs-table", str(tmp / "not.parquet"), str(tmp / "runs.html")), "is not a Parquet table"),
        (("runs-table", str(tmp / "not.parquet"), str(tmp / "no-folder" / "runs.html")), "existing folder"),
        (("envs", "key", "nosuch"), "no environment 'nosuch'"),
        (("envs", "build", "pytorch-mlk"), "no environment 'pytorch-mlk'"),
        (("heavy", "--", "no-such-command-here"), "no command 'no-such-command-here'"),
        (("train", "--point", "{bad", "--dataset-dir", str(tmp), "--out", str(tmp / "out")), "not JSON"),
        (("train", "--point", "[1]", "--dataset-dir", str(tmp), "--out", str(tmp / "out")), "not an object"),
    ]


@pytest.mark.parametrize("case", range(8))
def test_bad_input_is_refused_with_exit_2_and_no_traceback(tmp_path, case):
    args, says = _bad_input_cases(tmp_path)[case]
    proc = dlbench(*args)
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and says in proc.stderr, (args, proc.stderr)
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs.html").exists()
