"""Reading corpora, for training (model/) and measurement (bench/): a split's sentence pairs
(splits.py) and word-link files, the gold set's among them (word_links.py). The standard
library only; imports nothing else of attnmt; serving never reads a corpus, so the serving
image does not hold it."""
