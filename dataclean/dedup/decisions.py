"""Looking up a batch's dedup decisions by id, on the workers that apply the fitted stage.

`fit` leaves its decisions as Parquet files (id, kept id, kind, score) for the rows it drops and
for the kept rows of clusters. A worker loads them once (cached per process and folder) into
a table sorted by XXH64 of the id, and matches each batch with a binary search, confirming every
hit on the full id string. Memory per worker: about 8 + len(id) + len(kept id) + 20 bytes per
decided row (duplicates and cluster keepers; unique rows cost nothing).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.dedup.hashing import xxh64_strings
from dataclean.dedup.verify import DECISION_SCHEMA

_CACHE: dict[str, Decisions] = {}


@dataclass
class Found:
    """Per row of a batch: drop reason (or null), cluster id (or null), score (or null)."""

    reasons: pa.Array
    clusters: pa.Array
    scores: pa.Array


class Decisions:
    """All decisions of one fit, sorted by id hash."""

    def __init__(self, table: pa.Table) -> None:
        hashes = xxh64_strings(table.column("id"))
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.table = table.take(pa.array(order)).combine_chunks()

    @classmethod
    def load(cls, folder: str) -> Decisions:
        """The decisions saved in `folder`, from this process's cache when already loaded."""
        cached = _CACHE.get(folder)
        if cached is None:
            files = sorted(glob.glob(os.path.join(folder, "*.parquet")))
            tables = [pq.read_table(path, schema=DECISION_SCHEMA) for path in files]
            table = pa.concat_tables(tables) if tables else DECISION_SCHEMA.empty_table()
            cached = cls(table)
            _CACHE.clear()  # one fitted stage at a time per process
            _CACHE[folder] = cached
        return cached

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def find(self, ids: pa.Array | pa.ChunkedArray) -> Found:
        """The decisions for a batch's ids."""
        if isinstance(ids, pa.ChunkedArray):
            ids = ids.combine_chunks()
        ids = pc.cast(ids, pa.string())
        count = len(ids)
        if len(self.hashes) == 0 or count == 0:
            nulls = pa.nulls(count, pa.string())
            return Found(nulls, nulls, pa.nulls(count, pa.float64()))
        hashes = xxh64_strings(ids)
        where = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        candidates = self.table.take(pa.array(where))
        hit = (self.hashes[where] == hashes) & pc.fill_null(
            pc.equal(candidates.column("id"), ids), False
        ).to_numpy(zero_copy_only=False)
        mask = pa.array(~hit)
        kind = candidates.column("kind")
        kept = candidates.column("kept")
        dropped = pc.and_(pc.invert(mask), pc.not_equal(kind, "kept"))
        reason = pc.binary_join_element_wise(kind, kept, ":")
        reasons = pc.if_else(dropped, reason, pa.scalar(None, pa.string()))
        clusters = pc.if_else(mask, pa.scalar(None, pa.string()), kept)
        scores = pc.if_else(dropped, candidates.column("score"), pa.scalar(None, pa.float64()))
        return Found(_array(reasons), _array(clusters), _array(scores))


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
