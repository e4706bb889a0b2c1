"""A real headless Chromium for the playground's tests: Debian's `chromium` and `chromium-driver`,
installed with apt when missing (CI runs `make test` on a fresh machine, as root), driven by
selenium. Nothing is downloaded by selenium itself: the driver's path is given, so Selenium
Manager never runs.

    with chromium() as driver:
        driver.get(url)
        errors(driver)   # the browser console's errors since the last call
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PACKAGES = ["chromium", "chromium-driver"]
#: Two test workers may both find Chromium missing: one installs, the other waits for it.
INSTALL_LOCK = Path("/tmp/serverless-agents-chromium.lock")


def _present() -> bool:
    return CHROMIUM.is_file() and CHROMEDRIVER.is_file()


def _apt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(
        ["apt-get", *args], env=env, capture_output=True, text=True, timeout=900, check=False
    )


def ensure_chromium() -> None:
    """Install Chromium and its driver with apt when they are missing; skip (saying why) only
    when apt cannot be used here."""
    if _present():
        return
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip(
            "the playground's browser tests need Debian's chromium and chromium-driver:"
            " `apt-get install -y chromium chromium-driver` (as root; apt is not usable here)"
        )
    with INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _present():
            return
        result = _apt("install", "-y", *PACKAGES)
        if result.returncode != 0:  # a fresh machine's package lists may be missing or stale
            _apt("update")
            result = _apt("install", "-y", *PACKAGES)
        if not _present():
            pytest.skip(f"apt-get could not install {' '.join(PACKAGES)}: {result.stderr[-500:]}")


@contextmanager
def chromium() -> Iterator[object]:
    """A headless Chromium under selenium, its console log kept (`goog:loggingPrefs`)."""
    ensure_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1440,900",
        "--no-first-run",
        "--disable-background-networking",  # the browser's own calls home, not the page's
        "--disable-component-update",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def errors(driver) -> list[str]:
    """The console's errors (and failed loads) since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
