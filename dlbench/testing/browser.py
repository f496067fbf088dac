"""Headless Chromium for the tests that open a page (the report, the charts, the table of runs) as a reader would."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = "headless Chromium is not installed (Debian: apt-get install -y chromium)"


def chromium(profile: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Headless Chromium with a fresh profile, no network, nothing in the background."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
