#!/bin/sh
# Rebuilds libreoffice.odt and libreoffice.docx from libreoffice.fodt (a flat OpenDocument
# text: one XML file, reviewable) with LibreOffice Writer run headless, as a user's "Save as"
# would: the .docx through the filter "Word 2007-365" (MS Word 2007 XML). The documents are
# what LibreOffice writes, not what our tests would write by hand
# (tests/integration/test_file_office_libreoffice.py translates them).
#
# Made with LibreOffice 7.4.7.2 (Debian 12 bookworm, libreoffice-writer-nogui 4:7.4.7-1+deb12u14):
#   apt-get install -y --no-install-recommends libreoffice-writer-nogui
#   sh tests/data/office/make_fixtures.sh
# Each run writes new dates into the zip entries and meta.xml, and a new thumbnail: commit the
# documents only when the source changes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# a profile of its own, so that the machine user's settings (autocorrect, save options) play no part
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
for format in odt "docx:MS Word 2007 XML"; do
    soffice "-env:UserInstallation=file://$profile" --headless --convert-to "$format" --outdir "$here" \
        "$here/libreoffice.fodt"
done
ls -l "$here/libreoffice.odt" "$here/libreoffice.docx"
