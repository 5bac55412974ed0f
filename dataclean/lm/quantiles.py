"""Exact per-group quantiles of a float column spread over many Parquet files, in bounded memory.

A global perplexity cut ("drop the worst 0.2% of each language") needs corpus-wide order
statistics, but the driver should not hold every row's value. Two streaming passes do it exactly:
1. count values per group into 2**20 bins of their order-preserving bit pattern (each bin spans
   about 0.3% of relative width), which locates the bin and the rank inside it of each quantile;
2. collect only the values falling in those few bins, sort them, and read the quantiles off.
Each pass is a map over the files (on the run's executor: workers read the files, the driver only
adds sparse bin counts). Driver memory is 8 MB per group plus the values of the selected bins.

Quantile q of n values is the value of rank ceil(q * n) (1-based; numpy's "inverted_cdf").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.executors.base import Executor
from dataclean.io.writers import read_parquet_batches

T = TypeVar("T")

BIN_BITS = 20
_SHIFT = np.uint64(64 - BIN_BITS)
_BATCH_ROWS = 1 << 20


def _sortable(values: np.ndarray) -> np.ndarray:
    """Map float64 to uint64 so that unsigned integer order equals float order."""
    bits = values.astype(np.float64).view(np.uint64)
    negative = (bits >> np.uint64(63)).astype(bool)
    return np.where(negative, ~bits, bits | np.uint64(1 << 63))


def _groups(path: str, key: str, column: str) -> Iterator[tuple[str, np.ndarray]]:
    """(group, non-NaN values) of every batch of one file, one batch in memory at a time."""
    for batch in read_parquet_batches(path, _BATCH_ROWS):
        encoded = pc.dictionary_encode(batch.column(key).cast(pa.string()).fill_null("")).combine_chunks()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        values = batch.column(column).cast(pa.float64()).to_numpy(zero_copy_only=False)
        for code, group in enumerate(encoded.dictionary.to_pylist()):
            chosen = values[codes == code]
            yield str(group), chosen[~np.isnan(chosen)]


def _bins(values: np.ndarray) -> np.ndarray:
    bins: np.ndarray = (_sortable(values) >> _SHIFT).astype(np.int64)
    return bins


@dataclass(frozen=True)
class _CountBins:
    """Pass 1 over one file: {group: (occupied bins, their counts)}, sparse so it ships small."""

    key: str
    column: str

    def __call__(self, path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        found: dict[str, list[np.ndarray]] = {}
        for group, values in _groups(path, self.key, self.column):
            found.setdefault(group, []).append(_bins(values))
        return {group: np.unique(np.concatenate(parts), return_counts=True) for group, parts in found.items()}


@dataclass(frozen=True)
class _CollectBins:
    """Pass 2 over one file: the values falling in each wanted (group, bin)."""

    key: str
    column: str
    wanted: dict[str, frozenset[int]]

    def __call__(self, path: str) -> dict[tuple[str, int], np.ndarray]:
        found: dict[tuple[str, int], list[np.ndarray]] = {}
        for group, values in _groups(path, self.key, self.column):
            bins = _bins(values)
            for bin_index in self.wanted.get(group, ()):
                found.setdefault((group, bin_index), []).append(values[bins == bin_index])
        return {where: np.concatenate(parts) for where, parts in found.items()}


def exact_quantiles(
    files: Sequence[str],
    key: str,
    column: str,
    quantiles: Sequence[float],
    executor: Executor | None = None,
) -> dict[str, list[float]]:
    """{group: [value at each quantile]} over all rows of `files`; NaN values are ignored.

    Both passes read one file per task on `executor` (in this process without one); the caller
    merges the bin counts (8 MB per group) and sorts only the values of the selected bins.
    """
    run = executor.map if executor is not None else _in_process
    counts: dict[str, np.ndarray] = {}
    for found in run(_CountBins(key, column), list(files), light=True):
        for group, (bins, numbers) in found.items():
            total = counts.setdefault(group, np.zeros(1 << BIN_BITS, dtype=np.int64))
            np.add.at(total, bins, numbers)

    # For each group: the bin of each quantile and the 0-based rank inside that bin.
    targets: dict[str, list[tuple[int, int]]] = {}
    for group, histogram in counts.items():
        cumulative = np.cumsum(histogram)
        n = int(cumulative[-1])
        targets[group] = []
        for q in quantiles:
            rank = min(max(math.ceil(q * n - 1e-9), 1), n) - 1
            bin_index = int(np.searchsorted(cumulative, rank, side="right"))
            before = int(cumulative[bin_index - 1]) if bin_index else 0
            targets[group].append((bin_index, rank - before))

    wanted = {group: frozenset(b for b, _ in pairs) for group, pairs in targets.items()}
    selected: dict[tuple[str, int], list[np.ndarray]] = {}
    for collected in run(_CollectBins(key, column, wanted), list(files), light=True):
        for where, values in collected.items():
            selected.setdefault(where, []).append(values)
    sorted_bins = {where: np.sort(np.concatenate(parts)) for where, parts in selected.items()}
    return {
        group: [float(sorted_bins[(group, b)][offset]) for b, offset in pairs]
        for group, pairs in targets.items()
    }


def _in_process(fn: Callable[[str], T], items: Sequence[str], light: bool = False) -> list[T]:
    return [fn(item) for item in items]
