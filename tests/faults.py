"""Fault injection for the reliability tests: a test entry point, not a server setting.

`python tests/faults.py serve ...` is `attnmt serve ...` with faults installed first, as
the variable `FAULTS` asks, e.g. `FAULTS="poison=gato;die_on=luna;step_delay_ms=100"`
(`RunningServer` and `Spawned` start it when their environment names `FAULTS`):

- `poison=WORD`: every decoder step whose batch holds a sentence containing WORD
  raises, as a step that breaks on one input would (the worker then re-decodes the
  batch one sentence at a time, so only that sentence fails);
- `die_on=WORD`: the decode worker itself dies (outside any step) when a sentence
  containing WORD is waiting to join, as a bug in its bookkeeping would;
- `step_delay_ms=N`: every decoder step takes N ms longer (a slow warm-up, a busy
  batch).

WORD is matched on the source token ids of every served model (`ATTNMT_MODELS`), so it
should be a whole word the tokenizer keeps in one piece sequence. The serving code has no
hook for this: the entry point patches the decode batch and the worker of its own process.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from attnmt.service.cli import main
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.modeldir.tokenizer import Tokenizer
from attnmt.service.server.worker import DecodeWorker

log = logging.getLogger(__name__)


class InjectedFault(RuntimeError):
    """Raised by a fault `FAULTS` asked for."""


@dataclass(frozen=True)
class Faults:
    poison: str = ""
    die_on: str = ""
    step_delay_ms: float = 0.0

    @classmethod
    def parse(cls, spec: str) -> "Faults":
        """`key=value;key=value`; raises ValueError naming an unknown key or a bad value."""
        values: dict = {}
        for item in filter(None, (part.strip() for part in spec.split(";"))):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in cls.__dataclass_fields__:
                raise ValueError(f"FAULTS: {item!r} is not one of "
                                 f"{', '.join(k + '=...' for k in cls.__dataclass_fields__)}")
            values[key] = float(value) if key == "step_delay_ms" else value.strip()
        return cls(**values)


def _contains(source: list[int], word: tuple[int, ...]) -> bool:
    n = len(word)
    return any(tuple(source[i:i + n]) == word for i in range(len(source) - n + 1))


def install(faults: Faults, tokenizers: list[Tokenizer]) -> None:
    """Patch the decode path of this process (a server started for a test) with `faults`."""
    def ids(word: str) -> list[tuple[int, ...]]:
        return [tuple(t.encode(word)) for t in tokenizers] if word else []
    poison, die_on, delay = ids(faults.poison), ids(faults.die_on), faults.step_delay_ms / 1000

    def hit(source: list[int], words: list[tuple[int, ...]]) -> bool:
        return any(w and _contains(source, w) for w in words)

    step = DecodeBatch.step

    def faulty_step(self: DecodeBatch, idle: bool = False):
        if delay:
            time.sleep(delay)
        if poison and any(hit(s.source, poison) for s in self.searches):
            raise InjectedFault(f"injected fault: a sentence containing {faults.poison!r} breaks the step")
        return step(self, idle)

    next_joiners = DecodeWorker._next_joiners

    def dying_next_joiners(self: DecodeWorker):
        with self._cond:
            doomed = die_on and any(hit(job.search.source, die_on)
                                    for job in [*self._waiting, *self._jobs.values()])
        if doomed:
            raise InjectedFault(f"injected fault: the decode worker dies on {faults.die_on!r}")
        return next_joiners(self)

    DecodeBatch.step = faulty_step
    DecodeWorker._next_joiners = dying_next_joiners
    log.warning("fault injection is on: %s", faults)


def tokenizers(models: str) -> list[Tokenizer]:
    """The tokenizers of the model directories in `ATTNMT_MODELS` (comma-separated)."""
    dirs = [Path(d) for d in models.split(",") if d.strip()]
    return [Tokenizer(d / load_manifest(d).tokenizer) for d in dirs]


if __name__ == "__main__":
    try:
        chosen = Faults.parse(os.environ.get("FAULTS", ""))
    except ValueError as e:
        sys.exit(str(e))
    install(chosen, tokenizers(os.environ["ATTNMT_MODELS"]))
    sys.exit(main(sys.argv[1:]))
