"""LibreTranslate's API on a real `attnmt serve`, each client's request exactly as it sends it:
Mastodon's JSON list with `source: auto` and HTML, Weblate's form, a query string; the
errors in LibreTranslate's shape; never a translation into the wrong language."""

from __future__ import annotations

import httpx
import pytest

from conftest import REPO, SHORT, RunningServer, at_once

BUNDLED = REPO / "models" / "transformer-es-en"          # the default model
SPANISH = "No se puede abrir el archivo: permiso denegado."
FRENCH = "Impossible d'ouvrir le fichier de configuration : permission refusée par le système."


@pytest.fixture(scope="module")
def lt(tiny_model):
    """The default es->en model beside the tiny xx->en one."""
    with RunningServer([BUNDLED, tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "4"}) as server, \
            httpx.Client(base_url=server.http, timeout=60) as client:
        client.server = server
        yield client


def test_mastodons_request(lt):
    """app/lib/translation_service/libre_translate.rb: JSON, q a list of HTML, source auto."""
    body = {"q": ["<p>No se puede abrir el <b>archivo</b>.</p>", "<p>Permiso denegado.</p>"], "source": "auto",
            "target": "en", "format": "html", "api_key": ""}
    r = lt.post("/translate", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert set(answer) == {"translatedText", "detectedLanguage"}
    texts = answer["translatedText"]
    assert isinstance(texts, list) and len(texts) == 2
    assert texts[0].startswith("<p>") and "<b>" in texts[0] and texts[0].endswith("</p>")
    assert [d["language"] for d in answer["detectedLanguage"]] == ["es", "es"]
    assert all(0 < d["confidence"] <= 100 for d in answer["detectedLanguage"])
    # the same text through the native API, as HTML: the same translation
    native = lt.post("/v1/translate", json={"sentences": body["q"], "format": "TEXT_FORMAT_HTML",
                                            "splitSentences": True, "options": {"alignment": "ALIGNMENT_NONE"}})
    assert [t["text"] for t in native.json()["translations"]] == texts


def test_weblates_form_and_a_query_string(lt):
    """weblate/machinery/libretranslate.py posts a form; some clients put the fields in the URL."""
    r = lt.post("/translate", data={"api_key": "", "q": SPANISH, "source": "es", "target": "en"})
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"translatedText"} and isinstance(r.json()["translatedText"], str)
    by_query = lt.post("/translate", params={"q": SPANISH, "source": "es", "target": "en"})
    assert by_query.json() == r.json()
    # a form's line endings become \n, as LibreTranslate normalises them
    two_lines = lt.post("/translate", data={"q": "Hola.\r\nAdiós.", "source": "es", "target": "en"})
    assert two_lines.status_code == 200 and "\r" not in two_lines.json()["translatedText"]


def test_alternatives_come_from_the_n_best(lt):
    r = lt.post("/translate", json={"q": SPANISH, "source": "es", "target": "en", "alternatives": 2})
    answer = r.json()
    assert r.status_code == 200 and isinstance(answer["alternatives"], list)
    assert 1 <= len(answer["alternatives"]) <= 2
    assert answer["translatedText"] not in answer["alternatives"]
    assert len(set(answer["alternatives"])) == len(answer["alternatives"])
    batch = lt.post("/translate", json={"q": [SPANISH, "Permiso denegado."], "source": "es", "target": "en",
                                        "alternatives": 1}).json()
    assert len(batch["alternatives"]) == 2 and all(isinstance(a, list) for a in batch["alternatives"])


def test_the_pair_chooses_the_model(lt):
    toy = lt.post("/translate", json={"q": SHORT, "source": "xx", "target": "en"})
    native = lt.post("/v1/translate", json={"sentences": [SHORT], "model": "tiny", "splitSentences": True,
                                            "options": {"beamSize": 4}})
    assert toy.status_code == 200 and toy.json()["translatedText"] == native.json()["translations"][0]["text"]


@pytest.mark.parametrize("body, message", [
    ({"source": "es", "target": "en"}, "Invalid request: missing q parameter"),
    ({"q": "Hola", "target": "en"}, "Invalid request: missing source parameter"),
    ({"q": "Hola", "source": "es"}, "Invalid request: missing target parameter"),
    ({"q": "Hola", "source": "es", "target": "en", "format": "pdf"}, "pdf format is not supported"),
    ({"q": "Hola", "source": "es", "target": "fr"}, "fr is not supported"),
    ({"q": "Hola", "source": "de", "target": "en"}, "de is not supported"),
    ({"q": "Hello", "source": "en", "target": "es"},
     "Spanish (es) is not available as a target language from English (en)"),
    ({"q": FRENCH, "source": "auto", "target": "en"}, "fr (French) was detected, and this server does not "
                                                      "translate it"),
    ({"q": "Hola", "source": "es", "target": "en", "alternatives": "many"},
     "Invalid request: alternatives parameter is not a number"),
    ({"q": "Hola", "source": "es", "target": "en", "alternatives": 99}, "alternatives parameter must be <= 15"),
    ({"q": ["Hola"] * 65, "source": "es", "target": "en"}, "Invalid request: request (65) exceeds text limit (64)"),
    ({"q": "x" * 50_001, "source": "es", "target": "en"}, "exceeds text limit (50000)"),
])
def test_errors_in_libretranslates_shape(lt, body, message):
    r = lt.post("/translate", json=body)
    assert r.status_code == 400
    assert set(r.json()) == {"error"} and message in r.json()["error"], r.text


def test_english_is_never_translated_as_spanish(lt):
    """A text in the target's own language, sent with `auto`: 400, not a garbled 'translation'."""
    r = lt.post("/translate", json={"q": "Where is the nearest train station, please?", "source": "auto",
                                    "target": "en"})
    assert r.status_code == 400 and "English (en) is not available as a target language from English" in \
        r.json()["error"]


def test_a_text_with_no_letters_is_translated_from_a_served_source(lt):
    """Nothing to detect ("12345"): a source served into the target (the default model's), as the
    native API routes `auto`, not LibreTranslate's `en`, which nothing here translates into English."""
    r = lt.post("/translate", json={"q": "12345", "source": "auto", "target": "en"})
    assert r.status_code == 200, r.text
    native = lt.post("/v1/translate", json={"sentences": ["12345"], "sourceLanguage": "auto", "targetLanguage": "en",
                                            "splitSentences": True}).json()
    assert r.json() == {"translatedText": native["translations"][0]["text"],
                        "detectedLanguage": {"confidence": 0.0, "language": "es"}}
    batch = lt.post("/translate", json={"q": ["12345", "No se puede abrir el archivo: permiso denegado ahora."],
                                        "source": "auto", "target": "en"})
    assert batch.status_code == 200 and [d["language"] for d in batch.json()["detectedLanguage"]] == ["es", "es"]
    assert lt.post("/detect", json={"q": "12345"}).json() == [{"confidence": 0.0, "language": "en"}]


def test_errors_name_the_text_as_the_client_sent_it(lt):
    long = "palabra" * 400                      # one sentence over max_chars_per_sentence (2000)
    r = lt.post("/translate", json={"q": ["Hola.", long], "source": "es", "target": "en"})
    assert r.status_code == 400 and r.json()["error"].startswith("q[1], sentence 0 has 2800 characters"), r.text
    r = lt.post("/translate", data={"q": long, "source": "es", "target": "en"})
    assert r.status_code == 400 and r.json()["error"].startswith("q, sentence 0 has 2800 characters"), r.text


def test_languages_settings_health_and_detect(lt):
    languages = {lang["code"]: lang for lang in lt.get("/languages").json()}
    assert languages["es"] == {"code": "es", "name": "Spanish", "targets": ["en"]}
    assert languages["en"]["targets"] == [] and languages["xx"]["targets"] == ["en"]
    settings = lt.get("/frontend/settings").json()
    assert settings["charLimit"] == 50_000 and settings["keyRequired"] is False
    assert settings["language"] == {"source": {"code": "es", "name": "Spanish"},
                                    "target": {"code": "en", "name": "English"}}
    assert lt.get("/health").json() == {"status": "ok"}
    found = lt.post("/detect", data={"q": "¿Dónde está la estación de tren más cercana?"}).json()
    assert found[0]["language"] == "es" and 50 < found[0]["confidence"] <= 100
    assert lt.post("/detect", json={"q": FRENCH}).json()[0]["language"] == "fr"
    # a short text the detector is unsure of is named in a language served: "Hello." is 37 % Italian
    short = lt.post("/detect", json={"q": "Hello."}).json()
    assert [d["language"] for d in short] == ["es", "en"] and short[0]["confidence"] < 50
    assert lt.post("/detect", json={}).json() == {"error": "Invalid request: missing q parameter"}


def test_cors_on_every_answer_to_a_browser(lt):
    r = lt.post("/translate", json={"q": "Hola", "source": "es", "target": "en"},
                headers={"Origin": "moz-extension://abc"})
    assert r.headers["access-control-allow-origin"] == "*"


def test_discourses_requests(lt):
    """discourse-translator's app/services/discourse_translator/provider/libre_translate.rb: every
    call a form with `api_key` (empty when no key is set); GET /languages to check the pair, POST
    /detect on the post's text without its tags and `res[0]["language"]` as the source, then POST
    /translate with `format: html` and reads `translatedText`."""
    languages = lt.get("/languages").json()
    assert any(o["code"] == "es" for o in languages) and any(o["code"] == "en" for o in languages)
    post = "<p>No se puede abrir el <b>archivo</b>: permiso denegado.</p>"
    detected = lt.post("/detect", data={"q": "No se puede abrir el archivo: permiso denegado.", "api_key": ""})
    assert detected.status_code == 200 and detected.json()[0]["language"] == "es"
    r = lt.post("/translate", data={"q": post, "source": detected.json()[0]["language"], "target": "en",
                                    "format": "html", "api_key": ""})
    assert r.status_code == 200, r.text
    text = r.json()["translatedText"]
    assert isinstance(text, str) and text.startswith("<p>") and "<b>" in text and text.endswith("</p>")


def test_overload_is_429_with_retry_after_in_libretranslates_shape(tiny_model):
    """Mastodon backs off on 429 and gives up on 403: a full queue must be the former."""
    env = {"ATTNMT_MAX_QUEUE": "2", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_RETRY_AFTER_SECONDS": "2", "FAULTS": "step_delay_ms=20"}
    with RunningServer([tiny_model], env) as server:
        answers = at_once(lambda: httpx.post(server.http + "/translate", timeout=60,
                                             data={"q": SHORT, "source": "xx", "target": "en"}), 8)
        refused = [r for r in answers if r.status_code == 429]
        assert refused and any(r.status_code == 200 for r in answers), [r.text for r in answers]
        assert {r.status_code for r in answers} <= {200, 429}
        for r in refused:
            assert r.headers["retry-after"] == "2"
            assert set(r.json()) == {"error"} and r.json()["error"].startswith("Slowdown: "), r.text
            assert "max_queue" in r.json()["error"]


def test_keys_in_libretranslates_shape(tiny_model, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("secret-1 weblate\n")
    with RunningServer([tiny_model], {"ATTNMT_API_KEYS": str(keys)}) as server:
        url = server.http + "/translate"
        r = httpx.post(url, data={"q": SHORT, "source": "xx", "target": "en"})
        assert r.status_code == 403 and set(r.json()) == {"error"}
        assert httpx.post(url, data={"q": SHORT, "source": "xx", "target": "en", "api_key": "nope"}).status_code == 403
        ok = httpx.post(url, data={"q": SHORT, "source": "xx", "target": "en", "api_key": "secret-1"})
        assert ok.status_code == 200 and ok.json()["translatedText"]
        assert httpx.get(server.http + "/frontend/settings").json()["keyRequired"] is True


def test_language_tags_of_any_case_or_region_name_the_served_language(lt):
    """Clients write "ES", "es-MX", "en_US": each is the language this server translates."""
    plain = lt.post("/translate", json={"q": SPANISH, "source": "es", "target": "en"}).json()
    for source, target in (("ES", "EN"), ("es-MX", "en-US"), ("es_419", "en_GB")):
        r = lt.post("/translate", json={"q": SPANISH, "source": source, "target": target})
        assert r.status_code == 200 and r.json() == plain, (source, target, r.text)
    r = lt.post("/translate", json={"q": SPANISH, "source": "es", "target": "fr-CA"})
    assert r.status_code == 400 and r.json()["error"] == "fr-CA is not supported"
    # an unknown target is refused as such, before `auto` detects anything
    r = lt.post("/translate", json={"q": "Hello.", "source": "auto", "target": "de-AT"})
    assert r.status_code == 400 and r.json()["error"] == "de-AT is not supported"


def test_auto_reads_an_ambiguous_short_text_as_a_served_source(lt):
    """The detector's best guess for "Hello." is Italian at 37 %: not sure enough to refuse the
    text, so it is read as the likeliest source served into the target (here Spanish, 19 %), as
    the native API reads `auto`. A text the detector is sure of is still refused by its language."""
    r = lt.post("/translate", json={"q": "Hello.", "source": "auto", "target": "en"})
    assert r.status_code == 200, r.text
    detected = r.json()["detectedLanguage"]
    assert detected["language"] == "es" and 0 < detected["confidence"] < 50
    native = lt.post("/v1/translate", json={"sentences": ["Hello."], "sourceLanguage": "auto", "targetLanguage": "en",
                                            "splitSentences": True}).json()
    assert native["sourceLanguage"] == "es"
    r = lt.post("/translate", json={"q": FRENCH, "source": "auto", "target": "en"})
    assert r.status_code == 400 and "fr (French) was detected" in r.json()["error"]
