"""Headless chromium for the console's browser tests (Debian's chromium and chromium-driver, through selenium;
nothing downloads a browser): the page at 1280x800, and screenshots kept in the test's tmp dir and, when
$CONSOLE_SCREENSHOTS_DIR is set, there too (docs/images/ holds two)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@contextmanager
def headless_chromium() -> Iterator[webdriver.Chrome]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("the browser test needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # The page itself 1280x800, whatever the headless window's frame takes.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: webdriver.Chrome, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    copy_to = os.environ.get("CONSOLE_SCREENSHOTS_DIR")
    if copy_to:
        shutil.copy(path, Path(copy_to) / name)
