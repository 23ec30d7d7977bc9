"""The ONNX Runtime engine: two sessions (encoder, decoder step) over a model
directory. No search logic lives here (that is `decoding.py`); this module
owns providers, threads and the exact tensors each graph takes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .errors import ModelLoadError
from .manifest import DECODER_INPUTS, DECODER_OUTPUTS, ENCODER_INPUTS, ENCODER_OUTPUTS, Manifest, load_manifest
from .tokenizer import Tokenizer

log = logging.getLogger(__name__)

_LEVELS = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
           "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
           "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
           "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


@dataclass(frozen=True)
class EngineOptions:
    device: str = "cpu"             # cpu | cuda
    intra_op_threads: int = 0       # 0: ONNX Runtime's default (one per core)
    inter_op_threads: int = 1
    optimization: str = "all"       # disable | basic | extended | all
    allow_spinning: bool = True     # worker threads spin between steps: faster steps, busier cores
    io_binding: bool | None = None  # bind inputs/outputs explicitly (None: on for cuda, off for cpu)


@dataclass
class Encoded:
    """Encoder output for a batch; arrays are numpy (CPU) views."""
    annotations: np.ndarray   # batch x src_len x 2n (float32)
    keys: np.ndarray          # batch x src_len x K
    mask: np.ndarray          # batch x src_len (bool)
    init_state: np.ndarray    # batch x d


class Engine:
    """Loads a model directory and runs its graphs."""

    def __init__(self, model_dir: str | Path, options: EngineOptions = EngineOptions(), verify: bool = True):
        self.model_dir = Path(model_dir)
        self.options = options
        self.manifest: Manifest = load_manifest(self.model_dir, verify=verify)
        self.tokenizer = Tokenizer(self.model_dir / self.manifest.tokenizer)
        if len(self.tokenizer) != self.manifest.vocab_size:
            raise ModelLoadError(f"{self.model_dir}: tokenizer has {len(self.tokenizer)} pieces, "
                                 f"manifest says vocab_size {self.manifest.vocab_size}")
        self.providers = self._providers(options.device)
        self.encoder = self._session("encoder", ENCODER_INPUTS, ENCODER_OUTPUTS)
        self.decoder = self._session("decoder_step", DECODER_INPUTS, DECODER_OUTPUTS)
        self.provider = self.decoder.get_providers()[0]
        self.io_binding = options.io_binding if options.io_binding is not None else options.device == "cuda"
        self.device = "cuda" if self.provider == "CUDAExecutionProvider" else "cpu"
        ids = self.manifest.special_ids
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = ids.pad, ids.unk, ids.bos, ids.eos

    @staticmethod
    def _providers(device: str) -> list[str]:
        if device == "cpu":
            return ["CPUExecutionProvider"]
        if device != "cuda":
            raise ModelLoadError(f"device must be 'cpu' or 'cuda', not {device!r}")
        if hasattr(ort, "preload_dlls"):
            try:  # CUDA/cuDNN from the nvidia-* pip packages are found only after this
                ort.preload_dlls()
            except Exception as e:  # noqa: BLE001 - reported below if CUDA then fails
                log.warning("onnxruntime.preload_dlls() failed: %s", e)
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]

    def _session(self, graph: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> ort.InferenceSession:
        path = self.model_dir / self.manifest.graphs[graph]
        so = ort.SessionOptions()
        so.graph_optimization_level = _LEVELS[self.options.optimization]
        so.intra_op_num_threads = self.options.intra_op_threads
        so.inter_op_num_threads = self.options.inter_op_threads
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.options.allow_spinning else "0")
        so.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(path), sess_options=so, providers=self.providers)
        except Exception as e:  # ORT raises several exception types for a bad graph
            raise ModelLoadError(f"{path}: ONNX Runtime cannot load it: {e}") from e
        got = session.get_providers()
        if self.providers[0] not in got:
            # ORT falls back to CPU silently when CUDA cannot load: refuse instead.
            raise ModelLoadError(f"{graph}: asked for {self.providers[0]} but ONNX Runtime gave {got}; "
                                 "check the CUDA driver, CUDA 12/13 and cuDNN 9 libraries "
                                 "(pip install 'onnxruntime-gpu[cuda,cudnn]'), or set device=cpu")
        names_in = tuple(i.name for i in session.get_inputs())
        names_out = tuple(o.name for o in session.get_outputs())
        if set(names_in) != set(inputs) or set(names_out) != set(outputs):
            raise ModelLoadError(f"{path}: graph has inputs {names_in} and outputs {names_out}, "
                                 f"expected {inputs} -> {outputs}")
        return session

    def encode(self, sources: list[list[int]]) -> Encoded:
        """Encode token id lists (each already ending with </s>)."""
        lengths = np.array([len(s) for s in sources], dtype=np.int64)
        tokens = np.full((len(sources), int(lengths.max())), self.pad_id, dtype=np.int64)  # batch x src_len
        for row, ids in enumerate(sources):
            tokens[row, :len(ids)] = ids
        annotations, keys, mask, init_state = self.encoder.run(
            list(ENCODER_OUTPUTS), {"src_tokens": tokens, "src_lengths": lengths})
        return Encoded(annotations, keys, mask, init_state)

    def upload_memory(self, annotations: np.ndarray, keys: np.ndarray, mask: np.ndarray) -> tuple:
        """The attention memory as OrtValues on the execution device. With IO binding,
        a DecodeBatch uploads it once and reuses it for every step until its rows
        change, instead of copying annotations host -> device at each step."""
        return tuple(ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x), self.device, 0)
                     for x in (annotations, keys, mask))

    def step(self, prev_tokens: np.ndarray, state: np.ndarray, annotations: np.ndarray, keys: np.ndarray,
             mask: np.ndarray, memory: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One decoder step for every row: log_probs (rows x V), new_state (rows x d), α (rows x src_len).
        `memory` (from `upload_memory`) stands for annotations, keys and mask when IO binding is on."""
        if not self.io_binding:
            log_probs, new_state, alpha = self.decoder.run(list(DECODER_OUTPUTS), {
                "prev_tokens": prev_tokens, "state": state, "annotations": annotations, "keys": keys,
                "src_mask": mask})
            return log_probs, new_state, alpha
        binding = self.decoder.io_binding()
        binding.bind_cpu_input("prev_tokens", np.ascontiguousarray(prev_tokens))
        binding.bind_cpu_input("state", np.ascontiguousarray(state))
        for name, value in zip(("annotations", "keys", "src_mask"), memory or self.upload_memory(annotations, keys, mask)):
            binding.bind_ortvalue_input(name, value)
        for name in DECODER_OUTPUTS:     # the search runs on the host: outputs come back each step
            binding.bind_output(name, "cpu")
        self.decoder.run_with_iobinding(binding)
        log_probs, new_state, alpha = binding.copy_outputs_to_cpu()
        return log_probs, new_state, alpha
