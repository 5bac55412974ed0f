"""Which quarantine-list entry a row matches, and what that does to it: one rule for the pipeline's
`quarantine` stage and the training-time sampler (`dataclean.feedback.sampler`) alike.

A row matches an entry by its `id` (the entry's `sample_id`), else by its `text_hash` (a sample
whose id changed, e.g. after re-sharding), else, when near-duplicate matching is on and the row's
text is known, by being a near-duplicate of an entry's text (`dataclean.quarantine.neardup`), so
a changed keep rule cannot bring the same content back. The match says why (`reason`: the entry's
reason, or `near_duplicate_of:<sample_id>`), the entry's `action` and the row's loss weight
(0 for `drop`; a `downweight` entry's weight, `DEFAULT_DOWNWEIGHT` when it gives none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.quarantine.neardup import NearDuplicateIndex
from dataclean.quarantine.schema import DEFAULT_DOWNWEIGHT

DROP, DOWNWEIGHT = "drop", "downweight"


@dataclass(frozen=True)
class Match:
    """What an entry does to one row: the entry matched, why, the action and the row's weight."""

    entry: str
    reason: str
    action: str
    weight: float


@dataclass
class QuarantineIndex:
    """A quarantine list ready to match rows (`match`). `near_duplicates` indexes the entries'
    texts (and those added with `add_texts`) at Jaccard >= `threshold` with `num_perm`
    MinHash permutations."""

    entries: dict[str, dict[str, Any]]
    near_duplicates: bool = True
    threshold: float = 0.8
    num_perm: int = 128
    texts: dict[str, str] = field(default_factory=dict)
    _by_hash: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _near: NearDuplicateIndex | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_list(
        cls, table: pa.Table, near_duplicates: bool = True, threshold: float = 0.8, num_perm: int = 128
    ) -> QuarantineIndex:
        """From a list as `dataclean.quarantine.lists.read_list` returns it."""
        entries = {row[C.SAMPLE_ID]: row for row in table.to_pylist()}
        texts = {key: row[C.TEXT] for key, row in entries.items() if row.get(C.TEXT)}
        return cls(entries, near_duplicates, threshold, num_perm, texts)

    def __post_init__(self) -> None:
        self._by_hash = {row[C.TEXT_HASH]: key for key, row in self.entries.items() if row.get(C.TEXT_HASH)}
        self._build()

    def __bool__(self) -> bool:
        return bool(self.entries)

    def _build(self) -> None:
        self._near = None
        if self.near_duplicates and self.texts:
            self._near = NearDuplicateIndex(self.threshold, self.num_perm)
            keys = sorted(self.texts)
            self._near.add_many(keys, [self.texts[key] for key in keys])

    def add_texts(self, texts: dict[str, str]) -> None:
        """More texts of listed samples (entry key -> text), e.g. rows of a run that matched by id
        or hash, so their near-duplicates are found too (an entry's own text wins)."""
        fresh = {key: text for key, text in texts.items() if key in self.entries and key not in self.texts}
        if fresh:
            self.texts.update(fresh)
            self._build()

    def exact_entries(self, ids: Sequence[Any], hashes: Sequence[str | None] | None) -> list[str | None]:
        """The entry each row matches by id, else by text hash, or None."""
        keys = [str(i) if i is not None else None for i in ids]
        if hashes is None:
            hashes = [None] * len(keys)
        return [
            key if key in self.entries else self._by_hash.get(hashed) if hashed else None
            for key, hashed in zip(keys, hashes, strict=True)
        ]

    def match(
        self,
        ids: Sequence[Any],
        hashes: Sequence[str | None] | None,
        texts: Sequence[str | None] | None = None,
    ) -> list[Match | None]:
        """The `Match` of each row (None: the list does not touch it); see the module docstring."""
        exact = self.exact_entries(ids, hashes)
        near: list[tuple[str, float] | None] = [None] * len(exact)
        if self._near is not None and texts is not None:
            unmatched = [row for row, key in enumerate(exact) if key is None]
            for row, found in zip(
                unmatched, self._near.query_many([texts[row] for row in unmatched]), strict=True
            ):
                near[row] = found
        matches: list[Match | None] = []
        for key, similar in zip(exact, near, strict=True):
            reason = None
            if key is None and similar is not None:
                key, reason = similar[0], f"near_duplicate_of:{similar[0]}"
            if key is None:
                matches.append(None)
                continue
            entry = self.entries[key]
            action = entry.get(C.ACTION) or DROP
            if action == DOWNWEIGHT:
                weight = entry.get(C.WEIGHT)
                weight = DEFAULT_DOWNWEIGHT if weight is None else float(weight)
            else:
                weight = 0.0
            matches.append(Match(key, reason or entry.get(C.REASON) or "listed", action, weight))
        return matches


def row_weights(table: pa.Table) -> np.ndarray:
    """The rows' sampling weights as float64, `DEFAULT_WEIGHT` (1.0) where the table has no
    `weight` column or a null: a copy, to lower with `lowered_weights`."""
    if C.WEIGHT not in table.column_names:
        return np.full(table.num_rows, C.DEFAULT_WEIGHT)
    filled = pc.fill_null(table.column(C.WEIGHT), C.DEFAULT_WEIGHT)
    weights: np.ndarray = np.array(filled.to_numpy(zero_copy_only=False), dtype=np.float64)
    return weights


def lowered_weights(weights: np.ndarray, matches: Sequence[Match | None]) -> np.ndarray:
    """The weight rule, one place for the pipeline, the exporters and the training sampler: a row
    a `downweight` entry matches gets the lower of its weight and the entry's (lists only lower,
    and applying one twice changes nothing); other rows keep theirs. Changes `weights` in place."""
    for row, found in enumerate(matches):
        if found is not None and found.action == DOWNWEIGHT:
            weights[row] = min(weights[row], found.weight)
    return weights
