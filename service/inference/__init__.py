"""ONNX Runtime and numpy: the engine's sessions and graphs, slot storage, the decode batch, beam selection."""
