"""Headless Chromium for the browser tests, driven through Debian's chromedriver
(selenium): one lifecycle for every test that looks at a page, and the screenshots
the docs keep (``RCP_DOCS_SCREENSHOTS=docs/images pytest TEST`` writes them there)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from selenium.webdriver import Chrome, ChromeOptions
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


@contextlib.contextmanager
def chromium(
    tmp_path: Path,
    viewport: tuple[int, int],
    wait: float,
    flags: tuple[str, ...] = (),
) -> Iterator[Chrome]:
    """Chromium with a profile of its own under ``tmp_path``, a page of
    ``viewport`` pixels, pages loaded within ``wait`` seconds; ``flags``: more of
    Chromium's."""
    options = ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, *flags):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    service = Service(
        executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log")
    )
    driver = Chrome(options=options, service=service)
    try:
        driver.set_page_load_timeout(wait)
        width, height = viewport
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


def keep_screenshot(driver: Chrome, tmp_path: Path, name: str) -> None:
    """The page as it is, with no field focused, into ``tmp_path`` (and the
    directory ``RCP_DOCS_SCREENSHOTS`` names) as ``name``."""
    driver.execute_script("document.activeElement.blur()")
    path = tmp_path / name
    assert driver.save_screenshot(str(path)), path
    docs = os.environ.get("RCP_DOCS_SCREENSHOTS")
    if docs:
        shutil.copyfile(path, Path(docs) / name)
