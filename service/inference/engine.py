"""The ONNX Runtime engine: the encoder and the two decoder-step graphs of a
model directory. No search logic lives here (that is `search.py` and
`decoding.py`); this module owns providers, threads and the exact tensors each
graph takes (see `manifest.py` for the contract).

Token choice happens inside the step graph: a step returns each row's k best
tokens and their log-probabilities, never rows x vocabulary, so on a GPU only
ids, scores, α and the new state cross to the host.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from attnmt.service.errors import ModelLoadError
from attnmt.service.modeldir.manifest import (DECODER_INPUTS, DECODER_OUTPUTS, ENCODER_INPUTS, MEMORY_OUTPUTS, POSITIONS,
                       SHARED_DECODER_INPUTS, SHARED_SHORTLIST_DECODER_INPUTS, SHORTLIST_DECODER_INPUTS, Manifest,
                       load_manifest)
from attnmt.service.inference.shortlist import Shortlist
from attnmt.service.inference.slots import Memory, RowMemory
from attnmt.service.modeldir.tokenizer import Tokenizer

log = logging.getLogger(__name__)

# The slot graphs (model/export/slot_graphs.py), shipped with the service: the device path's gathers.
SLOT_GRAPHS = Path(__file__).parent / "graphs"

_LEVELS = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
           "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
           "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
           "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


@dataclass(frozen=True)
class EngineOptions:
    device: str = "cpu"             # cpu | cuda | openvino (the CPU through OpenVINO's execution provider)
    precision: str = "f32"          # f32 | bf16 (openvino only: bfloat16 matrix products, AMX where the CPU has it)
    intra_op_threads: int = 0       # 0: ONNX Runtime's default (one per core)
    inter_op_threads: int = 1
    optimization: str = "all"       # disable | basic | extended | all
    allow_spinning: bool = True     # worker threads spin within a run (never between runs: Engine._session)
    idle_spinning: bool = False     # without allow_spinning: spin within the steps a caller marks idle (step(idle=))
    io_binding: bool | None = None  # the device path (None: on for cuda, off for cpu): a batch's memory and
                                    # state stay on the execution device across steps (service/inference/device.py)
    shortlist: bool = False         # use the model's lexical shortlist when it has one (off: it pays only
                                    # at one or two sentences a step; docs/benchmarks.md)


@dataclass
class Encoded:
    """Encoder output for N sentences; numpy arrays."""
    annotations: np.ndarray   # N x S x 2n (float32)
    keys: np.ndarray          # N x S x K
    mask: np.ndarray          # N x S (bool)
    init_state: dict[str, np.ndarray]   # step-state name -> N x ...


@dataclass
class StepOutput:
    topk_log_probs: np.ndarray    # R x k, best first
    topk_ids: np.ndarray          # R x k
    forced_log_probs: np.ndarray  # R: log p of each row's forced token
    state: dict[str, np.ndarray]  # step-state name -> R x ... (the state for the next step)
    alpha: np.ndarray             # R x S


_OPENVINO = "OpenVINOExecutionProvider"
_openvino_lock = threading.Lock()
_openvino_registered = False        # ONNX Runtime refuses a second registration of the library


def _register_openvino() -> None:
    """Load OpenVINO's plugin library into ONNX Runtime, once per process.

    Whether to register is decided by the library, not by its devices: on a CPU where the
    plugin lists no device (an AMD EPYC, say), looking for a device would register again and
    ONNX Runtime would answer "EP library is already registered" to every later engine."""
    global _openvino_registered
    try:
        import onnxruntime_ep_openvino
    except ImportError as e:
        raise ModelLoadError("device openvino needs OpenVINO's execution provider: "
                             "pip install 'attnmt[openvino]' (the onnxruntime-ep-openvino package)") from e
    with _openvino_lock:
        if _openvino_registered:
            return
        try:
            ort.register_execution_provider_library(_OPENVINO, onnxruntime_ep_openvino.get_library_path())
        except Exception as e:  # noqa: BLE001 - ORT raises its own types for a library it cannot load
            if "already registered" not in str(e):    # registered by someone else in this process
                raise ModelLoadError(f"OpenVINO's execution provider did not load into ONNX Runtime "
                                     f"{ort.__version__}: {e}") from e
        _openvino_registered = True


def _openvino_devices() -> list:
    """The CPU as OpenVINO's plugin execution provider sees it.

    The plugin (PyPI onnxruntime-ep-openvino) loads into the installed ONNX Runtime; it takes
    its precision and threads from `load_config`, not from provider options. It lists a CPU
    device only on an Intel CPU: elsewhere every engine gets the same error."""
    _register_openvino()
    devices = [d for d in ort.get_ep_devices() if d.ep_name == _OPENVINO and d.device.type == ort.OrtHardwareDeviceType.CPU]
    if not devices:
        raise ModelLoadError(f"OpenVINO's execution provider found no CPU device on this machine "
                             f"(CPU vendor {_cpu_vendor()}; device openvino needs an Intel CPU): use device cpu")
    return devices[:1]


def _cpu_vendor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


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
        self.state_names = dict(self.manifest.step_state)       # input -> output that replaces it
        self.initial_state = dict(self.manifest.initial_state)  # input -> encoder output that starts it
        if set(self.initial_state) != set(self.state_names):
            raise ModelLoadError(f"{self.model_dir}: manifest step_state {sorted(self.state_names)} and "
                                 f"initial_state {sorted(self.initial_state)} must name the same state inputs")
        self.encoder_outputs = MEMORY_OUTPUTS + tuple(self.initial_state.values())
        extra = tuple(n for n in self.state_names if n not in DECODER_INPUTS)
        self.providers = self._providers(options.device, options.precision)
        self._openvino = _openvino_devices() if options.device == "openvino" else None
        self.positions = False      # set from decoder_step: whether the step graphs take POSITIONS
        self.encoder = self._session("encoder", ENCODER_INPUTS, self.encoder_outputs)
        self.decoder = self._session("decoder_step", DECODER_INPUTS + extra, DECODER_OUTPUTS)
        self.positions = POSITIONS in {i.name for i in self.decoder.get_inputs()}
        # The same graph with spinning threads, for steps while the server is idle (a lone
        # sentence: 0.85x its latency); without spinning under load, when the event loop
        # needs the cores (docs/benchmarks.md). 30-50 MB more resident memory.
        self._idle_decoder: ort.InferenceSession | None = None
        if options.idle_spinning and not options.allow_spinning and options.device == "cpu":
            self._idle_decoder = self._session("decoder_step", DECODER_INPUTS + extra, DECODER_OUTPUTS,
                                               spinning=True)
        self._extra_inputs = extra
        self._shared_decoder: ort.InferenceSession | None = None    # loaded when a beam first needs it
        self._lazy: dict[str, ort.InferenceSession] = {}
        self.provider = self.decoder.get_providers()[0]
        self.io_binding = options.io_binding if options.io_binding is not None else options.device == "cuda"
        self.device = "cuda" if self.provider == "CUDAExecutionProvider" else "cpu"
        ids = self.manifest.special_ids
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = ids.pad, ids.unk, ids.bos, ids.eos
        self.vocab_size = self.manifest.vocab_size
        # Never choose <pad> or <s>: -inf before the softmax removes them and
        # renormalises over the rest (their probability is ~0 after training).
        self.default_bias = np.zeros((1, self.vocab_size), dtype=np.float32)    # 1 x V
        self.default_bias[0, [self.pad_id, self.bos_id]] = -np.inf
        self._device_bias = self.upload(self.default_bias)[0] if self.io_binding else None   # uploaded once
        self.shortlist: Shortlist | None = None
        if options.shortlist and self.manifest.shortlist:
            self.shortlist = Shortlist(self.model_dir / self.manifest.shortlist["file"], self.vocab_size,
                                       always=[self.eos_id, self.unk_id], never=[self.pad_id, self.bos_id])

    @property
    def shared_decoder(self) -> ort.InferenceSession:
        """The shared-memory step graph; only batches with beams use it, so a greedy
        `attnmt translate` does not pay its load time at start-up."""
        if self._shared_decoder is None:
            self._shared_decoder = self._session("decoder_step_shared", SHARED_DECODER_INPUTS + self._extra_inputs,
                                                 DECODER_OUTPUTS)
        return self._shared_decoder

    def _graph(self, name: str, inputs: tuple[str, ...]) -> ort.InferenceSession:
        """A step graph loaded when first needed (the shortlist graphs)."""
        if name not in self._lazy:
            self._lazy[name] = self._session(name, inputs + self._extra_inputs, DECODER_OUTPUTS)
        return self._lazy[name]

    @staticmethod
    def _providers(device: str, precision: str) -> list[str]:
        if precision not in ("f32", "bf16"):
            raise ModelLoadError(f"precision must be 'f32' or 'bf16', not {precision!r}")
        if precision != "f32" and device != "openvino":
            raise ModelLoadError(f"precision {precision} needs device openvino (device {device} computes in f32)")
        if device == "cpu":
            return ["CPUExecutionProvider"]
        if device == "openvino":
            return [_OPENVINO, "CPUExecutionProvider"]
        if device != "cuda":
            raise ModelLoadError(f"device must be 'cpu', 'cuda' or 'openvino', not {device!r}")
        if hasattr(ort, "preload_dlls"):
            try:  # CUDA/cuDNN from the nvidia-* pip packages are found only after this
                ort.preload_dlls()
            except Exception as e:  # noqa: BLE001 - reported below if CUDA then fails
                log.warning("onnxruntime.preload_dlls() failed: %s", e)
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]

    def _session(self, graph: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
                 spinning: bool | None = None) -> ort.InferenceSession:
        if graph not in self.manifest.graphs:
            raise ModelLoadError(f"{self.model_dir}: the manifest names no {graph!r} graph")
        path = self.model_dir / self.manifest.graphs[graph]
        so = ort.SessionOptions()
        so.graph_optimization_level = _LEVELS[self.options.optimization]
        so.intra_op_num_threads = self.options.intra_op_threads
        so.inter_op_num_threads = self.options.inter_op_threads
        spin = self.options.allow_spinning if spinning is None else spinning
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        # Spin within a run only. Each graph has its own pool, and threads still spinning after
        # a run took the cores from the next graph's (the encoder's from the step's) and from
        # the server's event loop; without spinning, a sleeping thread is woken at every
        # parallel section of a step. Measured on 2 cores (docs/benchmarks.md): offline greedy
        # 1.16x as fast on 0.82x the CPU (the server leaves spinning off: config.py).
        so.add_session_config_entry("session.force_spinning_stop", "1")
        so.log_severity_level = 3
        providers = self.providers
        if self._openvino is not None:
            # A plugin EP is added per session for its devices; the CPU provider runs what it leaves.
            config = {"INFERENCE_PRECISION_HINT": self.options.precision}
            if self.options.intra_op_threads:
                config["INFERENCE_NUM_THREADS"] = self.options.intra_op_threads
            so.add_provider_for_devices(self._openvino, {"load_config": json.dumps({"CPU": config})})
            providers = None
        try:
            session = ort.InferenceSession(str(path), sess_options=so, providers=providers)
        except Exception as e:  # ORT raises several exception types for a bad graph
            raise ModelLoadError(f"{path}: ONNX Runtime cannot load it: {e}") from e
        got = session.get_providers()
        if self.providers[0] not in got:
            # ORT falls back to CPU silently when CUDA cannot load: refuse instead.
            if self._openvino is not None:
                raise ModelLoadError(f"{graph}: asked for {_OPENVINO} but ONNX Runtime gave {got}")
            raise ModelLoadError(f"{graph}: asked for {self.providers[0]} but ONNX Runtime gave {got}; "
                                 "check the CUDA driver, CUDA 12/13 and cuDNN 9 libraries "
                                 "(pip install 'onnxruntime-gpu[cuda,cudnn]'), or set device=cpu")
        names_in = tuple(i.name for i in session.get_inputs())
        names_out = tuple(o.name for o in session.get_outputs())
        want_out = outputs + tuple(o for o in self.state_names.values() if o not in outputs) if graph != "encoder" \
            else outputs
        if graph != "encoder" and POSITIONS in names_in:       # optional: each row's step
            if graph != "decoder_step" and not self.positions:
                raise ModelLoadError(f"{path}: takes {POSITIONS!r} where decoder_step does not")
            inputs = inputs + (POSITIONS,)
        elif graph != "encoder" and graph != "decoder_step" and self.positions:
            raise ModelLoadError(f"{path}: does not take {POSITIONS!r} where decoder_step does")
        if set(names_in) != set(inputs) or set(names_out) != set(want_out):
            raise ModelLoadError(f"{path}: graph has inputs {names_in} and outputs {names_out}, "
                                 f"expected {inputs} -> {want_out}")
        return session

    def _source_feeds(self, sources: list[list[int]]) -> dict[str, np.ndarray]:
        lengths = np.array([len(s) for s in sources], dtype=np.int64)
        tokens = np.full((len(sources), int(lengths.max())), self.pad_id, dtype=np.int64)  # N x S
        for row, ids in enumerate(sources):
            tokens[row, :len(ids)] = ids
        return {"src_tokens": tokens, "src_lengths": lengths}

    def encode(self, sources: list[list[int]]) -> Encoded:
        """Encode token id lists (each already ending with </s>)."""
        annotations, keys, mask, *init = self.encoder.run(list(self.encoder_outputs), self._source_feeds(sources))
        return Encoded(annotations, keys, mask, dict(zip(self.initial_state, init)))

    def encode_on_device(self, sources: list[list[int]]) -> tuple:
        """`encode` with its outputs left on the execution device (the device path):
        (annotations, keys, src_mask, {state name: initial state}) as OrtValues."""
        annotations, keys, mask, *init = self.run_on_device(self.encoder, self._source_feeds(sources),
                                                            self.encoder_outputs)
        return annotations, keys, mask, dict(zip(self.initial_state, init))

    def slot_graph(self, name: str) -> ort.InferenceSession:
        """One of the service's slot graphs (`SLOT_GRAPHS`), on this engine's device."""
        if name not in self._lazy:
            so = ort.SessionOptions()
            so.intra_op_num_threads = self.options.intra_op_threads
            so.log_severity_level = 3
            providers = self.providers if self._openvino is None else ["CPUExecutionProvider"]
            self._lazy[name] = ort.InferenceSession(str(SLOT_GRAPHS / name), sess_options=so, providers=providers)
        return self._lazy[name]

    def run_on_device(self, session: ort.InferenceSession, feeds: dict, outputs: tuple[str, ...],
                      to_host: frozenset[str] = frozenset()) -> list[ort.OrtValue]:
        """Run a graph with IO binding: feeds are numpy arrays (copied in) or OrtValues on the
        device; the outputs stay on the execution device, but for those named in `to_host`."""
        binding = session.io_binding()
        for name, value in feeds.items():
            if isinstance(value, np.ndarray):
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
            else:
                binding.bind_ortvalue_input(name, value)
        for name in outputs:
            binding.bind_output(name, "cpu" if name in to_host else self.device)
        session.run_with_iobinding(binding)
        return binding.get_outputs()

    def upload(self, *arrays: np.ndarray) -> tuple:
        """Arrays as OrtValues on the execution device."""
        return tuple(ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x), self.device, 0) for x in arrays)

    @staticmethod
    def row_memory(copies: RowMemory, memory: Memory, slots: np.ndarray) -> tuple[np.ndarray, ...]:
        """The step's memory feeds when rows outnumber sentences (beams) and the memory
        lives on the host: row r's copy of memory slot slots[r], kept across steps
        (`slots.RowMemory`), for the direct graph; with IO binding the shared graph
        gathers on the device instead."""
        return copies.view(memory, slots)

    def step(self, prev_tokens: np.ndarray, state: dict[str, np.ndarray], memory: tuple, k: int,
             forced_tokens: np.ndarray, memory_index: np.ndarray | None = None,
             vocab_bias: np.ndarray | None = None, candidates: np.ndarray | None = None,
             idle: bool = False, positions: np.ndarray | None = None) -> StepOutput:
        """One decoder step for R rows.

        memory: (annotations, keys, src_mask), numpy arrays or OrtValues on the device;
        state: numpy arrays, or with io_binding OrtValues on the device, where the new
        state then stays (StepOutput.state holds OrtValues);
        without `memory_index` row r attends memory row r (N = R), with it row r
        attends memory row memory_index[r] (beam rows share their sentence's memory).
        vocab_bias: 1 x V or R x V additive logits bias (default: forbid <pad> and <s>).
        candidates: vocabulary ids [C] the output layer runs over (the shortlist graphs);
        vocab_bias is then 1 x C or R x C, forced_tokens positions in candidates.
        idle: the machine has cores to spare (EngineOptions.idle_spinning); same answers.
        positions: R, each row's step, for graphs that take it (`self.positions`).
        """
        if candidates is not None:
            session = (self._graph("decoder_step_shortlist", SHORTLIST_DECODER_INPUTS) if memory_index is None
                       else self._graph("decoder_step_shared_shortlist", SHARED_SHORTLIST_DECODER_INPUTS))
        else:
            session = self.decoder if memory_index is None else self.shared_decoder
            if idle and memory_index is None and self._idle_decoder is not None:
                session = self._idle_decoder
        feeds = {"prev_tokens": prev_tokens,
                 "vocab_bias": vocab_bias if vocab_bias is not None
                 else self.default_bias if self._device_bias is None else self._device_bias,
                 "k": np.array([k], dtype=np.int64), "forced_tokens": forced_tokens}
        if memory_index is not None:
            feeds["memory_index"] = memory_index
        if candidates is not None:
            feeds["candidates"] = candidates
        if self.positions:
            feeds[POSITIONS] = positions
        names = list(DECODER_OUTPUTS) + [o for o in self.state_names.values() if o not in DECODER_OUTPUTS]
        feeds.update(state)
        feeds.update(zip(MEMORY_OUTPUTS, memory))
        if not self.io_binding:
            outputs = dict(zip(names, session.run(names, feeds)))
            state = {name: outputs[out] for name, out in self.state_names.items()}
        else:
            # What the search reads comes to the host; the new state stays on the device.
            kept = set(self.state_names.values())
            values = dict(zip(names, self.run_on_device(session, feeds, names, frozenset(names) - kept)))
            outputs = {name: value.numpy() for name, value in values.items() if name not in kept}
            state = {name: values[out] for name, out in self.state_names.items()}
        return StepOutput(outputs["topk_log_probs"], outputs["topk_ids"], outputs["forced_log_probs"],
                          state, outputs["alpha"])
