"""Text around the decoder: the translator, alignment to words and links, placeholders, glossaries, quality, \
documents and markup."""
