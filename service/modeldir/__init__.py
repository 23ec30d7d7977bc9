"""The model-directory contract that model/ writes and service/ reads: the manifest, the tokenizer, word links."""
