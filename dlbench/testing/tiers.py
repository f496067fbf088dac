"""The test tiers' rules, as a pytest plugin (tests/conftest.py loads it).

Two tiers: the CI tier (every test not marked `long`: `bash scripts/test.sh`) and the long tier
(`bash scripts/test.sh --long`). A long test is also slow, so `-m "not slow"` keeps the quick tests of either tier.
Each test has a time limit (pytest-timeout; pyproject.toml's 600 s, more for a test that may train the session's
tiny study and for a long test, unless it names its own). Under CI (CI=true) a test that would skip because
something the tier needs is missing (SLURM, Chromium, root, a framework environment, a dataset) fails instead, so
that a green CI means every test ran; only a test marked `gpu` still skips there, with its reason.
"""

from __future__ import annotations

import os

import pytest

# Time limits beyond pyproject.toml's 600 s (setup and call together): the first test to ask for the session's tiny
# study trains it; a long test may run a whole fault scenario or study.
TINY_RUN_TIMEOUT_S = 1200
LONG_TIMEOUT_S = 1800


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: trains real models or runs the whole workflow (minutes)")
    config.addinivalue_line("markers", "long: the long tier (scripts/test.sh --long), not run by CI")
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (the one kind of test that may skip in CI)")
    config.addinivalue_line("markers", "slurm: needs the test SLURM cluster (slurm-testbed/slurm-up.sh)")


def pytest_collection_modifyitems(config, items):
    """A long test is also slow; time limits by what a test sets up, unless it names its own."""
    for item in items:
        long = item.get_closest_marker("long") is not None
        if long and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("timeout") is None:
            if long:
                item.add_marker(pytest.mark.timeout(LONG_TIMEOUT_S))
            elif "tiny_run" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.timeout(TINY_RUN_TIMEOUT_S))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a skip is a failure unless the test needs a GPU: what the tier needs must be there."""
    report = yield
    if in_ci() and report.skipped and not hasattr(report, "wasxfail") and item.get_closest_marker("gpu") is None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} would skip in CI ({reason}); CI must provide what it needs "
                           "(scripts/setup.sh --tests, slurm-testbed/slurm-up.sh, root)")
    return report
