"""Copy variants (`attnmt data copies`): a word both sides share verbatim, replaced on both."""

import re

from attnmt.model.data.copies import copy_variants, foreign_pool, shared_words, write_copies

PAIRS = [("usa git commit para guardar %s", "use git commit to save %s"),
         ("Error al leer $HOME con --force", "Error reading $HOME with --force"),
         ("no se pudo abrir {name}", "could not open {name}"),
         ("el archivo README no existe", "the README file does not exist"),
         ("borre la rama", "delete the branch")]


def test_shared_words_skip_placeholders_and_options():
    assert shared_words(*PAIRS[0]) == ["git", "commit"]
    assert shared_words(*PAIRS[1]) == ["Error"]         # not $HOME, not --force
    assert shared_words(*PAIRS[2]) == []                 # {name} is a placeholder
    assert shared_words(*PAIRS[3]) == []                 # words are lower-case or capitalised, not README
    assert shared_words(*PAIRS[4]) == []


def test_the_pool_holds_target_words_no_source_uses():
    pool = foreign_pool(PAIRS)
    assert "branch" in pool and "delete" in pool
    assert "commit" not in pool and "git" not in pool     # the sources use them
    assert all(w.islower() and len(w) >= 4 for w in pool)


def test_a_variant_replaces_one_shared_word_on_both_sides():
    variants = copy_variants(PAIRS, share=1.0, seed=3)
    assert len(variants) == 2                             # the pairs that share a word
    pool = set(foreign_pool(PAIRS))
    for (source, target), (new_source, new_target) in zip(PAIRS[:2], variants):
        gone = [w for w in shared_words(source, target) if w not in new_source.split()]
        assert len(gone) == 1
        added = set(new_source.split()) - set(source.split())
        assert len(added) == 1 and added == set(new_target.split()) - set(target.split())
        assert added.pop().lower() in pool
    assert variants[1][0].startswith(variants[1][1].split()[0])   # Error -> a capitalised word, both sides
    assert re.search(r"\$HOME.*--force", variants[1][0])          # placeholders and options untouched


def test_variants_are_reproducible_and_share_zero_makes_none(tmp_path):
    assert copy_variants(PAIRS, 1.0, seed=1) == copy_variants(PAIRS, 1.0, seed=1)
    assert copy_variants(PAIRS, 0.0) == []
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.es").write_text("".join(s + "\n" for s, _ in PAIRS))
    (data / "train.en").write_text("".join(t + "\n" for _, t in PAIRS))
    counts = write_copies(tmp_path / "copies", data, share=1.0)
    assert counts["train"] == 2 and len((tmp_path / "copies" / "train.es").read_text().splitlines()) == 2
    assert (tmp_path / "copies" / "dev.es").read_text() == ""
