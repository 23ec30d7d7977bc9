"""The networks: RNNsearch (Bahdanau et al. 2015) and the Transformer (Vaswani et al. 2017)."""
