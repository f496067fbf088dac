"""The tiers' rules (dlbench.testing.tiers), run on small test files by an inner pytest."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TESTS = """
import pytest

@pytest.mark.skipif(True, reason="no SLURM cluster is up")
def test_needs_slurm():
    pass

@pytest.mark.gpu
@pytest.mark.skipif(True, reason="no NVIDIA GPU on this machine")
def test_needs_a_gpu():
    pass

@pytest.mark.long
def test_long(request):
    marks = {m.name: m for m in request.node.iter_markers()}
    assert "slow" in marks and marks["timeout"].args == (1800,)

def test_quick(request):
    assert request.node.get_closest_marker("timeout") is None
"""


@pytest.mark.parametrize("ci", ["true", None])
def test_a_skip_fails_in_ci_unless_the_test_needs_a_gpu(pytester, monkeypatch, ci):
    if ci:
        monkeypatch.setenv("CI", ci)
    else:
        monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("-p", "dlbench.testing.tiers", "-p", "no:cacheprovider", "-rs")
    if ci:
        result.assert_outcomes(passed=2, errors=1, skipped=1)  # a skipif skips at set-up: an error there
        assert result.ret != 0
        result.stdout.fnmatch_lines(["*test_needs_slurm would skip in CI (no SLURM cluster is up)*"])
    else:
        result.assert_outcomes(passed=2, skipped=2)


def test_the_tiers_split_the_tests(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(TESTS)
    ci_tier = pytester.runpytest("-p", "dlbench.testing.tiers", "-p", "no:cacheprovider", "-m", "not long")
    ci_tier.assert_outcomes(passed=1, skipped=2, deselected=1)
    long_tier = pytester.runpytest("-p", "dlbench.testing.tiers", "-p", "no:cacheprovider", "-m", "long")
    long_tier.assert_outcomes(passed=1, deselected=3)
    quick = pytester.runpytest("-p", "dlbench.testing.tiers", "-p", "no:cacheprovider", "-m", "not slow")
    quick.assert_outcomes(passed=1, skipped=2, deselected=1)
