"""Building the training corpora: the Bible, software messages, prose, back-translation, CLDR, copies, filters, \
links."""
