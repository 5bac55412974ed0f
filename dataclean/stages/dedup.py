"""dedup: drop exact and near duplicates across the whole corpus (MinHash + LSH, then verified).

A global stage. `observe` summarizes every row (exact hash of its normalized text, LSH band keys,
keep priority, shingle hashes) with compiled kernels over whole batches; `fit` groups the keys
of all shards with hash-partitioned files on the executor, joins candidates into components in
large-star / small-star rounds, also on the executor, and decides each candidate cluster on the
workers (`dataclean.dedup`); `__call__` marks the decided rows.

Drops `exact_of:<kept id>` (same normalized text: case, width, punctuation, digits and
whitespace folded as `fold` says) and `near_duplicate_of:<kept id>` (Jaccard similarity of word
`ngram_size`-grams, or character n-grams for Chinese and other unsegmented text, at least
`threshold`: exact Jaccard of the shingle sets when `verify`, else the MinHash estimate), with
the similarity in `dup_jaccard`. Kept rows of a cluster get `dup_cluster` = their own id, dropped
rows the id they duplicate; unique rows null. Which row of a cluster is kept: `keep` ("first":
smallest id; "longest"; a column name: lowest value; "-name": highest), ties by smallest id, so
the result does not depend on shard count, worker count or executor. With `index`, rows that
duplicate an earlier output (`dataclean.dedup.index`) are dropped too, and earlier rows always
win. Empty and short texts: see `dataclean.dedup.shingles`.

Alarms (`dataclean.dedup.alarms`): the fit's statistics (stats.json, the stage's `fit` entry)
list the largest clusters (size, a few members, the kept id) and, when the input has a `source`
or `domain` column, each source's share removed; a cluster of `warn_cluster_size` rows or more
and a source losing `warn_source_share` of its rows or more are warning lines at the end of the
run (`warnings`).

Bands and rows default to datasketch's optimizer weighted 49:1 towards recall
(`dataclean.dedup.lsh`); near-dedup practice: Broder 1997, Lee et al. 2022 ("Deduplicating
training data makes language models better"), threshold 0.7 as in data-juicer and text-dedup.

Memory: observe holds one batch; fit's driver nothing per row; each fit task one summary file
or one partition (`dataclean.dedup.reduce`); __call__ the decided rows of the shard it applies
to, filed by shard (`dataclean.dedup.decisions`), so no process holds the corpus's decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import pyarrow as pa

from dataclean import columns as C
from dataclean.dedup.alarms import warnings
from dataclean.dedup.decisions import Decisions
from dataclean.dedup.index import index_summaries
from dataclean.dedup.lsh import choose_bands
from dataclean.dedup.reduce import find_duplicates
from dataclean.dedup.shingles import DEFAULT_FOLD, FOLDS
from dataclean.dedup.summary import Sketch, keep_rule_is_valid
from dataclean.errors import ConfigError
from dataclean.stage import FitContext, GlobalStage, with_column, with_drops


@dataclass
class DropDuplicates(GlobalStage):
    """Drop exact and near-duplicate rows, keeping one row per cluster (module docstring)."""

    name: ClassVar[str] = "dedup"
    provides: ClassVar[tuple[str, ...]] = (C.DUP_CLUSTER, C.DUP_SCORE)
    # `lang`, when present, chooses word or character shingles; without it, the script does.
    reads_if_present: ClassVar[tuple[str, ...]] = (C.LANG, C.SOURCE, C.DOMAIN)
    compile_seconds: ClassVar[float] = 7.8  # benchmarks/bench_compile.py (2026-12-02, load 3)
    rehearse: ClassVar[bool] = True  # its kernels compile in observe, fit and apply (Stage.rehearse)

    threshold: float = 0.7
    num_perm: int = 128
    ngram_size: int = 5
    keep: str = "first"
    exact: bool = True
    near: bool = True
    verify: bool = True
    bands: int | None = None
    rows: int | None = None
    seed: int = 1
    fold: tuple[str, ...] = DEFAULT_FOLD
    index: str | None = None
    warn_cluster_size: int = 1000
    warn_source_share: float = 0.5
    decisions: str | None = field(default=None, init=False, repr=False)
    fit_stats: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    # (bands, rows): the ones given, else datasketch's optimizer's, resolved in the driver before
    # the stage ships (`prepare`), so workers get them with the stage.
    _bands_rows: tuple[int, int] | None = field(default=None, init=False, repr=False, compare=False)
    # Whether `fit` filed its decisions by input shard, and the shard being applied (begin_shard).
    _by_shard: bool = field(default=False, init=False, repr=False, compare=False)
    _shard: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ConfigError(f"dedup.threshold: {self.threshold} is not between 0 and 1 (exclusive)")
        if not 2 <= self.num_perm <= 4096:
            raise ConfigError(f"dedup.num_perm: {self.num_perm} is not between 2 and 4096")
        if self.ngram_size < 1:
            raise ConfigError(f"dedup.ngram_size: {self.ngram_size} must be at least 1")
        if not keep_rule_is_valid(self.keep):
            raise ConfigError(
                f"dedup.keep: {self.keep!r} is not 'first', 'longest', a column name or '-name'"
            )
        if not (self.exact or self.near):
            raise ConfigError("dedup.exact, dedup.near: both off; skip the stage (--skip dedup)")
        if (self.bands is None) != (self.rows is None):
            raise ConfigError("dedup.bands, dedup.rows: set both or neither")
        if self.bands is not None and self.rows is not None:
            if self.bands < 1 or self.rows < 1:
                raise ConfigError(f"dedup.bands, dedup.rows: {self.bands}, {self.rows} must be >= 1")
            if self.bands * self.rows > self.num_perm:
                raise ConfigError(
                    f"dedup.num_perm: {self.num_perm} is less than bands x rows "
                    f"({self.bands} x {self.rows} = {self.bands * self.rows})"
                )
        if self.warn_cluster_size < 2:
            raise ConfigError(f"dedup.warn_cluster_size: {self.warn_cluster_size} must be at least 2")
        if not 0.0 < self.warn_source_share <= 1.0:
            raise ConfigError(f"dedup.warn_source_share: {self.warn_source_share} is not in (0, 1]")
        if not 0 <= self.seed < 2**32:
            raise ConfigError(f"dedup.seed: {self.seed} is not in [0, 2**32)")
        unknown = [name for name in self.fold if name not in FOLDS]
        if unknown:
            raise ConfigError(f"dedup.fold: unknown {', '.join(unknown)} (valid: {', '.join(FOLDS)})")
        if self.bands is not None and self.rows is not None:
            self._bands_rows = (self.bands, self.rows)

    def required_columns(self) -> tuple[str, ...]:
        """The column `keep` ranks rows by (`keep=-ppl`: `ppl`), checked when the run is planned."""
        if self.keep in ("first", "longest"):
            return ()
        return (self.keep[1:] if self.keep.startswith("-") else self.keep,)

    def bands_rows(self) -> tuple[int, int]:
        """(bands, rows) of the LSH index: as given, else chosen by datasketch's optimizer
        (`dataclean.dedup.lsh.choose_bands`) on first use. Not at construction: the optimizer
        imports datasketch and scipy (0.4 s), which a run would otherwise pay before Ray starts."""
        if self._bands_rows is None:
            self._bands_rows = choose_bands(self.threshold, self.num_perm)
        return self._bands_rows

    def prepare(self, scratch: str) -> None:
        """Resolve the bands here, in the driver: the workers get them with the stage."""
        self.bands_rows()

    def sketch(self) -> Sketch:
        """How this stage summarizes texts (the part an index must share)."""
        bands, rows = self.bands_rows()
        return Sketch(
            ngram_size=self.ngram_size,
            num_perm=self.num_perm,
            seed=self.seed,
            bands=bands,
            rows=rows,
            fold=tuple(self.fold),
            exact=self.exact,
            near=self.near,
            verify=self.verify,
            keep=self.keep,
        )

    def observe(self, table: pa.Table) -> pa.Table:
        """One summary row per input row (`dataclean.dedup.summary`)."""
        return self.sketch().summarize(table)

    def fit(self, context: FitContext) -> dict[str, Any]:
        """Find every duplicate across all summaries (and the index, if any); returns the fit's
        statistics (rows, candidate pairs, clusters), which the run records in stats.json."""
        earlier = index_summaries(self.index, self.sketch()) if self.index else []
        self.decisions, self.fit_stats = find_duplicates(
            context.summaries,
            context.scratch,
            context.executor,
            threshold=self.threshold,
            exact=self.exact,
            near=self.near,
            verify=self.verify,
            earlier=earlier,
            shards=context.shards,
        )
        self._by_shard = context.shards is not None
        self.fit_stats["warnings"] = warnings(
            self.fit_stats["largest_clusters"],
            self.fit_stats["source_shares"],
            self.warn_cluster_size,
            self.warn_source_share,
        )
        return self.fit_stats

    def rehearsal_copy(self) -> DropDuplicates:
        """A copy to rehearse (`Stage.rehearse`): the keep rule's column is not in the tiny corpus."""
        return replace(self, keep="first")

    def begin_shard(self, shard: int | None) -> None:
        """Apply only this shard's decisions next: a worker holds one shard's, not the corpus's."""
        self._shard = shard

    def __call__(self, table: pa.Table) -> pa.Table:
        """Mark duplicates for dropping; add `dup_cluster` and `dup_jaccard`."""
        if self.decisions is None:
            raise RuntimeError("DropDuplicates: call fit() before applying the stage")
        shard = self._shard if self._by_shard else None
        found = Decisions.load(self.decisions, shard).find(table.column(C.ID))
        table = with_column(table, C.DUP_CLUSTER, found.clusters)
        table = with_column(table, C.DUP_SCORE, found.scores)
        return with_drops(table, found.reasons)
