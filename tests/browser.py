"""Headless Chromium for the e2e tests: Debian's /usr/bin/chromium driven by Playwright.

Browser downloads do not work on our machines, so Playwright launches the system Chromium
(installed by `make test`) with the flags that keep it off the network. A missing browser is a
test failure, never a skip.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is not installed: run `make test` (it installs Debian's chromium package)"
    return path


@contextmanager
def chromium_page(width: int = 1400, height: int = 1000) -> Iterator[tuple[object, list[str]]]:
    """A fresh headless page and the list its console errors and page errors are appended to."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            yield page, errors
        finally:
            browser.close()
