"""Buffered, crash-safe Parquet writers for a training loop's loss and step logs.

A training loop calls `log(...)` every step; rows are buffered in memory and each flush writes
one small Parquet file atomically (a hidden temp name in the same folder, then `os.replace`). A
process that dies loses at most the unflushed buffer: every file in the folder is complete, so
`dataclean feedback --losses FOLDER` can read the folder at any moment, even while training runs.

File names carry the rank, the process id, the start time and a sequence number, so several
ranks, restarts and resumed runs can share one folder without overwriting each other.
Schemas as docs/contracts.md says ("Training feedback"): per-sample `sample_id, loss [, step, epoch, rank,
tokens]` and per-step `step, loss [, lr, grad_norm, loss_scale]`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dataclean import columns as C
from dataclean.feedback import schema as S

FLUSH_SECONDS_ENV = "DATACLEAN_LOG_FLUSH_SECONDS"


def _to_numpy(values: Any, dtype: type | str) -> np.ndarray:
    """A 1-d numpy array from a list, numpy array or (duck-typed) torch tensor."""
    if hasattr(values, "detach"):  # a torch tensor: torch stays an optional import
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=dtype).reshape(-1)


class ParquetLogWriter:
    """Append rows of one schema to a folder of small Parquet files, one file per flush.

    `flush_rows`: flush when this many rows are buffered. `flush_seconds`: also flush when the
    oldest buffered row is older than this, so a crash loses at most that much time of logging
    (default 60, or DATACLEAN_LOG_FLUSH_SECONDS: `dataclean supervise` sets it to follow the logs).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        schema: pa.Schema,
        prefix: str,
        rank: int | None = None,
        flush_rows: int = 50_000,
        flush_seconds: float | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.rank = rank
        self.flush_rows = flush_rows
        if flush_seconds is None:
            flush_seconds = float(os.environ.get(FLUSH_SECONDS_ENV) or 60.0)
        self.flush_seconds = flush_seconds
        started = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        rank_part = f"r{rank:05d}" if rank is not None else "r00000"
        self._stem = f"{prefix}-{rank_part}-{started}-{os.getpid()}"
        self._sequence = 0
        self._columns: dict[str, list[np.ndarray | list[Any]]] = {n: [] for n in schema.names}
        self._buffered = 0
        self._oldest: float | None = None
        self.files: list[Path] = []

    def _append(self, columns: dict[str, np.ndarray | list[Any]], rows: int) -> None:
        for name in self.schema.names:
            self._columns[name].append(columns.get(name, [None] * rows))
        self._buffered += rows
        if self._oldest is None:
            self._oldest = time.monotonic()
        if self._buffered >= self.flush_rows or (time.monotonic() - self._oldest >= self.flush_seconds):
            self.flush()

    def flush(self) -> Path | None:
        """Write the buffered rows as one complete Parquet file; returns its path (None if empty)."""
        if self._buffered == 0:
            return None
        arrays = []
        for field in self.schema:
            parts = [pa.array(part, type=field.type) for part in self._columns[field.name]]
            arrays.append(pa.concat_arrays(parts))
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        final = self.folder / f"{self._stem}-{self._sequence:06d}.parquet"
        temp = self.folder / f".{final.name}.tmp"
        pq.write_table(table, temp)
        os.replace(temp, final)  # atomic: readers see the whole file or none of it
        self._sequence += 1
        self._columns = {name: [] for name in self.schema.names}
        self._buffered = 0
        self._oldest = None
        self.files.append(final)
        return final

    def close(self) -> None:
        """Flush what is left. Also called on leaving a `with` block."""
        self.flush()

    def __enter__(self) -> ParquetLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LossLogWriter(ParquetLogWriter):
    """Per-sample losses: one row per sample per step (`sample_id`, `loss`, `step`, ...)."""

    def __init__(self, folder: str | os.PathLike[str], rank: int | None = None, **kwargs: Any):
        super().__init__(folder, S.LOSS_LOG_SCHEMA, "losses", rank=rank, **kwargs)

    def log(
        self,
        step: int,
        sample_ids: Sequence[str],
        losses: Any,
        epoch: int | None = None,
        tokens: Any = None,
    ) -> None:
        """Record one batch: `losses[i]` is the mean token loss of `sample_ids[i]`.

        `losses` and `tokens` may be lists, numpy arrays or torch tensors (moved to the CPU here).
        """
        loss = _to_numpy(losses, "float64")
        if len(loss) != len(sample_ids):
            raise ValueError(f"{len(sample_ids)} sample ids but {len(loss)} losses")
        rows = len(loss)
        columns: dict[str, np.ndarray | list[Any]] = {
            C.SAMPLE_ID: [str(sample_id) for sample_id in sample_ids],
            C.LOSS: loss,
            C.STEP: np.full(rows, step, dtype="int64"),
        }
        if epoch is not None:
            columns[C.EPOCH] = np.full(rows, epoch, dtype="int64")
        if self.rank is not None:
            columns[C.RANK] = np.full(rows, self.rank, dtype="int64")
        if tokens is not None:
            columns[C.TOKENS] = _to_numpy(tokens, "int64")
        self._append(columns, rows)


class StepLogWriter(ParquetLogWriter):
    """Per-step values as trainers print them: `step`, `loss`, optional `lr`, `grad_norm`, ..."""

    def __init__(self, folder: str | os.PathLike[str], rank: int | None = None, **kwargs: Any):
        kwargs.setdefault("flush_rows", 1000)
        super().__init__(folder, S.STEP_LOG_SCHEMA, "steps", rank=rank, **kwargs)

    def log(
        self,
        step: int,
        loss: float,
        lr: float | None = None,
        grad_norm: float | None = None,
        loss_scale: float | None = None,
    ) -> None:
        """Record one optimizer step (any value may be a 0-d torch tensor)."""

        def scalar(value: Any) -> float | None:
            return None if value is None else float(_to_numpy(value, "float64")[0])

        columns: dict[str, np.ndarray | list[Any]] = {
            C.STEP: [int(step)],
            C.LOSS: [scalar(loss)],
            C.LR: [scalar(lr)],
            C.GRAD_NORM: [scalar(grad_norm)],
            C.LOSS_SCALE: [scalar(loss_scale)],
        }
        self._append(columns, 1)
