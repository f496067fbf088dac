"""Code digests of what a job does, not how it is written: found by parsing, each one-line change checked against
the jobs it must rerun (the same counts the workflow's dry runs show, tests/test_workflow.py, on the digests
alone)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dlbench.frameworks import registry
from dlbench.paths import PACKAGE
from dlbench.rules import code_digest, code_modules

FRAMEWORKS = registry.names()


def modules(roots, package: Path = PACKAGE) -> set[str]:
    return {name.removeprefix("dlbench.") for name in code_modules.closure(roots, package)}


def test_each_job_imports_what_it_runs_and_not_the_words_or_the_tables():
    for framework in FRAMEWORKS:
        training = modules(code_digest.framework_roots(framework))
        assert {"frameworks.trainer", "run.measure", "run.monitor", f"frameworks.{framework}", "frameworks.base",
                "frameworks.protocol", "spec.initial_weights", "spec.inputs", "spec.networks", "spec.lr_policies",
                "datasets.store", "node.hostload", "node.locks", "record.raw"} <= training, (framework, training)
        # What no training job runs: how its attempts are kept and its record made, the drawing, the words, the
        # tables, the sweep's expansion, the schema's check, the presets.
        assert not training & {"run.runner", "run.build_record", "run.derive", "record.store", "study.point_facts",
                               "study.presets", "present.charts.draw", "present.findings", "analysis.frames",
                               "study.sweep", "study.config", "aggregate.collect"}, training
        others = {f"frameworks.{name}" for name in FRAMEWORKS if name != framework}
        assert not training & others, (framework, training & others)
    assert {"frameworks.caffe_log", "frameworks.caffe_data"} <= modules(code_digest.framework_roots("caffe"))
    assert "paths" in modules(code_digest.framework_roots("theano"))  # its compile cache lies under dlbench's cache
    record = modules((code_digest.RECORD,))
    assert {"run.build_record", "run.derive", "run.earlier_layout", "record.raw", "record.store",
            "study.point_facts"} <= record and not record & {"run.measure", "run.runner", "frameworks.trainer"}


def test_a_digest_is_of_the_definitions_a_job_can_reach():
    training = code_digest.Program(code_digest.framework_roots("pytorch")).definitions()
    assert {"dlbench.frameworks.base:Reporter", "dlbench.frameworks.protocol:encode", "dlbench.record.raw:write",
            "dlbench.record.fields:check_info", "dlbench.run.measure:launch"} <= training
    # in modules it imports, but nothing it runs names them: the record's side of the raw measurement and schema
    assert not training & {"dlbench.record.raw:read", "dlbench.record.fields:problems",
                           "dlbench.record.fields:ordered_columns", "dlbench.record.statuses:signal_name"}
    record = code_digest.Program((code_digest.RECORD,)).definitions()
    assert {"dlbench.record.raw:read", "dlbench.run.build_record:build_record", "dlbench.record.store:rewrite",
            "dlbench.run.earlier_layout:facts"} <= record
    assert "dlbench.record.store:mark_started" not in record


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of the dlbench package to edit (the digests read it as the real one)."""
    return Path(shutil.copytree(PACKAGE, tmp_path / "dlbench", ignore=shutil.ignore_patterns("__pycache__")))


def digests(package: Path) -> dict[str, str]:
    out = {f: code_digest.digest_of(code_digest.framework_roots(f), package) for f in FRAMEWORKS}
    out["record"] = code_digest.digest_of((code_digest.RECORD,), package)
    out["caffe_data"] = code_digest.digest_of((code_digest.CAFFE_DATA,), package)
    out["charts"] = code_digest.digest_of((code_digest.CHARTS,), package)
    out["findings"] = code_digest.digest_of((code_digest.FINDINGS,), package)
    return out


def changed_by(package: Path, rel: str, old: str, new: str) -> set[str]:
    """The digests one edit of a file changes (the file as it was afterwards)."""
    path = package / rel
    text = path.read_text()
    assert text.count(old) == 1, (rel, old)
    before = digests(package)
    path.write_text(text.replace(old, new))
    try:
        after = digests(package)
    finally:
        path.write_text(text)
    return {k for k in before if after[k] != before[k]}


TRAININGS = set(FRAMEWORKS)


def test_one_line_changes_rerun_exactly_what_they_invalidate(package):
    """The counts a user sees: a comment, a docstring, blank lines nothing; a record field's description, a chart
    colour or label nothing; a statement in how a record is made the record rule only; a statement in one adapter
    that framework's points; in the initial weights or the measurement every point."""
    assert changed_by(package, "run/runner.py", "\nimport shutil\n", "\n# why, in a comment\nimport shutil\n") == set()
    assert changed_by(package, "run/measure.py", '    """Start the trainer, pinned', '    """Start it, pinned') == set()
    assert changed_by(package, "run/monitor.py", "\n\n\ndef nvml_index(", "\n\n\n\ndef nvml_index(") == set()
    assert changed_by(package, "record/fields.py", '"the framework that trained it"',
                      '"the framework it ran in"') == set()
    assert changed_by(package, "frameworks/registry.py", 'color="#ee4c2c"', 'color="#ee4c2d"') == set()
    assert changed_by(package, "frameworks/registry.py", '"PyTorch", own_preset', '"Pytorch", own_preset') == set()
    assert changed_by(package, "run/runner.py", "    runs = tries(options.attempt)\n",
                      "    runs = tries(options.attempt) + 0\n") == set()  # which attempt runs: no result changes
    assert changed_by(package, "run/build_record.py", 'record["threads_requested"] = point["threads"]',
                      'record["threads_requested"] = int(point["threads"])') == {"record"}
    assert changed_by(package, "frameworks/tensorflow.py", "\nimport numpy as np\n",
                      "\nimport numpy as np\n\nSTEP_NAME = 'step'\n") == {"tensorflow"}
    assert changed_by(package, "spec/initial_weights.py", "            j += 1\n    return out\n",
                      "            j += 1\n    out = list(out)\n    return out\n") == TRAININGS
    assert changed_by(package, "run/measure.py", 'env["PYTHONUNBUFFERED"] = "1"',
                      'env["PYTHONUNBUFFERED"] = "yes"') == TRAININGS


def test_what_draws_the_charts_and_writes_the_findings_redraws_them_and_trains_nothing(package):
    """A finished study draws its charts and writes its findings again where their code changes (a title, a
    sentence), never for a comment, and no such change trains or makes a record again."""
    title = '    title = "Time to accuracy: test accuracy against cumulative training time"'
    assert changed_by(package, "present/charts/drawings.py", title, "    # why\n" + title) == set()
    # the findings import the charts' catalog (which charts were not drawn, and why): they count its drawings too
    assert changed_by(package, "present/charts/drawings.py", "against cumulative training time",
                      "against the cumulative training time") == {"charts", "findings"}
    assert changed_by(package, "present/findings.py", '"## Failed points"', '"## The failed points"') == {"findings"}


def test_a_registry_value_a_trainer_reads_reruns_and_an_estimate_figure_does_not(package):
    assert changed_by(package, "frameworks/registry.py", '"TF_CPP_MIN_LOG_LEVEL": "1"',
                      '"TF_CPP_MIN_LOG_LEVEL": "2"') >= TRAININGS
    assert changed_by(package, "frameworks/registry.py", "efficiency=1.46", "efficiency=1.5") == set()


def test_a_function_moved_to_another_module_and_a_module_moved_rerun_nothing(package):
    before = digests(package)
    measure = package / "run" / "measure.py"
    text = measure.read_text()
    start, end = text.index("def cap_suspected("), text.index("def facts(")
    moved = text[start:end]
    measure.write_text((text[:start] + text[end:]).replace(
        "from dlbench.run.threads import thread_env\n",
        "from dlbench.run.memory_cap import cap_suspected\nfrom dlbench.run.threads import thread_env\n"))
    (package / "run" / "memory_cap.py").write_text(
        '"""Whether the hard cap may have ended a point."""\n\nfrom __future__ import annotations\n\n'
        "from dlbench.frameworks import protocol\n\n\n" + moved.rstrip() + "\n")
    assert digests(package) == before
    (package / "node" / "threads.py").write_text((package / "run" / "threads.py").read_text())
    (package / "run" / "threads.py").unlink()
    measure.write_text(measure.read_text().replace("dlbench.run.threads", "dlbench.node.threads"))
    assert digests(package) == before


def test_taking_another_definition_of_the_same_name_changes_the_digest(package):
    """Two modules define `summary`; an import that takes the other one is another program, though no definition
    changed."""
    (package / "node" / "quiet.py").write_text("def summary(samples, in_train, contended_pct=25.0):\n    return {}\n")
    build = package / "run" / "build_record.py"
    build.write_text(build.read_text().replace("from dlbench.node import hostload\n",
                                               "from dlbench.node import hostload, quiet\n"))
    before = digests(package)["record"]
    build.write_text(build.read_text().replace("record.update(hostload.summary(", "record.update(quiet.summary("))
    assert digests(package)["record"] != before


def test_a_definition_nothing_runs_changes_nothing_until_something_names_it(package):
    statuses = package / "record" / "statuses.py"
    before = digests(package)
    statuses.write_text(statuses.read_text() + "\n\ndef spare(status):\n    return status in RESULTS\n")
    assert digests(package) == before
    trainer = package / "frameworks" / "trainer.py"
    trainer.write_text(trainer.read_text().replace("from dlbench.record.statuses import disk_full\n",
                                                   "from dlbench.record.statuses import disk_full, spare\n\n"
                                                   "    spare('ok')\n", 1))
    assert {k for k, v in digests(package).items() if v != before[k]} == TRAININGS


def test_an_import_inside_a_function_and_a_relative_one_are_followed(package):
    """A module imported only inside a function body (and, from there, relatively) is part of the digest."""
    (package / "frameworks" / "extra_step.py").write_text("from ..extra_leaf import VALUE\n\n\ndef step():\n"
                                                         "    return VALUE\n")
    (package / "extra_leaf.py").write_text("VALUE = 1\n")
    adapter = package / "frameworks" / "pytorch.py"
    adapter.write_text(adapter.read_text() + "\n\ndef _helper():\n    from dlbench.frameworks import extra_step\n"
                                             "    return extra_step.step()\n")
    assert {"frameworks.extra_step", "extra_leaf"} <= modules(code_digest.framework_roots("pytorch"), package)
    assert "extra_leaf" not in modules(code_digest.framework_roots("tensorflow"), package)
    assert changed_by(package, "extra_leaf.py", "VALUE = 1", "VALUE = 2") == {"pytorch"}


def test_a_data_file_the_trainer_opens_is_digested_with_its_code(package):
    (package / "extra_table.yaml").write_text("a: 1\n")
    weights = package / "spec" / "initial_weights.py"
    weights.write_text(weights.read_text() + '\nTABLE = "extra_table.yaml"  # read at run time\n')
    # the findings import the initial weights' module too (what a preset's network is): its tables count there
    assert changed_by(package, "extra_table.yaml", "a: 1", "a: 2") == TRAININGS | {"record", "findings"}


def test_caffes_data_preparation_draws_no_weights(package):
    """Its digest stays where the initial weights change (it once came in with the adapters' contract module)."""
    assert "caffe_data" not in changed_by(package, "spec/initial_weights.py", "            j += 1\n    return out\n",
                                          "            j += 1\n    out = list(out)\n    return out\n")


def test_the_digests_are_the_same_wherever_the_package_lies_and_kept_per_version(tmp_path, monkeypatch):
    """The same files elsewhere (a moved checkout, another clone) give the same digests, which the cache keeps
    under the package's version: a changed file is a new version, computed again."""
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "cache"))
    one = Path(shutil.copytree(PACKAGE, tmp_path / "a" / "dlbench", ignore=shutil.ignore_patterns("__pycache__")))
    two = Path(shutil.copytree(PACKAGE, tmp_path / "b" / "dlbench", ignore=shutil.ignore_patterns("__pycache__")))
    assert code_digest.digest_of((code_digest.RECORD,), one) == code_digest.digest_of((code_digest.RECORD,), two)
    calls = []

    def compute():
        calls.append(1)
        return "abc"

    assert code_digest.cached("record", compute, one) == "abc" and code_digest.cached("record", compute, two) == "abc"
    assert len(calls) == 1  # the second copy is the same version
    (two / "run" / "build_record.py").write_text((two / "run" / "build_record.py").read_text() + "\nX = 1\n")
    assert code_digest.cached("record", compute, two) == "abc" and len(calls) == 2
    kept = json.loads((tmp_path / "cache" / "code-digests.json").read_text())
    assert len(kept) == 2 and all(v == {"record": "abc"} for v in kept.values())


def test_no_package_data_is_read_by_a_trainer_today():
    """Stated in docs: the trainer process opens none of the package's data files (presets.yaml is read when the
    sweep is expanded, and its values are each point's parameters, in its id)."""
    for framework in FRAMEWORKS:
        assert code_modules.data_files(code_modules.closure(code_digest.framework_roots(framework))) == set()
