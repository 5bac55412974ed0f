"""Step 1 of `dataclean export megatron`, one job per input file: a small IndexedDataset of its own.

Each job reads one file of kept rows through the exporters' shared reader (quarantine applied and
counted), tokenizes every row into one document (its tokens, then the end-of-document id) and
writes the shard's `.bin`, `.idx` and `.ids.parquet` (document numbers local to the shard), then
`.done.json` with its counts, last: a shard with that file is finished, and a resumed export
skips it. The files depend only on the input file, the tokenizer and the list, so they are the
same whatever the executor, the worker, or the number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.export.megatron.ids import DOCUMENT, TOKEN_COUNT, ids_path, write_ids
from dataclean.export.megatron.indexed import bin_path, idx_path, write_index
from dataclean.export.source import Listed, kept_batches
from dataclean.export.tokenizer import PackTokenizer, encode_documents
from dataclean.io.files import atomic_output, exists
from dataclean.io.writers import read_json, write_json


def done_path(prefix: str) -> str:
    return prefix + ".done.json"


@dataclass
class ShardResult:
    """What a shard job tells the driver (also its `.done.json`)."""

    documents: int
    tokens: int
    rows_read: int
    quarantined: int
    text_bytes: int

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class ExportShard:
    """The job: (input file, shard prefix) -> the shard's IndexedDataset and ids. Pickled to each
    worker once; the tokenizer loads there."""

    tokenizer: PackTokenizer
    dtype: str
    listed: Listed | None = None

    def __call__(self, item: tuple[str, str]) -> ShardResult:
        source, prefix = item
        if exists(done_path(prefix)):  # finished by an earlier, interrupted export
            return ShardResult(**read_json(done_path(prefix)))
        dtype = np.dtype(self.dtype)
        lengths: list[np.ndarray] = []
        ids: list[pa.Table] = []
        rows = quarantined = text_bytes = 0
        with atomic_output(bin_path(prefix)) as sink:
            for batch in kept_batches(source, self.listed):
                rows += batch.rows_read
                quarantined += batch.quarantined
                texts = batch.table.column(C.TEXT).combine_chunks()
                text_bytes += int(pc.sum(pc.binary_length(texts)).as_py() or 0)
                tokens, offsets = encode_documents(self.tokenizer, texts)
                sink.write(tokens.astype(dtype, copy=False).data)  # no bytes copy of the array
                length = np.diff(offsets)
                lengths.append(length)
                ids.append(
                    pa.table(
                        {
                            C.ID: batch.table.column(C.ID),
                            C.TEXT_HASH: batch.table.column(C.TEXT_HASH),
                            C.WEIGHT: batch.table.column(C.WEIGHT),
                            TOKEN_COUNT: pa.array(length, pa.int64()),
                        }
                    )
                )
        all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        write_index(idx_path(prefix), all_lengths, dtype)
        table = pa.concat_tables(ids) if ids else None
        count = len(all_lengths)
        numbers = pa.array(np.arange(count, dtype=np.int64))
        if table is None:
            table = pa.table({C.ID: pa.array([], pa.string()), C.TEXT_HASH: pa.array([], pa.string())})
            table = table.append_column(C.WEIGHT, pa.array([], pa.float64()))
            table = table.append_column(TOKEN_COUNT, pa.array([], pa.int64()))
        write_ids(ids_path(prefix), table.append_column(DOCUMENT, numbers))
        result = ShardResult(count, int(all_lengths.sum()), rows, quarantined, text_bytes)
        write_json(done_path(prefix), result.to_json())
        return result


def shard_summary(results: list[ShardResult]) -> dict[str, Any]:
    """The counts of all shards together."""
    return {
        "documents": sum(r.documents for r in results),
        "tokens": sum(r.tokens for r in results),
        "rows_read": sum(r.rows_read for r in results),
        "quarantined": sum(r.quarantined for r in results),
    }
