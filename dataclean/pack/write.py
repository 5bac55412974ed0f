"""Steps 2 and 3 of `dataclean pack`: move every token span to its sequence, write the sequences.

The plan (`dataclean.pack.packer`) sends spans of any input file to any output file, so the
tokens are regrouped on disk, as dedup regroups its band keys: a scatter job per scratch file
writes, for each output file its spans go to, one small Parquet file of (sequence, start, id,
weight, tokens); a gather job per output file reads its pieces, orders the spans by (sequence,
start) and writes the rows. A job holds one file's tokens at a time, the driver none.

Output rows: `input_ids` (list<int32>, exactly `seq_len`, the rest padding), `sample_ids`
(list<string>, in order), `sample_starts` and `sample_lengths` (list<int32>, end-of-sample
included), and `sample_weights` (list<float64>, each sample's `weight`). The rows depend only on
the plan and the tokens, so the files are byte-identical whatever the executor or worker count.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.io.files import exists, list_files, open_input, read_parquet, write_parquet
from dataclean.pack.encode import TOKENS

INPUT_IDS = "input_ids"
SAMPLE_IDS = "sample_ids"
SAMPLE_STARTS = "sample_starts"
SAMPLE_LENGTHS = "sample_lengths"
SAMPLE_WEIGHTS = "sample_weights"
SEQUENCE_SCHEMA = pa.schema(
    [
        (INPUT_IDS, pa.list_(pa.int32())),
        (SAMPLE_IDS, pa.list_(pa.string())),
        (SAMPLE_STARTS, pa.list_(pa.int32())),
        (SAMPLE_LENGTHS, pa.list_(pa.int32())),
        (SAMPLE_WEIGHTS, pa.list_(pa.float64())),
    ]
)
_SEQUENCE = "sequence"
_START = "start"


def piece_name(folder: str, part: int, source: int) -> str:
    """The scatter file of scratch file `source`'s spans bound for output file `part`."""
    return posixpath.join(folder, f"p{part:05d}-f{source:05d}.parquet")


def part_name(folder: str, part: int) -> str:
    """Output file `part` of PACKED/."""
    return posixpath.join(folder, f"part-{part:05d}.parquet")


@dataclass
class Spans:
    """One scratch file's spans (rows of the file; offset and length in tokens; sequence; start)."""

    source: int
    path: str
    row: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    sequence: np.ndarray
    start: np.ndarray


@dataclass
class ScatterSpans:
    """The job: a scratch file's spans -> one piece file per output file they go to."""

    folder: str
    rows_per_file: int

    def __call__(self, spans: Spans) -> list[int]:
        tokens = read_parquet(spans.path, columns=[C.ID, C.WEIGHT, TOKENS])
        lists = tokens.column(TOKENS).combine_chunks()
        flat = lists.values.to_numpy()
        first = lists.offsets.to_numpy()[spans.row] + spans.offset
        index = np.repeat(first - _starts(spans.length), spans.length) + np.arange(int(spans.length.sum()))
        piece_offsets = np.r_[0, np.cumsum(spans.length)].astype(np.int32)
        table = pa.table(
            {
                _SEQUENCE: pa.array(spans.sequence, pa.int64()),
                _START: pa.array(spans.start, pa.int32()),
                C.ID: tokens.column(C.ID).take(pa.array(spans.row)),
                C.WEIGHT: tokens.column(C.WEIGHT).take(pa.array(spans.row)),
                TOKENS: pa.ListArray.from_arrays(pa.array(piece_offsets), pa.array(flat[index], pa.int32())),
            }
        )
        parts = spans.sequence // self.rows_per_file
        written = []
        for part in np.unique(parts):
            mask = pa.array(parts == part)
            write_parquet(piece_name(self.folder, int(part), spans.source), table.filter(mask))
            written.append(int(part))
        return written


@dataclass
class GatherSequences:
    """The job: (output file, the piece files bound for it) -> PACKED/part-NNNNN.parquet rows."""

    folder: str
    rows_per_file: int
    seq_len: int
    padding_id: int

    def __call__(self, item: tuple[int, int, list[str]]) -> str:
        part, rows, pieces = item
        table = pa.concat_tables([read_parquet(p) for p in pieces if exists(p)])
        table = table.take(pc.sort_indices(table, [(_SEQUENCE, "ascending"), (_START, "ascending")]))
        local = table.column(_SEQUENCE).to_numpy() - part * self.rows_per_file
        starts = table.column(_START).to_numpy().astype(np.int64)
        lists = table.column(TOKENS).combine_chunks()
        lengths = np.diff(lists.offsets.to_numpy())
        flat = lists.values.to_numpy()
        input_ids = np.full(rows * self.seq_len, self.padding_id, dtype=np.int32)
        target = np.repeat(local * self.seq_len + starts - _starts(lengths), lengths) + np.arange(len(flat))
        input_ids[target] = flat
        offsets = pa.array(np.r_[0, np.cumsum(np.bincount(local, minlength=rows))].astype(np.int32))

        def per_row(values: pa.Array) -> pa.Array:
            return pa.ListArray.from_arrays(offsets, values)

        sequences = pa.Table.from_arrays(
            [
                pa.FixedSizeListArray.from_arrays(pa.array(input_ids), self.seq_len).cast(
                    pa.list_(pa.int32())
                ),
                per_row(table.column(C.ID).combine_chunks()),
                per_row(pa.array(starts, pa.int32())),
                per_row(pa.array(lengths, pa.int32())),
                per_row(table.column(C.WEIGHT).combine_chunks()),
            ],
            schema=SEQUENCE_SCHEMA,
        )
        path = part_name(self.folder, part)
        write_parquet(path, sequences, compression="zstd")
        return path


def _starts(lengths: np.ndarray) -> np.ndarray:
    """Exclusive running sums: where each of consecutive runs of `lengths` begins."""
    starts: np.ndarray = np.cumsum(lengths) - lengths
    return starts


def packed_files(folder: str) -> list[str]:
    """PACKED/'s sequence files, in order."""
    return list_files(folder, ".parquet", "part-")


def read_packed(folder: str) -> pa.Table:
    """Every sequence of a PACKED/ folder, in file order (for tests and small corpora)."""
    tables = []
    for path in packed_files(folder):
        with open_input(path) as source:
            tables.append(pq.read_table(source, schema=SEQUENCE_SCHEMA))
    return pa.concat_tables(tables) if tables else SEQUENCE_SCHEMA.empty_table()
