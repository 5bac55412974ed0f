"""Stage `language`: label each row's language with lid.176, optionally keep only some languages.

Language is decided once, here, right after `clean`: dedup's shingles (characters for Chinese,
Japanese, Thai...), the perplexity model, its buckets and cuts all follow `lang`. The labels come
from `dataclean.lang.identify_languages` (fastText lid.176 on each text's first 2,000
characters, as CCNet and datatrove label web text, with the Chinese/English majority rule).

`IdentifyLanguage` adds `lang` (ISO 639-1 code, `und` without letters) and `lang_score` (the
model's probability; null for `und` and for labels that came with the input). A `lang` column in
the input is kept as it is (rows where it is null or empty are labeled) unless `relabel` is on.

Filter (off by default: every row is kept): `keep` lists the languages to keep (`zh,en`: lid.176's
codes, checked when the stage is built, so that `eng` or a typo is an error, not a run that drops
every row); other rows are dropped with reason `<code>` (`language:de` in the stats). `min_score`
drops rows whose label is less probable than that, reason `uncertain:<code>` (datatrove's LanguageFilter uses
0.65); labels without a score (from the input) are trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.lang import SAMPLE_CHARS, identify_languages
from dataclean.lang.labels import unknown_code_message
from dataclean.stage import Stage, with_column, with_drops


@dataclass
class IdentifyLanguage(Stage):
    """Add `lang` and `lang_score`; drop rows outside `keep` or under `min_score` (module docstring).

    `sample_chars`: characters of each text the model reads (from the start).
    """

    name: ClassVar[str] = "language"
    provides: ClassVar[tuple[str, ...]] = (C.LANG, C.LANG_SCORE)
    compile_seconds: ClassVar[float] = 3.7  # benchmarks/bench_compile.py (2026-12-02, load 3)

    keep: tuple[str, ...] = ()
    min_score: float = 0.0
    relabel: bool = False
    sample_chars: int = SAMPLE_CHARS

    def __post_init__(self) -> None:
        self.keep = tuple(code.strip() for code in self.keep if code.strip())
        message = unknown_code_message("language.keep", self.keep)
        if message is not None:
            raise ConfigError(message)
        if not 0.0 <= self.min_score < 1.0:
            raise ConfigError(f"language.min_score must be in [0, 1), got {self.min_score}")
        if self.sample_chars < 1:
            raise ConfigError(f"language.sample_chars must be >= 1, got {self.sample_chars}")

    def setup(self) -> None:
        """Read the model once per worker (the first batch would otherwise)."""
        identify_languages(pa.array([""], pa.string()), self.sample_chars)

    def compile_kernels(self) -> None:
        """The model's kernels, on a few short texts (Latin, Han, empty)."""
        identify_languages(
            pa.array(["Compiled once, then loaded.", "编译一次。", ""], pa.string()), self.sample_chars
        )

    def __call__(self, table: pa.Table) -> pa.Table:
        texts = table.column(C.TEXT)
        if C.LANG in table.column_names and not self.relabel:
            given = table.column(C.LANG).cast(pa.string())
            score = (
                table.column(C.LANG_SCORE).cast(pa.float64())
                if C.LANG_SCORE in table.column_names
                else pa.nulls(table.num_rows, pa.float64())
            )
            missing = pc.fill_null(pc.equal(given, ""), True).to_numpy(zero_copy_only=False)
            rows = np.flatnonzero(missing)
            codes = given.to_numpy(zero_copy_only=False).astype(object)
            scores = score.to_numpy(zero_copy_only=False).astype(np.float64)
            if len(rows):
                found, found_scores = identify_languages(texts.take(rows), self.sample_chars)
                codes[rows] = found.to_numpy(zero_copy_only=False)
                scores[rows] = found_scores.fill_null(np.nan).to_numpy(zero_copy_only=False)
            lang = pa.array(codes.tolist(), pa.string())
            lang_score = pa.array(scores, pa.float64(), mask=np.isnan(scores))
        else:
            lang, lang_score = identify_languages(texts, self.sample_chars)
        table = with_column(table, C.LANG, lang)
        table = with_column(table, C.LANG_SCORE, lang_score)
        return with_drops(table, self._reasons(lang, lang_score))

    def _reasons(self, lang: pa.Array, score: pa.Array) -> pa.Array:
        reasons = pa.nulls(len(lang), pa.string())
        if self.min_score > 0:
            uncertain = pc.fill_null(pc.less(score, self.min_score), False)
            reasons = pc.if_else(uncertain, pc.binary_join_element_wise("uncertain", lang, ":"), reasons)
        if self.keep:
            other = pc.invert(pc.fill_null(pc.is_in(lang, value_set=pa.array(self.keep, pa.string())), False))
            reasons = pc.if_else(other, lang, reasons)
        return reasons
