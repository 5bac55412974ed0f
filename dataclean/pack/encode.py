"""Step 1 of `dataclean pack`, one job per input file: tokenize the kept rows, keep the lengths.

Each job reads one Parquet file of a run's kept rows (`OUT/data/`) through the exporters' shared
reader (`dataclean.export.source`: the quarantine list's `drop` entries left out and counted,
`downweight` entries' weights lowered), tokenizes the rest (`dataclean.export.tokenizer`),
appends the end-of-sample id to each, and writes id, weight and tokens to a scratch file. It
returns only the token count of each sample: the driver plans the packing from the lengths, so
its memory grows with the number of samples, never with the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.export.source import Listed, kept_batches
from dataclean.export.tokenizer import PackTokenizer, encode_documents
from dataclean.io.files import atomic_output

TOKENS = "tokens"
TOKEN_SCHEMA = pa.schema([(C.ID, pa.string()), (C.WEIGHT, pa.float64()), (TOKENS, pa.list_(pa.int32()))])

__all__ = ["TOKENS", "TOKEN_SCHEMA", "EncodeFile", "EncodeResult", "Listed"]


@dataclass
class EncodeResult:
    """What a job tells the driver: each kept sample's length (tokens + end-of-sample), rows
    read, rows the quarantine list dropped and UTF-8 bytes of text tokenized."""

    lengths: np.ndarray
    rows: int
    quarantined: int
    text_bytes: int = 0


@dataclass
class EncodeFile:
    """The job: (input file, scratch file) -> EncodeResult. Pickled to each worker once."""

    tokenizer: PackTokenizer
    listed: Listed | None = None

    def __call__(self, item: tuple[str, str]) -> EncodeResult:
        import pyarrow.parquet as pq

        source, target = item
        lengths: list[np.ndarray] = []
        rows = quarantined = text_bytes = 0
        with atomic_output(target) as sink, pq.ParquetWriter(sink, TOKEN_SCHEMA) as writer:
            for batch in kept_batches(source, self.listed, with_hash=False):
                rows += batch.rows_read
                quarantined += batch.quarantined
                text_bytes += int(pc.sum(pc.binary_length(batch.table.column(C.TEXT))).as_py() or 0)
                encoded, length = self._encode(batch.table)
                writer.write_table(encoded)
                lengths.append(length)
        found = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        return EncodeResult(found, rows, quarantined, text_bytes)

    def _encode(self, table: pa.Table) -> tuple[pa.Table, np.ndarray]:
        """Tokens of every row followed by the end-of-sample id, as a list<int32> column."""
        tokens, offsets = encode_documents(self.tokenizer, table.column(C.TEXT).combine_chunks())
        column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(tokens, pa.int32()))
        encoded = pa.Table.from_arrays(
            [table.column(C.ID), table.column(C.WEIGHT), column], schema=TOKEN_SCHEMA
        )
        return encoded, np.diff(offsets)
