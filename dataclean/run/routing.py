"""Where a stage's output rows go: kept, dropped (labelled with stage and reason), copied, redacted,
and how kept rows are finalized for OUT/data.

A stage marks rows (`dataclean.stage.with_drops`, `with_copies`); `split_outputs` separates them
and labels the dropped and copied ones with `stage` and `{stage}:{reason}`; `finalize` gives the
kept rows of the last group the final columns (`FINAL_COLUMNS`) in contract order.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.ids import table_text_hashes
from dataclean.stage import Stage, with_column

READ = "read"


def finalize(table: pa.Table) -> pa.Table:
    """Kept rows as written to OUT/data: contract columns first, in order. A column no stage
    produced is completed with its neutral value: `text_hash` computed, `weight` 1.0, `dup_cluster`
    null. `lang` is not: only the `language` stage labels rows (a run without it has no `lang`)."""
    table = with_column(table, C.TEXT_HASH, table_text_hashes(table))
    if C.WEIGHT not in table.column_names:
        # Imported here: its module imports numba, which `dataclean run` would otherwise load
        # before its first progress line (the run layer is imported to parse the command).
        from dataclean.quarantine.match import row_weights

        table = with_column(table, C.WEIGHT, pa.array(row_weights(table), pa.float64()))
    if C.DUP_CLUSTER not in table.column_names:
        table = with_column(table, C.DUP_CLUSTER, pa.nulls(table.num_rows, pa.string()))
    return _ordered(table)


def _ordered(table: pa.Table) -> pa.Table:
    leading = [name for name in (*C.LEADING, C.STAGE, C.REASON, C.ACTION) if name in table.column_names]
    rest = [name for name in table.column_names if name not in leading]
    return table.select(leading + rest)


def split_drops(stage_name: str, table: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """Separate rows a stage marked (DROP_REASON not null) from kept ones; label the dropped."""
    if C.DROP_REASON not in table.column_names:
        return table, None
    reasons = table.column(C.DROP_REASON)
    if reasons.null_count == len(reasons):
        return table.drop_columns([C.DROP_REASON]), None
    marked = pc.is_valid(reasons)
    kept = table.filter(pc.invert(marked)).drop_columns([C.DROP_REASON])
    return kept, _labelled(stage_name, table.filter(marked), C.DROP_REASON)


def split_outputs(stage_name: str, table: pa.Table) -> tuple[pa.Table, pa.Table | None, pa.Table | None]:
    """(kept, dropped, copies) of a stage's output: `split_drops`, then the kept rows it marked to
    list in its destination folder too (`with_copies`), labelled like dropped rows. The kept rows
    lose the private and output-only columns (COPY_REASON, ACTION)."""
    kept, dropped = split_drops(stage_name, table)
    if dropped is not None and C.COPY_REASON in dropped.column_names:
        dropped = dropped.drop_columns([C.COPY_REASON])
    copies = None
    if C.COPY_REASON in kept.column_names:
        reasons = kept.column(C.COPY_REASON)
        if reasons.null_count < len(reasons):
            copies = _labelled(stage_name, kept.filter(pc.is_valid(reasons)), C.COPY_REASON)
        kept = kept.drop_columns([C.COPY_REASON])
    if C.ACTION in kept.column_names:
        kept = kept.drop_columns([C.ACTION])
    return kept, dropped, copies


def _labelled(stage_name: str, rows: pa.Table, reason_column: str) -> pa.Table:
    """Rows for excluded/ or quarantined/: `stage`, and `reason` = `{stage}:{the stage's reason}`."""
    prefixed = pc.binary_join_element_wise(stage_name, rows.column(reason_column), ":")
    rows = rows.drop_columns([reason_column])
    rows = rows.append_column(C.STAGE, pa.array([stage_name] * rows.num_rows, pa.string()))
    rows = rows.append_column(C.REASON, prefixed)
    return _ordered(rows)


DROPPED, COPIED, RECORDED = "dropped", "copied", "recorded"


@dataclass(frozen=True)
class Side:
    """Rows a stage's output sends beside its kept rows: `dropped` and `copied` rows, labelled with
    `stage` and `reason`, to its output folder (`Outputs.folder`); `recorded` facts, each with its
    row's `id`, to its records file (`Outputs.records`)."""

    kind: str
    rows: pa.Table


@dataclass(frozen=True)
class StageOutput:
    """A stage's output taken apart: the kept rows (private columns removed), what goes beside
    them (`Side`), and the per-row counts it reported (`with_counts`), totalled."""

    kept: pa.Table
    sides: list[Side]
    counts: dict[str, int]


def take_outputs(stage_name: str, table: pa.Table) -> StageOutput:
    """Every mark a stage can leave on its output (`with_counts`, `with_records`, `with_drops`,
    `with_copies`), taken off in one place: the one mechanism by which any stage's extra outputs
    reach OUT/ (`dataclean.run.shard` writes each `Side` by its kind)."""
    table, counts = _take_counts(table)
    table, recorded = _take_records(table)
    kept, dropped, copies = split_outputs(stage_name, table)
    found = ((RECORDED, recorded), (DROPPED, dropped), (COPIED, copies))
    return StageOutput(kept, [Side(kind, rows) for kind, rows in found if rows is not None], counts)


def _take_counts(table: pa.Table) -> tuple[pa.Table, dict[str, int]]:
    """A stage's per-row counts (`with_counts`), totalled, and the table without their columns."""
    names = [name for name in table.column_names if name.startswith(C.COUNT_PREFIX)]
    counts = {
        name.removeprefix(C.COUNT_PREFIX): int(pc.sum(table.column(name)).as_py() or 0) for name in names
    }
    return (table.drop_columns(names) if names else table), counts


def _take_records(table: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """A stage's records (`with_records`) as rows with their row's `id`, and the table without
    the column; None when it recorded nothing."""
    if C.RECORDS not in table.column_names:
        return table, None
    lists = table.column(C.RECORDS).combine_chunks()
    table = table.drop_columns([C.RECORDS])
    flat = pc.list_flatten(lists)
    if len(flat) == 0:
        return table, None
    ids = table.column(C.ID).take(pc.list_parent_indices(lists))
    return table, pa.Table.from_arrays([ids, *flat.flatten()], [C.ID, *(f.name for f in flat.type)])


def redaction(stages: list[Stage]) -> tuple[Stage | None, frozenset[str]]:
    """The pipeline's first redacting stage (`Outputs.redacts`), and the names of the steps before
    it (the reader's included) whose dropped rows it must redact before they are written."""
    for position, stage in enumerate(stages):
        if stage.outputs.redacts:
            return stage, frozenset([READ, *(s.name for s in stages[:position])])
    return None, frozenset()
