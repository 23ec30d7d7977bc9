"""ONNX Runtime sessions for a model directory's graphs: the execution provider
(CPU, CUDA, or the CPU through OpenVINO's plugin), the session options, and the
check that each graph takes and returns exactly what the contract says
(`service/modeldir/manifest.py`). Running the graphs is `engine.py`'s job.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import onnxruntime as ort

from attnmt.service.errors import ModelLoadError
from attnmt.service.modeldir.manifest import POSITIONS, Manifest, decoder_inputs, decoder_outputs

if TYPE_CHECKING:
    from attnmt.service.inference.engine import EngineOptions

log = logging.getLogger(__name__)

# The slot graphs (model/export/slot_graphs.py), shipped with the service: the device path's gathers.
SLOT_GRAPHS = Path(__file__).parent / "graphs"

# The step graphs by name: (shared memory, shortlist, append, grouped), which of the contract's
# optional inputs each takes beyond decoder_step's.
STEP_GRAPHS = {"decoder_step": (False, False, False, False),
               "decoder_step_shared": (True, False, False, False),
               "decoder_step_shortlist": (False, True, False, False),
               "decoder_step_shared_shortlist": (True, True, False, False),
               "decoder_step_append": (False, False, True, False),
               "decoder_step_grouped": (False, False, True, True)}
# The step graphs a batch of one row per sentence steps with; the first opened says whether they take POSITIONS.
_DIRECT = ("decoder_step", "decoder_step_append", "decoder_step_grouped")

_LEVELS = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
           "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
           "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
           "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}

OPENVINO = "OpenVINOExecutionProvider"

# ONNX Runtime optimizers left off on the CPU provider. MatMulScaleFusion folds attention's
# 1/sqrt(d_k) into the Q·Kᵀ FusedMatMul, whose CPU kernel is then slower than the product and a
# separate Mul: a Transformer's step took 1.11x the time at one row and 1.02-1.04x at 26-320
# (AMD EPYC, one thread), the encoder the same either way; the numbers are the same bits.
CPU_DISABLED_OPTIMIZERS = ["MatMulScaleFusion"]


def axis_suffix(axis: int) -> str:
    """The slot graphs' name for a tensor whose positions run along `axis`: "" for axis 1,
    "_at2" for axis 2 (model/export/slot_graphs.py names them so)."""
    return f"_at{axis}" if axis != 1 else ""
_openvino_lock = threading.Lock()
_openvino_registered = False        # ONNX Runtime refuses a second registration of the library


def precision_problem(device: str, precision: str) -> str | None:
    """Why `precision` cannot run on `device`, or None: bf16 exists only through OpenVINO
    (the other providers compute in f32). The server's settings check the same rule."""
    if precision not in ("f32", "bf16"):
        return f"precision must be 'f32' or 'bf16', not {precision!r}"
    if precision != "f32" and device != "openvino":
        return f"precision {precision} needs device openvino (device {device} computes in f32)"
    return None


def providers(device: str, precision: str) -> list[str]:
    """The execution providers for `device`, best first."""
    problem = precision_problem(device, precision)
    if problem is not None:
        raise ModelLoadError(problem)
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if device == "openvino":
        return [OPENVINO, "CPUExecutionProvider"]
    if device != "cuda":
        raise ModelLoadError(f"device must be 'cpu', 'cuda' or 'openvino', not {device!r}")
    if hasattr(ort, "preload_dlls"):
        try:  # CUDA/cuDNN from the nvidia-* pip packages are found only after this
            ort.preload_dlls()
        except Exception as e:  # noqa: BLE001 - reported below if CUDA then fails
            log.warning("onnxruntime.preload_dlls() failed: %s", e)
    return ["CUDAExecutionProvider", "CPUExecutionProvider"]


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
            ort.register_execution_provider_library(OPENVINO, onnxruntime_ep_openvino.get_library_path())
        except Exception as e:  # noqa: BLE001 - ORT raises its own types for a library it cannot load
            if "already registered" not in str(e):    # registered by someone else in this process
                raise ModelLoadError(f"OpenVINO's execution provider did not load into ONNX Runtime "
                                     f"{ort.__version__}: {e}") from e
        _openvino_registered = True


def openvino_devices() -> list:
    """The CPU as OpenVINO's plugin execution provider sees it.

    The plugin (PyPI onnxruntime-ep-openvino) loads into the installed ONNX Runtime; it takes
    its precision and threads from `load_config`, not from provider options. It lists a CPU
    device only on an Intel CPU: elsewhere every engine gets the same error."""
    _register_openvino()
    devices = [d for d in ort.get_ep_devices()
               if d.ep_name == OPENVINO and d.device.type == ort.OrtHardwareDeviceType.CPU]
    if not devices:
        raise ModelLoadError(f"OpenVINO's execution provider found no CPU device on this machine "
                             f"(CPU vendor {_cpu_vendor()}; device openvino needs an Intel CPU): use device cpu")
    return devices[:1]


def _differences(kind: str, got: tuple[str, ...], want: tuple[str, ...]) -> list[str]:
    """What a graph lacks of the names it must have, and what it has beyond them."""
    missing, extra = [n for n in want if n not in got], [n for n in got if n not in want]
    return ([f"no {kind} {', '.join(map(repr, missing))}"] if missing else []) \
        + ([f"unexpected {kind} {', '.join(map(repr, extra))}"] if extra else [])


def _cpu_vendor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


class Sessions:
    """Opens a model directory's graphs on one execution provider, each checked against the
    contract; graphs opened by name once (`cached`) stay open."""

    def __init__(self, model_dir: Path, manifest: Manifest, options: EngineOptions):
        self.model_dir = model_dir
        self.manifest = manifest
        self.options = options
        self.state_names = dict(manifest.step_state)       # input -> output that replaces it
        self.initial_state = dict(manifest.initial_state)  # input -> encoder output that starts it
        if set(self.initial_state) != set(self.state_names):
            raise ModelLoadError(f"{model_dir}: manifest step_state {sorted(self.state_names)} and "
                                 f"initial_state {sorted(self.initial_state)} must name the same state inputs")
        self.providers = providers(options.device, options.precision)
        self._openvino = openvino_devices() if options.device == "openvino" else None
        self.positions = False      # whether the step graphs take POSITIONS: decoder_step says, the others agree
        self._open: dict[str, ort.InferenceSession] = {}
        self._opening = threading.Lock()

    def step_graph(self, name: str, spinning: bool | None = None, threads: int | None = None
                   ) -> ort.InferenceSession:
        """A new session of one of the `STEP_GRAPHS`; spinning, threads: override allow_spinning
        and intra_op_threads."""
        shared, shortlist, append, grouped = STEP_GRAPHS[name]
        inputs = decoder_inputs(self.manifest.memory, self.state_names, shared=shared, shortlist=shortlist,
                                append=append, grouped=grouped)
        return self.graph(name, inputs, decoder_outputs(self.state_names.values()), spinning, threads)

    def kept_open(self) -> dict[str, ort.InferenceSession]:
        """The sessions kept open by name (`cached` step graphs, slot graphs), for inspection."""
        return dict(self._open)

    def cached(self, name: str) -> ort.InferenceSession:
        """A step graph opened on first use and kept: the shared graph (only batches with beams
        use it, so a greedy `attnmt translate` does not pay its load time) and the shortlist ones."""
        with self._opening:                 # decode workers share an engine: one session per name
            if name not in self._open:
                self._open[name] = self.step_graph(name)
            return self._open[name]

    def graph(self, graph: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
              spinning: bool | None = None, threads: int | None = None) -> ort.InferenceSession:
        """A new session of the manifest's `graph`, refused unless it takes `inputs` (and,
        for step graphs, POSITIONS as decoder_step does) and returns `outputs`; the refusal
        names what is missing or unexpected."""
        if graph not in self.manifest.graphs:
            raise ModelLoadError(f"{self.model_dir}: the manifest names no {graph!r} graph")
        path = self.model_dir / self.manifest.graphs[graph]
        session = self._open_session(path, graph, spinning, threads)
        names_in = tuple(i.name for i in session.get_inputs())
        names_out = tuple(o.name for o in session.get_outputs())
        direct = graph in _DIRECT                          # the first step graph opened: it decides
        if graph != "encoder" and POSITIONS in names_in:       # optional: each row's step
            if not direct and not self.positions:
                raise ModelLoadError(f"{path}: takes {POSITIONS!r} where decoder_step does not")
            inputs = inputs + (POSITIONS,)
        elif graph != "encoder" and not direct and self.positions:
            raise ModelLoadError(f"{path}: does not take {POSITIONS!r} where decoder_step does")
        problems = _differences("input", names_in, inputs) + _differences("output", names_out, outputs)
        if problems:
            raise ModelLoadError(f"{path}: {'; '.join(problems)} (the graph has inputs {names_in} and outputs "
                                 f"{names_out}; the manifest's memory is {self.manifest.memory}, its step_state "
                                 f"{self.state_names})")
        if direct:
            self.positions = POSITIONS in names_in
        return session

    def _open_session(self, path: Path, graph: str, spinning: bool | None, threads: int | None
                      ) -> ort.InferenceSession:
        so = ort.SessionOptions()
        so.graph_optimization_level = _LEVELS[self.options.optimization]
        so.intra_op_num_threads = self.options.intra_op_threads if threads is None else threads
        so.inter_op_num_threads = self.options.inter_op_threads
        spin = self.options.allow_spinning if spinning is None else spinning
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        # Spin within a run only. Each graph has its own pool, and threads still spinning after
        # a run take the cores from the next graph's (the encoder's from the step's) and from
        # the server's event loop; without spinning, a sleeping thread is woken at every
        # parallel section of a step (the server leaves spinning off: settings.py).
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
        disabled = CPU_DISABLED_OPTIMIZERS if self.options.device == "cpu" else []
        try:
            session = ort.InferenceSession(str(path), sess_options=so, providers=providers,
                                           disabled_optimizers=disabled)
        except Exception as e:  # ORT raises several exception types for a bad graph
            raise ModelLoadError(f"{path}: ONNX Runtime cannot load it: {e}") from e
        got = session.get_providers()
        if self.providers[0] not in got:
            # ORT falls back to CPU silently when CUDA cannot load: refuse instead.
            if self._openvino is not None:
                raise ModelLoadError(f"{graph}: asked for {OPENVINO} but ONNX Runtime gave {got}")
            raise ModelLoadError(f"{graph}: asked for {self.providers[0]} but ONNX Runtime gave {got}; "
                                 "check the CUDA driver, CUDA 12/13 and cuDNN 9 libraries "
                                 "(pip install 'onnxruntime-gpu[cuda,cudnn]'), or set device=cpu")
        return session

    def memory_gathers(self, encoder: ort.InferenceSession) -> dict[str, str]:
        """The slot graph that gathers each memory tensor on the device path, by the encoder
        output's element type, rank and source axis (memory_gather_float_3.onnx,
        memory_gather_float_4_at2.onnx); refused where the service ships none."""
        outputs = {o.name: o for o in encoder.get_outputs()}
        files = {}
        for name in self.manifest.memory:
            kind, rank = outputs[name].type.removeprefix("tensor(").removesuffix(")"), len(outputs[name].shape or ())
            axis = self.manifest.position_axis(name)
            files[name] = f"memory_gather_{kind}_{rank}{axis_suffix(axis)}.onnx"
            if not (SLOT_GRAPHS / files[name]).is_file():
                where = f", source axis {axis}" if axis != 1 else ""
                raise ModelLoadError(f"{self.model_dir}: memory {name!r} ({outputs[name].type}, rank {rank}{where}) "
                                     f"has no slot graph for the device path ({files[name]}); set io_binding off")
        return files

    def slot_graph(self, name: str) -> ort.InferenceSession:
        """One of the service's slot graphs (`SLOT_GRAPHS`), on this engine's device, kept open."""
        if name not in self._open:
            so = ort.SessionOptions()
            so.intra_op_num_threads = self.options.intra_op_threads
            so.log_severity_level = 3
            providers = self.providers if self._openvino is None else ["CPUExecutionProvider"]
            self._open[name] = ort.InferenceSession(str(SLOT_GRAPHS / name), sess_options=so, providers=providers)
        return self._open[name]
