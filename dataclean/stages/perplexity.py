"""Stages `perplexity` (score) and `perplexity_filter` (thresholds and buckets), as CCNet does.

Scoring and thresholds are two stages so that thresholds can be re-tuned without re-scoring (the
data-juicer split of a score column and a filter): `ScorePerplexity` adds `ppl`, which survives
into the output, and `FilterPerplexity` reads it. Re-running only `perplexity_filter` on a previous
output changes the cut without loading a model.

`ScorePerplexity` scores each row with the reference model of its `lang` (see `dataclean.lm`):
`ppl` is null for languages without a model and for texts shorter than `min_tokens` pieces, whose
perplexity is noise. `FilterPerplexity` is a barrier: it sees the (lang, ppl) of every shard, then
per language computes exact corpus percentiles and
- adds `ppl_bucket`: `head` at or below the 30th percentile, `middle` up to the 60th, `tail` above
  (CCNet's buckets, Wenzek et al. 2020, computed on the user's corpus rather than fixed tables);
- drops `too_perplexing`: ppl above an absolute `max_ppl` (for all languages, or per language);
- drops `worst_fraction`: the `drop_fraction` highest-perplexity rows of each language across all
  shards (e.g. 0.002 for "drop the worst 0.2%").
Rows with a null `ppl` get a null bucket and are never dropped here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.lm.compiled import compile_kernels
from dataclean.lm.fetch import check_remote_model, fetch_model, is_uri
from dataclean.lm.model import (
    BUNDLED,
    DEFAULT_MIN_TOKENS,
    TOKENIZER_FILE,
    LanguageModel,
    load_model,
    prepare_tables,
    resolve_model,
)
from dataclean.lm.ngram import UNROLLED_ORDER, compile_scorer
from dataclean.lm.quantiles import exact_quantiles
from dataclean.stage import FitContext, GlobalStage, Stage, with_column, with_drops

BUCKETS = ("head", "middle", "tail")


def _parse_pairs(values: tuple[str, ...], where: str) -> dict[str | None, str]:
    """`("en=X", "Y")` -> {"en": "X", None: "Y"}: per-language values, None for the default."""
    pairs: dict[str | None, str] = {}
    for value in values:
        lang, sep, rest = value.partition("=")
        key, item = (lang.strip(), rest.strip()) if sep else (None, value.strip())
        if not item or (sep and not key):
            raise ConfigError(f"{where}: {value!r} is not VALUE or LANG=VALUE")
        pairs[key] = item
    return pairs


@dataclass
class ScorePerplexity(Stage):
    """Add `ppl` (CCNet perplexity under the reference model of the row's `lang`, which the
    `language` stage provides: planning a run without it fails, naming this stage).

    `models`: added to the bundled models (`en`, `zh`), or replacing one of them: `LANG=PATH` /
    `LANG:PATH` for a model folder written by `dataclean lm train` (a local path, or a URI any
    pyarrow filesystem reads: `s3://`, `gs://`, `hdfs://`, `file://`, fetched once per machine by
    `dataclean.lm.fetch`), `LANG` for a bundled model, `LANG=off` to score no row of that language.
    Only rows whose `lang` has a model are scored. `min_tokens`: texts with fewer SentencePiece
    pieces get a null `ppl`.
    `rescore`: score rows that already have a `ppl` (by default they keep it).
    """

    name: ClassVar[str] = "perplexity"
    requires: ClassVar[tuple[str, ...]] = (C.LANG,)
    provides: ClassVar[tuple[str, ...]] = (C.PPL,)
    compile_seconds: ClassVar[float] = 6.0  # benchmarks/bench_compile.py (2026-12-02, load 3)

    models: tuple[str, ...] = ()
    min_tokens: int = DEFAULT_MIN_TOKENS
    rescore: bool = False
    _loaded: dict[str, LanguageModel] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.models = tuple(self.models)
        if self.min_tokens < 1:
            raise ConfigError(f"perplexity.min_tokens must be >= 1, got {self.min_tokens}")
        specs = self.model_specs()
        for lang, spec in specs.items():
            if is_uri(spec):
                check_remote_model(spec)
            elif spec not in BUNDLED and not Path(spec).is_dir():
                raise ConfigError(
                    f"perplexity.models: {lang}={spec} is neither a bundled model "
                    f"({', '.join(BUNDLED)}) nor a model folder"
                )

    def model_specs(self) -> dict[str, str]:
        """{lang: bundled name, model folder or URI}: the bundled models, then `models` over them.

        LANG and PATH split at the first = or :; `LANG=off` removes that language's model.
        """
        specs: dict[str, str] = {lang: lang for lang in BUNDLED}
        for value in self.models:
            cut = min((i for i in (value.find("="), value.find(":")) if i >= 0), default=-1)
            lang, path = (value[:cut], value[cut + 1 :]) if cut >= 0 else (value, "")
            if cut >= 0 and not (lang.strip() and path.strip()):
                raise ConfigError(f"perplexity.models: {value!r} is not LANG or LANG=PATH")
            specs[lang.strip()] = path.strip() if cut >= 0 else lang.strip()
        return {lang: spec for lang, spec in specs.items() if spec != "off"}

    def setup(self) -> None:
        """Load each language's model, once per worker process."""
        if self._loaded is None:
            self._loaded = {
                lang: load_model(fetch_model(spec) if is_uri(spec) else spec)
                for lang, spec in self.model_specs().items()
            }

    def compile_kernels(self) -> None:
        """The compiled tokenizer's kernels, with the first model that uses them, and the n-gram
        scorer's, on a tiny model of its own (and its loop over orders, for a local model of an
        order above 4); and each local model's tables, built once into the cache the run's
        processes load them from (`dataclean.lm.model.prepare_tables`)."""
        compile_scorer()
        compiled = False
        for spec in self.model_specs().values():
            if is_uri(spec):  # fetched by setup(); the bundled or local models come first
                continue
            folder = resolve_model(spec)
            order = prepare_tables(folder)
            if order is not None and order > UNROLLED_ORDER:
                compile_scorer(order)
            path = folder / TOKENIZER_FILE
            compiled = compiled or (path.exists() and compile_kernels(path.read_bytes()))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_loaded"] = None  # models load on the worker, in setup()
        return state

    def __call__(self, table: pa.Table) -> pa.Table:
        self.setup()
        assert self._loaded is not None
        langs = table.column(C.LANG)
        texts = table.column(C.TEXT)
        ppl = np.full(table.num_rows, np.nan)
        todo = np.ones(table.num_rows, dtype=bool)
        index = table.schema.get_field_index(C.PPL)
        if index >= 0:
            previous = table.column(index).cast(pa.float64())
            ppl = previous.fill_null(np.nan).to_numpy(zero_copy_only=False).copy()
            todo = np.ones_like(todo) if self.rescore else np.isnan(ppl)
        for lang, model in self._loaded.items():
            is_lang = pc.equal(langs, lang).fill_null(False)
            rows = np.flatnonzero(todo & is_lang.to_numpy(zero_copy_only=False))
            if len(rows) == table.num_rows:
                ppl[:] = model.score_array(texts).perplexity(self.min_tokens)
            elif len(rows):
                ppl[rows] = model.score_array(texts.take(rows)).perplexity(self.min_tokens)
        return with_column(table, C.PPL, pa.array(ppl, pa.float64(), mask=np.isnan(ppl)))


@dataclass
class FilterPerplexity(GlobalStage):
    """Add `ppl_bucket` at corpus percentiles per language; drop rows over perplexity thresholds.

    `max_ppl`: absolute maximum, `VALUE` for every language and/or `LANG=VALUE` (e.g.
    `("en=2000", "zh=3000")`); rows above it are dropped as `too_perplexing`.
    `drop_fraction`: drop this fraction of each language's rows with the highest `ppl`, counted
    across all shards, as `worst_fraction` (0 keeps all). `bucket_percentiles`: the two percentiles
    that cut head/middle/tail.
    """

    name: ClassVar[str] = "perplexity_filter"
    requires: ClassVar[tuple[str, ...]] = (C.LANG, C.PPL)
    provides: ClassVar[tuple[str, ...]] = (C.PPL_BUCKET,)

    max_ppl: tuple[str, ...] = ()
    drop_fraction: float = 0.0
    bucket_percentiles: tuple[float, ...] = (30.0, 60.0)
    # Fitted per language: bucket cut points and the ppl above which the worst fraction starts.
    cutoffs: dict[str, list[float]] = field(default_factory=dict, init=False)
    worst_above: dict[str, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.max_ppl = tuple(self.max_ppl)
        self.bucket_percentiles = tuple(self.bucket_percentiles)
        for lang, value in self.max_by_lang().items():
            if not value > 0:
                raise ConfigError(f"perplexity_filter.max_ppl: {lang or 'all'} must be > 0")
        if not 0.0 <= self.drop_fraction < 1.0:
            raise ConfigError(f"perplexity_filter.drop_fraction must be in [0, 1), got {self.drop_fraction}")
        low_high = self.bucket_percentiles
        if len(low_high) != 2 or not 0.0 < low_high[0] < low_high[1] < 100.0:
            raise ConfigError(
                "perplexity_filter.bucket_percentiles must be two increasing percentiles in "
                f"(0, 100), got {list(low_high)}"
            )

    def max_by_lang(self) -> dict[str | None, float]:
        """{lang: maximum ppl}; the key None applies to languages not listed."""
        pairs = _parse_pairs(self.max_ppl, "perplexity_filter.max_ppl")
        try:
            return {lang: float(value) for lang, value in pairs.items()}
        except ValueError:
            raise ConfigError(f"perplexity_filter.max_ppl: {self.max_ppl} has a non-number") from None

    def observe(self, table: pa.Table) -> pa.Table | None:
        """The (lang, ppl) of scored rows: all that `fit` needs."""
        if C.PPL not in table.column_names or C.LANG not in table.column_names:
            raise ConfigError("perplexity_filter needs `ppl` and `lang`: run `perplexity` before it")
        scored = table.filter(pc.is_valid(table.column(C.PPL)))
        if scored.num_rows == 0:
            return None
        return pa.table(
            {
                C.LANG: scored.column(C.LANG).cast(pa.string()).fill_null(""),
                C.PPL: scored.column(C.PPL).cast(pa.float64()),
            }
        )

    def fit(self, context: FitContext) -> None:
        """Exact per-language percentiles over all shards' summaries (two passes, each a map)."""
        low, high = self.bucket_percentiles
        wanted = [low / 100.0, high / 100.0]
        if self.drop_fraction > 0:
            wanted.append(1.0 - self.drop_fraction)
        quantiles = exact_quantiles(context.summaries, C.LANG, C.PPL, wanted, context.executor)
        self.cutoffs = {lang: values[:2] for lang, values in quantiles.items()}
        if self.drop_fraction > 0:
            self.worst_above = {lang: values[2] for lang, values in quantiles.items()}

    def __call__(self, table: pa.Table) -> pa.Table:
        langs = table.column(C.LANG).fill_null("").to_numpy(zero_copy_only=False)
        ppl = table.column(C.PPL).cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
        buckets = np.full(len(ppl), None, dtype=object)
        limits = self.max_by_lang()
        default_max = limits.get(None, np.inf)
        reasons = np.full(len(ppl), None, dtype=object)
        for lang in np.unique(langs):
            rows = langs == lang
            if lang in self.cutoffs:
                low, high = self.cutoffs[lang]
                level = (ppl[rows] > low).astype(np.int64) + (ppl[rows] > high)
                buckets[rows] = np.asarray(BUCKETS, dtype=object)[level]
            worst = rows & (ppl > self.worst_above.get(lang, np.inf))
            reasons[worst] = "worst_fraction"
            over = rows & (ppl > limits.get(lang, default_max))
            reasons[over] = "too_perplexing"
        buckets[np.isnan(ppl)] = None
        table = with_column(table, C.PPL_BUCKET, pa.array(buckets.tolist(), pa.string()))
        return with_drops(table, reasons.tolist())
