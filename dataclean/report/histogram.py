"""Histograms filled batch by batch on fixed bins, so any number of batches merge by addition.

Perplexities and text lengths span several orders of magnitude: `LogHistogram` bins them on a
fixed log10 grid (values outside the grid go to its first or last bin). `LinearHistogram` bins
values in a known range (Jaccard similarities in [0, 1]).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class LinearHistogram:
    """Counts of values in `bins` equal bins over [low, high]; outside values are clipped in."""

    low: float = 0.0
    high: float = 1.0
    bins: int = 50
    counts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.counts = np.zeros(self.bins, dtype=np.int64)

    @property
    def edges(self) -> np.ndarray:
        return np.linspace(self.low, self.high, self.bins + 1)

    def add(self, values: np.ndarray) -> None:
        """Count the finite values of a batch."""
        values = np.asarray(values, dtype=np.float64)
        values = np.clip(values[np.isfinite(values)], self.low, self.high)
        self.counts += np.histogram(values, bins=self.edges)[0]

    @property
    def total(self) -> int:
        return int(self.counts.sum())


@dataclass
class LogHistogram:
    """Counts of positive values on log10 bins of width `step` between 10**low and 10**high."""

    low: float = 0.0
    high: float = 7.0
    step: float = 0.05
    counts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.counts = np.zeros(round((self.high - self.low) / self.step), dtype=np.int64)

    @property
    def log_edges(self) -> np.ndarray:
        """Bin edges in log10 units."""
        return self.low + self.step * np.arange(len(self.counts) + 1)

    def add(self, values: np.ndarray) -> None:
        """Count the finite values of a batch; values <= 10**low go to the first bin."""
        values = np.asarray(values, dtype=np.float64)
        values = values[np.isfinite(values)]
        logs = np.log10(np.maximum(values, 10.0**self.low))
        index = np.clip(((logs - self.low) / self.step).astype(np.int64), 0, len(self.counts) - 1)
        self.counts += np.bincount(index, minlength=len(self.counts))

    def merge(self, other: LogHistogram) -> None:
        self.counts += other.counts

    @property
    def total(self) -> int:
        return int(self.counts.sum())


def occupied(counts: list[np.ndarray]) -> slice:
    """The bin range holding every nonzero count of several histograms on the same bins."""
    stacked = np.vstack(counts).sum(axis=0) if counts else np.zeros(0)
    nonzero = np.flatnonzero(stacked)
    if len(nonzero) == 0:
        return slice(0, 0)
    return slice(int(nonzero[0]), int(nonzero[-1]) + 1)
