"""The model directory contract shared by `model/` (which writes it) and
`service/` (which reads it): `manifest.json` beside the graphs and tokenizer.

    encoder.onnx        src_tokens[N,S] int64, src_lengths[N] int64
                        -> the memory, then one output per step state (`initial_state`)
    decoder_step.onnx   one step for R rows, row r attending memory row r (N = R):
                        prev_tokens[R] int64, the step state, the memory (each [R,S,...]),
                        vocab_bias[B,V] (B = 1 or R), k[1] int64, forced_tokens[R] int64
                        -> topk_log_probs[R,k], topk_ids[R,k] int64, forced_log_probs[R],
                           the new step state (`step_state`), alpha[R,S]
    decoder_step_shared.onnx
                        the same, but the memory is per sentence ([N,S,...]) and
                        memory_index[R] int64 names each row's sentence: the rows of one
                        beam share their sentence's memory.
    decoder_step_shortlist.onnx, decoder_step_shared_shortlist.onnx (optional)
                        the two step graphs with one more input, candidates[C] int64: the
                        output layer runs over these vocabulary ids only; vocab_bias is
                        [B,C], forced_tokens are positions in candidates, topk_ids are
                        vocabulary ids. Present with `shortlist.npz` (frequent[F] int32,
                        table[V,M] int32, -1 padded: target candidates per source id).
    decoder_step_append.onnx (optional, a Transformer's)
                        decoder_step over caches with room to grow: one more input,
                        cache_length[] int64, the positions of each cache that hold entries
                        (its caches may be longer: zeros beyond); returns only the new
                        position's entry of each cache ([R,H,1,d_k]), which the host writes
                        at cache_length, instead of the caches with it appended (a copy of
                        every cache at every step).
    decoder_step_grouped.onnx (optional, a Transformer's)
                        decoder_step_append with the memory per sentence ([N,S,...]) and
                        two more inputs, group_rows[N,G] int64 (sentence n's rows side by
                        side; where it has fewer than G, any row: its answer there is never
                        read) and row_places[R] int64 (row r's place n·G + g in that grid;
                        `sentence_groups`): a sentence's memory is read once for all its
                        rows (a beam's), with no copy per row.
    spm.model           SentencePiece
    manifest.json       this schema

Token choice happens inside the step graph, so the host never receives R x V
log-probabilities: log_probs = log_softmax(logits + vocab_bias) (the bias is
-inf for tokens a row may not choose, e.g. <pad> and <s>, and renormalises over
the rest); the graph returns the k best per row (sorted, best first) and the
log-probability of each row's `forced_tokens` entry (forced alignment).

`memory` in the manifest names the encoder outputs the decode batch keeps once per
sentence and feeds, under the same names, to every step: each [N,S,...] (sentence on
axis 0, source position on axis 1, zero or False beyond a sentence's length), src_mask
[N,S] bool always among them. RNNsearch's (the default): annotations[N,S,2n],
keys[N,S,K] (the attention's projected annotations), src_mask; a Transformer's:
cross_keys, cross_values, src_mask (docs/transformer.md).
`step_state` in the manifest maps each recurrent state input to the output that
replaces it next step ({"state": "new_state"} for RNNsearch), and `initial_state`
each of them to the encoder output that starts it ({"state": "init_state"}), so
the decode loop carries state without knowing what it holds. Nothing in the loop
assumes an RNN, so another attention architecture fits the same
worker:
- a step graph may take `positions[R]` int64, each row's step (0 at the first);
- a state tensor of per-row rank 2 or more (a Transformer decoder's self-attention
  cache, [R,H,T,d_k]) may grow along its position axis from step to step. Rows of
  different ages share the batch's T: a shorter cache is padded with zeros on the left,
  so every row's newest entry is last and a row's own entries are its last positions[r]
  (or however many its initial state had, plus one per step); the graph masks the
  rest itself.
- `position_axes` names the memory tensors and step states whose positions (source
  pieces for the memory, steps for a growing state) run along another axis than 1:
  a Transformer keeps each layer's keys and values head-major, [N,H,S,d_k] and
  [R,H,T,d_k] (axis 2), the layout its attention reads without a copy. The encoder's
  initial state takes its state's axis. Absent: axis 1 for every tensor.

Schema 3 added `position_axes`; schema 2 directories (every axis 1) are read as they are.

Schema 1 (a step returning log_probs[R,V]) is refused with a pointer to
`attnmt upgrade-model DIR`, which re-exports from the directory's checkpoint.pt.

A Transformer's `graphs_revision` says which export wrote its step graphs, with the same
inputs and outputs and the same numbers (absent: 1); `attnmt upgrade-model` re-exports
older ones:
- 2: a step's activations R x d (each linear layer one Gemm as ONNX Runtime runs it) and
  1/√d_k a constant: the append step 95 nodes after ONNX Runtime's optimizations, 123 before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from attnmt.service.errors import ModelLoadError
from attnmt.service.modeldir.links import LINK_RULES

SCHEMA_VERSION = 3
TRANSFORMER_GRAPHS_REVISION = 2    # the module docstring
READABLE_SCHEMAS = (2, 3)     # schema 2: no position_axes
MANIFEST = "manifest.json"

ENCODER_INPUTS = ("src_tokens", "src_lengths")
SRC_MASK = "src_mask"                        # the memory tensor every model declares: N x S, True on its pieces
MEMORY = ("annotations", "keys", SRC_MASK)   # the default `memory`: RNNsearch's
POSITIONS = "positions"                      # an optional step input: each row's step
CACHE_LENGTH = "cache_length"                # the append step's input: positions of the caches in use
GRAPHS = {"encoder": "encoder.onnx", "decoder_step": "decoder_step.onnx",
          "decoder_step_shared": "decoder_step_shared.onnx"}
# Optional, with a lexical shortlist (`shortlist.npz`): the step graphs over `candidates[C]`.
SHORTLIST_GRAPHS = {"decoder_step_shortlist": "decoder_step_shortlist.onnx",
                    "decoder_step_shared_shortlist": "decoder_step_shared_shortlist.onnx"}
# Optional, a Transformer's: the direct step graph over caches with room to grow (module docstring).
APPEND_GRAPH = {"decoder_step_append": "decoder_step_append.onnx"}
# Optional, a Transformer's: the append step over the memory per sentence, rows grouped by sentence.
GROUPED_GRAPH = {"decoder_step_grouped": "decoder_step_grouped.onnx"}
GROUP_ROWS, ROW_PLACES = "group_rows", "row_places"


def encoder_outputs(memory: Iterable[str], initial_state: Iterable[str]) -> tuple[str, ...]:
    """The encoder's outputs: the memory, then each step state's initial value."""
    return (*memory, *initial_state)


def decoder_inputs(memory: Iterable[str], state: Iterable[str], shared: bool = False, shortlist: bool = False,
                   positions: bool = False, append: bool = False, grouped: bool = False) -> tuple[str, ...]:
    """A step graph's inputs: the step state and memory (manifest `step_state`, `memory`) among the
    contract's own; `shared` with memory_index, `shortlist` with candidates, `positions` with POSITIONS,
    `append` with CACHE_LENGTH, `grouped` with GROUP_ROWS and ROW_PLACES."""
    return ("prev_tokens", *state, *memory, "vocab_bias", "k", "forced_tokens") \
        + ("candidates",) * shortlist + ("memory_index",) * shared + (POSITIONS,) * positions \
        + (CACHE_LENGTH,) * append + (GROUP_ROWS, ROW_PLACES) * grouped


def sentence_groups(memory_index: np.ndarray, sentences: int) -> tuple[np.ndarray, np.ndarray]:
    """The grouped step's GROUP_ROWS [N, G] and ROW_PLACES [R] for R >= 1 rows, row r attending
    memory slot memory_index[r] of `sentences`: each sentence's rows in row order at places
    0, 1, ... (G: the most rows any sentence has), row 0 at the places no row takes, and
    row r's place n·G + g."""
    R = len(memory_index)
    counts = np.bincount(memory_index, minlength=sentences)
    G = max(int(counts.max(initial=0)), 1)
    order = np.argsort(memory_index, kind="stable")
    first = np.cumsum(counts) - counts                                 # each sentence's first entry in `order`
    place = np.empty(R, dtype=np.int64)
    place[order] = np.arange(R) - first[memory_index[order]]
    group_rows = np.zeros((sentences, G), dtype=np.int64)
    group_rows[memory_index, place] = np.arange(R)
    return group_rows, memory_index * G + place


def decoder_outputs(new_state: Iterable[str]) -> tuple[str, ...]:
    """A step graph's outputs: each row's k best tokens, its forced token's log-probability, the
    new step state (manifest `step_state`'s outputs) and α."""
    return ("topk_log_probs", "topk_ids", "forced_log_probs", *new_state, "alpha")


# RNNsearch's graphs: the defaults spelled out (one state, `state`, and the default memory), in the
# order model/export/rnnsearch.py traces them; the service reads every model through the functions above.
ENCODER_OUTPUTS = encoder_outputs(MEMORY, ("init_state",))
DECODER_INPUTS = decoder_inputs(MEMORY, ("state",))
SHARED_DECODER_INPUTS = decoder_inputs(MEMORY, ("state",), shared=True)
DECODER_OUTPUTS = decoder_outputs(("new_state",))


class SpecialIds(BaseModel):
    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3


class FileEntry(BaseModel):
    sha256: str
    bytes: int
    # False for what serving never reads (the float16 checkpoint.pt, kept for re-export and
    # `attnmt upgrade-model`): a serving copy of the directory may leave it out.
    serving: bool = True


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int
    name: str
    version: str
    architecture: str = "RNNsearch"
    # RNNsearch's alignment score a(s_{i-1}, h_j): bahdanau | general | dot | scaled_dot
    # (model/architectures/rnnsearch.py SCORE_FUNCTIONS). Manifests exported before this field hold it only in
    # dimensions["attention"], from which it is filled; None where neither says.
    score_function: str | None = None
    source_language: str
    target_language: str
    tokenizer: str = "spm.model"
    vocab_size: int
    special_ids: SpecialIds = Field(default_factory=SpecialIds)
    dimensions: dict[str, Any] = Field(default_factory=dict)
    graphs: dict[str, str] = Field(default_factory=lambda: dict(GRAPHS))
    step_state: dict[str, str] = Field(default_factory=lambda: {"state": "new_state"})
    initial_state: dict[str, str] = Field(default_factory=lambda: {"state": "init_state"})  # state -> encoder output
    # The encoder outputs kept once per sentence and fed to every step under the same names (above).
    memory: list[str] = Field(default_factory=lambda: list(MEMORY))
    # Memory tensors and step states whose positions are not on axis 1, by name: the axis (above).
    position_axes: dict[str, int] = Field(default_factory=dict)
    # Which cross-attention becomes α ({"layer": -1, "heads": [0]}: the mean of those heads of that
    # decoder layer); the step graph computes α. "shift_att": true, each target piece's row is read
    # from the next step, the one that takes the piece as its input (Chen et al. 2020; the Translator
    # moves the rows). None: one attention (RNNsearch).
    alignment: dict[str, Any] | None = None
    # Placeholder protection the model was trained for (model/data/placeholders.py): the regular
    # expression, the sentinel format ("⦃{}⦄") and how many numbered sentinels exist.
    placeholders: dict[str, Any] | None = None
    opset: int = 17
    files: dict[str, FileEntry]
    training: dict[str, Any] = Field(default_factory=dict)
    evaluation: dict[str, Any] = Field(default_factory=dict)
    quantization: dict[str, Any] | None = None
    # `attnmt store-weights`: how weights.bin stores the weight matrices (int8 with a scale per
    # output channel); absent: float16
    weights_storage: dict[str, Any] | None = None
    # Lexical shortlist (model/export/shortlist.py): file, sizes and its measured BLEU change.
    shortlist: dict[str, Any] | None = None
    # Names kept as written (service/text/names.py): the known-words file, the counts that put a word
    # in it and the dev sets' change, written by `attnmt fit-names`. None: the model translates every word.
    names: dict[str, Any] | None = None
    # Words the model never learnt, translated (service/text/lexicon.py): the lexicon file, where it came
    # from and the dev sets' change, written by `attnmt fit-lexicon`. None: no lexicon.
    lexicon: dict[str, Any] | None = None
    # Quality estimation (service/text/quality.py): feature weights, standardisation, the coverage
    # threshold and the `suspect_below` threshold, fitted on dev by `attnmt fit-quality`.
    quality: dict[str, Any] | None = None
    # The server's default hard links (service/text/alignment.py `hard_pairs`): the rule read from the
    # word-level α with the lowest AER on the gold alignment set's dev split, and what it measured,
    # written by `attnmt evaluate-alignment --write-manifest`: {"rule": "source-argmax", "dev_aer": 0.376,
    # "test_aer": 0.357, ...}; rule "threshold" carries its "threshold". None: each target word's
    # argmax, the rule before any measurement. A request's `alignment_threshold` still overrides it.
    hard_links: dict[str, Any] | None = None
    # Decoding defaults chosen on the model's dev sets, for a request that names none: {"length_penalty": 1.6,
    # "chosen_on": "dev", "dev": {...}}, written by `attnmt fit-length-penalty`. None: 1.0.
    decoding: dict[str, Any] | None = None
    # Which export wrote a Transformer's step graphs (the module docstring); None: the first.
    graphs_revision: int | None = None

    @property
    def older_graphs(self) -> bool:
        """A Transformer whose step graphs an older export wrote: the same numbers, more nodes a
        step; `attnmt upgrade-model` re-exports a float directory's."""
        return self.architecture == "Transformer" and graphs_behind(self.graphs_revision)

    @model_validator(mode="after")
    def _hard_links_rule(self) -> "Manifest":
        if self.hard_links is not None:
            rule = self.hard_links.get("rule")
            if rule not in LINK_RULES:
                raise ValueError(f"hard_links.rule {rule!r} is not one of {', '.join(LINK_RULES)}")
            threshold = self.hard_links.get("threshold")
            if (rule == "threshold") != (threshold is not None) or (threshold is not None
                                                                     and not 0.0 < float(threshold) <= 1.0):
                raise ValueError("hard_links.threshold: a number in (0, 1] for rule 'threshold', and only for it")
        return self

    @model_validator(mode="after")
    def _score_function_from_dimensions(self) -> "Manifest":
        if self.score_function is None:
            self.score_function = self.dimensions.get("attention")
        return self

    @model_validator(mode="after")
    def _memory_has_the_mask(self) -> "Manifest":
        if SRC_MASK not in self.memory:
            raise ValueError(f"memory {self.memory} lacks {SRC_MASK!r} (every model's memory holds the source mask)")
        if len(set(self.memory)) != len(self.memory):
            raise ValueError(f"memory {self.memory} names a tensor twice")
        clash = sorted(set(self.memory) & (set(self.step_state) | set(decoder_inputs((), (), True, True, True))))
        if clash:
            raise ValueError(f"memory {self.memory}: {clash} are step inputs of their own")
        return self

    @model_validator(mode="after")
    def _position_axes_name_tensors(self) -> "Manifest":
        for name, axis in self.position_axes.items():
            if name not in set(self.memory) | set(self.step_state) or name == SRC_MASK:
                raise ValueError(f"position_axes names {name!r}, which is neither a memory tensor (other than "
                                 f"{SRC_MASK}) nor a step state")
            if axis < 1:
                raise ValueError(f"position_axes[{name!r}] is {axis}: axis 0 holds the sentences or rows")
        return self

    def position_axis(self, name: str) -> int:
        """The axis along which `name`'s positions run (a memory tensor or a step state)."""
        return self.position_axes.get(name, 1)


def graphs_behind(revision: int | None) -> bool:
    """Whether a Transformer's `graphs_revision` (None: the first) is an older export's."""
    return (revision or 1) < TRANSFORMER_GRAPHS_REVISION


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# What an export writes beside the graphs that serving never reads.
NOT_SERVED = ("checkpoint.pt",)


def file_entries(model_dir: Path, names: list[str]) -> dict[str, dict]:
    """Checksums of `names` in `model_dir`, those in NOT_SERVED marked `serving: false`."""
    entries = {n: {"sha256": sha256_of(model_dir / n), "bytes": (model_dir / n).stat().st_size} for n in names}
    for name in set(names) & set(NOT_SERVED):
        entries[name]["serving"] = False
    return entries


def load_manifest(model_dir: Path, verify: bool = True) -> Manifest:
    """Read and validate `manifest.json`; with `verify`, check every listed file's checksum."""
    path = Path(model_dir) / MANIFEST
    if not path.is_file():
        raise ModelLoadError(f"{model_dir}: no {MANIFEST} (is this a model directory made by `attnmt export`?)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from e
    version = raw.get("schema_version")
    if version == 1:
        raise ModelLoadError(f"{path}: schema_version 1 (a step graph returning full log-probabilities) is no "
                             f"longer served; run `attnmt upgrade-model {model_dir}` to re-export it from its "
                             "checkpoint.pt as schema_version 2")
    if version not in READABLE_SCHEMAS:
        raise ModelLoadError(f"{path}: schema_version {version!r} is not supported "
                             f"(this attnmt reads schema_version {' and '.join(map(str, READABLE_SCHEMAS))})")
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as e:
        raise ModelLoadError(f"{path}: {e}") from e
    required = {manifest.tokenizer, *manifest.graphs.values()}
    missing = sorted(required - set(manifest.files))
    if missing:
        raise ModelLoadError(f"{path}: files {missing} are not listed with checksums")
    for name, entry in manifest.files.items():
        file = Path(model_dir) / name
        if not file.is_file():
            if not entry.serving:
                continue                 # a serving copy may leave it out; if present, it is checked
            raise ModelLoadError(f"{model_dir}: {name} is listed in the manifest but missing")
        if verify and (file.stat().st_size != entry.bytes or sha256_of(file) != entry.sha256):
            raise ModelLoadError(f"{model_dir}: {name} does not match its manifest checksum (corrupt or replaced)")
    return manifest


def write_manifest(model_dir: Path, manifest: dict) -> None:
    (Path(model_dir) / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
