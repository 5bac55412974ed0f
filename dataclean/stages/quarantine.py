"""Stage `quarantine`: leave out (or down-weight) the samples on a quarantine list.

A row is quarantined when its `id` or its `text_hash` is on the list (the hash catches a sample
whose id changed, e.g. after re-sharding). Near-duplicates of quarantined texts are quarantined
too (character 5-grams at Jaccard >= `threshold`: MinHash LSH candidates verified exactly, see
`dataclean.quarantine.neardup`), so a changed keep rule (another copy kept by dedup, a different
split) cannot bring the same content back. The quarantined texts come from the list's optional
`text` column and from the rows of this run that matched by id or hash (collected by `observe`,
which is why this is a global stage).

OUT/quarantined lists every row the list touched, with the list's reason
(`quarantine:loss_outlier`, `quarantine:near_duplicate_of:<id>`) and `action`: `drop` rows are
left out of OUT/data (counted as `quarantined`); an entry with action `downweight` keeps its row
in OUT/data with `weight` lowered to the entry's weight (never raised, so applying a list twice
changes nothing), and a copy of it, with that weight, is listed in OUT/quarantined (counted as
`copied`, not again in the accounting invariant: the row is kept). Entries with action `review`
(persistent outliers `dataclean feedback` lists for a person) are not applied until accepted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.feedback import schema as S
from dataclean.ids import text_hashes
from dataclean.io.files import open_input, read_parquet
from dataclean.quarantine.lists import applied, read_list
from dataclean.quarantine.neardup import NearDuplicateIndex
from dataclean.stage import FitContext, GlobalStage, with_copies, with_drops


@dataclass
class DropQuarantined(GlobalStage):
    """Drop or down-weight listed samples and their near-duplicates (see the module docstring).

    `path`: the quarantine list (Parquet); None makes the stage a no-op. `near_duplicates`: also
    match texts similar to quarantined ones, at Jaccard >= `threshold` (candidates from `num_perm`
    MinHash permutations in 16 bands).
    """

    name: ClassVar[str] = "quarantine"
    destination: ClassVar[str] = "quarantined"

    path: str | None = None
    near_duplicates: bool = True
    threshold: float = 0.8
    num_perm: int = 128
    _entries: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)
    _by_hash: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _texts: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _index: NearDuplicateIndex | None = field(default=None, init=False, repr=False)

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
        if self.path is None or self._entries:
            return
        listed = applied(read_list(self.path))
        self._entries = {row[S.SAMPLE_ID]: row for row in listed.to_pylist()}
        self._by_hash = {row[S.TEXT_HASH]: key for key, row in self._entries.items() if row[S.TEXT_HASH]}
        self._texts = {key: row[S.TEXT] for key, row in self._entries.items() if row[S.TEXT]}
        self.build_index()

    def _matches(self, table: pa.Table) -> list[str | None]:
        """The list entry (sample id) each row matches by id or text hash, or None."""
        ids = table.column(C.ID).to_pylist()
        if C.TEXT_HASH in table.column_names:
            hashes = table.column(C.TEXT_HASH).to_pylist()
        else:
            hashes = text_hashes(table.column(C.TEXT)).to_pylist()
        return [
            row_id if row_id in self._entries else self._by_hash.get(h) if h else None
            for row_id, h in zip(ids, hashes, strict=True)
        ]

    def is_barrier(self) -> bool:
        """Only a list with near-duplicate matching needs to see the whole run first."""
        return self.path is not None and self.near_duplicates

    def observe(self, table: pa.Table) -> pa.Table | None:
        """Texts of this run's rows that match the list, for near-duplicate matching."""
        if self.path is None or not self.near_duplicates:
            return None
        matches = self._matches(table)
        keep = [i for i, key in enumerate(matches) if key is not None and key not in self._texts]
        if not keep:
            return None
        texts = table.column(C.TEXT).take(keep).to_pylist()
        return pa.table({"entry": [matches[i] for i in keep], C.TEXT: texts})

    def fit(self, context: FitContext) -> None:
        """Index every quarantined text (from the list and from this run) for MinHash queries."""
        for summary in context.summaries:
            for row in read_parquet(summary).to_pylist():
                self._texts.setdefault(row["entry"], row[C.TEXT])
        self.build_index()

    def build_index(self) -> None:
        """The near-duplicate index over the quarantined texts (one entry per listed sample)."""
        if not self.near_duplicates or not self._texts:
            self._index = None
            return
        self._index = NearDuplicateIndex(self.threshold, self.num_perm)
        for key, text in self._texts.items():
            self._index.add(key, text)

    def _near(self, text: str | None) -> str | None:
        if self._index is None or not text:
            return None
        found = self._index.query(text)
        return found[0] if found else None

    def __call__(self, table: pa.Table) -> pa.Table:
        if not self._entries or table.num_rows == 0:
            return table
        texts = table.column(C.TEXT).to_pylist()
        reasons: list[str | None] = []  # dropped rows
        copies: list[str | None] = []  # down-weighted rows, listed in OUT/quarantined too
        actions: list[str | None] = []
        weights = (
            pc.fill_null(table.column(C.WEIGHT), 1.0).to_numpy(zero_copy_only=False).copy()
            if C.WEIGHT in table.column_names
            else np.ones(table.num_rows)
        )
        for i, key in enumerate(self._matches(table)):
            reason = None
            if key is None:
                key = self._near(texts[i])
                if key is not None:
                    reason = f"near_duplicate_of:{key}"
            if key is None:
                reasons.append(None)
                copies.append(None)
                actions.append(None)
                continue
            entry = self._entries[key]
            reason = reason or entry[S.REASON] or "listed"
            if entry[S.ACTION] == "downweight":
                weights[i] = min(weights[i], entry[S.WEIGHT] if entry[S.WEIGHT] is not None else 0.1)
                reasons.append(None)
                copies.append(reason)
            else:
                reasons.append(reason)
                copies.append(None)
            actions.append(entry[S.ACTION] or "drop")
        weight_array = pa.array(weights, pa.float64())
        if C.WEIGHT in table.column_names:
            table = table.set_column(table.schema.get_field_index(C.WEIGHT), C.WEIGHT, weight_array)
        else:
            table = table.append_column(C.WEIGHT, weight_array)
        table = table.append_column(C.ACTION, pa.array(actions, pa.string()))
        return with_copies(with_drops(table, reasons), copies)
