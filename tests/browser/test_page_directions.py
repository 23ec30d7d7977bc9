"""The web page's direction switch in headless Chromium, against a real `attnmt serve` of three
directions (tests/conftest.py `paired_models`: es->en the default, en->es, xx->en): the default
model's pair first, another chosen or swapped to, sent as sourceLanguage and targetLanguage, and
the translation shown with its heatmap as POST /v1/translate gives it for that pair."""

from __future__ import annotations

import httpx
import pytest

from conftest import SHORT, RunningServer

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from browser import test_page as page  # noqa: E402

browser = page.browser            # the same headless Chromium fixture


@pytest.fixture(scope="module")
def server(paired_models):
    with RunningServer(paired_models) as running:
        yield running


def opened(driver, server) -> Select:
    driver.get(server.http + "/")
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "direction-option").is_displayed())
    return Select(driver.find_element(By.ID, "direction"))


def test_the_default_models_pair_comes_first(browser, server):
    direction = opened(browser, server)
    assert [o.text for o in direction.options] == ["Spanish → English", "English → Spanish", "xx → English"]
    assert direction.first_selected_option.text == "Spanish → English"
    assert browser.find_element(By.ID, "source-label").text == "Spanish"
    assert not browser.find_element(By.ID, "model-option").is_displayed()      # one model per pair
    assert browser.find_element(By.ID, "swap").is_enabled()


def test_a_chosen_direction_is_sent_and_shown(browser, server):
    opened(browser, server)
    browser.find_element(By.ID, "swap").click()
    assert browser.find_element(By.ID, "source-label").text == "English"
    assert browser.find_element(By.ID, "glossary-form").text == "english = spanish"
    assert browser.find_element(By.ID, "source").get_attribute("lang") == "en"
    source = browser.find_element(By.ID, "source")
    source.clear()
    source.send_keys(SHORT)
    browser.find_element(By.ID, "translate").click()
    assert page.answered(browser) == ""
    body = {**page.request_body(SHORT, beam=5), "sourceLanguage": "en", "targetLanguage": "es"}
    reply = httpx.post(f"{server.http}/v1/translate", json=body, timeout=60).json()
    assert reply["model"] == "tiny-en-es"
    (expected,) = reply["translations"]
    assert browser.find_element(By.ID, "target").text == expected["text"]
    assert browser.find_element(By.ID, "result-heading").text == "Spanish"
    assert browser.find_element(By.ID, "target").get_attribute("lang") == "es"
    (sentence,) = page.sentences_of(expected)
    best = sentence["hypotheses"][0]
    cells = browser.find_elements(By.CSS_SELECTOR, "table.heatmap td.cell")
    assert len(cells) == len(best["targetWords"]) * len(sentence["sourceWords"])
    # xx -> en has no way back: the swap button is off
    Select(browser.find_element(By.ID, "direction")).select_by_visible_text("xx → English")
    assert not browser.find_element(By.ID, "swap").is_enabled()
