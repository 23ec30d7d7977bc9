"""Placeholder protection: sentinels in, originals out, nothing lost or invented."""

import numpy as np

from attnmt.model.data.placeholders import MAX_SENTINELS, PATTERN, SENTINEL
from attnmt.service.text.placeholders import Protector, detokenize

SPEC = {"pattern": PATTERN, "sentinel": SENTINEL, "max": MAX_SENTINELS}


def test_protect_numbers_placeholders_in_source_order():
    p = Protector(SPEC).protect("no se puede abrir %s: %1$d {name}")
    assert p.text == "no se puede abrir ⦃1⦄: ⦃2⦄ ⦃3⦄"
    assert p.originals == ("%s", "%1$d", "{name}")


def test_command_line_options_are_placeholders_and_hyphenated_words_are_not():
    p = Protector(SPEC).protect("--connect-timeout=SECS set the timeout; use [-a|--all] or '--no-refresh'")
    assert p.originals == ("--connect-timeout=SECS", "-a", "--all", "'--no-refresh'")
    # a value's name in any script is the option's, whole ("--round=M" would leave "ÉTODO" to the model)
    p = Protector(SPEC).protect("--round=MÉTODO, --pages=PRIMERA_PÁGINA[:ÚLTIMA_PÁGINA] o --hash[=<n>]")
    assert p.originals == ("--round=MÉTODO", "--pages=PRIMERA_PÁGINA", "--hash")
    for prose in ("an e-mail to non-free lists", "a - b -- c", "-5 degrees", "x--y", "-Hola -dijo él", "--opción"):
        assert Protector(SPEC).protect(prose).originals == ()


def test_with_more_placeholders_than_sentinels_options_give_way_to_format_directives():
    text = "usage: %s " + " ".join(f"[--opt{i}]" for i in range(10)) + " %d '%s'"
    p = Protector(SPEC).protect(text)
    assert p.originals == ("%s", *(f"--opt{i}" for i in range(7)), "%d", "'%s'")[:MAX_SENTINELS - 2] + ("%d", "'%s'")
    assert p.text.startswith("usage: ⦃1⦄ [⦃2⦄]") and p.text.endswith("[--opt8] [--opt9] ⦃8⦄ ⦃9⦄")


def test_evaluations_count_options_apart_from_format_directives():
    from attnmt.bench.evaluate import placeholders_kept
    from attnmt.model.data.placeholders import find_options
    sources = ["--all: show %s", "-n STRING sets %d", "no placeholder here"]
    hyps = ["--all: muestra %s", "-nCADENA fija %d", "ninguno %s"]
    assert placeholders_kept(sources, hyps) == {"sentences": 2, "kept": 2, "share": 1.0, "invented": 1}
    assert placeholders_kept(sources, hyps, find_options) == {"sentences": 2, "kept": 1, "share": 0.5, "invented": 0}


def test_more_placeholders_than_sentinels_stay_as_they_are():
    text = " ".join(f"%{i}$s" for i in range(1, 12))
    p = Protector(SPEC).protect(text)
    assert len(p.originals) == MAX_SENTINELS and p.text.endswith("%10$s %11$s")


def restore(source, target, alpha, originals):
    return Protector(SPEC).restore(source, target, np.array(alpha, dtype=np.float32), originals)


def test_sentinels_the_model_kept_are_restored_in_its_order():
    source = ["▁de", "▁", "⦃1⦄", "▁a", "▁", "⦃2⦄", "</s>"]
    target = ["▁", "⦃2⦄", "▁from", "▁", "⦃1⦄", "</s>"]
    alpha = np.eye(6, 7)
    src, tgt, a, origin, _ = restore(source, target, alpha, ("%s", "%d"))
    assert detokenize(tgt[:-1]) == "%d from %s"
    assert src[2] == "%s" and src[5] == "%d"
    assert origin == [0, 1, 2, 3, 4, 5] and a.shape == (6, 7)


def test_a_dropped_sentinel_is_inserted_after_the_word_aligned_to_it():
    source = ["▁abrir", "▁", "⦃1⦄", "</s>"]
    target = ["▁open", "ing", "▁file", "</s>"]
    alpha = [[0.9, 0.0, 0.1, 0.0],     # 'open' attends 'abrir'
             [0.2, 0.1, 0.7, 0.0],     # 'ing' attends the sentinel most
             [0.3, 0.2, 0.5, 0.0],
             [0.0, 0.0, 0.0, 1.0]]
    src, tgt, a, origin, _ = restore(source, target, alpha, ("%s",))
    assert detokenize(tgt[:-1]) == "opening %s file"     # after the whole word 'opening'
    assert origin == [0, 1, -1, 2, 3]
    assert a[2].tolist() == [0, 0, 1, 0]


def test_invented_and_repeated_sentinels_are_removed():
    source = ["▁ver", "▁", "⦃1⦄", "</s>"]
    target = ["▁see", "▁", "⦃1⦄", "▁", "⦃1⦄", "▁", "⦃7⦄", "▁now", "</s>"]
    src, tgt, a, origin, _ = restore(source, target, np.full((9, 4), 0.25), ("$HOME",))
    assert detokenize(tgt[:-1]) == "see $HOME now"
    assert len(tgt) == a.shape[0] == len(origin)


def test_placeholders_the_model_wrote_itself_are_removed():
    protector = Protector(SPEC)
    pieces = ["▁Stri", "de", "▁%", "s", "▁", "⦃1⦄", ":", "▁in", "▁", "⦃2⦄"]
    assert protector.text(pieces, ("%s", "'%d'")) == "Stride %s: in '%d'"


def test_without_protection_stray_sentinels_are_dropped():
    assert Protector(SPEC).without_sentinels("⦃1⦄E %s is not a commit!") == "E %s is not a commit!"


def test_a_percent_sign_before_a_sentinel_does_not_fuse_with_the_placeholder():
    assert Protector(SPEC).text(["▁failed", "▁%", "⦃1⦄"], ("%s",)) == "failed %s"


def test_quotation_marks_around_a_placeholder_are_hidden_with_it():
    p = Protector(SPEC).protect("failed to flush '%s', use \"$HOME\" or `%s' and ‘%d’ \u201c{name}\u201d, not 'a %s'")
    assert p.originals == ("'%s'", '"$HOME"', "`%s'", "‘%d’", "\u201c{name}\u201d", "%s")
    assert p.text == "failed to flush ⦃1⦄, use ⦃2⦄ or ⦃3⦄ and ⦃4⦄ ⦃5⦄, not 'a ⦃6⦄'"
    # marks the model wrote around a restored one are not doubled by the restoring
    assert Protector(SPEC).text(["▁no", "▁se", "▁pudo", "▁vaciar", "▁⦃1⦄"], ("'%s'",)) == "no se pudo vaciar '%s'"


def test_a_word_the_model_glued_to_a_sentinel_is_set_apart_where_the_source_has_a_gap():
    source = ["▁Use", "▁", "⦃1⦄", "▁", "⦃2⦄", "▁", "STRING", "▁or", "▁", "⦃3⦄", ":", "▁x", "</s>"]
    target = ["▁Usa", "▁", "⦃1⦄", "⦃2⦄", "C", "ADENA", "▁o", "⦃3⦄", ":", "▁x", "</s>"]
    _, restored, a, origin, _ = restore(source, target, np.full((11, 13), 1 / 13), ("-V", "-n", "%s"))
    assert detokenize(restored[:-1]) == "Usa -V -n CADENA o %s: x"
    assert len(restored) == a.shape[0] == len(origin) == 11


def test_what_the_source_glues_to_a_sentinel_stays_glued():
    source = ["▁--", "size", "=", "⦃1⦄", "B", "▁y", "▁", "⦃2⦄", "⦃3⦄", "</s>"]
    target = ["▁--", "size", "=", "⦃1⦄", "B", "▁and", "▁", "⦃2⦄", "⦃3⦄", "</s>"]
    _, restored, *_ = restore(source, target, np.full((10, 10), 0.1), ("%d", "%s", "%%"))
    assert detokenize(restored[:-1]) == "--size=%dB and %s%%"


def test_a_sentinel_the_user_typed_is_hidden_as_a_placeholder():
    # left in the text, "⦃2⦄" would read as the sentinel of "%d" and come back as it (or be dropped)
    p = Protector(SPEC).protect("Pulsa ⦃2⦄ y luego %s y %d; ⦃12⦄.")
    assert p.text == "Pulsa ⦃1⦄ y luego ⦃2⦄ y ⦃3⦄; ⦃4⦄."
    assert p.originals == ("⦃2⦄", "%s", "%d", "⦃12⦄")
    crowded = Protector(SPEC).protect(" ".join(f"%{i}$s" for i in range(1, 12)) + " ⦃3⦄")
    assert "⦃3⦄" in crowded.originals                       # hidden first when sentinels run short


def test_addresses_and_emoji_are_kept_as_written_and_not_counted_as_format_directives():
    from attnmt.model.data.placeholders import find, find_formats
    text = ("Ver https://ejemplo.com/ruta?x=1, (www.gnu.org) y http://www.w3.org/1998/Math/MathML»; "
            "escribe a juan.perez@ejemplo.org o @ana@mastodon.social 😀 👍🏽 🇪🇸 👩\u200d💻 %s")
    assert find(text) == ["https://ejemplo.com/ruta?x=1", "www.gnu.org", "http://www.w3.org/1998/Math/MathML",
                          "juan.perez@ejemplo.org", "@ana@mastodon.social", "😀", "👍🏽", "🇪🇸", "👩\u200d💻", "%s"]
    assert find_formats(text) == ["%s"]
    assert find("un e-mail a las 10.30, señor.") == []
