"""The quarantine list and the guard on packed sequences (`dataclean pack`), without torch.

A packed row holds several samples, and a row cannot lose one of them without repacking. So a
listed sample is not dropped from its row: `PackedQuarantine` masks its tokens' loss (labels set
to -100, weight 0), and a down-weighted one gets its entry's weight in the row's per-sample
weights. With the block-diagonal attention of packed training (position ids restarting at every
sample) no other sample attends to the masked one, so its only effect left is the compute its
tokens take; the sampler passes over a row only when every sample in it is dropped. To take the
samples out for good, `dataclean pack --quarantine LIST` repacks without them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataclean.feedback.sampler import WEIGHT_KEY, DatasetQuarantine


def flat_sample_ids(sample_ids: Sequence[Any]) -> list[str]:
    """A batch's sample ids in order: a packed batch's per-row lists are flattened."""
    flat: list[str] = []
    for entry in sample_ids:
        if isinstance(entry, (list, tuple)):
            flat.extend(str(sample_id) for sample_id in entry)
        else:
            flat.append(str(entry))
    return flat


class PackedQuarantine:
    """Which samples of each packed row the list drops or down-weights (a view like
    `DatasetQuarantine`, whose `excluded` is by row: a row with nothing left to train on).

    `sample_ids`: each row's sample ids (`PackedDataset.sample_ids`). `samples` is the
    `DatasetQuarantine` over every sample of every row, in row order (matched by id).
    """

    def __init__(self, sample_ids: Sequence[Sequence[str]], path: str | os.PathLike[str]) -> None:
        counts = np.array([len(row) for row in sample_ids], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(counts)])
        self.samples = DatasetQuarantine([i for row in sample_ids for i in row], path)
        self.path = self.samples.path
        self.excluded = np.zeros(len(counts), dtype=bool)
        self._rows_excluded()

    @classmethod
    def from_dataset(cls, dataset: Any, path: str | os.PathLike[str]) -> PackedQuarantine:
        """From a `PackedDataset` (anything with per-row `sample_ids`)."""
        return cls(dataset.sample_ids, path)

    def __len__(self) -> int:
        return len(self.excluded)

    def _rows_excluded(self) -> None:
        dropped = self.samples.excluded.astype(np.int64)
        per_row = np.add.reduceat(dropped, self.offsets[:-1]) if len(dropped) else dropped
        self.excluded = per_row == np.diff(self.offsets)

    def refresh(self) -> bool:
        """Re-read the list if it changed; True when it was re-read."""
        changed = self.samples.refresh()
        if changed:
            self._rows_excluded()
        return changed

    def text_hash_of(self, sample_id: str) -> str | None:
        """Packed rows carry no text: quarantine entries from them are matched by id."""
        return None

    def weigh(self, item: dict[str, Any], index: int) -> dict[str, Any]:
        """A `PackedDataset` item with dropped samples' labels masked and every sample's weight
        multiplied by its list weight (0 when dropped, the entry's weight when down-weighted)."""
        first, last = int(self.offsets[index]), int(self.offsets[index + 1])
        dropped = np.flatnonzero(self.samples.excluded[first:last])
        weights = self.samples.weights[first:last]
        labels = item["labels"]
        if len(dropped):
            labels = labels.clone() if hasattr(labels, "clone") else np.array(labels)
            for k in dropped:
                labels[item["sample_index"] == int(k)] = -100
        weight = item.get(WEIGHT_KEY)
        base = np.ones(len(weights), dtype=np.float32) if weight is None else np.asarray(weight, np.float32)
        return {**item, "labels": labels, WEIGHT_KEY: (base * weights).astype(np.float32)}
