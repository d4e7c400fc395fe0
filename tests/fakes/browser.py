"""`agentrl view`'s page in headless Chromium: the page's DOM after its script ran, and the
skip mark of the tests that need the browser.

Chromium is Debian's ``chromium`` package, which `.ci/run` installs when it is missing.
Without it these tests fail (they do not skip): set AGENTRL_SKIP_BROWSER=1 to leave them
out on a machine that cannot have a browser.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# A module's ``pytestmark`` (or a test's mark) where the test opens the page in the browser.
needs_browser = pytest.mark.skipif(
    os.environ.get("AGENTRL_SKIP_BROWSER") == "1", reason="AGENTRL_SKIP_BROWSER=1"
)


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        "headless Chromium not found (looked for " + ", ".join(BROWSERS) + "): install it "
        "with `apt-get install -y chromium` (.ci/run does), or set AGENTRL_SKIP_BROWSER=1"
    )


def headless_command(tmp: Path) -> list[str]:
    """The browser's command line without a page, its profile under ``tmp``."""
    return [
        browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--virtual-time-budget=5000",
        f"--user-data-dir={tmp / 'chromium-profile'}",
    ]


def dom(page: Path, fragment: str, tmp: Path) -> str:
    """The page's DOM after its script ran, opened at ``#fragment``."""
    url = page.resolve().as_uri() + "#" + fragment
    done = subprocess.run(
        [*headless_command(tmp), "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'data-ready="1"' in done.stdout, "the page's script did not finish"
    return done.stdout


def count(html: str) -> int:
    """The number of episodes the page's list says it shows."""
    match = re.search(r'<span id="count">(\d+)</span>', html)
    assert match, "no episode count in the page"
    return int(match.group(1))
