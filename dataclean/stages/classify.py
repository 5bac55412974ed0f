"""Stage `classify`: score rows with fastText quality classifiers; cut by corpus percentile.

The field's strongest open corpora filter with a trained classifier: DCLM (fastText, OpenHermes
and ELI5 positives, keep the top 10%; Li et al. 2024), FineWeb-Edu (educational score; Penedo et
al. 2024), Ultra-FineWeb (fastText, English and Chinese; Wang et al. 2025), Nemotron-CC and
CCI 4.0 (several classifiers, each ranked into 20 buckets of 5%, combined by the maximum).

`ScoreQuality` adds `quality_<name>` per model (`dataclean.classify.models`: the probability of
its label, exactly what fastText's `predict` gives) and, as a corpus-wide barrier like
`perplexity_filter`, ranks every row among its language's rows across all shards
(`dataclean.classify.ranks`):
- `quality_bucket`: 0-19 by 5% percentiles of the row's rank (19: the best 5%);
- `keep_top`: keep this share of each language's rows, the best ranked; others are dropped as
  `<name>:below_top` (one model), or `combined:below_top` (several, or with the perplexity: the
  rank is the maximum of the row's ranks, CCI 4.0's rule);
- `threshold`: drop rows whose probability is below an absolute value, `<name>:below_threshold`;
- `annotate`: add the columns, drop nothing (choose the cuts later).
Rows of a language no model scores get null columns and are never dropped. Without `models` the
stage does nothing (and is no barrier), like `quarantine` without a list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.classify.models import (
    NORMALIZATIONS,
    ModelSpec,
    label_probability,
    load_classifier,
    parse_models,
    parse_named,
)
from dataclean.classify.ranks import (
    GRID_QUANTILES,
    RANK,
    WriteRanks,
    buckets,
    combined_ranks,
    cut_arrays,
    float_column,
    lang_column,
)
from dataclean.errors import ConfigError
from dataclean.io.files import make_dirs, read_parquet
from dataclean.lm.quantiles import exact_quantiles
from dataclean.stage import FitContext, GlobalStage, with_column, with_drops

# The perplexity as a rank source: negated, so that low perplexity ranks high.
_PPL_SOURCE = "__neg_ppl"


@dataclass
class ScoreQuality(GlobalStage):
    """Add `quality_<name>` (and `quality_bucket`); keep the top share or drop below a threshold.

    `models`: `NAME:PATH` or `NAME@LANG:PATH` (see `dataclean.classify.models`). `label`: the
    label whose probability is the score, `LABEL` for every model or `NAME=LABEL`. `normalize`:
    `none` (newlines as spaces only), `lowercase` or `ccnet`, as the model was trained.
    `keep_top`: share of each language's rows to keep (0: all). `threshold`: `VALUE` or
    `NAME=VALUE`. `buckets`: add `quality_bucket`. `with_perplexity`: the perplexity's rank
    (`ppl`, low ranks high) joins the maximum. `annotate`: drop nothing. `exact`: fastText's
    probabilities bit for bit; off (the default), a model with few labels is scored through its
    projected rows (`dataclean.lang.fasttext_projected`): within fastText's own float32 rounding,
    and 2.3x as fast for a DCLM-shaped model (`benchmarks/bench_classify.py`).
    """

    name: ClassVar[str] = "classify"
    # Its kernels are the language stage's (compiled there) and two small output layers, plus the
    # float64 specialization of the language stage's kernel that the projected rows use (1.4 s
    # of CPU, measured with an empty numba cache).
    compile_seconds: ClassVar[float] = 1.5

    models: tuple[str, ...] = ()
    label: tuple[str, ...] = ()
    normalize: str = "none"
    keep_top: float = 0.0
    threshold: tuple[str, ...] = ()
    buckets: bool = True
    with_perplexity: bool = False
    annotate: bool = False
    exact: bool = False
    # Fitted: per rank source and language the GRID-1 quantiles; the least score (one source) or
    # combined rank (several) kept by `keep_top`, per language.
    cuts: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, init=False)
    top: dict[str, float] = field(default_factory=dict, init=False)
    _specs: list[ModelSpec] = field(default_factory=list, init=False, repr=False)
    _summaries: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _observed: pa.Table | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.models, self.label, self.threshold = tuple(self.models), tuple(self.label), tuple(self.threshold)
        self._specs = parse_models(self.models)
        names = self.names()
        parse_named(self.label, names, "classify.label")
        for key, value in self.thresholds().items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"classify.threshold: {key or 'all'} must be in [0, 1], got {value}")
        for name in names:
            if C.QUALITY_PREFIX + name in (
                C.QUALITY_BUCKET,
                C.QUALITY_SIGNALS,
                C.QUALITY_RUNS_CUT,
                C.QUALITY_UNCONFIGURED,
            ):
                raise ConfigError(f"classify.models: {name!r} would name the column {C.QUALITY_PREFIX}{name}")
        if self.normalize not in NORMALIZATIONS:
            raise ConfigError(f"classify.normalize must be one of {', '.join(NORMALIZATIONS)}")
        if not 0.0 <= self.keep_top < 1.0:
            raise ConfigError(f"classify.keep_top must be in [0, 1), got {self.keep_top}")

    def names(self) -> list[str]:
        """The models' names, in the order given (one column each)."""
        return list(dict.fromkeys(spec.name for spec in self._specs))

    def thresholds(self) -> dict[str | None, float]:
        try:
            pairs = parse_named(self.threshold, self.names(), "classify.threshold")
            return {key: float(value) for key, value in pairs.items()}
        except ValueError:
            raise ConfigError(f"classify.threshold: {self.threshold} has a non-number") from None

    def required_columns(self) -> tuple[str, ...]:
        if not self._specs:
            return ()
        return (C.LANG, C.PPL) if self.with_perplexity else (C.LANG,)

    def provided_columns(self) -> tuple[str, ...]:
        columns = tuple(C.QUALITY_PREFIX + name for name in self.names())
        return (*columns, C.QUALITY_BUCKET) if columns and self.buckets else columns

    def is_barrier(self) -> bool:
        """Ranks need the whole corpus: only for buckets and `keep_top`."""
        return bool(self._specs) and (self.buckets or self.keep_top > 0)

    def setup(self) -> None:
        """Read (fetch) every model once per worker."""
        for spec in self._specs:
            load_classifier(spec.path)

    def compile_kernels(self) -> None:
        """fastText's kernels, with the first local model (a fetched one waits for setup)."""
        for spec in self._specs:
            if "://" not in spec.path:
                model, texts = load_classifier(spec.path), pa.array(["compiled once", ""])
                label_probability(model, texts, None, self.normalize, self.exact)
                return

    def _sources(self) -> list[str]:
        columns = [C.QUALITY_PREFIX + name for name in self.names()]
        return [*columns, _PPL_SOURCE] if self.with_perplexity else columns

    def score(self, table: pa.Table) -> dict[str, np.ndarray]:
        """{column: float64 probability per row, NaN where no model scores the row's language}."""
        langs = lang_column(table) if C.LANG in table.column_names else np.full(table.num_rows, "")
        labels = parse_named(self.label, self.names(), "classify.label")
        scores: dict[str, np.ndarray] = {}
        for name in self.names():
            values = np.full(table.num_rows, np.nan)
            specs = [spec for spec in self._specs if spec.name == name]
            own = {spec.lang for spec in specs if spec.lang is not None}
            for spec in specs:
                rows = np.flatnonzero(~np.isin(langs, list(own)) if spec.lang is None else langs == spec.lang)
                if len(rows):
                    texts = table.column(C.TEXT)
                    texts = texts.take(rows) if len(rows) < table.num_rows else texts
                    label = labels.get(name, labels.get(None))
                    model = load_classifier(spec.path)
                    values[rows] = label_probability(model, texts, label, self.normalize, self.exact)
            scores[C.QUALITY_PREFIX + name] = values
        if self.with_perplexity:
            if C.PPL not in table.column_names:
                raise ConfigError("classify.with_perplexity needs `ppl`: run `perplexity` before it")
            scores[_PPL_SOURCE] = -float_column(table, C.PPL)
        return scores

    def observe(self, table: pa.Table) -> pa.Table | None:
        """Every row's id, lang and scores: `fit` ranks them, `__call__` reuses them."""
        columns = {C.ID: table.column(C.ID), C.LANG: pa.array(lang_column(table), pa.string())}
        for column, values in self.score(table).items():
            columns[column] = pa.array(values, pa.float64())
        return pa.table(columns)

    def fit(self, context: FitContext) -> None:
        """Per source and language the quantiles of the rank grid (exact, over all shards); for
        `keep_top` with several sources, a second pass over the combined ranks."""
        sources = self._sources()
        single = len(sources) == 1
        wanted = [*GRID_QUANTILES, *([1.0 - self.keep_top] if single and self.keep_top > 0 else [])]
        for source in sources:
            quantiles = exact_quantiles(context.summaries, C.LANG, source, wanted, context.executor)
            self.cuts[source] = cut_arrays(quantiles)
            if single and self.keep_top > 0:
                self.top = {lang: values[-1] for lang, values in quantiles.items()}
        if not single and self.keep_top > 0:
            folder = f"{context.scratch.rstrip('/')}/ranks"
            make_dirs(folder)
            step = WriteRanks(folder, tuple(sources), self.cuts)
            paths = context.executor.map(step, context.summaries, light=True)
            quantiles = exact_quantiles(paths, C.LANG, RANK, [1.0 - self.keep_top], context.executor)
            self.top = {lang: values[0] for lang, values in quantiles.items()}
        if context.shards is not None:
            self._summaries = dict(zip(context.shards, context.summaries, strict=True))

    def begin_shard(self, shard: int | None) -> None:
        """This shard's scores, computed by `observe`: applying reads them instead of scoring again."""
        path = self._summaries.get(shard) if shard is not None else None
        self._observed = read_parquet(path) if path else None

    def _scores(self, table: pa.Table) -> dict[str, np.ndarray]:
        """The batch's scores: from the shard's summary, matched by id, when every row is there."""
        if self._observed is not None:
            index = pc.index_in(table.column(C.ID), self._observed.column(C.ID))
            if index.null_count == 0:
                rows = index.to_numpy(zero_copy_only=False)
                return {c: float_column(self._observed, c)[rows] for c in self._sources()}
        return self.score(table)

    def __call__(self, table: pa.Table) -> pa.Table:
        if not self._specs:
            return table
        scores = self._scores(table)
        for name in self.names():
            values = scores[C.QUALITY_PREFIX + name]
            column = pa.array(values, pa.float64(), mask=np.isnan(values))
            table = with_column(table, C.QUALITY_PREFIX + name, column)
        reasons = np.full(table.num_rows, None, dtype=object)
        limits = self.thresholds()
        for name in self.names():
            limit = limits.get(name, limits.get(None))
            if limit is not None:
                below = np.nan_to_num(scores[C.QUALITY_PREFIX + name], nan=np.inf) < limit
                reasons[below & (reasons == None)] = f"{name}:below_threshold"  # noqa: E711
        if self.is_barrier():
            langs = lang_column(table)
            rank = combined_ranks(langs, scores, self.cuts)
            if self.buckets:
                table = with_column(table, C.QUALITY_BUCKET, buckets(rank))
            if self.keep_top > 0:
                single = len(scores) == 1
                value = next(iter(scores.values())) if single else rank
                least = np.full(table.num_rows, -np.inf)
                for lang, value_kept in self.top.items():
                    least[langs == lang] = value_kept
                below = np.nan_to_num(value, nan=np.inf) < least
                reason = f"{self.names()[0]}:below_top" if single else "combined:below_top"
                reasons[below & (reasons == None)] = reason  # noqa: E711
        return table if self.annotate else with_drops(table, reasons.tolist())
