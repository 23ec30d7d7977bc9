"""A sentence's case as the models read it: Title Case told apart from ordinary text and from a
program's labels, read in small letters where the model knows a word so, names kept."""

import re

import pytest

from attnmt.model.data.placeholders import PATTERN
from attnmt.service.text.case import SMALL_WORDS, as_typed, listed_small, titled, untitled

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
