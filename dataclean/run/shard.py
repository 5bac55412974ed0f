"""A worker's run of one stage group over one shard: stream, apply, route, count, time, write.

`GroupWorker` runs one stage group over one shard (a `GroupTask`): it streams the shard's batches
(from the input for the first group, from the previous group's intermediate files otherwise)
through the group's stages, routes each stage's dropped rows to `excluded/` or `quarantined/` with
`stage` and `reason` (`{stage}:{reason}`), feeds the kept rows to the group's barrier (`observe`),
and writes the kept rows. It returns the task's stats (see `dataclean.run.stats`). Rows that the reader or
a stage before a redacting stage (`Outputs.redacts`: pii) drops pass through its `redact` before they
are written (`redaction`), so no output holds the personal data that stage removes. Workers are
picklable and load their stages' resources (`setup`) once, on the first task they run.

A stage that raises on a batch: with `on_error="raise"` (the default) that is a `StageError`
naming the stage, shard and the batch's ids; with `"skip"` the batch is retried row by row and
each failing row is excluded as `{stage}:error:{ExceptionType}`, the others go on. A MemoryError
is raised as it is, never retried.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import InputError, StageError
from dataclean.executors.base import WorkerFunction
from dataclean.io.layout import EXCLUDED, QUARANTINED, Layout
from dataclean.io.readers import ReadOptions, read_shard
from dataclean.io.shards import Shard
from dataclean.io.writers import PartWriter, read_parquet_batches, write_json
from dataclean.run.routing import (
    COPIED,
    DROPPED,
    READ,
    RECORDED,
    Side,
    finalize,
    split_drops,
    take_outputs,
)
from dataclean.run.stats import UNDECODABLE, new_account, new_stage
from dataclean.stage import GlobalStage, Stage, reason_kind


@dataclass(frozen=True)
class GroupTask:
    """One shard through one stage group. `sources` are the previous group's kept files."""

    group: int
    shard: Shard
    sources: tuple[str, ...] | None = None


def _text_bytes(table: pa.Table) -> int:
    if table.num_rows == 0:
        return 0
    total = pc.sum(pc.binary_length(table.column(C.TEXT))).as_py()
    return int(total or 0)


@dataclass
class GroupWorker(WorkerFunction):
    """Runs stage groups over shards; shipped to each worker once (see the module docstring).

    `redactor` redacts the dropped rows of the steps named in `unredacted` (`redaction`)."""

    stages: list[Stage]
    observer: GlobalStage | None
    layout: Layout
    read_options: ReadOptions
    final: bool
    redactor: Stage | None = None
    unredacted: frozenset[str] = frozenset()
    _ready: bool = field(default=False, init=False, repr=False)
    # Its tasks may run in the driver while the executor starts (`dataclean.executors.starting`): each
    # writes its own files, the same wherever it runs. (Compiling kernels ahead, say, may not:
    # that is the workers' to do in parallel.)
    shareable: ClassVar[bool] = True

    def warm(self) -> None:
        """Load the stages' models (`Stage.setup`), once per process: before its first task, or
        ahead of it (`dataclean.executors.ray.RayExecutor.map_queue`)."""
        if not self._ready:
            extra = [s for s in (self.observer, self.redactor) if s is not None and s not in self.stages]
            for stage in [*self.stages, *extra]:
                stage.setup()
            self._ready = True

    def __call__(self, task: GroupTask) -> dict[str, Any]:
        self.warm()
        return _ShardRun(self, task).run()


class _ShardRun:
    """One task's writers and stats while it runs."""

    def __init__(self, worker: GroupWorker, task: GroupTask) -> None:
        self.worker = worker
        self.task = task
        self.shard = task.shard
        layout = worker.layout
        index = self.shard.index
        self.kept_writer = (
            PartWriter(layout.data, f"part-{index:05d}")
            if worker.final
            else PartWriter(layout.group(task.group), layout.shard_stem(index))
        )
        self.summary_writer = (
            PartWriter(layout.summaries(task.group), layout.shard_stem(index), "lz4")
            if worker.observer is not None
            else None
        )
        # Writers of what goes beside the kept rows (`_write`), by (folder, step).
        self.side_writers: dict[tuple[str, str], PartWriter] = {}
        self.stats: dict[str, Any] = {"shard": self.shard.name, "account": new_account(), "stages": {}}

    def _writers(self) -> list[PartWriter]:
        extra = [self.summary_writer] if self.summary_writer is not None else []
        return [self.kept_writer, *extra, *self.side_writers.values()]

    def run(self) -> dict[str, Any]:
        observer = self.worker.observer
        for stage in self.worker.stages:
            if isinstance(stage, GlobalStage):
                stage.begin_shard(self.shard.index)
        try:
            for batch in self._batches():
                kept = self._run_stages(batch)
                if observer is not None and kept.num_rows:
                    # Writing the summary is part of the stage's work (as writing its signatures
                    # is part of datatrove's MinHash stage 1): inside its seconds.
                    started, cpu = time.perf_counter(), time.thread_time()
                    summary = observer.observe(kept)
                    if summary is not None and self.summary_writer is not None:
                        self.summary_writer.write(summary)
                    observed = self.stats["stages"].setdefault(observer.name, new_stage())
                    observed["seconds"] += time.perf_counter() - started
                    observed["cpu_seconds"] += time.thread_time() - cpu
                if self.worker.final:
                    kept = finalize(kept)
                    self.stats["account"]["kept"] += kept.num_rows
                self.kept_writer.write(kept)
        except BaseException:
            for writer in self._writers():
                writer.abort()
            raise
        for writer in self._writers():
            started = time.perf_counter()
            writer.close()
            if writer is self.summary_writer and observer is not None:  # its last rows: as above
                observed = self.stats["stages"].setdefault(observer.name, new_stage())
                observed["seconds"] += time.perf_counter() - started
        self.stats["shard_size"] = self.shard.size
        self.stats["shard_mtime"] = self.shard.mtime
        write_json(self.worker.layout.done_marker(self.task.group, self.shard.index), self.stats)
        return self.stats

    def _batches(self) -> Iterator[pa.Table]:
        """The task's input batches; for the first group, reader drops and read errors are routed."""
        options = self.worker.read_options
        if self.task.sources is not None:
            for source in self.task.sources:
                yield from read_parquet_batches(source, options.batch_rows)
            return
        read = self.stats["stages"].setdefault(READ, new_stage())
        account = self.stats["account"]
        started = time.perf_counter()
        try:
            for batch in read_shard(self.shard, options):
                read["seconds"] += time.perf_counter() - started
                account["rows_in"] += batch.num_rows
                read["rows_in"] += batch.num_rows
                if C.BAD_BYTES in batch.column_names:
                    counts = read.setdefault("counts", {})
                    undecodable = int(pc.sum(batch.column(C.BAD_BYTES)).as_py() or 0)
                    counts[UNDECODABLE] = counts.get(UNDECODABLE, 0) + undecodable
                kept, dropped = split_drops(READ, batch)
                if dropped is not None:
                    self._write(READ, EXCLUDED, Side(DROPPED, dropped))
                read["rows_out"] += kept.num_rows
                read["bytes_out"] += _text_bytes(kept)
                yield kept
                started = time.perf_counter()
        except InputError as error:
            if options.on_error == "raise":
                raise
            # The rows read before the error stay; the rest of the shard is one excluded record.
            account["rows_in"] += 1
            read["rows_in"] += 1
            record = {
                C.ID: [self.shard.name],
                C.TEXT: pa.nulls(1, pa.string()),
                C.STAGE: [READ],
                C.REASON: [f"{READ}:error:{error.detail}"],
            }
            self._write(READ, EXCLUDED, Side(DROPPED, pa.table(record)))

    def _write(self, stage_name: str, folder: str, side: Side) -> None:
        """Write a `Side` of a step's output: dropped rows and copies to OUT/{folder}/ (redacted
        first when a redacting stage comes after the step), counted as excluded or quarantined
        (copies as copied); records to the stage's records folder, uncounted."""
        rows = side.rows
        if side.kind == RECORDED:
            where, stem = (
                self.worker.layout.records(stage_name),
                self.worker.layout.shard_stem(self.shard.index),
            )
        else:
            if stage_name in self.worker.unredacted and self.worker.redactor is not None:
                rows = self.worker.redactor.redact(rows)
            where, stem = self.worker.layout.folder(folder), f"part-{self.shard.index:05d}-{stage_name}"
        writer = self.side_writers.get((where, stage_name))
        if writer is None:
            writer = self.side_writers[(where, stage_name)] = PartWriter(where, stem)
        writer.write(rows)
        account = self.stats["account"]
        if side.kind == COPIED:
            account["copied"] += rows.num_rows
        elif side.kind == DROPPED:
            account["quarantined" if folder == QUARANTINED else "excluded"] += rows.num_rows
            counts = self.stats["stages"].setdefault(stage_name, new_stage())["dropped"]
            for reason in rows.column(C.REASON).to_pylist():
                kind = reason_kind(reason)
                counts[kind] = counts.get(kind, 0) + 1

    def _run_stages(self, table: pa.Table) -> pa.Table:
        for stage in self.worker.stages:
            if table.num_rows == 0:
                break
            stage_stats = self.stats["stages"].setdefault(stage.name, new_stage())
            rows_in = table.num_rows
            stage_stats["rows_in"] += rows_in
            stage_stats["bytes_in"] += _text_bytes(table)
            started, cpu = time.perf_counter(), time.thread_time()
            applied = self._apply(stage, table)
            output = take_outputs(stage.name, applied)
            stage_stats["seconds"] += time.perf_counter() - started
            stage_stats["cpu_seconds"] += time.thread_time() - cpu
            if output.counts:
                totals = stage_stats.setdefault("counts", {})
                for what, count in output.counts.items():
                    totals[what] = totals.get(what, 0) + count
            added = applied.num_rows - rows_in
            stage_stats["rows_added"] += added
            self.stats["account"]["rows_added"] += added
            for side in output.sides:
                self._write(stage.name, stage.outputs.folder, side)
            table = output.kept
            stage_stats["rows_out"] += table.num_rows
            stage_stats["bytes_out"] += _text_bytes(table)
        return table

    def _apply(self, stage: Stage, table: pa.Table) -> pa.Table:
        """The stage on the batch. If it raises: with on_error="raise", a `StageError` naming the
        batch (no retry: a retry row by row would hide a batch-level bug and crawl); with "skip",
        the batch again row by row, each failing row excluded. A MemoryError is never retried."""
        try:
            return stage(table)
        except MemoryError:
            raise
        except Exception as error:
            if self.worker.read_options.on_error == "raise":
                ids = table.column(C.ID)
                raise StageError(
                    f"stage {stage.name!r} failed on {self.shard.label}, a batch of {table.num_rows} rows "
                    f"(ids {ids[0].as_py()!r} to {ids[-1].as_py()!r}): {type(error).__name__}: {error}"
                ) from error
        outputs = []  # on_error="skip": find the row(s) at fault, one at a time
        for index in range(table.num_rows):
            row = table.slice(index, 1)
            try:
                outputs.append(stage(row))
            except MemoryError:
                raise
            except Exception as error:
                reason = pa.array([f"error:{type(error).__name__}"], pa.string())
                outputs.append(row.append_column(C.DROP_REASON, reason))
        return pa.concat_tables(outputs, promote_options="permissive")
