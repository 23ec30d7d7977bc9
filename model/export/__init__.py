"""From a checkpoint to a served model directory: ONNX graphs, int8, the shortlist, slot graphs, upgrades."""
