"""How suspect a corpus row looks before any training: the signals dataclean already computed.

Used to rank the documents of a Megatron data spike when no per-document loss is known
(`dataclean.feedback.megatron.suspects`). Per row, the mean of the signals it has, each in 0-1,
1 the most suspect:

- `ppl`: the share of its language's rows with a lower reference perplexity. Within the
  language, because a perplexity is only comparable under one model (dataclean's `ppl_bucket`
  is per language for the same reason).
- `quality_bucket`: `1 - bucket / 19` (the bucket is the row's 5% percentile of quality within
  its language, 19 the best; docs/classify.md).

A row with neither has no score.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from dataclean import columns as C
from dataclean.feedback.corpus import corpus_files

TOP_QUALITY_BUCKET = 19


def _languages(table: pa.Table) -> np.ndarray:
    if C.LANG not in table.column_names:
        return np.full(table.num_rows, "", dtype=object)
    return np.asarray(pc.fill_null(table.column(C.LANG), "").to_pylist(), dtype=object)


def _floats(table: pa.Table, name: str) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, np.nan)
    column = pc.cast(table.column(name), pa.float64())
    return np.asarray(pc.fill_null(column, np.nan).to_numpy(zero_copy_only=False), dtype=np.float64)


def corpus_suspicion(corpus: str | Path, ids: Collection[str]) -> dict[str, float]:
    """id -> suspicion (0-1, see the module docstring) of the corpus rows with these ids."""
    dataset = ds.dataset(corpus_files(corpus), format="parquet")
    names = dataset.schema.names
    signals = [name for name in (C.PPL, C.QUALITY_BUCKET) if name in names]
    if C.ID not in names or not signals or not ids:
        return {}
    language = [C.LANG] if C.LANG in names else []
    wanted = dataset.to_table(columns=[C.ID, *language, *signals], filter=ds.field(C.ID).isin(list(ids)))
    scores = []
    if C.PPL in signals:
        # every row's ppl, by language: the wanted rows' percentiles are taken against these
        everything = dataset.to_table(columns=[*language, C.PPL])
        all_languages, all_ppl = _languages(everything), _floats(everything, C.PPL)
        wanted_languages, wanted_ppl = _languages(wanted), _floats(wanted, C.PPL)
        share = np.full(wanted.num_rows, np.nan)
        for lang in set(wanted_languages.tolist()):
            known = np.sort(all_ppl[(all_languages == lang) & np.isfinite(all_ppl)])
            rows = (wanted_languages == lang) & np.isfinite(wanted_ppl)
            if len(known):
                share[rows] = np.searchsorted(known, wanted_ppl[rows], side="left") / len(known)
        scores.append(share)
    if C.QUALITY_BUCKET in signals:
        scores.append(1.0 - _floats(wanted, C.QUALITY_BUCKET) / TOP_QUALITY_BUCKET)
    stacked = np.vstack(scores)
    known_count = np.isfinite(stacked).sum(axis=0)
    total = np.where(np.isfinite(stacked), stacked, 0.0).sum(axis=0)
    found: dict[str, float] = {}
    for row_id, count, value in zip(wanted.column(C.ID).to_pylist(), known_count, total, strict=True):
        if count:
            found[str(row_id)] = float(value / count)
    return found
