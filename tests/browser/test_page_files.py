"""The web page's file field in headless Chromium, against a real `attnmt serve`: a chosen
subtitle file goes to POST /v1/translate_file and comes back offered for download and shown,
its numbers and timings as sent; a file the server refuses shows the server's message."""

from __future__ import annotations

import pytest

from conftest import SHORT

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from browser import test_page as page  # noqa: E402

browser, server = page.browser, page.server         # the same headless Chromium and tiny-model server

SUBTITLES = f"1\n00:00:01,000 --> 00:00:02,500\n{SHORT}\n\n2\n00:00:03,000 --> 00:00:04,000\n{SHORT}\n"


def chosen(driver, server, path) -> str:
    """Open the page, choose `path` in the file field; the status or the error once answered."""
    driver.get(server.http + "/")
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "model-info").text)
    driver.find_element(By.ID, "file").send_keys(str(path))
    WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "status").text.startswith("Translated ")
                                    or d.find_element(By.ID, "error").text)
    return driver.find_element(By.ID, "error").text


def test_a_chosen_file_comes_back_to_download_with_its_timings(browser, server, tmp_path):
    path = tmp_path / "clip.srt"
    path.write_text(SUBTITLES, encoding="utf-8")
    assert chosen(browser, server, path) == ""
    link = browser.find_element(By.ID, "file-download")
    assert link.is_displayed() and link.get_attribute("download") == "clip_en.srt"
    assert link.get_attribute("href").startswith("blob:")
    shown = browser.find_element(By.ID, "file-preview").text
    assert "00:00:01,000 --> 00:00:02,500" in shown and "00:00:03,000 --> 00:00:04,000" in shown
    assert SHORT not in shown                      # translated
    assert page.severe_console_entries(browser) == []


def test_a_refused_file_shows_the_servers_message(browser, server, tmp_path):
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.4\n")
    error = chosen(browser, server, path)
    assert "not supported" in error and ".srt" in error
    assert not browser.find_element(By.ID, "file-download").is_displayed()
