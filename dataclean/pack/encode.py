"""Step 1 of `dataclean pack`, one job per input file: tokenize the kept rows, keep the lengths.

Each job reads one Parquet file of a run's kept rows (`OUT/data/`), leaves out the samples a
quarantine list drops (matched by `id` or `text_hash`, as the `quarantine` stage matches; its
near-duplicate matching needs a `dataclean run --quarantine`) and lowers the weight of those it
down-weights, tokenizes the rest, appends the end-of-sample id to each, and writes id, weight and
tokens to a scratch file. It returns only the token count of each sample: the driver plans the
packing from the lengths, so its memory grows with the number of samples, never with the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.ids import text_hashes
from dataclean.io.files import atomic_output, open_input
from dataclean.pack.tokenizer import PackTokenizer
from dataclean.quarantine.lists import applied, read_list
from dataclean.quarantine.match import DROP, QuarantineIndex

BATCH_ROWS = 4096
TOKENS = "tokens"
TOKEN_SCHEMA = pa.schema([(C.ID, pa.string()), (C.WEIGHT, pa.float64()), (TOKENS, pa.list_(pa.int32()))])


@dataclass
class Listed:
    """A quarantine list as `pack` applies it: the one matching rule of the pipeline's quarantine
    stage and the sampler (`dataclean.quarantine.match`: by id, text hash, or near-duplicate
    text), `drop` entries left out, `downweight` entries' weights lowered, `review` entries not
    applied until accepted."""

    index: QuarantineIndex

    @classmethod
    def read(cls, path: str) -> Listed:
        return cls(QuarantineIndex.from_list(applied(read_list(path))))

    def apply(self, table: pa.Table) -> tuple[pa.Table, int]:
        """The rows the list keeps (weights lowered) and how many it dropped."""
        ids = table.column(C.ID).to_pylist()
        if C.TEXT_HASH in table.column_names:
            hashes = table.column(C.TEXT_HASH).to_pylist()
        else:
            hashes = text_hashes(table.column(C.TEXT)).to_pylist()
        matches = self.index.match(ids, hashes, table.column(C.TEXT).to_pylist())
        keep = np.array([m is None or m.action != DROP for m in matches], dtype=bool)
        weights = table.column(C.WEIGHT).to_numpy(zero_copy_only=False).copy()
        for row, found in enumerate(matches):
            if found is not None and found.action != DROP:
                weights[row] = min(weights[row], found.weight)
        table = table.set_column(table.schema.get_field_index(C.WEIGHT), C.WEIGHT, pa.array(weights))
        return table.filter(pa.array(keep)), int(len(keep) - keep.sum())


@dataclass
class EncodeResult:
    """What a job tells the driver: each kept sample's length (tokens + end-of-sample), rows
    read and rows the quarantine list dropped."""

    lengths: np.ndarray
    rows: int
    quarantined: int


@dataclass
class EncodeFile:
    """The job: (input file, scratch file) -> EncodeResult. Pickled to each worker once."""

    tokenizer: PackTokenizer
    listed: Listed | None = None

    def __call__(self, item: tuple[str, str]) -> EncodeResult:
        source, target = item
        lengths: list[np.ndarray] = []
        rows = quarantined = 0
        with open_input(source) as handle:
            parquet = pq.ParquetFile(handle)
            names = parquet.schema_arrow.names
            for name in (C.ID, C.TEXT):
                if name not in names:
                    raise InputError(source, f"no {name!r} column: not a dataclean output's data/ file")
            wanted = [C.ID, C.TEXT] + [n for n in (C.WEIGHT, C.TEXT_HASH) if n in names]
            with atomic_output(target) as sink, pq.ParquetWriter(sink, TOKEN_SCHEMA) as writer:
                for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
                    table = _with_weight(pa.Table.from_batches([batch]))
                    _check_rows(table, source, rows)
                    rows += table.num_rows
                    if self.listed is not None:
                        table, dropped = self.listed.apply(table)
                        quarantined += dropped
                    encoded, length = self._encode(table)
                    writer.write_table(encoded)
                    lengths.append(length)
        return EncodeResult(np.concatenate(lengths) if lengths else np.zeros(0, np.int64), rows, quarantined)

    def _encode(self, table: pa.Table) -> tuple[pa.Table, np.ndarray]:
        """Tokens of every row followed by the end-of-sample id, as a list<int32> column."""
        texts = table.column(C.TEXT).combine_chunks()
        tokens, offsets = self.tokenizer.encode(texts)
        lengths = np.diff(offsets) + 1
        with_end = np.empty(len(tokens) + len(texts), dtype=np.int32)
        ends = offsets[1:] + np.arange(1, len(texts) + 1)  # one past each sample's end-of-sample
        with_end[ends - 1] = self.tokenizer.end_of_sample_id
        is_token = np.ones(len(with_end), dtype=bool)
        is_token[ends - 1] = False
        with_end[is_token] = tokens
        new_offsets = np.r_[0, ends].astype(np.int32)
        column = pa.ListArray.from_arrays(pa.array(new_offsets), pa.array(with_end, pa.int32()))
        encoded = pa.Table.from_arrays(
            [table.column(C.ID), table.column(C.WEIGHT), column], schema=TOKEN_SCHEMA
        )
        return encoded, lengths.astype(np.int64)


def _with_weight(table: pa.Table) -> pa.Table:
    if C.WEIGHT in table.column_names:
        return table.set_column(
            table.schema.get_field_index(C.WEIGHT), C.WEIGHT, pc.fill_null(table.column(C.WEIGHT), 1.0)
        )
    return table.append_column(C.WEIGHT, pa.array(np.ones(table.num_rows), pa.float64()))


def _check_rows(table: pa.Table, source: str, first_row: int) -> None:
    """A null id or text is an error naming the file and row, never a silently lost sample."""
    for name in (C.ID, C.TEXT):
        column = table.column(name)
        if column.null_count:
            row = first_row + int(pc.index(pc.is_null(column), True).as_py())
            raise InputError(source, f"null {name!r}", row=row)
