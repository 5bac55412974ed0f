"""One clustering partition's candidate rows: small columns held, sketches and keys read on demand.

`GatherCandidates` (`dataclean.dedup.verify`) leaves, per summary file, one Arrow IPC file whose
record batch p holds partition p's candidate rows. A clustering task holds only the small columns
of its rows (root, earlier, shard, id, exact hash, priority, source, sketch length: about 60
bytes and the id's length a row), sorted into keep order, and reads the large ones (the sketch,
4 bytes a shingle; the LSH keys, 8 bytes a band) for the rows it is deciding, a chunk at a time
(`PartitionRows.sketches`, `PartitionRows.keys`): each read opens the files, takes those rows and
closes them, so nothing of a component's sketches outlives the chunk that needed it. Locally the
files are memory-mapped, so a read touches only its rows' pages; on an object store it reads
record batch p of each file that holds one of them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.dedup.partition import flat_lists
from dataclean.io.files import open_input

SMALL_COLUMNS = ("root", "earlier", "shard", "id", "exact", "priority", "source")
KEEP_ORDER = [("root", "ascending"), ("priority", "ascending"), ("id", "ascending")]


class PartitionRows:
    """Partition `partition` of the candidate files: small columns in keep order (`table`), each
    row's sketch length (`lengths`), and the sketches and keys of any rows, read when asked."""

    def __init__(self, paths: list[str], partition: int, schema: pa.Schema) -> None:
        self.paths = paths
        self.partition = partition
        self._read_small(schema)
        # Arrow's allocator keeps what the copies in `_read_small` freed for reuse: on a
        # 1.2M-row partition, 90 MB beside the 61 MB of small columns, held through the task.
        pa.default_memory_pool().release_unused()

    def _read_small(self, schema: pa.Schema) -> None:
        """The small columns of every file's record batch `partition`, in keep order."""
        paths, partition = self.paths, self.partition
        pieces: list[pa.Table] = []
        lengths: list[np.ndarray] = []
        files: list[np.ndarray] = []
        for number, path in enumerate(paths):
            with open_input(path) as source:
                batch = pa.ipc.open_file(source).get_batch(partition)
                small = pa.Table.from_batches([batch]).select(list(SMALL_COLUMNS))
                # Copied out of the mapped file before it closes: the small columns only.
                copied = [column.combine_chunks() for column in small.columns]
                pieces.append(pa.table(copied, names=small.column_names))
                counted = pc.list_value_length(batch.column("sketch"))
                lengths.append(pc.fill_null(counted, 0).to_numpy().astype(np.int64))
                files.append(np.full(batch.num_rows, number, dtype=np.int32))
        small_schema = pa.schema([schema.field(name) for name in SMALL_COLUMNS])
        table = pa.concat_tables(pieces) if pieces else small_schema.empty_table()
        order = pc.sort_indices(table, sort_keys=KEEP_ORDER).to_numpy()
        self.table = table.take(pa.array(order)).combine_chunks()
        self.lengths = np.concatenate(lengths)[order] if lengths else np.zeros(0, np.int64)
        self.file = np.concatenate(files)[order] if files else np.zeros(0, np.int32)
        rows = [np.arange(len(piece), dtype=np.int64) for piece in lengths]
        self.row = np.concatenate(rows)[order] if rows else np.zeros(0, np.int64)

    @property
    def count(self) -> int:
        return int(self.table.num_rows)

    def sketches(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, offsets) of these rows' sketches (positions in keep order), in that order."""
        values, offsets = self._read("sketch", rows)
        return values.astype(np.uint32, copy=False), offsets

    def keys(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, offsets) of these rows' LSH keys, in that order."""
        values, offsets = self._read("keys", rows)
        return values.astype(np.uint64, copy=False), offsets

    def _read(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(rows) == 0:
            return np.zeros(0), np.zeros(1, np.int64)
        files = self.file[rows]
        by_file = np.argsort(files, kind="stable")
        ordered_files, ordered_rows = files[by_file], self.row[rows][by_file]
        starts = np.flatnonzero(np.r_[True, ordered_files[1:] != ordered_files[:-1]])
        ends = np.r_[starts[1:], len(by_file)]
        pieces = []
        for start, end in zip(starts, ends, strict=True):
            with open_input(self.paths[int(ordered_files[start])]) as source:
                column = pa.ipc.open_file(source).get_batch(self.partition).column(name)
                pieces.append(column.take(pa.array(ordered_rows[start:end])))
        back = np.empty_like(by_file)
        back[by_file] = np.arange(len(by_file))
        return flat_lists(pa.concat_arrays(pieces).take(pa.array(back)))
