"""Typed-input variants: training pairs without final marks, with a lower-cased first letter, or
without accents."""

import pytest

from attnmt.model.data.variants import lowercased, typed_share, unaccented, unpunctuated
from attnmt.model.guided_alignment import corpus_piece_links
from attnmt.model.train import TrainConfig, training_pairs


@pytest.mark.parametrize("pair, bare", [
    (("¡Hola!", "Hello!"), ("Hola", "Hello")),
    (("¿Cómo estás?", "How are you?"), ("Cómo estás", "How are you")),
    (("Espera...", "Wait..."), ("Espera", "Wait")),
    (("¿Qué?!", "What?!"), ("Qué", "What")),
    (("Tengo 5.", "I have 5."), ("Tengo 5", "I have 5")),
])
def test_final_marks_leave_both_sides(pair, bare):
    assert unpunctuated(*pair) == bare


@pytest.mark.parametrize("pair", [
    ("Guardar", "Save"),                              # nothing to drop
    ("Hola.", "Hello"),                               # one side only: the pair is left as it is
    ("Tom, ¿vienes?", "Tom, are you coming?"),        # a dangling "¿" would stay
    ("Hola !", "Hello !"),                            # a mark standing alone is a word
    ('Dijo "sí."', 'He said "yes."'),                 # the quotes would lose their balance
])
def test_pairs_the_variant_would_spoil_are_left(pair):
    assert unpunctuated(*pair) is None


def test_the_source_alone_is_lower_cased_and_acronyms_stay():
    assert lowercased("Él vino.") == "él vino."
    assert lowercased("NASA lo sabe.") is None
    assert lowercased("hola") is None
    assert lowercased("¿Qué?") is None                # no letter first: nothing typed differently
    assert lowercased("") is None


def test_accents_and_opening_marks_leave_the_source_as_a_keyboard_without_them_types_it():
    assert unaccented("¿Dónde está la estación? Mañana, pingüino.") == "Donde esta la estacion? Manana, pinguino."
    assert unaccented("Él dijo «¡Ánimo!» y ¿ qué") == "El dijo «Animo!» y ¿ que"     # a lone ¿ is a word: kept
    assert unaccented("Hola, Tom.") is None                              # nothing to drop
    assert unaccented("नमस्ते") is None                                   # another script's marks are letters
    assert len(unaccented("¿Cómo estás, Tom?").split()) == 3            # words, and so their links, stay


def test_shares_are_near_their_rates_and_reruns_agree():
    pairs = [(f"Frase número {n}.", f"Sentence number {n}.") for n in range(4000)]
    once, again = typed_share(pairs, 0.2, 0.1), typed_share(pairs, 0.2, 0.1)
    assert once == again
    bare = sum(not s.endswith(".") for s, _ in once)
    lower = sum(s[0] == "f" for s, _ in once)
    assert 0.17 < bare / len(pairs) < 0.23 and 0.08 < lower / len(pairs) < 0.12
    assert all(t.endswith(".") == s.endswith(".") for s, t in once)      # the marks leave both sides together
    assert all(t[0] == "S" for _, t in once)                             # the target keeps its capital
    assert typed_share(pairs, 0.0, 0.0) is pairs
    accented = [(f"Canción número {n}.", f"Song number {n}.") for n in range(4000)]
    plain = sum(s.startswith("Cancion numero") for s, _ in typed_share(accented, 0.0, 0.0, 0.3))
    assert 0.27 < plain / len(accented) < 0.33


def test_training_reads_the_variants_and_their_word_links_stay(tmp_path):
    raw = [("¡Hola, Tom!", "Hello, Tom!"), ("Guardar el archivo.", "Save the file.")] * 50
    cfg = TrainConfig(unpunctuated_rate=1.0, lowercased_rate=1.0)
    used = training_pairs(cfg, raw)
    assert used[0] == ("hola, Tom", "Hello, Tom") and used[1] == ("guardar el archivo", "Save the file")
    links = tmp_path / "train.links"
    links.write_text("0-0 1-1\n0-0 1-1 2-2\n" * 50)

    class Words:                                      # one piece a word: links map onto pieces one to one
        def __init__(self):
            self.sp = self

        def __len__(self):
            return 16

        def id_to_piece(self, i):
            return "▁w"

    ids = [([4] * len(s.split()), [4] * len(t.split())) for s, t in used]
    out, counts = corpus_piece_links(links, raw, used, [s for s, _ in ids], [t for _, t in ids], Words())
    assert counts["with_links"] == 100 and counts["mismatched"] == 0
