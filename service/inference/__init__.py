"""ONNX Runtime and numpy: the engine and its sessions, the decode batch and its searches,
beam search, slot storage, the shortlist and the vocabulary bias."""

import os

# ONNX Runtime's Linux wheels collect usage telemetry and keep a device id under ~/.cache (or
# $XDG_CACHE_HOME) unless this is set before onnxruntime is imported; attnmt sends nothing, and
# a server should write nothing outside its own files. A value the user set is kept.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
