"""Looking up a batch's dedup decisions by id, on the workers that apply the fitted stage.

`fit` leaves its decisions (id, kept id, kind, score) for the rows it drops and for the kept rows
of clusters as one Arrow file per cluster partition, filed by input shard (record batch s holds
shard s's decisions). A worker applying the stage to a shard loads that shard's decisions from
every file (or all of them, when no shard is given) into a table sorted by XXH64 of the id, and
matches each batch with a binary search, confirming every hit on the full id string. Memory per
worker: about 8 + len(id) + len(kept id) + 20 bytes per decided row of the shard (duplicates and
cluster keepers; unique rows cost nothing), so it grows with the shard, not with the corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.dedup.hashing import xxh64_strings
from dataclean.dedup.verify import DECISION_SCHEMA
from dataclean.io.files import list_files, open_input

_CACHE: dict[tuple[str, int | None], Decisions] = {}


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
    def load(cls, folder: str, shard: int | None = None) -> Decisions:
        """Shard `shard`'s decisions saved in `folder` (None: every shard's), from this process's
        cache when they are the ones loaded last."""
        cached = _CACHE.get((folder, shard))
        if cached is None:
            batches: list[pa.RecordBatch] = []
            for path in list_files(folder, ".arrow"):
                with open_input(path) as source:
                    reader = pa.ipc.open_file(source)
                    if shard is None:
                        batches.extend(reader.get_batch(i) for i in range(reader.num_record_batches))
                    elif shard < reader.num_record_batches:
                        batches.append(reader.get_batch(shard))
            cached = cls(pa.Table.from_batches(batches, schema=DECISION_SCHEMA))
            _CACHE.clear()  # one shard of one fitted stage at a time per process
            _CACHE[(folder, shard)] = cached
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
