"""The stage contract: a named callable from an Arrow table to an Arrow table.

A stage adds or replaces columns (`with_column`), marks rows to drop with a reason (`with_drops`),
marks kept rows to list in its output folder as well (`with_copies`), records facts about rows
for a file of its own (`with_records`), or says per row how much it did (`with_counts`: escape
sequences removed); `Outputs` declares where those go. It never writes files, never sums, never
times and never imports Ray: the run layer takes every mark off in one place
(`dataclean.run.routing.take_outputs`), prefixes reasons with the stage name, writes, counts,
sums and times every stage alike.

Stages are dataclasses whose init fields are their parameters: typed, validated in
`__post_init__` (raise `ConfigError` naming the field), and settable from the CLI with
`--set STAGE.PARAM=VALUE` (see `dataclean.run.config`). Heavy resources (models) are loaded in
`setup()`, which each worker calls once before its first batch, never once per batch.

A `GlobalStage` is a barrier (dedup, corpus percentiles): `observe` sees every shard's rows and
returns a small summary table, `fit` reduces all summaries (on the driver, using the executor for
distributed work), then `__call__` applies the result row by row like any other stage.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.executors.base import Executor


@dataclass(frozen=True)
class Records:
    """A file of facts about rows under OUT/ (decontaminate's `contamination.parquet`): its name,
    and the columns of its records after `id`. Rows are marked with `with_records`."""

    file: str
    schema: pa.Schema


@dataclass(frozen=True)
class Outputs:
    """What a stage writes beyond its kept rows, declared in one place: the run routes every
    stage's marked rows by this and nothing else (`dataclean.run.routing.take_outputs`).

    - `folder`: where the rows it drops (`with_drops`) and the copies of kept rows it marks
      (`with_copies`) go: `excluded`, or `quarantined` for the quarantine stage;
    - `records`: its records file, for the facts it marks with `with_records`;
    - `redacts`: it removes personal data (pii): the rows that stages before it drop, and that the
      reader rejects, pass through its `redact` before they are written, so nothing written under
      OUT/ holds what it would have removed.
    """

    folder: str = "excluded"
    records: Records | None = None
    redacts: bool = False


class Stage(ABC):
    """One step of a pipeline. Subclasses are dataclasses; see the module docstring for the contract.

    `name` is the stage name used in `--only/--skip/--set` and as the prefix of every drop reason.
    `outputs` declares what it writes beyond its kept rows (`Outputs`).
    """

    name: ClassVar[str]
    outputs: ClassVar[Outputs] = Outputs()
    # The columns this stage reads beyond what every batch has (`id`, `text`, `parent_id`,
    # `bad_bytes`: the reader's), and the columns it adds. Planning a run checks that an earlier
    # stage provides each required column; every column has exactly one producer. A stage whose
    # columns depend on its parameters overrides `required_columns` / `provided_columns`.
    requires: ClassVar[tuple[str, ...]] = ()
    provides: ClassVar[tuple[str, ...]] = ()
    # It may return more rows than it got (split: a long document becomes several chunks, ids
    # `{parent_id}#{k}`): the run counts them as rows added, and the report shows the lengths.
    adds_rows: ClassVar[bool] = False
    # Columns it reads when a batch has them and does without otherwise (dedup shingles by `lang`
    # when a language stage ran): planning checks no stage after it provides one.
    reads_if_present: ClassVar[tuple[str, ...]] = ()
    # About how long `compile_kernels` takes on a first run, in CPU seconds (as
    # benchmarks/bench_compile.py measures it): the workers take the longest first.
    compile_seconds: ClassVar[float] = 0.0
    # True: the run compiles this (global) stage's kernels by a rehearsal, its observe, fit and
    # apply over a tiny mixed-language corpus (`dataclean.run.kernels.rehearse`), instead of calling
    # `compile_kernels`: for kernels that only `fit` reaches, with the types of a real run.
    rehearse: ClassVar[bool] = False

    def required_columns(self) -> tuple[str, ...]:
        """Columns this stage reads that an earlier stage must provide (default: `requires`)."""
        return self.requires

    def provided_columns(self) -> tuple[str, ...]:
        """Columns this stage adds (default: `provides`)."""
        return self.provides

    def optional_columns(self) -> tuple[str, ...]:
        """Columns this stage reads when present (default: `reads_if_present`)."""
        return self.reads_if_present

    def prepare(self, scratch: str) -> None:  # noqa: B027 - optional hook, most stages need nothing
        """Once per run, on the driver, before the first shard: build what every worker needs
        from inputs other than the corpus (an index of evaluation sets, a fetched model). Keep
        what is small on `self` (the stage is pickled to the workers after this), or write it
        under `scratch` (a folder private to this stage) and keep its path."""

    def setup(self) -> None:  # noqa: B027 - optional hook, most stages need nothing
        """Load heavy resources once per worker process; called before the first batch."""

    def compile_kernels(self) -> None:  # noqa: B027 - optional hook, most stages have no kernels
        """Compile the numba kernels this stage runs (or load them from the cache), on a tiny input
        of the same types as real batches, without loading models. Called once per run on a
        worker before the first shard, so each kernel is compiled once, not once per worker
        process (`dataclean.run.kernels`)."""

    def rehearsal_copy(self) -> Stage:
        """A fresh copy of this stage for a rehearsal (`rehearse`): fitting it must not touch
        `self`, and a setting the tiny corpus cannot serve (a column it lacks) is replaced."""
        return dataclasses.replace(self) if dataclasses.is_dataclass(self) else self

    def redact(self, table: pa.Table) -> pa.Table:
        """Rows (as the runner writes them, with `stage` and `reason`) with personal data removed;
        only called on a stage whose `outputs.redacts` is true. The default: the stage itself."""
        return self(table)

    @abstractmethod
    def __call__(self, table: pa.Table) -> pa.Table:
        """Return the table with columns added/replaced and rows to drop marked by `with_drops`."""

    def params(self) -> dict[str, Any]:
        """The stage's parameters (its dataclass init fields), for the manifest and config hash."""
        if not dataclasses.is_dataclass(self):
            return {}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}


@dataclass
class FitContext:
    """What a global stage's `fit` gets: the summaries its `observe` produced, and where to work.

    `summaries` are Parquet files, one per input shard that produced summary rows, in shard order.
    `scratch` is a local or remote folder private to this stage for files that `fit` writes.
    `executor` runs distributed steps of the reduce (`executor.map`).
    `shards`, when the runner knows them, are the input shard index of each summary file: a stage
    may then key its fitted state by shard, and load only one shard's share in `begin_shard`.
    """

    summaries: list[str]
    scratch: str
    executor: Executor
    shards: list[int] | None = None


class GlobalStage(Stage):
    """A barrier stage: needs every shard's summary before any row can be decided.

        Order of calls: `observe` on every batch of every shard (on workers) -> `fit` once (driver;
    its returned statistics go to stats.json)
        -> per shard, `begin_shard` then `__call__` on its batches (on workers; the fitted stage is
        pickled to them, so the state `fit` leaves on `self` must be small: put large state in files
        under `FitContext.scratch`, keyed by shard where it grows with the corpus).
    """

    def is_barrier(self) -> bool:
        """Whether this run needs the barrier. A stage whose settings make `fit` pointless (a
        quarantine stage with no list) returns False and runs as a plain row-local stage,
        saving the pass of intermediate files that a barrier costs."""
        return True

    def observe(self, table: pa.Table) -> pa.Table | None:
        """Summary rows of this batch that `fit` needs (e.g. ids and signatures); None for none."""
        return None

    @abstractmethod
    def fit(self, context: FitContext) -> Mapping[str, Any] | None:
        """Reduce all summaries into the state that `__call__` applies. May return statistics of
        the fit (small, JSON-serializable: counts, cluster sizes), which the run records in
        stats.json as the stage's `fit` entry; None for none."""

    def begin_shard(self, shard: int | None) -> None:
        """The batches that follow come from input shard `shard` (None: from anywhere). The runner
        calls this before each shard goes through the fitted stage, so a stage whose fitted state
        grows with the corpus can hold one shard's share of it instead of all of it."""


def with_drops(table: pa.Table, reasons: pa.Array | Sequence[str | None]) -> pa.Table:
    """Mark rows to drop: `reasons[i]` is the reason for row i (without the stage prefix), or None.

    Reasons are short and namespaced by kind, then detail: `empty`, `exact_of:<id>`,
    `error:ValueError`. The runner prefixes the stage name (`clean:empty`) and counts by kind.
    """
    array = reasons if isinstance(reasons, pa.Array) else pa.array(reasons, type=pa.string())
    if len(array) != table.num_rows:
        raise ValueError(f"{len(array)} drop reasons for {table.num_rows} rows")
    index = table.schema.get_field_index(C.DROP_REASON)
    if index >= 0:
        # A stage marking twice keeps the first reason.
        import pyarrow.compute as pc

        array = pc.coalesce(table.column(index), array)
        return table.set_column(index, C.DROP_REASON, array)
    return table.append_column(C.DROP_REASON, array.cast(pa.string()))


def reason_kind(reason: str) -> str:
    """The countable part of a reason: `stage:kind` (`dedup:exact_of:abc` -> `dedup:exact_of`)."""
    parts = reason.split(":", 2)
    return ":".join(parts[:2])


def with_records(table: pa.Table, records: pa.Array) -> pa.Table:
    """Record facts about rows in the stage's records file (`Outputs.records`): `records[i]` is a
    list of structs (of its schema's fields) about row i, empty or null for none. The runner writes each
    with the row's `id`, whether the row is kept or dropped, and removes the column."""
    if len(records) != table.num_rows:
        raise ValueError(f"{len(records)} record lists for {table.num_rows} rows")
    return table.append_column(C.RECORDS, records)


def with_copies(table: pa.Table, reasons: pa.Array | Sequence[str | None]) -> pa.Table:
    """Mark kept rows to list in the stage's output folder as well: `reasons[i]` is why row
    i is listed there (without the stage prefix), or None. The rows stay in the output; the
    runner writes a copy with `stage` and `reason` and counts it as `copied`, apart from the
    accounting invariant (the row is counted once, as kept)."""
    array = reasons if isinstance(reasons, pa.Array) else pa.array(reasons, type=pa.string())
    if len(array) != table.num_rows:
        raise ValueError(f"{len(array)} copy reasons for {table.num_rows} rows")
    return table.append_column(C.COPY_REASON, array.cast(pa.string()))


def with_counts(table: pa.Table, counts: Mapping[str, pa.Array | np.ndarray | Sequence[int]]) -> pa.Table:
    """Count what the stage did, per row: `counts[what][i]` for row i (`escape_sequences`). The
    runner totals each `what` into the stage's stats (`stats.json`: the stage's `counts`), over
    kept and dropped rows alike, and writes none of these columns."""
    for what, values in counts.items():
        array = pa.array(values, pa.int64())
        if len(array) != table.num_rows:
            raise ValueError(f"{len(array)} counts of {what} for {table.num_rows} rows")
        table = table.append_column(C.COUNT_PREFIX + what, array)
    return table


def with_column(table: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    """`table` with column `name` set to `values`: replaced in place where it exists, else added
    last. The one way stages and the run layer set a column."""
    index = table.schema.get_field_index(name)
    if index >= 0:
        return table.set_column(index, name, values)
    return table.append_column(name, values)
