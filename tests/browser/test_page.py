"""The web page at / in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromium-driver, against a real `attnmt serve` of the tiny model. What the page shows is
held against what POST /v1/translate answers for the same request.

`ATTNMT_SCREENSHOT=1` also writes docs/page.png from the default Spanish model (the README's picture).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import httpx
import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")     # Debian's chromium-driver, the same version as chromium
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip("the browser tests need Debian's chromium and chromium-driver "
                "(apt-get install chromium chromium-driver; .ci/run installs them)", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from attnmt.service.http.front import PAGE_POLICY  # noqa: E402
from conftest import REPO, SHORT, RunningServer  # noqa: E402

ARTIFACTS = Path(__file__).parent / "artifacts"
MAX_CHARS = 40                                   # the server's max_chars_per_sentence here
HTML_INPUT = "<b>peru</b> vidas <script>alert(1)</script> kasa ."


@pytest.fixture(scope="module")
def server(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_MAX_CHARS_PER_SENTENCE": str(MAX_CHARS)}) as running:
        yield running


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the system driver: Selenium Manager would try to download one
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


# --- using the page as a user would -------------------------------------------

def request_body(text: str, beam: int = 4, n_best: int = 3, html: bool = False, split: bool = True,
                 glossary: list[dict[str, str]] | None = None) -> dict:
    """The POST /v1/translate body the page sends for these settings of its controls."""
    return {"sentences": [text], "options": {"beamSize": beam, "nBest": n_best, "alignment": "ALIGNMENT_WORDS"},
            "format": "TEXT_FORMAT_HTML" if html else "TEXT_FORMAT_PLAIN", "splitSentences": split,
            "glossary": glossary or []}


def api(server, body: dict) -> httpx.Response:
    return httpx.post(f"{server.http}/v1/translate", json=body, timeout=60)


def sentences_of(translation: dict) -> list[dict]:
    """The translated sentences of one entry, as the page lists them (page.js `sentencesOf`)."""
    if translation["sentences"]:
        return [s["translation"] for s in translation["sentences"]]
    return [translation] if translation["hypotheses"] else []


def fill(driver, server, text: str, beam: int = 4, n_best: int = 3, html: bool = False, split: bool = True,
         glossary: str = "") -> None:
    """Open the page and set every control."""
    driver.get(server.http + "/")
    for field, value in (("source", text), ("beam-size", str(beam)), ("n-best", str(n_best)), ("glossary", glossary)):
        element = driver.find_element(By.ID, field)
        element.clear()
        element.send_keys(value)
    for box, wanted in (("html", html), ("split", split)):
        element = driver.find_element(By.ID, box)
        if element.is_selected() != wanted:
            element.click()


def answered(driver) -> str:
    """Wait for the page to show a translation or an error; the error's text, or ''."""
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "status").text.startswith("Translated")
                                    or d.find_element(By.ID, "error").text)
    return driver.find_element(By.ID, "error").text


def translate(driver, server, text: str, **controls) -> None:
    fill(driver, server, text, **controls)
    driver.find_element(By.ID, "translate").click()
    assert answered(driver) == ""


def indices(driver, selector: str) -> set[int]:
    return {int(e.get_attribute("data-index")) for e in driver.find_elements(By.CSS_SELECTOR, selector)}


def severe_console_entries(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


# --- the tests -----------------------------------------------------------------

def test_the_page_shows_the_translation_the_api_gives(browser, server):
    translate(browser, server, SHORT)
    (expected,) = api(server, request_body(SHORT)).json()["translations"]
    (sentence,) = sentences_of(expected)
    best = sentence["hypotheses"][0]
    assert browser.find_element(By.ID, "target").text == expected["text"]
    source_words = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".word[data-side=source]")]
    target_words = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".word[data-side=target]")]
    assert source_words == sentence["sourceWords"][:-1]         # "</s>" has no word of its own
    assert target_words == [w for w in best["targetWords"] if w != "</s>"]
    # the n-best list, best first, and the quality flag in plain words with its score
    alternatives = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".alternatives .alt-text")]
    assert alternatives == [h["text"] for h in sentence["hypotheses"]] and len(alternatives) == 3
    quality = browser.find_element(By.ID, "quality").text
    assert f"{best['quality']['score']:.2f}" in quality
    assert ("suspect: this translation may be wrong" in quality) == best["suspect"]
    # the languages are marked for screen readers and hyphenation
    assert browser.find_element(By.ID, "source").get_attribute("lang") == "es"
    assert browser.find_element(By.ID, "target").get_attribute("lang") == "en"
    assert browser.find_element(By.CSS_SELECTOR, ".words.source").get_attribute("lang") == "es"


def test_hovering_or_focusing_a_word_highlights_its_hard_links(browser, server):
    translate(browser, server, SHORT)
    (expected,) = api(server, request_body(SHORT)).json()["translations"]
    (sentence,) = sentences_of(expected)
    links = sentence["hypotheses"][0]["alignment"]["links"]
    assert links
    # every word but "</s>", with the words it is hard-linked to (maybe none)
    targets_of = {s: {link["target"] for link in links if link["source"] == s}
                  for s in range(len(sentence["sourceWords"]) - 1)}
    sources_of = {t: {link["source"] for link in links if link["target"] == t}
                  for t in range(len(sentence["hypotheses"][0]["targetWords"]) - 1)}
    for source, targets in reversed(targets_of.items()):     # the first word last: the screenshot shows it
        word = browser.find_element(By.CSS_SELECTOR, f".word[data-side=source][data-index='{source}']")
        ActionChains(browser).move_to_element(word).perform()
        assert indices(browser, ".word.highlight[data-side=target]") == targets, f"source word {source}"
        assert indices(browser, ".word.active") == {source}
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "page.png"))
    for target, sources in sources_of.items():
        word = browser.find_element(By.CSS_SELECTOR, f".word[data-side=target][data-index='{target}']")
        ActionChains(browser).move_to_element(word).perform()
        assert indices(browser, ".word.highlight[data-side=source]") == sources, f"target word {target}"
    # by keyboard: focus the first source word, Tab to the second
    ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    assert not browser.find_elements(By.CSS_SELECTOR, ".highlight")
    browser.execute_script("arguments[0].focus()",
                           browser.find_element(By.CSS_SELECTOR, ".word[data-side=source][data-index='0']"))
    ActionChains(browser).send_keys(Keys.TAB).perform()
    focused = browser.switch_to.active_element
    assert (focused.get_attribute("data-side"), focused.get_attribute("data-index")) == ("source", "1")
    assert indices(browser, ".word.highlight[data-side=target]") == targets_of[1]
    if targets_of[1]:
        assert "aligned to" in browser.find_element(By.ID, "link-status").get_attribute("textContent")


def test_the_heatmap_has_a_cell_for_each_target_and_source_word(browser, server):
    translate(browser, server, SHORT)
    (expected,) = api(server, request_body(SHORT)).json()["translations"]
    (sentence,) = sentences_of(expected)
    best = sentence["hypotheses"][0]
    rows = best["alignment"]["rows"]
    assert len(rows) == len(best["targetWords"]) and len(rows[0]["weights"]) == len(sentence["sourceWords"])
    cells = browser.find_elements(By.CSS_SELECTOR, "table.heatmap td.cell")
    assert len(cells) == len(best["targetWords"]) * len(sentence["sourceWords"])
    headers = browser.find_elements(By.CSS_SELECTOR, "table.heatmap thead th")
    assert [h.get_attribute("textContent") for h in headers] == sentence["sourceWords"]
    for cell in cells:
        i, j = int(cell.get_attribute("data-target")), int(cell.get_attribute("data-source"))
        weight = rows[i]["weights"][j]
        assert cell.text == str(round(weight * 100))
        assert cell.get_attribute("aria-label") == (f"{best['targetWords'][i]} ← {sentence['sourceWords'][j]}: "
                                                    f"α {weight:.2f}")
    outlined = {(int(c.get_attribute("data-source")), int(c.get_attribute("data-target")))
                for c in browser.find_elements(By.CSS_SELECTOR, "table.heatmap td.cell.link")}
    assert outlined == {(link["source"], link["target"]) for link in best["alignment"]["links"]}


def test_a_refused_sentence_shows_the_servers_message(browser, server):
    too_long = ("peru vidas kasa granda " * 3)[:60]            # one sentence of 60 characters, over 40
    refusal = api(server, request_body(too_long))
    assert refusal.status_code == 400
    message = refusal.json()["error"]["message"]
    assert "max_chars_per_sentence" in message
    fill(browser, server, too_long)
    browser.find_element(By.ID, "translate").click()
    assert answered(browser) == message
    error = browser.find_element(By.ID, "error")
    assert error.is_displayed() and error.get_attribute("role") == "alert"
    assert error.get_attribute("data-code") == "INVALID_ARGUMENT"


def test_a_glossary_line_is_sent_and_a_malformed_one_is_explained(browser, server):
    translate(browser, server, SHORT, glossary="kasa = home\n")
    body = request_body(SHORT, glossary=[{"source": "kasa", "target": "home"}])
    (expected,) = api(server, body).json()["translations"]
    assert browser.find_element(By.ID, "target").text == expected["text"]
    assert "home" in expected["text"]
    fill(browser, server, SHORT, glossary="kasa home")
    browser.find_element(By.ID, "translate").click()
    assert answered(browser) == "Glossary line 1: write it as “spanish = english”."


def test_an_html_translation_is_shown_as_text(browser, server):
    translate(browser, server, HTML_INPUT, html=True)
    (expected,) = api(server, request_body(HTML_INPUT, html=True)).json()["translations"]
    shown = browser.find_element(By.ID, "target").text
    assert shown == expected["text"] and "<b>" in shown and "<script>alert(1)</script>" in shown
    # the model's markup is text: no element came from it, and nothing ran
    assert browser.find_elements(By.CSS_SELECTOR, "main b, main script") == []
    assert browser.execute_script("return document.scripts.length") == 1      # page.js
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.accept()


def test_ctrl_enter_translates(browser, server):
    fill(browser, server, SHORT)
    browser.find_element(By.ID, "source").send_keys(Keys.CONTROL, Keys.ENTER)
    assert answered(browser) == ""
    (expected,) = api(server, request_body(SHORT)).json()["translations"]
    assert browser.find_element(By.ID, "target").text == expected["text"]


def test_the_page_runs_under_its_policy_without_console_errors(browser, server):
    page = httpx.get(server.http + "/", timeout=10)
    assert page.headers["content-security-policy"] == PAGE_POLICY
    assert "script-src 'self'" in PAGE_POLICY and "unsafe-inline" not in PAGE_POLICY
    browser.get("about:blank")
    browser.get_log("browser")                                  # what earlier tests left
    translate(browser, server, SHORT)
    word = browser.find_element(By.CSS_SELECTOR, ".word[data-side=source][data-index='0']")
    ActionChains(browser).move_to_element(word).perform()
    # a CSP violation (inline style or script) or a failing script would be logged as SEVERE
    assert severe_console_entries(browser) == []


@pytest.mark.skipif(os.environ.get("ATTNMT_SCREENSHOT") != "1", reason="writes docs/page.png: ATTNMT_SCREENSHOT=1")
def test_screenshot_of_the_bundled_model_for_the_readme(browser):
    Image = pytest.importorskip("PIL.Image")        # Pillow (matplotlib's, in the train extra) shrinks the PNG
    # two sentences: a software message and an everyday question, through the default model
    document = "El archivo de configuración no existe. ¿Dónde está la estación de tren más cercana?"
    with RunningServer([REPO / "models" / "transformer-es-en"]) as bundled:
        translate(browser, bundled, document, beam=5, n_best=2)
        browser.set_window_size(1000, 1000)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        chrome = browser.execute_script("return window.outerHeight - window.innerHeight")
        browser.set_window_size(1000, height + chrome)                      # the whole page, no scroll bar
        word = browser.find_element(By.CSS_SELECTOR, ".word[data-sentence='0'][data-side=source][data-index='1']")
        ActionChains(browser).move_to_element(word).perform()               # archivo: file
        png = browser.get_screenshot_as_png()
    browser.set_window_size(1200, 1000)
    out = REPO / "docs" / "page.png"
    # 128 colours without dithering: the text stays sharp, the file a third of the size
    Image.open(io.BytesIO(png)).convert("RGB").quantize(128, dither=Image.Dither.NONE).save(out, optimize=True)
    assert out.stat().st_size < 200_000
