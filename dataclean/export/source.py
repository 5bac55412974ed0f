"""What every exporter reads: a run's kept rows, file by file, with the quarantine list applied.

`input_files` names the Parquet files of kept rows (`OUT/data/*.parquet`, or a folder of such
files), in name order: an exporter's document order, and so its output bytes, follow from it and
from the rows' order in each file, never from the executor or the worker count. `kept_batches`
reads one file in batches of `id`, `text`, `weight` (1.0 where missing) and `text_hash` (computed
where missing), checks that no id or text is null (an error naming the file and row, never a
silently lost sample) and applies a quarantine list as the pipeline's `quarantine` stage does
(`Listed`): `drop` entries left out and counted, `downweight` entries' weights lowered, `review`
entries not applied until accepted.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.ids import table_text_hashes
from dataclean.io.files import exists, list_files, open_input
from dataclean.quarantine.lists import applied, read_list
from dataclean.quarantine.match import DROP, QuarantineIndex, lowered_weights, row_weights
from dataclean.stage import with_column

BATCH_ROWS = 4096


def input_files(run_folder: str) -> list[str]:
    """The kept rows of a dataclean output (OUT/data/*.parquet), or of a folder of such files."""
    data = posixpath.join(run_folder, "data")
    files = list_files(data if exists(data) else run_folder, ".parquet")
    if not files:
        raise InputError(run_folder, "no Parquet files of kept rows (OUT/data/*.parquet)")
    return files


@dataclass
class Listed:
    """A quarantine list as an exporter applies it: the one matching rule of the pipeline's
    quarantine stage and the sampler (`dataclean.quarantine.match`: by id, text hash, or
    near-duplicate text), `drop` entries left out, `downweight` entries' weights lowered, `review`
    entries not applied until accepted."""

    index: QuarantineIndex

    @classmethod
    def read(cls, path: str) -> Listed:
        return cls(QuarantineIndex.from_list(applied(read_list(path))))

    def apply(self, table: pa.Table) -> tuple[pa.Table, int]:
        """The rows the list keeps (weights lowered) and how many it dropped."""
        ids = table.column(C.ID).to_pylist()
        hashes = table_text_hashes(table).to_pylist()
        matches = self.index.match(ids, hashes, table.column(C.TEXT).to_pylist())
        keep = np.array([m is None or m.action != DROP for m in matches], dtype=bool)
        weights = lowered_weights(row_weights(table), matches)
        table = with_column(table, C.WEIGHT, pa.array(weights, pa.float64()))
        return table.filter(pa.array(keep)), int(len(keep) - keep.sum())


@dataclass
class Batch:
    """Kept rows of one batch (`id`, `text`, `weight`, `text_hash`), the rows read before the
    list was applied, and how many the list dropped."""

    table: pa.Table
    rows_read: int
    quarantined: int


def kept_batches(
    source: str, listed: Listed | None, batch_rows: int = BATCH_ROWS, with_hash: bool = True
) -> Iterator[Batch]:
    """The rows of one file of kept rows, batch by batch, with the quarantine list applied.

    `with_hash=False` leaves `text_hash` out when the file has none (computing it costs a Python
    call per row, and only some exporters record it).
    """
    rows = 0
    with open_input(source) as handle:
        parquet = pq.ParquetFile(handle)
        names = parquet.schema_arrow.names
        for name in (C.ID, C.TEXT):
            if name not in names:
                raise InputError(source, f"no {name!r} column: not a dataclean output's data/ file")
        wanted = [C.ID, C.TEXT] + [n for n in (C.WEIGHT, C.TEXT_HASH) if n in names]
        for record_batch in parquet.iter_batches(batch_size=batch_rows, columns=wanted):
            table = with_weight(pa.Table.from_batches([record_batch]))
            check_rows(table, source, rows)
            rows += table.num_rows
            read = table.num_rows
            dropped = 0
            if listed is not None:
                table, dropped = listed.apply(table)
            if with_hash:
                table = with_column(table, C.TEXT_HASH, table_text_hashes(table))
            yield Batch(table, read, dropped)


def with_weight(table: pa.Table) -> pa.Table:
    """`weight` filled with 1.0 where null, or added as 1.0 where the file has none."""
    return with_column(table, C.WEIGHT, pa.array(row_weights(table), pa.float64()))


def check_rows(table: pa.Table, source: str, first_row: int) -> None:
    """A null id or text is an error naming the file and row, never a silently lost sample."""
    for name in (C.ID, C.TEXT):
        column = table.column(name)
        if column.null_count:
            row = first_row + int(pc.index(pc.is_null(column), True).as_py())
            raise InputError(source, f"null {name!r}", row=row)
