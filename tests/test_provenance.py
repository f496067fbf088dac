"""What a record says about the dlbench and the CPU policy it ran under."""

import shutil
import subprocess
import sys

import dlbench
from dlbench.node import machine
from dlbench.paths import ROOT
from dlbench.record import provenance


def test_the_checkout_gives_its_commit_and_whether_tracked_files_changed():
    got = provenance.dlbench_build()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          timeout=60).stdout
    status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=600).stdout
    assert got == {"dlbench_version": dlbench.__version__, "dlbench_commit": head.strip(),
                   "dlbench_dirty": bool(status.strip())}
    assert len(got["dlbench_commit"]) == 40


def test_a_copy_outside_git_says_it_does_not_know(tmp_path):
    shutil.copytree(ROOT / "dlbench", tmp_path / "dlbench", ignore=shutil.ignore_patterns("__pycache__"))
    script = "from dlbench.record import provenance; print(provenance.dlbench_build())"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"}, timeout=600)
    assert out.stdout.strip() == (f"{{'dlbench_version': '{dlbench.__version__}', 'dlbench_commit': None, "
                                  "'dlbench_dirty': None}"), out.stderr


def sysfs(root, governors=(), boost=None, no_turbo=None):
    for i, g in enumerate(governors):
        (root / f"cpu{i}" / "cpufreq").mkdir(parents=True)
        (root / f"cpu{i}" / "cpufreq" / "scaling_governor").write_text(g + "\n")
    if boost is not None:
        (root / "cpufreq").mkdir(exist_ok=True)
        (root / "cpufreq" / "boost").write_text(boost + "\n")
    if no_turbo is not None:
        (root / "intel_pstate").mkdir()
        (root / "intel_pstate" / "no_turbo").write_text(no_turbo + "\n")
    return str(root)


def test_governor_and_boost_as_the_kernel_exposes_them(tmp_path):
    amd = sysfs(tmp_path / "amd", ["performance", "performance"], boost="0")
    assert (machine.cpu_governor(amd), machine.cpu_boost(amd)) == ("performance", False)
    intel = sysfs(tmp_path / "intel", ["powersave", "performance"], no_turbo="0")
    assert (machine.cpu_governor(intel), machine.cpu_boost(intel)) == ("performance, powersave", True)
    bare = sysfs(tmp_path / "vm")
    assert (machine.cpu_governor(bare), machine.cpu_boost(bare)) == (None, None)


def test_every_record_carries_them():
    host = machine.host()
    assert {"cpu_governor", "cpu_boost"} <= set(host)
    assert host["cpu_governor"] == machine.cpu_governor() and host["cpu_boost"] == machine.cpu_boost()
