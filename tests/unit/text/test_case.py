"""A sentence's case as the models read it: Title Case told apart from ordinary text and from a
program's labels, read in small letters where the model knows a word so, names kept."""

import json
import re
import shutil

import numpy as np
import pytest

from attnmt.model.data.placeholders import PATTERN
from attnmt.service.errors import ConfigError
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.settings import BUNDLED_TRANSFORMER
from attnmt.service.text.case import SMALL_WORDS, as_typed, first_small, listed_small, titled, untitled
from attnmt.service.text.translator import Hypothesis, Translation, Translator

KNOWN = frozenset({"reunión", "se", "ha", "trasladado", "al", "próximo", "lunes", "meeting", "has", "been", "moved",
                   "to", "next", "writer", "protecting", "content", "in", "estación", "dónde", "está", "la", "de",
                   "tren", "en", "Madrid"})


@pytest.mark.parametrize("text, title", [
    ("La Reunión Se Ha Trasladado Al Próximo Lunes", True),
    ("The Meeting Has Been Moved to Next Monday", True),          # a small "to", as English titles write it
    ("¿Dónde Está La Estación De Tren?", True),
    ("La reunión se ha trasladado al próximo lunes.", False),
    ("Open Recent File", False),                                  # three words: a label the models learnt
    ("Bienvenido a San Francisco.", False),                       # two capitals for a name
    ('"Hola, soy Tom." "Hola." "¿Y tú?" "Ah, Mary."', False),      # capitals after quotation marks
    ("Tom Dijo «Hola» Y «Adiós» Ayer", False),                     # quotations open with a capital
    ("Hi, I'm Tom and Mary.", False),                             # "I'm" is capitalised anywhere
    ("Dicen Eso en el Reino Unido", False),                       # half its words small
    ("Choose File - Export As - Export as PDF", False),           # a menu path
    ("Vaya a Ver ▸ Navegador.", False),
    ("SUMA(Número 1; Número 2; Número 3)", False),                # a signature
    ("Bloques Total %b Libres %f Disponibles %a", False),         # a program's labels
    ("LA REUNIÓN SE HA TRASLADADO", False),                       # capitals: read apart (shouted)
])
def test_title_case_is_told_apart(text, title):
    assert titled(text, re.compile(PATTERN)) is title


def test_an_english_title_with_its_small_words_in_small_letters_is_title_case():
    text = "The Crisis of the Euro and the Future of Europe"
    assert titled(text, None, SMALL_WORDS["en"]) and not titled(text)      # half its words are small ones
    assert not titled("The crisis of the euro and the future of Europe", None, SMALL_WORDS["en"])


def test_title_case_is_read_with_known_words_small_and_names_kept():
    assert untitled("La Reunión Se Ha Trasladado Al Próximo Lunes", KNOWN) == \
        "La reunión se ha trasladado al próximo lunes"
    assert untitled("¿Dónde Está La Estación De Tren En Madrid?", KNOWN) == "¿Dónde está la estación de tren en Madrid?"
    # a name the model knows, and the word after it ("writer" alone is known: "escritor" is not the product)
    assert untitled("Protecting Content in LibreOffice Writer", KNOWN | {"LibreOffice"}) == \
        "Protecting content in LibreOffice Writer"
    # after a name it never learnt, a word like any other ("Voráček Helped" became "Voráček Ayuda")
    assert untitled("Protecting Content in LibreOffice Writer", KNOWN) == "Protecting content in LibreOffice writer"
    assert untitled("Meeting With USB Gaziantep", KNOWN) == "Meeting With USB Gaziantep"   # first, capitals, unknown
    assert untitled("La Reunión Se Ha", None) == "La reunión se ha"                      # no list: every word
    assert untitled("Group Meeting: Next Meeting Moved", KNOWN) == "Group meeting: Next meeting moved"  # after a colon


def test_a_titles_small_words_are_small_after_a_name_and_one_capital_alone_is_no_acronym():
    known = frozenset({"Libia", "firman", "acuerdo", "sign", "deal", "Libya", "approval"})
    assert untitled("Libia Y Túnez Firman Un Acuerdo", known, (), SMALL_WORDS["es"]) == \
        "Libia y Túnez firman un acuerdo"
    assert untitled("Libia Y Túnez Firman Un Acuerdo", known) == "Libia Y Túnez firman Un acuerdo"   # no small words
    assert untitled("Libya And Tunisia Sign A Deal", known, (), SMALL_WORDS["en"]) == "Libya and Tunisia sign a deal"
    assert untitled("Delayed Approval Of The U.S. Approval", known, (), SMALL_WORDS["en"]) == \
        "Delayed approval of the U.S. Approval"                         # "U.S." in capitals; a word after "." opens


def test_a_word_the_lexicon_holds_in_small_letters_is_no_name_unless_the_model_knows_it_capitalised():
    dictionary = {"estilista": "stylist", "libia": "Libyan"}
    known = KNOWN | {"Libia", "tener", "una", "visión", "elecciones"}
    assert untitled("El Estilista Ha De Tener Una Visión", known, dictionary) == "El estilista ha de tener una visión"
    assert untitled("El Estilista Ha De Tener Una Visión", known) == "El Estilista ha de tener una visión"   # a name
    assert untitled("Elecciones En Libia", known, dictionary) == "Elecciones en Libia"


def test_in_a_sentence_in_capitals_only_a_lexicon_word_the_model_knows_in_no_case_is_small():
    dictionary = {"estilista": "stylist", "libia": "Libyan"}
    assert listed_small("EL ESTILISTA EN LIBIA Y GAZIANTEP.", KNOWN | {"Libia"}, dictionary) == \
        "EL estilista EN LIBIA Y GAZIANTEP."
    assert listed_small("EL ESTILISTA", KNOWN, ()) == "EL ESTILISTA"


def test_the_source_pieces_get_back_the_case_the_text_was_sent_in():
    pieces = ["▁La", "▁reun", "ión", "▁se", "▁", "⦃1⦄", "▁Madrid", "</s>"]
    assert as_typed(pieces, "La Reunión Se ⦃1⦄ Madrid") == ["▁La", "▁Reun", "ión", "▁Se", "▁", "⦃1⦄", "▁Madrid", "</s>"]
    # pieces that do not spell the text (an <unk>) are left as they are
    assert as_typed(["▁la", "<unk>", "</s>"], "La Ñ") == ["▁la", "<unk>", "</s>"]


def test_a_first_word_the_model_knows_only_in_small_letters_is_read_so_on_a_line_without_a_final_mark():
    known = {"tren", "cerveza", "empiece", "Abrir", "abrir", "de", "a", "cantar", "estación", "archivo"}
    assert first_small("Tren", known) == "tren"
    assert first_small("¿Cerveza fría", known) == "¿cerveza fría"
    assert first_small("Estación de tren", known) == "estación de tren"
    assert first_small("Empiece a cantar.", known) is None                 # a sentence: its first word as sent
    assert first_small("Empiece a cantar.", known, "any") == "empiece a cantar."
    assert first_small('Empiece a cantar."', known) is None               # a mark inside the quotation
    assert first_small("Tren", known, "never") is None
    assert first_small("Abrir", known) is None                             # known capitalised: as sent
    assert first_small("TREN", known) is None and first_small("tren", known) is None
    assert first_small("Gaziantep", known) is None                         # known in no case: a name
    assert first_small("3 Trenes", known) is None and first_small("", known) is None
    placeholder = re.compile(r"%\w|\{\w+\}|\{Archivo\}")
    assert first_small("{Archivo} de tren", known, placeholders=placeholder) is None   # a program's text


@pytest.mark.skipif(not (BUNDLED_TRANSFORMER / "manifest.json").exists(), reason="no bundled model")
def test_a_word_typed_alone_is_translated_as_the_word_and_answered_with_a_capital():
    translator = Translator(Engine(BUNDLED_TRANSFORMER))
    beer, train = translator.translate(["Cerveza", "Tren"], SearchOptions(beam_size=5))
    # read as sent, "Cerveza" came back "Cerve" and "Tren" "Three": the model knows them in small letters
    assert (beer.best.text, train.best.text) == ("Beer", "Train")
    assert beer.best.source_words[0] == "Cerveza" and beer.best.target_words[0] == "Beer"
    assert beer.best.target_tokens[0].startswith("▁B")                    # the pieces as the text
    translator.first_word = "unmarked"                                    # a sentence is then read as sent
    unmarked = translator.translate(["Empiece a cantar.", "Cerveza"], SearchOptions(beam_size=5))
    translator.first_word = "never"
    never = translator.translate(["Empiece a cantar.", "Cerveza"], SearchOptions(beam_size=5))
    assert unmarked[0].best.text == never[0].best.text == "Start singing."
    assert (unmarked[1].best.text, never[1].best.text) == ("Beer", "Cerve")
    # the capital goes on a letter that opens the answer, after opening marks at most
    alpha = np.full((4, 3), 1 / 3)                                        # T x S
    for pieces, text, expected in ((["▁¿", "dónde", "?", "</s>"], "¿dónde?", ["▁¿", "Dónde", "?", "</s>"]),
                                   (["▁3", "▁beers", "▁.", "</s>"], "3 beers .", ["▁3", "▁beers", "▁.", "</s>"])):
        hyp = Hypothesis(text, pieces, [-0.1] * 4, -0.4, -0.1, alpha, ["▁3", "▁cervezas", "</s>"])
        done = translator._first_capitalised(Translation(text, hyp.source_tokens, [hyp])).best
        assert done.target_tokens == expected and done.text == "".join(expected[:-1]).replace("▁", " ").strip()


@pytest.mark.skipif(not (BUNDLED_TRANSFORMER / "manifest.json").exists(), reason="no bundled model")
def test_a_models_first_word_rule_is_one_of_three(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(BUNDLED_TRANSFORMER, model)
    manifest = json.loads((model / "manifest.json").read_text())
    manifest.setdefault("decoding", {})["first_word"] = "sometimes"
    (model / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="decoding.first_word is 'sometimes'; expected one of unmarked, any, never"):
        Translator(Engine(model))
