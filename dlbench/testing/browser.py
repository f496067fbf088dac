"""Headless Chromium for the tests that open a page (the report, the charts, the table of runs) as a reader would."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = "headless Chromium is not installed (Debian: apt-get install -y chromium)"


def command(profile: Path, *args: str) -> list[str]:
    """The command line of headless Chromium with a fresh profile, no network, nothing in the background."""
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", *args]


def chromium(profile: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Headless Chromium (command) run to its end."""
    return subprocess.run(command(profile, *args), capture_output=True, text=True, timeout=timeout)
