"""What every benchmark reports: one timed implementation, and its memory, in one shape.

`Measurement` is one implementation on one input (docs, MB, seconds, cores, peak memory);
`comparison` pairs dataclean's measurement with a reference measured in the same run on the same
input (with `rounds`, the seconds of each round, its ratio is the median of the per-round ratios,
with their min-max: never a ratio of two different rounds, see `benchmarks/rounds.py`);
`write_json` saves a benchmark's comparisons for `benchmarks/run_all.py` (`--json PATH`).

`PeakMemory` measures, in this process, the resident memory a block needs above what the process
held when the block began (the input it was handed is already counted there): a thread samples
/proc/self/statm every few milliseconds, after freed memory was handed back to the system
(`gc.collect`, glibc `malloc_trim`, Arrow's pool), so memory kept by an earlier block does not hide
this block's needs. Linux only; elsewhere it reports None.

Benchmarks only: tests never import this module.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import statistics
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STATM = Path("/proc/self/statm")


def _resident_bytes() -> int | None:
    try:
        return int(_STATM.read_text().split()[1]) * _PAGE
    except OSError:
        return None


def _hand_back_free_memory() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:
        pass


class PeakMemory:
    """Context manager: `megabytes` is the peak resident memory above the block's start (MiB)."""

    def __init__(self, interval: float = 0.003) -> None:
        self.interval = interval
        self.megabytes: float | None = None
        self._stop = threading.Event()
        self._baseline = 0
        self._peak = 0

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, _resident_bytes() or 0)

    def __enter__(self) -> PeakMemory:
        _hand_back_free_memory()
        start = _resident_bytes()
        if start is None:
            return self
        self._baseline = self._peak = start
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        if not self._baseline:
            return
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, _resident_bytes() or 0)
        self.megabytes = (self._peak - self._baseline) / 2**20


@dataclass
class Measurement:
    """One implementation on one input. Rates are per core: work / (seconds x cores).

    `rounds`: the seconds of each timed round, when there were several (`seconds` is then their
    median)."""

    implementation: str
    docs: int
    megabytes: float
    seconds: float
    cores: int = 1
    peak_mb: float | None = None
    peak_note: str = "above input"
    rounds: list[float] | None = None

    @property
    def mb_per_core_second(self) -> float:
        return self.megabytes / (self.seconds * self.cores)

    @property
    def docs_per_core_second(self) -> float:
        return self.docs / (self.seconds * self.cores)


def comparison(step: str, corpus: str, ours: Measurement, reference: Measurement) -> dict[str, Any]:
    """A table row: dataclean and a reference on the same input; the ratio is speed per core.

    When both were timed in the same rounds, the ratio is the median of the per-round ratios and
    `ratio_min`/`ratio_max` their range."""
    row = {
        "step": step,
        "corpus": corpus,
        "dataclean": asdict(ours),
        "reference": asdict(reference),
        "ratio": ours.mb_per_core_second / reference.mb_per_core_second,
    }
    if ours.rounds and reference.rounds and len(ours.rounds) == len(reference.rounds):
        scale = (ours.megabytes / ours.cores) / (reference.megabytes / reference.cores)
        ratios = sorted(
            scale * theirs / mine for mine, theirs in zip(ours.rounds, reference.rounds, strict=True)
        )
        row.update(ratio=statistics.median(ratios), ratio_min=ratios[0], ratio_max=ratios[-1])
    return row


def write_json(path: str | Path, rows: list[dict[str, Any]], **extra: Any) -> None:
    """Save a benchmark's comparison rows (and anything else it found) for run_all."""
    Path(path).write_text(json.dumps({"rows": rows, **extra}, indent=1, ensure_ascii=False))
