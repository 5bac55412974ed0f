"""The quarantine list applied at training time: a sampler and a dataset wrapper.

`DatasetQuarantine` maps a list onto one training dataset by the rule the pipeline's quarantine
stage applies (`dataclean.quarantine.match`): a row matching an entry by `id`, `text_hash` or, when
the texts are given, as a near-duplicate of a listed text, is left out when the entry's action is
`drop`, and gets the entry's weight when it is `downweight`; `review` entries are not applied
until accepted. It re-reads the list whenever the
file changes (a cheap `os.stat` per check), so a sample the guard quarantines during the run is not
drawn again, and a run resumed from a checkpoint with the list in place never draws a listed
sample, without re-running the pipeline.

`QuarantineSampler` draws the dataset's rows (a seeded permutation per epoch, or in order) and
passes over the quarantined ones at the moment they would be drawn; `max_draws` caps how often
one row is drawn over the whole run. Its `state_dict` (epoch, position, draw counts) goes into a
checkpoint so a resumed run continues the same order. `QuarantinedDataset` wraps a map-style
dataset (a torch `Dataset`, a Hugging Face `datasets.Dataset`, any sequence) and adds each row's
loss weight to its items. Neither imports torch: a DataLoader takes any iterable of indices as
its `sampler`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dataclean import columns as C
from dataclean.ids import text_hash
from dataclean.quarantine.lists import applied, read_list
from dataclean.quarantine.match import DOWNWEIGHT, QuarantineIndex, lowered_weights

WEIGHT_KEY = "weight"


def _column(dataset: Any, name: str) -> list[Any] | None:
    """A column of a table-like dataset (HF `datasets.Dataset`, pyarrow Table, pandas), or None."""
    names = getattr(dataset, "column_names", None)
    if names is None and hasattr(dataset, "columns"):
        names = list(dataset.columns)
    if names is None or name not in names:
        return None
    values = dataset[name]
    return values.to_pylist() if hasattr(values, "to_pylist") else list(values)


class DatasetQuarantine:
    """Which rows of one dataset the quarantine list leaves out, and every row's loss weight.

    `ids`: the dataset's sample ids in row order. `path`: the quarantine list (it may not exist
    yet). `text_hashes`: each row's `text_hash` (or give `texts`, hashed here), so a listed text
    is matched even under another id; with `texts` and `near_duplicates`, near-duplicates of the
    listed texts are matched too. `excluded` and `weights` are numpy arrays by row.
    """

    def __init__(
        self,
        ids: Sequence[Any],
        path: str | os.PathLike[str],
        text_hashes: Sequence[str | None] | None = None,
        texts: Sequence[str | None] | None = None,
        near_duplicates: bool = True,
    ) -> None:
        self.path = Path(path)
        self.near_duplicates = near_duplicates
        self.texts = list(texts) if texts is not None else None
        self.ids = [str(i) for i in ids]
        if text_hashes is None and texts is not None:
            text_hashes = [None if t is None else text_hash(t) for t in texts]
        self.hashes = list(text_hashes) if text_hashes is not None else None
        self._row_of_id = {sample_id: row for row, sample_id in enumerate(self.ids)}
        self.excluded = np.zeros(len(self.ids), dtype=bool)
        self.weights = np.ones(len(self.ids), dtype="float64")
        self._stamp: tuple[int, int, int] | None = None
        self.refresh()

    @classmethod
    def from_dataset(
        cls,
        dataset: Any,
        path: str | os.PathLike[str],
        id_column: str = "sample_id",
        text_column: str = "text",
    ) -> DatasetQuarantine:
        """From a table-like dataset's id column (`sample_id`, else dataclean's `id`) and its
        `text_hash` column, else its text column."""
        ids = _column(dataset, id_column)
        if ids is None:
            ids = _column(dataset, "id")
        if ids is None:
            raise ValueError(f"the dataset has no {id_column!r} or 'id' column")
        return cls(ids, path, _column(dataset, C.TEXT_HASH), _column(dataset, text_column))

    def __len__(self) -> int:
        return len(self.ids)

    def text_hash_of(self, sample_id: str) -> str | None:
        """The text hash of a sample of this dataset (None when unknown)."""
        row = self._row_of_id.get(str(sample_id))
        return None if row is None or self.hashes is None else self.hashes[row]

    def text_of(self, sample_id: str) -> str | None:
        """The text of a sample of this dataset (None when unknown: the view was given hashes)."""
        row = self._row_of_id.get(str(sample_id))
        return None if row is None or self.texts is None else self.texts[row]

    def refresh(self) -> bool:
        """Re-read the list if its file changed since the last read; True when it was re-read."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            stamp = None
        else:
            stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        self.excluded[:] = False
        self.weights[:] = C.DEFAULT_WEIGHT
        if stamp is None:
            return True
        index = QuarantineIndex.from_list(applied(read_list(self.path)), self.near_duplicates)
        matches = index.match(self.ids, self.hashes, self.texts)
        lowered_weights(self.weights, matches)
        for row, found in enumerate(matches):
            if found is not None and found.action != DOWNWEIGHT:
                self.excluded[row] = True
        self.weights[self.excluded] = 0.0
        return True


class QuarantineSampler:
    """Indices of the rows to train on, leaving out quarantined rows as they would be drawn.

    `shuffle`: a permutation per epoch from (`seed`, epoch); else row order. `max_draws`: the most
    times one row is drawn over the run (None: no cap). `recheck`: re-stat the list every this
    many draws (1: before every draw).
    """

    def __init__(
        self,
        view: DatasetQuarantine,
        shuffle: bool = True,
        seed: int = 0,
        max_draws: int | None = None,
        recheck: int = 1,
    ) -> None:
        if max_draws is not None and max_draws < 1:
            raise ValueError(f"max_draws: must be at least 1, got {max_draws}")
        self.view = view
        self.shuffle = shuffle
        self.seed = seed
        self.max_draws = max_draws
        self.recheck = max(1, recheck)
        self.epoch = 0
        self.position = 0
        self.draws = np.zeros(len(view), dtype="int64")

    def _order(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.view))
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.view))

    def _allowed(self) -> np.ndarray:
        allowed = ~self.view.excluded
        if self.max_draws is not None:
            allowed &= self.draws < self.max_draws
        return allowed

    def __len__(self) -> int:
        """Rows still to draw in this epoch (as the list stands now)."""
        self.view.refresh()
        order = self._order()[self.position :]
        return int(self._allowed()[order].sum())

    def __iter__(self) -> Iterator[int]:
        order = self._order()
        self.view.refresh()
        while self.position < len(order):
            row = int(order[self.position])
            self.position += 1
            if self.position % self.recheck == 0:
                self.view.refresh()
            if self.view.excluded[row] or (self.max_draws is not None and self.draws[row] >= self.max_draws):
                continue
            self.draws[row] += 1
            yield row
        self.epoch += 1
        self.position = 0

    def set_epoch(self, epoch: int) -> None:
        """Start epoch `epoch` from its beginning (as DistributedSampler.set_epoch)."""
        self.epoch, self.position = epoch, 0

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs to continue the same order."""
        return {"epoch": self.epoch, "position": self.position, "draws": self.draws.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's `state_dict`; the list is re-read at the next draw."""
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        self.draws = np.asarray(state["draws"], dtype="int64").copy()


class QuarantinedDataset:
    """A map-style dataset whose items carry their loss weight (`weight`: 1.0, a down-weighted
    entry's weight, 0.0 when quarantined). Dict items get a `weight` key; tuples get the weight
    appended; anything else becomes (item, weight). `sampler()` leaves quarantined rows out.
    Over a `PackedDataset`, give a `dataclean.feedback.packed.PackedQuarantine` as `view`: items
    then carry one weight per sample and the dropped samples' labels masked (see there why)."""

    def __init__(self, dataset: Any, view: DatasetQuarantine) -> None:
        if len(dataset) != len(view):
            raise ValueError(f"the dataset has {len(dataset)} rows but the view {len(view)}")
        self.dataset = dataset
        self.view = view

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        item = self.dataset[index]
        if hasattr(self.view, "weigh"):  # a PackedQuarantine: per-sample weights, masked labels
            return self.view.weigh(item, index)
        weight = np.float32(self.view.weights[index])  # collated to float32, like the losses
        if isinstance(item, dict):
            return {**item, WEIGHT_KEY: weight}
        if isinstance(item, tuple):
            return (*item, weight)
        return item, weight

    def sampler(self, **kwargs: Any) -> QuarantineSampler:
        """A `QuarantineSampler` over this dataset (keyword arguments as its own)."""
        return QuarantineSampler(self.view, **kwargs)
