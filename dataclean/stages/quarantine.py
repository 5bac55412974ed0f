"""Stage `quarantine`: leave out (or down-weight) the samples on a quarantine list.

Which rows a list touches, and how, is `dataclean.quarantine.match` (the rule the training-time
sampler applies too): a row's `id`, else its `text_hash`, else its text as a near-duplicate of a
quarantined text (character 5-grams at Jaccard >= `threshold`, dedup's normalization and MinHash,
candidates verified exactly). The quarantined texts come from the list's optional `text` column and
from the rows of this run that matched by id or hash (collected by `observe`, which is why this is
a global stage).

OUT/quarantined lists every row the list touched, with the list's reason
(`quarantine:loss_outlier`, `quarantine:near_duplicate_of:<id>`) and `action`: `drop` rows are
left out of OUT/data (counted as `quarantined`); an entry with action `downweight` keeps its row
in OUT/data with `weight` lowered to the entry's weight (never raised, so applying a list twice
changes nothing), and a copy of it, with that weight, is listed in OUT/quarantined (counted as
`copied`, not again in the accounting invariant: the row is kept).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.ids import table_text_hashes
from dataclean.io.files import open_input, read_parquet
from dataclean.io.layout import QUARANTINED
from dataclean.quarantine.lists import applied, read_list
from dataclean.quarantine.match import DOWNWEIGHT, QuarantineIndex, lowered_weights, row_weights
from dataclean.quarantine.neardup import NearDuplicateIndex
from dataclean.stage import FitContext, GlobalStage, Outputs, with_column, with_copies, with_drops


@dataclass
class DropQuarantined(GlobalStage):
    """Drop or down-weight listed samples and their near-duplicates (see the module docstring).

    `path`: the quarantine list (Parquet); None makes the stage a no-op. `near_duplicates`: also
    match texts similar to quarantined ones, at Jaccard >= `threshold` (candidates from `num_perm`
    MinHash permutations in 16 bands).
    """

    name: ClassVar[str] = "quarantine"
    outputs: ClassVar[Outputs] = Outputs(folder=QUARANTINED)
    provides: ClassVar[tuple[str, ...]] = (C.WEIGHT,)
    # An input's `text_hash` (a previous run's OUT/data) saves hashing; an input's `weight` is
    # lowered, never raised.
    reads_if_present: ClassVar[tuple[str, ...]] = (C.TEXT_HASH, C.WEIGHT)

    path: str | None = None
    near_duplicates: bool = True
    threshold: float = 0.8
    num_perm: int = 128
    _index: QuarantineIndex | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ConfigError(f"quarantine.threshold: must be in (0, 1], got {self.threshold}")
        if self.num_perm < 16 or self.num_perm % 16:
            raise ConfigError(f"quarantine.num_perm: must be a multiple of 16, got {self.num_perm}")
        if self.path is not None:
            self.setup()

    def params(self) -> dict[str, Any]:
        """Parameters plus a fingerprint of the list's content, so that a rerun with a changed
        list at the same path is a new config (not a resume of the old one)."""
        params = super().params()
        if self.path is not None:
            digest = hashlib.sha256()
            with open_input(self.path) as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            params["list_sha256"] = digest.hexdigest()[:16]
        return params

    def setup(self) -> None:
        """Load the list (once per worker)."""
        if self.path is None or self._index is not None:
            return
        self._index = QuarantineIndex.from_list(
            applied(read_list(self.path)), self.near_duplicates, self.threshold, self.num_perm
        )

    def compile_kernels(self) -> None:
        """Near-duplicate matching runs dedup's normalization, MinHash and band-key kernels
        (compiled already when dedup is in the recipe); nothing without a list."""
        if self.path is not None and self.near_duplicates:
            index = NearDuplicateIndex(self.threshold, self.num_perm)
            index.add("warm-up", "A warm-up text, 一段热身的文字.")
            index.query_many(["A warm-up text, 一段热身的文字."])

    def _hashes(self, table: pa.Table) -> list[str | None]:
        return list(table_text_hashes(table).to_pylist())

    def is_barrier(self) -> bool:
        """Only a list with near-duplicate matching needs to see the whole run first."""
        return self.path is not None and self.near_duplicates

    def observe(self, table: pa.Table) -> pa.Table | None:
        """Texts of this run's rows that match the list, for near-duplicate matching."""
        if self._index is None or not self.near_duplicates:
            return None
        matches = self._index.exact_entries(table.column(C.ID).to_pylist(), self._hashes(table))
        keep = [i for i, key in enumerate(matches) if key is not None and key not in self._index.texts]
        if not keep:
            return None
        texts = table.column(C.TEXT).take(keep).to_pylist()
        return pa.table({"entry": [matches[i] for i in keep], C.TEXT: texts})

    def fit(self, context: FitContext) -> None:
        """Index every quarantined text (from the list and from this run) for MinHash queries."""
        if self._index is None:
            return
        found: dict[str, str] = {}
        for summary in context.summaries:
            for row in read_parquet(summary).to_pylist():
                found.setdefault(row["entry"], row[C.TEXT])
        self._index.add_texts(found)

    def __call__(self, table: pa.Table) -> pa.Table:
        if not self._index or table.num_rows == 0:
            return table
        matches = self._index.match(
            table.column(C.ID).to_pylist(), self._hashes(table), table.column(C.TEXT).to_pylist()
        )
        reasons: list[str | None] = []  # dropped rows
        copies: list[str | None] = []  # down-weighted rows, listed in OUT/quarantined too
        for found in matches:
            downweight = found is not None and found.action == DOWNWEIGHT
            reasons.append(found.reason if found is not None and not downweight else None)
            copies.append(found.reason if found is not None and downweight else None)
        weights = lowered_weights(row_weights(table), matches)
        table = with_column(table, C.WEIGHT, pa.array(weights, pa.float64()))
        actions = [None if found is None else found.action for found in matches]
        table = table.append_column(C.ACTION, pa.array(actions, pa.string()))
        return with_copies(with_drops(table, reasons), copies)
