"""The samples of one training step, with their losses and texts: a step replayed from the logs.

What practitioners otherwise get by re-running the data loader with a fixed seed up to step N:
the per-sample loss log already says which samples step N trained on and how each fared, and the
cleaned corpus (OUT/data) gives their texts. `replay` joins the two on the sample id (`id` in the
corpus); a sample the corpus does not hold keeps a null text, and the report says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from dataclean import columns as C
from dataclean.errors import InputError
from dataclean.feedback import schema as S
from dataclean.feedback.analysis.analyze import read_corpus_rows
from dataclean.feedback.analysis.logs import _format_of, log_files, read_loss_log

# The loss log's columns, then the sample's text hash and text from the corpus.
REPLAY_SCHEMA = S.LOSS_LOG_SCHEMA.append(pa.field(C.TEXT_HASH, pa.string())).append(
    pa.field(C.TEXT, pa.string())
)


@dataclass
class Replay:
    """The step's rows (REPLAY_SCHEMA, highest loss first) and what could not be found."""

    step: int
    rows: pa.Table
    missing_texts: list[str] = field(default_factory=list)


def step_rows(losses: str | Path, step: int, since: float | None = None) -> pa.Table:
    """The loss log's rows of one step. A folder of Parquet files is filtered while it is read
    (a long run's log need not fit in memory), from the files written at or after `since` (a Unix
    time: a relaunched run's, `dataclean supervise`) when given; other formats are read whole."""
    files = log_files(losses)
    if since is not None and files and all(_format_of(f) == "parquet" for f in files):
        files = [f for f in files if f.stat().st_mtime >= since - 1]
        if not files:
            return S.LOSS_LOG_SCHEMA.empty_table()
    if files and all(_format_of(f) == "parquet" for f in files):
        dataset = ds.dataset([str(f) for f in files], format="parquet")
        if C.STEP not in dataset.schema.names:
            raise InputError(str(losses), "the loss log has no 'step' column: steps cannot be replayed")
        table = dataset.to_table(filter=ds.field(C.STEP) == step)
        columns = [
            table.column(f.name).cast(f.type)
            if f.name in table.column_names
            else pa.nulls(len(table), f.type)
            for f in S.LOSS_LOG_SCHEMA
        ]
        return pa.Table.from_arrays(columns, schema=S.LOSS_LOG_SCHEMA)
    log = read_loss_log(losses)
    if not log.has(C.STEP):
        raise InputError(str(losses), "the loss log has no 'step' column: steps cannot be replayed")
    return log.table.filter(pc.fill_null(pc.equal(log.table.column(C.STEP), step), False))


def replay(
    losses: str | Path, step: int, corpus: str | Path | None = None, rank: int | None = None
) -> Replay:
    """The samples of `step` (of one `rank`, or all) with their losses, and texts from `corpus`."""
    rows = step_rows(losses, step)
    if rank is not None:
        rows = rows.filter(pc.fill_null(pc.equal(rows.column(C.RANK), rank), False))
    loss = pc.fill_null(rows.column(C.LOSS), math.nan)
    order = pc.sort_indices(
        pa.table({"key": pc.if_else(pc.is_nan(loss), math.inf, loss)}), [("key", "descending")]
    )
    rows = rows.take(order)
    ids = [str(i) for i in rows.column(C.SAMPLE_ID).to_pylist()]
    hashes: list[str | None] = [None] * len(ids)
    texts: list[str | None] = [None] * len(ids)
    missing: list[str] = []
    if corpus is not None and ids:
        found, _ = read_corpus_rows(corpus, sorted(set(ids)))
        lookup = {r[C.ID]: r for r in found.to_pylist()}
        for index, sample_id in enumerate(ids):
            row = lookup.get(sample_id)
            if row is None:
                missing.append(sample_id)
            else:
                hashes[index], texts[index] = row[C.TEXT_HASH], row[C.TEXT]
    table = rows.append_column(C.TEXT_HASH, pa.array(hashes, pa.string()))
    table = table.append_column(C.TEXT, pa.array(texts, pa.string()))
    return Replay(step=step, rows=table.cast(REPLAY_SCHEMA), missing_texts=list(dict.fromkeys(missing)))
