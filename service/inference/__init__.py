"""ONNX Runtime and numpy: the engine and its sessions, the decode batch and its searches,
beam search, slot storage, the shortlist and the vocabulary bias."""
