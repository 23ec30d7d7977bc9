"""The software-message corpus: real .mo catalogs (written with polib) read,
cleaned, split by package and de-duplicated across splits."""

from pathlib import Path

import polib
import pytest

from attnmt.model.data import gettext as gc
from attnmt.model.data.placeholders import find, protect_pair, protect_share


def write_mo(root: Path, domain: str, entries: list[polib.MOEntry]) -> None:
    mo = polib.MOFile()
    mo.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    mo.extend(entries)
    path = root / "usr/share/locale/es/LC_MESSAGES" / f"{domain}.mo"
    path.parent.mkdir(parents=True, exist_ok=True)
    mo.save(str(path))


def entry(msgid: str, msgstr: str = "", **kw) -> polib.MOEntry:
    return polib.MOEntry(msgid=msgid, msgstr=msgstr, **kw)


def test_plural_forms_and_contexts_each_give_a_pair(tmp_path):
    write_mo(tmp_path, "demo", [
        entry("%d file", msgid_plural="%d files", msgstr_plural={0: "%d archivo", 1: "%d archivos"}),
        entry("Open", "Abrir", msgctxt="menu"),
        entry("Untranslated", ""),
    ])
    pairs = list(gc.read_catalog(tmp_path / "usr/share/locale/es/LC_MESSAGES/demo.mo"))
    assert ("%d archivo", "%d file") in pairs and ("%d archivos", "%d files") in pairs
    assert ("Abrir", "Open") in pairs                       # the context is not part of the text


@pytest.mark.parametrize("msgstr, msgid, expected", [
    ("_Archivo", "_File", [("Archivo", "File")]),            # GTK accelerator
    ("&Guardar como", "Save &As", [("Guardar como", "Save As")]),
    ("~Insertar", "~Insert", [("Insertar", "Insert")]),      # LibreOffice
    ("volcado core_dump", "core_dump written", [("volcado core_dump", "core_dump written")]),  # identifier
    ("A &amp; B", "A &amp; B and C", [("A &amp; B", "A &amp; B and C")]),  # an entity is no accelerator
    ("Uno\nDos", "One\nTwo", [("Uno", "One"), ("Dos", "Two")]),            # lines agree: split
    ("Uno  dos\ntres", "One two three", [("Uno dos tres", "One two three")]),  # lines differ: joined
    ("Same", "Same", []),                                    # untranslated
    ("%s: %s", "%s: %s", []),
    ("", "Empty", []),
    ("x" * 400, "long", []),
])
def test_message_cleaning(msgstr, msgid, expected):
    assert list(gc.message_pairs(msgstr, msgid)) == expected


def test_split_by_package_removes_held_out_sources_from_train(tmp_path):
    roots = {}
    for package, entries in {
        "git": [entry("Commit", "Confirmar"), entry("Push", "Empujar")],
        "bash": [entry("Push", "Empujar"), entry("Exit", "Salir")],
        "gawk": [entry("commit", "confirmar"), entry("Exit", "Salir"), entry("Quit", "Terminar"),
                 entry("Quit", "Terminar")],
    }.items():
        root = tmp_path / f"{package}_1.0_all"
        write_mo(root, package, entries)
        roots[package] = root
    splits, facts = gc.build_corpus(roots)
    sources = {name: [m.source for m in msgs] for name, msgs in splits.items()}
    assert sorted(sources["test"]) == ["Confirmar", "Empujar"]
    assert sources["dev"] == ["Salir"]                # 'Empujar' is a test message
    assert sources["train"] == ["Terminar"]           # case-folded leak removed, duplicate dropped
    assert {f["package"]: f["version"] for f in facts} == {"git": "1.0", "bash": "1.0", "gawk": "1.0"}


def test_write_corpus_writes_aligned_files_and_a_card(tmp_path):
    root = tmp_path / "gawk_5.2_all"
    write_mo(root, "gawk", [entry("cannot open %s", "no se puede abrir %s")])
    splits, facts = gc.build_corpus({"gawk": root})
    counts = gc.write_corpus(splits, facts, tmp_path / "out")
    assert counts == {"train": 1, "dev": 0, "test": 0}
    assert (tmp_path / "out/train.es").read_text() == "no se puede abrir %s\n"
    assert (tmp_path / "out/train.ids").read_text() == "gawk/gawk\n"
    assert "| gawk | 5.2 | 1 | 1 |" in (tmp_path / "out/DATA_CARD.md").read_text()


def test_the_committed_package_list_holds_the_reserved_packages():
    packages = gc.read_package_list()
    assert set(gc.TEST_PACKAGES + gc.DEV_PACKAGES) <= set(packages)
    assert len(packages) == len(set(packages))


def test_missing_tools_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="apt-get not found"):
        gc.fetch_packages(["git"], tmp_path)


@pytest.mark.parametrize("text, expected", [
    ("borre %s y %1$s", ["%s", "%1$s"]),
    ("%.*s y %-10lu y %<PRIu64>", ["%.*s", "%-10lu", "%<PRIu64>"]),
    ("%(name)s {0} {name} {{var}} $HOME ${VAR}", ["%(name)s", "{0}", "{name}", "{{var}}", "$HOME", "${VAR}"]),
    ("<b>negrita</b> y <a href=\"x\">enlace</a>", ["<b>", "</b>", "<a href=\"x\">", "</a>"]),
    ("el 50 % de los casos, {a b}", []),
    # a metavariable is translated (<archivo> -> <file>), only markup elements are tags
    ("usa \"git add <archivo>...\" <BR/> <rama> <span class=\"x\">", ["<BR/>", "<span class=\"x\">"]),
])
def test_placeholder_pattern(text, expected):
    assert find(text) == expected


def test_protect_pair_numbers_in_source_order_and_follows_target_order():
    assert protect_pair("de %s a %d", "%d from %s") == ("de ⦃1⦄ a ⦃2⦄", "⦃2⦄ from ⦃1⦄")
    assert protect_pair("dos %s %s", "two %s %s") == ("dos ⦃1⦄ ⦃2⦄", "two ⦃1⦄ ⦃2⦄")
    assert protect_pair("de %s", "from %1$s") is None       # the translator changed the placeholder
    assert protect_pair("nada", "nothing") is None


def test_protect_share_is_deterministic_and_partial():
    pairs = [(f"archivo {i} %s", f"file {i} %s") for i in range(400)]
    once, again = protect_share(pairs, 0.5), protect_share(pairs, 0.5)
    assert once == again
    protected = sum("⦃1⦄" in s for s, _ in once)
    assert 120 < protected < 280
    assert protect_share(pairs, 0.0) == pairs
