"""Lengths of the kept documents before splitting and of the samples after it, in characters.

A kept row whose `id` differs from its `parent_id` is a chunk (`"{parent_id}#{k}"`); a document's
length before splitting is the sum of its kept chunks (chunks dropped later, or repeated text
with `overlap_sentences`, make it differ from the input document's). Lengths need the text
column, so a large output is read on an even spread of row groups, about `max_rows` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.io.layout import DATA
from dataclean.report.histogram import LogHistogram
from dataclean.report.scan import Output, sample_row_groups, tables

LENGTH = "length"


@dataclass
class LengthSummary:
    """Histograms of document and sample lengths, and how much of the output they cover."""

    documents: LogHistogram = field(default_factory=LogHistogram)
    samples: LogHistogram = field(default_factory=LogHistogram)
    split_documents: int = 0
    chunks: int = 0
    rows_read: int = 0
    rows_total: int = 0
    budget: float | None = None


def length_summary(output: Output, max_rows: int = 500_000) -> LengthSummary | None:
    """None unless the kept rows have `parent_id` and the run split something (or ran `split`)."""
    files = output.files[DATA]
    if C.PARENT_ID not in output.columns(DATA):
        return None
    chosen, rows_read, rows_total = sample_row_groups(files, max_rows)
    summary = LengthSummary(rows_read=rows_read, rows_total=rows_total)
    partial: list[pa.Table] = []
    for table in tables(files, [C.ID, C.PARENT_ID, C.TEXT], chosen):
        if C.TEXT not in table.column_names or C.PARENT_ID not in table.column_names:
            continue
        lengths = pc.utf8_length(table.column(C.TEXT)).fill_null(0)
        summary.samples.add(lengths.to_numpy())
        chunk = pc.fill_null(pc.not_equal(table.column(C.ID), table.column(C.PARENT_ID)), False)
        summary.documents.add(lengths.filter(pc.invert(chunk)).to_numpy())
        chunks = pa.table({C.PARENT_ID: table.column(C.PARENT_ID), LENGTH: lengths}).filter(chunk)
        if chunks.num_rows:
            summary.chunks += chunks.num_rows
            partial.append(chunks.group_by(C.PARENT_ID).aggregate([(LENGTH, "sum")]))
    if partial:
        documents = pa.concat_tables(partial).group_by(C.PARENT_ID).aggregate([(f"{LENGTH}_sum", "sum")])
        summary.documents.add(np.asarray(documents.column(f"{LENGTH}_sum_sum").to_numpy()))
        summary.split_documents = documents.num_rows
    splitter = output.row_adder()
    if not summary.chunks and splitter is None:
        return None
    budget = output.stage_params(splitter).get("max_chars")
    summary.budget = float(budget) if isinstance(budget, (int, float)) else None
    return summary
