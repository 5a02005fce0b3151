"""Fixtures for the real-browser JupyterLab tests (Chromium via Playwright); helpers and the
recipes they follow are in ``lab_browser.py``.

* ``lab`` (session): ``jupyter lab`` on 127.0.0.1 and a free port, in a temporary root directory;
  stopped by its pid at the end of the session.
* ``chromium`` (session): Debian's Chromium, launched headless by Playwright.
* ``browser_context`` (session): one context, so the HTTP cache keeps JupyterLab's bundles.
* ``page`` (per test): a new page.  Every dialog (``alert`` ...) it opens is
  recorded in ``page.dialogs`` and dismissed; a full-page screenshot is saved to the test's
  ``tmp_path / "page.png"`` at the end, pass or fail.

Skipped, with the reason, only when Playwright or Chromium is missing.
"""

from __future__ import annotations

import pytest

from helpers.lab_browser import CHROMIUM, CHROMIUM_ARGS, SKIP_REASON, VIEWPORT, playwright_api, start_lab


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chromium():
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def browser_context(chromium):
    """One context for the session: its HTTP cache keeps JupyterLab's bundles between tests."""
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(browser_context, lab, tmp_path):
    pg = browser_context.new_page()
    pg.dialogs = []  # (type, message) of every dialog the page opened

    def on_dialog(dialog) -> None:
        pg.dialogs.append((dialog.type, dialog.message))
        dialog.dismiss()

    pg.on("dialog", on_dialog)
    try:
        yield pg
    finally:
        try:
            pg.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        finally:
            pg.close()
