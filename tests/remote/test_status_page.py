"""The status page of a real ``rcpd serve --http-listen`` in headless Chromium: a
running job's progress moves while the page reloads itself (the test never reloads
it), and the job's row ends with its summary. The screenshot of the running page is
``docs/images/status-page.png``:
``RCP_DOCS_SCREENSHOTS=docs/images pytest tests/remote/test_status_page.py``."""

from __future__ import annotations

import time
from pathlib import Path

from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By

from rcp_core import CopySettings
from support.browser import chromium, keep_screenshot
from support.services import TOKEN, with_http_port

FILES = 400
WAIT = 60.0
VIEWPORT = (1280, 420)
SCREENSHOT = "status-page.png"


def cell(driver: Chrome, job: str, name: str) -> str:
    """The text of the job's row's ``name`` cell as the page shows it now ("" while
    the page reloads)."""
    try:
        return driver.find_element(By.CSS_SELECTOR, f'[id="job-{job}"] .{name}').text
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def test_the_page_shows_a_jobs_progress_moving_and_then_its_summary(
    tmp_path: Path,
) -> None:
    rcpd, tree = with_http_port(tmp_path, FILES, 2048)
    try:
        with (
            chromium(
                tmp_path, VIEWPORT, WAIT, flags=("--ignore-certificate-errors",)
            ) as driver,
            rcpd.client() as client,
        ):
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd(
                "Network.setExtraHTTPHeaders",
                {"headers": {"Authorization": f"Bearer {TOKEN}"}},
            )
            job = client.submit(
                [str(tree)],
                str(tmp_path / "backup" / "tree"),
                CopySettings(ops_throttle=40),
            )["job"]
            driver.get(f"https://{rcpd.announce['http']}/")
            deadline = time.monotonic() + WAIT
            seen: list[str] = []
            while len(set(seen)) < 2:  # it moved
                assert time.monotonic() < deadline, seen
                shown = cell(driver, job, "progress")
                if "entries" in shown:
                    seen.append(shown)
                time.sleep(0.5)
            assert driver.find_element(By.CSS_SELECTOR, f'[id="job-{job}"] .running')
            keep_screenshot(driver, tmp_path, SCREENSHOT)
            while "copied" not in cell(driver, job, "summary"):
                assert time.monotonic() < deadline, cell(driver, job, "summary")
                time.sleep(0.5)
            summary = cell(driver, job, "summary")
            assert f"copied {FILES} files" in summary, summary
            assert "0 errors" in summary
            assert driver.find_element(By.CSS_SELECTOR, f'[id="job-{job}"] .succeeded')
    finally:
        assert rcpd.stop() == 0, rcpd.stderr
