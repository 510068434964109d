"""Headless Chromium for the tests that look at a page as a reader's browser draws it.

A test writes a copy of its page with a probe script that, once the page has loaded, writes what it
finds as JSON into `<pre id="probe">`; `probe` opens the copy offline (every host unresolvable, no
background traffic), lets virtual time settle, dumps the DOM and returns that JSON with Chromium's
console lines. The slow tier runs these tests; `.ci/run` installs Debian's chromium.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def probe(page: Path, profile: Path, window: str, budget_ms: int) -> tuple[dict, list[str]]:
    """Open `page` (a file) at `window` ("1280,900") with `budget_ms` of virtual time; the probe's
    JSON and every console message or uncaught error Chromium logged."""
    out = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={window}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    dom = out.stdout
    assert '<pre id="probe">' in dom, out.stderr[-2000:]
    start = dom.index('<pre id="probe">') + len('<pre id="probe">')
    found = json.loads(dom[start : dom.index("</pre>", start)].replace("&quot;", '"'))
    console = [line for line in out.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return found, console
