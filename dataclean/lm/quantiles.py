"""Exact per-group quantiles of a float column spread over many Parquet files, in bounded memory.

A global perplexity cut ("drop the worst 0.2% of each language") needs corpus-wide order
statistics, but the driver should not hold every row's value. Two streaming passes do it exactly:
1. count values per group into 2**20 bins of their order-preserving bit pattern (each bin spans
   about 0.3% of relative width), which locates the bin and the rank inside it of each quantile;
2. collect only the values falling in those few bins, sort them, and read the quantiles off.
Memory is 8 MB per group plus the values of the selected bins.

Quantile q of n values is the value of rank ceil(q * n) (1-based; numpy's "inverted_cdf").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from dataclean.io.writers import read_parquet_batches

BIN_BITS = 20
_SHIFT = np.uint64(64 - BIN_BITS)
_BATCH_ROWS = 1 << 20


def _sortable(values: np.ndarray) -> np.ndarray:
    """Map float64 to uint64 so that unsigned integer order equals float order."""
    bits = values.astype(np.float64).view(np.uint64)
    negative = (bits >> np.uint64(63)).astype(bool)
    return np.where(negative, ~bits, bits | np.uint64(1 << 63))


def _groups(files: Sequence[str], key: str, column: str) -> Iterator[tuple[str, np.ndarray]]:
    """(group, non-NaN values) of every batch of every file, one batch in memory at a time."""
    for path in files:
        for batch in read_parquet_batches(path, _BATCH_ROWS):
            keys = batch.column(key).cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
            values = batch.column(column).cast(pa.float64()).to_numpy(zero_copy_only=False)
            for group in np.unique(keys):
                chosen = values[keys == group]
                yield str(group), chosen[~np.isnan(chosen)]


def exact_quantiles(
    files: Sequence[str], key: str, column: str, quantiles: Sequence[float]
) -> dict[str, list[float]]:
    """{group: [value at each quantile]} over all rows of `files`; NaN values are ignored."""
    counts: dict[str, np.ndarray] = {}
    for group, values in _groups(files, key, column):
        bins = (_sortable(values) >> _SHIFT).astype(np.int64)
        total = counts.setdefault(group, np.zeros(1 << BIN_BITS, dtype=np.int64))
        total += np.bincount(bins, minlength=1 << BIN_BITS)

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

    selected: dict[tuple[str, int], list[np.ndarray]] = {
        (group, bin_index): [] for group, pairs in targets.items() for bin_index, _ in pairs
    }
    for group, values in _groups(files, key, column):
        bins = (_sortable(values) >> _SHIFT).astype(np.int64)
        for bin_index in {b for b, _ in targets.get(group, [])}:
            selected[(group, bin_index)].append(values[bins == bin_index])
    sorted_bins = {where: np.sort(np.concatenate(parts)) for where, parts in selected.items()}
    return {
        group: [float(sorted_bins[(group, b)][offset]) for b, offset in pairs]
        for group, pairs in targets.items()
    }
