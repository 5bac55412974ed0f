"""The groups a corpus column puts its rows in, by what the column is.

- a classifier's probability (`quality_<name>` from `classify`: floating point, every value in
  [0, 1]): fifths of [0, 1] (0-0.2, ..., 0.8-1);
- a bucket or a code (integers with at most `max_levels` distinct values, e.g. `quality_bucket`
  0-19): one group per value;
- any other number (a count such as `quality_runs_cut`, a perplexity, a length): quintiles of its
  values;
- a string or a boolean (`source`, `lang`, `ppl_bucket`, `dup_cluster`): one group per value;
  `url_host` is the host of the `url` column;
- a struct (`quality_signals` in `quality.mode=annotate`) or a list: not grouped as a whole; a
  field of a struct is a column of its own when named with a dot (`quality_signals.c4_lines`).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SOURCE = "source"
URL = "url"
URL_HOST = "url_host"
_HOST = r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(?P<host>[^/:?#]+)"


def column_values(corpus: pa.Table, column: str) -> pa.Array | None:
    """The values a column (or `struct.field`, or `url_host`) names, or None when absent."""
    if column == URL_HOST:
        if URL not in corpus.column_names:
            return None
        found = pc.extract_regex(corpus.column(URL).cast(pa.string()), _HOST)
        return pc.utf8_lower(pc.struct_field(found, "host")).combine_chunks()
    if column in corpus.column_names:
        return corpus.column(column).combine_chunks()
    head, _, field = column.partition(".")
    if field and head in corpus.column_names and pa.types.is_struct(corpus.schema.field(head).type):
        kind = corpus.schema.field(head).type
        if kind.get_field_index(field) >= 0:
            return pc.struct_field(corpus.column(head).combine_chunks(), field)
    return None


def groupable(kind: pa.DataType) -> bool:
    """Whether a column of this type is grouped (structs, lists, maps and bytes are not)."""
    nested = pa.types.is_struct(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind)
    nested = nested or pa.types.is_map(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
    return not nested


def is_probability(numbers: np.ndarray, finite: np.ndarray) -> bool:
    """Floating-point values all in [0, 1]: a probability."""
    values = numbers[finite]
    return bool(len(values)) and bool(((values >= 0) & (values <= 1)).all())


def group_labels(corpus: pa.Table, column: str, bins: int = 5, max_levels: int = 20) -> pa.Array | None:
    """The group of every corpus row for one column (null: in no group); None when the column
    is absent or not grouped (see the module docstring)."""
    values = column_values(corpus, column)
    if values is None or not groupable(values.type):
        return None
    if pa.types.is_integer(values.type):
        levels = pc.count_distinct(values).as_py()
        if levels <= max_levels:
            return values.cast(pa.string())
    if pa.types.is_floating(values.type) or pa.types.is_integer(values.type):
        numbers = pc.fill_null(values.cast(pa.float64()), math.nan).to_numpy(zero_copy_only=False)
        finite = np.isfinite(numbers)
        if not finite.any():
            return pa.nulls(len(values), pa.string())
        probability = pa.types.is_floating(values.type) and is_probability(numbers, finite)
        if probability:
            edges = np.linspace(0.0, 1.0, bins + 1)
        else:
            edges = np.unique(np.quantile(numbers[finite], np.linspace(0, 1, bins + 1)))
        index = np.clip(np.searchsorted(edges, numbers, side="right") - 1, 0, max(len(edges) - 2, 0))
        labels = [f"{edges[i]:.3g}-{edges[min(i + 1, len(edges) - 1)]:.3g}" for i in range(len(edges))]
        return pa.array([labels[i] if ok else None for i, ok in zip(index, finite, strict=True)], pa.string())
    return values.cast(pa.string())
