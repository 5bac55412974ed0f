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

from dataclean import columns as C
from dataclean.feedback import schema as S
from dataclean.feedback.corpus import read_corpus_rows
from dataclean.feedback.logs import step_rows

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
