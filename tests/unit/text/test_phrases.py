"""Set phrases (service/text/phrases.py): a whole line that is one, matched whatever its case,
accents and marks, answered in its case and with its marks; any other line left to the model."""

from __future__ import annotations

from attnmt.service.text.phrases import Phrases, read_phrases, write_phrases

TABLE = {"hola": "hello", "buenos días": "good morning", "ave César": "hail Caesar",
         "ojos que no ven, corazón que no siente": "out of sight, out of mind"}


def test_a_line_that_is_a_phrase_gets_its_translation_in_the_lines_case_and_marks():
    english = Phrases(TABLE, "en")
    assert english.match("Hola") == "Hello"
    assert english.match("hola") == "hello"
    assert english.match("¡Hola!") == "Hello!"
    assert english.match("  Hola. ") == "Hello."
    assert english.match("«Hola»") == "«Hello»"
    assert english.match("buenos dias") == "good morning"                 # typed without the accent
    assert english.match("Buenos   días...") == "Good morning..."
    assert english.match("Ave césar") == "Hail Caesar"
    assert english.match("Ojos que no ven, corazón que no siente.") == "Out of sight, out of mind."


def test_a_spanish_target_opens_its_question_or_exclamation():
    spanish = Phrases({"hello": "hola", "good morning": "buenos días"}, "es")
    assert spanish.match("Hello!") == "¡Hola!"
    assert spanish.match("Good morning?") == "¿Buenos días?"
    assert spanish.match("Hello.") == "Hola."


def test_any_other_line_is_left_to_the_model():
    english = Phrases(TABLE, "en")
    for line in ["Hola, Tom.", "Hola Hola", "Buenos", "", "¡!", "hola mundo", "Hola %s"]:
        assert english.match(line) is None, line
    assert english.match("HOLA") is None                    # in capitals: a label or an acronym ("OK")


def test_n_with_its_tilde_is_a_letter_of_its_own():
    english = Phrases({"coño": "damn", "adiós": "goodbye"}, "en")
    assert english.match("cono") is None and english.match("Coño") == "Damn"
    assert english.match("adios") == "goodbye"


def test_the_file_reads_back_as_written(tmp_path):
    write_phrases(tmp_path / "phrases.tsv", TABLE)
    assert read_phrases(tmp_path / "phrases.tsv") == TABLE
    assert (tmp_path / "phrases.tsv").read_text(encoding="utf-8").splitlines()[0] == "ave César\thail Caesar"
