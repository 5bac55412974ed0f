"""Part writers: batches are gathered into large row groups; parts stay atomic."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean.io import writers
from dataclean.io.writers import PartWriter


def _batch(start: int, rows: int) -> pa.Table:
    numbers = list(range(start, start + rows))
    return pa.table({"id": [f"r{i}" for i in numbers], "n": numbers})


def test_batches_are_gathered_into_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writers, "ROW_GROUP_ROWS", 2500)
    writer = PartWriter(str(tmp_path), "part")
    for start in range(0, 7000, 1000):
        writer.write(_batch(start, 1000))
    [path] = writer.close()
    metadata = pq.ParquetFile(path).metadata
    sizes = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    assert sizes == [3000, 3000, 1000]  # flushed once 2500 rows were buffered, the rest on close
    assert pq.read_table(path).column("n").to_pylist() == list(range(7000))


def test_a_new_schema_flushes_the_buffer_into_the_previous_part(tmp_path: Path) -> None:
    writer = PartWriter(str(tmp_path), "part")
    writer.write(_batch(0, 10))
    writer.write(pa.table({"id": ["x"], "extra": [1.5]}))  # a new column: the next part
    paths = writer.close()
    assert [pq.read_table(p).num_rows for p in paths] == [10, 1]
    assert writer.rows == 11


def test_abort_leaves_nothing(tmp_path: Path) -> None:
    writer = PartWriter(str(tmp_path), "part")
    writer.write(_batch(0, 10))
    writer.abort()
    assert list(tmp_path.iterdir()) == []
