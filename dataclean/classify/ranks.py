"""Corpus percentile ranks of classifier scores, combined by their maximum (CCI 4.0's rule).

A row's rank under one score is the share of its language's rows, across all shards, whose score
is below it, on a grid of `GRID` steps: rank k (0 to GRID - 1) when its score is at or above the
corpus quantile k/GRID and below quantile (k+1)/GRID (exact quantiles, `dataclean.lm.quantiles`,
so the ranks do not depend on how the corpus is sharded). With several scores (several
classifiers, and optionally the perplexity, ranked so that low perplexity ranks high) a row's rank
is the maximum of its ranks (CCI 4.0, Wang et al. 2025; Nemotron-CC, Su et al. 2024, combines its
classifiers' buckets the same way). Its bucket is rank * 20 // GRID: 0 to 19, by 5% percentiles,
19 the best 5%.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.io.files import read_parquet, write_parquet

GRID = 1000
BUCKETS = 20
# The quantiles that bound the ranks: 1/GRID, ..., (GRID-1)/GRID.
GRID_QUANTILES = tuple(k / GRID for k in range(1, GRID))
RANK = "rank"


def ranks(scores: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """float64 rank (0..GRID-1) of each score given its language's GRID-1 quantiles; NaN stays
    NaN (a row without this score)."""
    found = np.searchsorted(cuts, scores, side="right").astype(np.float64)
    found[np.isnan(scores)] = np.nan
    return found


def combined_ranks(
    langs: np.ndarray, scores: dict[str, np.ndarray], cuts: dict[str, dict[str, np.ndarray]]
) -> np.ndarray:
    """The maximum over the scores of each row's rank (NaN when the row has none of them);
    `cuts[source][lang]` are that score's quantiles in that language."""
    best = np.full(len(langs), np.nan)
    for source, values in scores.items():
        for lang, lang_cuts in cuts.get(source, {}).items():
            rows = langs == lang
            if rows.any():
                best[rows] = np.fmax(best[rows], ranks(values[rows], lang_cuts))
    return best


def buckets(rank: np.ndarray) -> pa.Array:
    """int8 bucket 0..19 of each rank, null where the rank is NaN."""
    missing = np.isnan(rank)
    values = (np.where(missing, 0, rank).astype(np.int64) * BUCKETS // GRID).astype(np.int8)
    return pa.array(values, pa.int8(), mask=missing)


@dataclass(frozen=True)
class WriteRanks:
    """One summary file's (lang, combined rank) rows, written under `folder` for a quantile pass
    over the ranks themselves (the share to keep of the combined rank)."""

    folder: str
    sources: tuple[str, ...]
    cuts: dict[str, dict[str, np.ndarray]]

    def __call__(self, summary: str) -> str:
        table = read_parquet(summary, [C.LANG, *self.sources])
        langs = lang_column(table)
        scores = {source: float_column(table, source) for source in self.sources}
        rank = combined_ranks(langs, scores, self.cuts)
        path = posixpath.join(self.folder, posixpath.basename(summary))
        write_parquet(path, pa.table({C.LANG: pa.array(langs, pa.string()), RANK: pa.array(rank)}))
        return path


def float_column(table: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64 numpy, nulls as NaN."""
    values: np.ndarray = (
        table.column(name).cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
    )
    return values


def lang_column(table: pa.Table) -> np.ndarray:
    """`lang` as a numpy object array, null as the empty string (the quantiles' group)."""
    values: np.ndarray = table.column(C.LANG).cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
    return values


def cut_arrays(quantiles: dict[str, list[float]], count: int = len(GRID_QUANTILES)) -> dict[str, np.ndarray]:
    """{lang: the first `count` quantiles as an array} from `exact_quantiles`' answer."""
    return {lang: np.asarray(values[:count], np.float64) for lang, values in quantiles.items()}
