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
from dlbench.paths import ROOT

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


@pytest.mark.parametrize("text", ["datasets: [digits]\nframeworks: [pytorch]\npreset: [caffe]\nno_such_key: 1\n",
                                  "repeats: 1\nrepeats: 2\n", None])
def test_validate_a_bad_config_in_one_line(tmp_path, text):
    path = tmp_path / "study.yaml"
    if text is not None:  # None: no such file
        path.write_text(text)
    proc = dlbench("validate", str(path))
    assert proc.returncode != 0 and proc.stdout == ""
    [line] = proc.stderr.splitlines()  # one problem, one line (several are said at once, a line each)
    assert line.startswith("dlbench: config error: ")


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
    (tmp / "mine.txt").write_text("mine")
    (tmp / "list-key.yaml").write_text("? [a, b]\n: 1\ndatasets: [digits]\n")
    (tmp / "unclosed.yaml").write_text("datasets: [digits\n")
    (tmp / "typo.yaml").write_text("datasets: [digits]\nframeworks: [tensorflw]\npreset: [caffe]\n")
    return [
        (("runs-table", str(tmp / "missing.parquet"), str(tmp / "runs.html")), "no file"),
        (("runs-table", str(tmp / "not.parquet"), str(tmp / "runs.html")), "is not a Parquet table"),
        (("runs-table", str(tmp / "not.parquet"), str(tmp / "no-folder" / "runs.html")), "existing folder"),
        (("envs", "key", "nosuch"), "no environment 'nosuch'"),
        (("envs", "build", "pytorch-mlk"), "no environment 'pytorch-mlk'"),
        (("heavy", "--", "no-such-command-here"), "no command 'no-such-command-here'"),
        (("train", "--point", "{bad", "--dataset-dir", str(tmp), "--out", str(tmp / "out")), "not JSON"),
        (("train", "--point", "[1]", "--dataset-dir", str(tmp), "--out", str(tmp / "out")), "not an object"),
        (("compare", str(tmp), str(tmp), "--out", str(tmp / "mine.txt")), "is a file, not a folder; name a folder"),
        (("evidence", "--doc", str(tmp / "missing.md")), "no such file; name the document"),
        (("calibrate", "--json", str(tmp / "no-folder" / "c.json")), "no folder"),
        (("validate", str(tmp / "list-key.yaml")), "line 1, column 3: a key that is a list"),
        (("validate", str(tmp / "unclosed.yaml")), "line 2, column 1: did not find expected ',' or ']'"),
        (("validate", str(tmp / "typo.yaml")), "did you mean 'tensorflow'?"),
    ]


@pytest.mark.parametrize("case", range(14))
def test_bad_input_is_refused_with_exit_2_and_no_traceback(tmp_path, case):
    args, says = _bad_input_cases(tmp_path)[case]
    proc = dlbench(*args)
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and says in proc.stderr.splitlines()[-1], (args, proc.stderr)
    assert proc.stdout == "", (args, proc.stdout)  # nothing done: no table, no simulation, no build
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs.html").exists()
    assert (tmp_path / "mine.txt").read_text() == "mine"


def test_every_config_error_is_said_at_once_each_in_its_own_line(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("datasets: [digits]\nframeworks: [tensorflw]\npreset: [caffe]\nrepeats: 0\n"
                    "sweep: {batchsize: [3]}\n")
    proc = dlbench("validate", str(path))
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 3, proc.stderr
    assert all(ln.startswith("dlbench: config error: ") for ln in lines), lines
    assert any("did you mean 'batch_size'?" in ln for ln in lines) and any("repeats: 0" in ln for ln in lines)


def _careless(tmp: Path) -> list[tuple[list[str], str]]:
    """Each command's other arguments as a careless user gives them: a count below one, a folder where a file
    is wanted, a file where a folder is, a config that is not there."""
    (tmp / "a-file").write_text("mine")
    (tmp / "a-folder").mkdir()
    point = '{"id": "p", "framework": "pytorch", "dataset": "digits", "device": "cpu", "threads": 1}'
    train = ["train", "--dataset-dir", str(tmp), "--point"]
    return [
        (["calibrate", "--replications", "0"], "argument --replications: 0 is below 2"),
        (["calibrate", "--jobs", "0"], "argument --jobs: 0 is below 1"),
        (["calibrate", "--repeats", "-3"], "argument --repeats: -3 is below 1"),
        (["calibrate", "--config", str(tmp / "none.yaml")], "none.yaml: cannot be read"),
        (["calibrate", "--json", str(tmp / "a-folder")], "is a folder; name a file in it"),
        (["peak", "--threads", "0", "--out", str(tmp / "p.json")], "argument --threads: 0 is below 1"),
        (["peak", "--n", "-5", "--out", str(tmp / "p.json")], "argument --n: -5 is below 1"),
        (["peak", "--out", str(tmp / "a-folder")], "is a folder; name the file to write"),
        (["plan", "config/config.yaml", "--iterations", "0"], "argument --iterations: 0 is below 1"),
        (["evidence", "--doc", str(tmp / "a-folder")], "a folder; name the document"),
        ([*train, "{}", "--out", str(tmp / "o")], "the point has no id, framework, dataset, device, threads"),
        ([*train, point, "--out", str(tmp / "a-file")], "a-file is a file; name the folder to write"),
        ([*train, point, "--out", str(tmp / "o"), "--interval", "-1"], "argument --interval: -1 is not a finite"),
        ([*train, point, "--out", str(tmp / "o"), "--time-limit", "nan"], "argument --time-limit: nan is not a"),
        ([*train, point, "--out", str(tmp / "o"), "--attempt", "0"], "argument --attempt: 0 is below 1"),
        ([*train, point, "--out", str(tmp / "o"), "--retries", "-1"], "argument --retries: -1 is below 0"),
        (["prepare", "digits", "--out", str(tmp / "a-file")], "a-file is a file; name the folder to write"),
        (["docs", "--site", str(tmp / "a-file")], "is a file; name a new or empty folder"),
        (["compare", str(tmp), str(tmp), str(tmp / "none"), "--out", str(tmp / "o")], "holds no results"),
        (["compare", str(tmp), str(tmp), "--out", str(tmp / "o"), "--fail-on", "slowr"], "did you mean 'slower'?"),
    ]


@pytest.mark.parametrize("case", range(20))
def test_careless_arguments_are_one_line_and_exit_2_before_any_work(tmp_path, capsys, monkeypatch, case):
    args, says = _careless(tmp_path)[case]
    monkeypatch.chdir(ROOT)  # `plan config/config.yaml`, as from the checkout
    try:
        code = cli.main(args)
    except SystemExit as exc:  # argparse's own refusal: its usage, then its one line
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (args, code, out, err)
    assert says in err.strip().splitlines()[-1], (args, err)
    assert not (tmp_path / "o").exists() and not (tmp_path / "p.json").exists()
    assert (tmp_path / "a-file").read_text() == "mine" and not any((tmp_path / "a-folder").iterdir())
