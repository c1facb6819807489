"""Airflow's own connection form for type ``rcp``, in a real browser.

Airflow's API server serves its UI on loopback, with a SQLite database of its own
under the test's directory and ``[core] test_connection`` enabled; headless Chromium,
driven through chromedriver, opens "Add Connection" and picks type ``rcp``. Proves:

- the form shows what :func:`rcp_provider.get_provider_info.get_provider_info`
  declares (read from there, not copied): the standard fields under their new labels
  with their placeholders, none of the hidden ones, and every extra of
  ``conn-fields`` under its label with its description;
- a connection filled in there for a real ``rcpd serve`` is saved in Airflow's
  database as entered, its extras typed as declared;
- the Test button of its row reports that the service answered, and for a connection
  with a wrong token a failure that says the token was refused.

A screenshot of the filled form is written to the test's directory and, when
``RCP_DOCS_SCREENSHOTS`` names a directory, there too:
``RCP_DOCS_SCREENSHOTS=docs/images pytest tests/operators/test_connection_form.py``
makes ``docs/images/connection-form.png``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.expected_conditions import element_to_be_clickable
from selenium.webdriver.support.wait import WebDriverWait

from rcp_provider.get_provider_info import get_provider_info
from support.airflow import airflow, migrate
from support.browser import chromium, keep_screenshot
from support.scheduler import components
from support.services import TOKEN, RcpdServe

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

(FORM,) = (
    conn_type
    for conn_type in get_provider_info()["connection-types"]
    if conn_type["connection-type"] == "rcp"
)
BEHAVIOUR: dict[str, Any] = FORM["ui-field-behaviour"]
EXTRAS: dict[str, Any] = FORM["conn-fields"]
STANDARD = {
    "description": "Description",
    "host": "Host",
    "port": "Port",
    "login": "Login",
    "password": "Password",
    "schema": "Schema",
}
"""Airflow's standard connection fields and the labels its form gives them."""
INPUT_NAMES = {"schema": "url_schema"}
"""Standard fields whose input the form names otherwise."""

VIEWPORT = (1280, 1100)
"""The page's size: the whole form, its extras open, fits in the screenshot."""
WAIT = 30.0
"""Seconds the UI may take to show what a step leads to."""
TEST_TITLES = {"Test Connection Successful": True, "Test Connection Failed": False}
"""The titles of the notes the Test button brings up, and the result each stands for."""
SCREENSHOT = "connection-form.png"


@pytest.fixture
def rcpd(tmp_path: Path) -> Iterator[RcpdServe]:
    """A real ``rcpd serve`` with one root, whose token is :data:`TOKEN`, and an
    identity (key, certificate) of its own."""
    root = tmp_path / "served"
    root.mkdir()
    (tmp_path / "token").write_text(TOKEN)
    service = RcpdServe(
        [
            "--root",
            str(root),
            "--token-file",
            str(tmp_path / "token"),
            "--identity",
            str(tmp_path / "identity"),
        ]
    )
    try:
        yield service
    finally:
        assert service.stop() == 0, service.stderr


@pytest.fixture
def ui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL of Airflow's API server, with its UI, on a database of this test;
    everyone is an administrator, and the Test button is enabled."""
    home = tmp_path / "airflow"
    home.mkdir()
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    migrate()
    with components(
        home,
        api_only=True,
        AIRFLOW__CORE__TEST_CONNECTION="Enabled",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
    ) as url:
        yield url


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chrome]:
    with chromium(tmp_path, VIEWPORT, WAIT) as driver:
        yield driver


def _wait(driver: Chrome) -> WebDriverWait[Chrome]:
    return WebDriverWait(driver, WAIT, poll_frequency=0.1)


def _clickable(driver: Chrome, xpath: str) -> WebElement:
    """The element at ``xpath``, once it is shown and enabled."""
    return _wait(driver).until(element_to_be_clickable((By.XPATH, xpath)))


def _button(driver: Chrome, text: str) -> WebElement:
    """The button that reads ``text``, once it can be pressed."""
    return _clickable(driver, f"//button[normalize-space()={json.dumps(text)}]")


def _enter(driver: Chrome, name: str, text: str) -> None:
    """Put ``text`` into the form's field ``name`` as one input, as pasting does.

    Typed key by key at the driver's speed, an extra's field of this form lost a key
    now and then in trials (Airflow 3.3), so the text is inserted whole, and the
    field must then show it."""
    field = driver.find_element(By.CSS_SELECTOR, f"[role=dialog] [name='{name}']")
    field.click()
    driver.execute_cdp_cmd("Input.insertText", {"text": text})
    _wait(driver).until(lambda _: field.get_attribute("value") == text)


def _open_rcp_form(driver: Chrome, url: str) -> None:
    """A fresh connections page, "Add Connection", type ``rcp`` chosen."""
    driver.get(f"{url}/connections")
    _button(driver, "Add Connection").click()
    kind = _clickable(driver, "//*[@role='dialog']//input[@role='combobox']")
    kind.send_keys(FORM["hook-name"])
    name = json.dumps(FORM["hook-name"])
    _clickable(driver, f"//*[@role='option' and normalize-space()={name}]").click()
    _wait(driver).until(lambda d: _shown(d, "host"))


def _open_extras(driver: Chrome) -> None:
    """Open the form's "Extra Fields" (which closes its "Standard Fields")."""
    _button(driver, "Extra Fields").click()
    _wait(driver).until(
        lambda d: (
            all(_shown(d, name) for name in _declared_extras())
            and not any(_shown(d, name) for name in _declared_standard())
        )
    )


def _shown(driver: Chrome, name: str) -> bool:
    return any(f.is_displayed() for f in driver.find_elements(By.NAME, name))


def _shown_fields(driver: Chrome) -> dict[str, tuple[str, str, str]]:
    """Each field the form shows but the id: its label, placeholder and the
    description under it (empty where there is none)."""
    shown = {}
    for field in driver.find_elements(
        By.CSS_SELECTOR, "[role=dialog] input[name], [role=dialog] textarea[name]"
    ):
        name = field.get_attribute("name") or ""
        if name == "connection_id":
            continue
        root = field.find_element(
            By.XPATH, "./ancestor::*[@data-scope='field' and @data-part='root'][1]"
        )
        label = root.find_element(
            By.XPATH, ".//label[@data-scope='field' and @data-part='label']"
        )
        if not label.is_displayed():
            continue  # in a closed part of the form
        helpers = root.find_elements(By.XPATH, ".//*[@data-part='helper-text']")
        shown[name] = (
            label.text,
            field.get_attribute("placeholder") or "",
            helpers[0].text if helpers else "",
        )
    return shown


def _declared_standard() -> dict[str, tuple[str, str, str]]:
    """What :func:`_shown_fields` must find under "Standard Fields", by the
    provider's declaration."""
    return {
        INPUT_NAMES.get(field, field): (
            BEHAVIOUR["relabeling"].get(field, label),
            BEHAVIOUR["placeholders"].get(field, ""),
            "",
        )
        for field, label in STANDARD.items()
        if field not in BEHAVIOUR["hidden-fields"]
    }


def _declared_extras() -> dict[str, tuple[str, str, str]]:
    """What :func:`_shown_fields` must find under "Extra Fields", by the provider's
    declaration."""
    return {
        f"element_{key}": (
            spec["label"],
            BEHAVIOUR["placeholders"].get(key, ""),
            spec.get("description", ""),
        )
        for key, spec in EXTRAS.items()
    }


def _save(driver: Chrome, conn_id: str) -> None:
    """Save the form; until the connection's row is listed."""
    _button(driver, "Save").click()
    _wait(driver).until(lambda d: d.find_elements(By.XPATH, _row(conn_id)))


def _row(conn_id: str) -> str:
    cell = "td[@data-testid='table-cell-connection_id']"
    return f"//tr[{cell}[normalize-space()={json.dumps(conn_id)}]]"


NOTES = """return Array.from(
  document.querySelectorAll('[data-scope=toast][data-part=root]'),
  note => [note.id,
           note.querySelector('[data-part=title]')?.textContent ?? '',
           note.querySelector('[data-part=description]')?.textContent ?? ''])"""
"""Script: the notes (toasts) on the page, each as id, title and description."""


def _press_test(driver: Chrome, conn_id: str) -> tuple[bool, str]:
    """Press the Test button of ``conn_id``'s row; the result and message of the
    note that brings up."""
    before = {note[0] for note in driver.execute_script(NOTES)}
    _clickable(
        driver, f"{_row(conn_id)}//button[@aria-label='Test Connection']"
    ).click()
    _, title, message = _wait(driver).until(
        lambda d: next(
            (
                note
                for note in d.execute_script(NOTES)
                if note[0] not in before and note[1] in TEST_TITLES and note[2]
            ),
            False,
        )
    )
    return TEST_TITLES[title], message


def _saved_connections() -> dict[str, dict[str, Any]]:
    """The connections in Airflow's database, as ``airflow connections export``
    gives them (the token in clear, the extras as JSON)."""
    exported: dict[str, dict[str, Any]] = json.loads(
        airflow("connections", "export", "-").stdout
    )
    return exported


def test_the_rcp_form_saves_a_connection_that_tests_against_a_real_service(
    tmp_path: Path, rcpd: RcpdServe, ui: str, browser: Chrome
) -> None:
    host, port = rcpd.address
    fingerprint = rcpd.announce["fingerprint"]

    _open_rcp_form(browser, ui)
    assert _shown_fields(browser) == _declared_standard()
    for hidden in BEHAVIOUR["hidden-fields"]:
        assert not browser.find_elements(By.NAME, INPUT_NAMES.get(hidden, hidden))
    _enter(browser, "connection_id", "rcp_form")
    _enter(browser, "host", host)
    _enter(browser, "port", str(port))
    _enter(browser, "password", TOKEN)
    _open_extras(browser)
    assert _shown_fields(browser) == _declared_extras()
    _enter(browser, "element_fingerprint", fingerprint)
    _enter(browser, "element_timeout", "30")
    _enter(browser, "element_max_workers", "4")
    keep_screenshot(browser, tmp_path, SCREENSHOT)
    _save(browser, "rcp_form")

    ok, message = _press_test(browser, "rcp_form")
    assert ok, message
    assert message.startswith(f"rcpd serve at {host}:{port} answered"), message

    _open_rcp_form(browser, ui)
    _enter(browser, "connection_id", "rcp_form_wrong_token")
    _enter(browser, "host", host)
    _enter(browser, "port", str(port))
    _enter(browser, "password", "not-the-token")
    _open_extras(browser)
    _enter(browser, "element_fingerprint", fingerprint)
    _save(browser, "rcp_form_wrong_token")

    ok, message = _press_test(browser, "rcp_form_wrong_token")
    assert not ok, message
    assert message.startswith(
        f"rcpd serve at {host}:{port} refused the token (authentication failed)"
    ), message

    saved = _saved_connections()
    assert sorted(saved) == ["rcp_form", "rcp_form_wrong_token"]
    right = saved["rcp_form"]
    assert (right["conn_type"], right["host"], right["port"], right["password"]) == (
        "rcp",
        host,
        port,
        TOKEN,
    )
    assert (right["login"], right["schema"]) == (None, None)
    assert json.loads(right["extra"]) == {
        "fingerprint": fingerprint,
        "no_encryption": None,
        "timeout": 30,
        "max_workers": 4,
    }
    assert saved["rcp_form_wrong_token"]["password"] == "not-the-token"
