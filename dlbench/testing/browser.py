"""Headless Chromium for the tests that open a page (the report, the charts, the table of runs) as a reader would."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = "headless Chromium is not installed (Debian: apt-get install -y chromium)"
REPORTED = "dlbench-reported "  # how a script run by run_page marks the line it reports on the console


def command(profile: Path, *args: str) -> list[str]:
    """The command line of headless Chromium with a fresh profile, no network, nothing in the background."""
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", *args]


def chromium(profile: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Headless Chromium (command) run to its end."""
    return subprocess.run(command(profile, *args), capture_output=True, text=True, timeout=timeout)


def run_page(page: Path, script: str, profile: Path, window: str = "1400,1000", timeout_s: float = 300,
             head: str = "", output: str = "--dump-dom"):
    """Open a copy of `page` (beside it, so that its links resolve) with `script` at its end and `head` (a style,
    say) at the end of its head, in real time, and give what the script passes to `report(value)` (a JSON value);
    output: what Chromium does once the page has loaded (--screenshot=PATH: a picture of it then). Not
    --virtual-time-budget: its clock stands still while a script runs and races ahead while work goes on off the
    page's thread (unpacking data, Vega drawing), so a script waiting for a chart gives up before the chart is
    drawn. The page is kept loading instead by an async script read from a named pipe, written once the report
    has come: then the page loads, and Chromium dumps it or takes its picture."""
    text = page.read_text()
    if head:
        at = text.index("</head>")
        text = text[:at] + head + text[at:]
    at = text.rindex("</body>")  # the page's own end (a script in the page may hold the words too)
    copy, hold = page.with_name(f".run-{os.getpid()}.html"), page.with_name(f".run-{os.getpid()}.hold")
    hold.unlink(missing_ok=True)
    os.mkfifo(hold)
    reporter = f"<script>function report(v) {{ console.log('{REPORTED}' + JSON.stringify(v)); }}</script>"
    copy.write_text(text[:at] + f'<script async src="{hold.name}"></script>{reporter}<script>{script}</script>'
                    + text[at:])
    lines: queue.Queue = queue.Queue()
    found = None
    try:
        proc = subprocess.Popen(command(profile, f"--window-size={window}", "--enable-logging=stderr", "--v=0",
                                        output, copy.as_uri()),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                found = re.search(rf'{REPORTED}(.*)", source: ', lines.get(timeout=0.5))
            except queue.Empty:
                continue
        try:  # the page may finish loading now (no reader: Chromium is not waiting on it)
            os.close(os.open(hold, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        proc.wait(timeout=60)
    finally:
        copy.unlink(missing_ok=True)
        hold.unlink(missing_ok=True)
    if found is None:
        raise AssertionError(f"{page.name} reported nothing within {timeout_s:.0f} s in Chromium")
    return json.loads(found.group(1))
