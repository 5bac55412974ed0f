"""Atomic writes: Parquet parts and JSON files appear under their final name only when complete.

A `PartWriter` streams tables into `{stem}-{part:03d}.parquet`. Batches are aligned to the open
file's schema (missing columns become nulls, types are cast where lossless); a batch that cannot be
aligned (a new column, a changed type) starts the next part instead of failing, so columns carried
through from a loosely typed input are never lost. Files are written under a hidden temporary name
(`.{name}.tmp`) and renamed on `close()`; `abort()` removes them. Readers skip hidden files.

Batches are buffered into row groups of up to `ROW_GROUP_ROWS` rows or `ROW_GROUP_BYTES` bytes:
a row group per 2048-row batch made every later reader (the next stage group, the report, a
training data loader) pay Parquet's per-row-group cost 30 times over. The buffer is the writer's
memory bound.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean.io.files import atomic_output, list_files, make_dirs
from dataclean.io.files import exists as exists  # re-exported: callers import it from here
from dataclean.io.files import remove_tree as remove_tree  # re-exported
from dataclean.io.shards import filesystem

ROW_GROUP_ROWS = 64 << 10
ROW_GROUP_BYTES = 32 << 20


def _align(table: pa.Table, schema: pa.Schema) -> pa.Table | None:
    """`table` in `schema`'s column order and types, or None when that would lose data."""
    if set(table.column_names) - set(schema.names):
        return None
    columns = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            if column.type != field.type:
                if column.null_count != len(column) and pa.types.is_null(field.type):
                    return None
                try:
                    column = column.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    return None
            columns.append(column)
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


class PartWriter:
    """Write tables to `folder/{stem}-{part:03d}.parquet`, atomically, rolling parts on schema change."""

    def __init__(self, folder: str, stem: str, compression: str = "zstd") -> None:
        self.fs, self.folder = filesystem(folder)
        self.stem = stem
        self.compression = compression
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[tuple[str, str]] = []
        self._buffer: list[pa.Table] = []
        self._buffered_rows = 0
        self._buffered_bytes = 0

    def _open(self, schema: pa.Schema) -> None:
        self._close_current()
        name = f"{self.stem}-{len(self._pending):03d}.parquet"
        final = posixpath.join(self.folder, name)
        temp = posixpath.join(self.folder, f".{name}.tmp")
        self.fs.create_dir(self.folder, recursive=True)
        sink = self.fs.open_output_stream(temp)
        self._writer = pq.ParquetWriter(sink, schema, compression=self.compression)
        self._sink = sink
        self._pending.append((temp, final))

    def _flush(self) -> None:
        """Write the buffered tables as one row group."""
        if self._buffer and self._writer is not None:
            self._writer.write_table(pa.concat_tables(self._buffer), row_group_size=self._buffered_rows)
        self._buffer = []
        self._buffered_rows = self._buffered_bytes = 0

    def _close_current(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = None

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        aligned = _align(table, self._writer.schema) if self._writer is not None else None
        if aligned is None:
            self._open(table.schema)
            aligned = table
        self._buffer.append(aligned)
        self._buffered_rows += aligned.num_rows
        self._buffered_bytes += aligned.nbytes
        if self._buffered_rows >= ROW_GROUP_ROWS or self._buffered_bytes >= ROW_GROUP_BYTES:
            self._flush()
        self.rows += table.num_rows

    def close(self) -> list[str]:
        """Finish all parts and move them to their final names; returns the final paths."""
        self._close_current()
        for temp, final in self._pending:
            self.fs.move(temp, final)
        finals = [final for _, final in self._pending]
        self._pending = []
        return finals

    def abort(self) -> None:
        """Remove every part written so far."""
        self._buffer = []
        try:
            self._close_current()
        finally:
            for temp, _ in self._pending:
                with contextlib.suppress(OSError):
                    self.fs.delete_file(temp)
            self._pending = []


def write_json(uri: str, value: Any) -> None:
    """Write JSON atomically (temporary name, then rename)."""
    make_dirs(posixpath.dirname(uri))
    with atomic_output(uri) as sink:
        sink.write(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False).encode())


def read_json(uri: str) -> Any:
    """Read a JSON file written by `write_json`."""
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as source:
        return json.loads(source.read().decode())


def parquet_files(folder: str, prefix: str = "") -> list[str]:
    """Final (non-hidden) Parquet files in a folder whose names start with `prefix`, sorted."""
    return list_files(folder, ".parquet", prefix)


def read_parquet_batches(uri: str, batch_rows: int) -> Iterator[pa.Table]:
    """Stream a Parquet file written by dataclean in batches."""
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as source:
        for batch in pq.ParquetFile(source).iter_batches(batch_size=batch_rows):
            yield pa.Table.from_batches([batch])
