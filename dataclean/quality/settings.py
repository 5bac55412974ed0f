"""The quality stage's thresholds as settable parameters (`--set quality.top_2_gram=0.25`).

Each field left at None takes its value from the row's language table
(`dataclean/data/quality/thresholds.json`); a value set here replaces it in every table. Names are
datatrove's parameter names (`GopherRepetitionFilter(dup_line_frac=...)`,
`GopherQualityFilter(min_doc_words=...)`, `C4QualityFilter(min_num_sentences=...)`,
`FineWebQualityFilter(line_punct_thr=...)`; a top/duplicated n-gram fraction is named after its
rule, `top_2_gram`, `duplicated_5_n_grams`), plus `long_run_fraction` (the share of a document's
characters in long n-gram runs above which it is dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class QualityThresholds:
    """Thresholds that override every language table (None: the table's own)."""

    dup_para_frac: float | None = None
    dup_para_char_frac: float | None = None
    dup_line_frac: float | None = None
    dup_line_char_frac: float | None = None
    top_2_gram: float | None = None
    top_3_gram: float | None = None
    top_4_gram: float | None = None
    duplicated_5_n_grams: float | None = None
    duplicated_6_n_grams: float | None = None
    duplicated_7_n_grams: float | None = None
    duplicated_8_n_grams: float | None = None
    duplicated_9_n_grams: float | None = None
    duplicated_10_n_grams: float | None = None
    min_doc_words: float | None = None
    max_doc_words: float | None = None
    min_avg_word_length: float | None = None
    max_avg_word_length: float | None = None
    max_symbol_word_ratio: float | None = None
    max_bullet_lines_ratio: float | None = None
    max_ellipsis_lines_ratio: float | None = None
    max_non_alpha_words_ratio: float | None = None
    min_stop_words: float | None = None
    min_num_sentences: float | None = None
    line_punct_thr: float | None = None
    short_line_thr: float | None = None
    char_duplicates_ratio: float | None = None
    new_line_ratio: float | None = None
    long_run_fraction: float | None = None

    def overrides(self) -> dict[str, Any]:
        """The thresholds set here, by name."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(QualityThresholds)
            if getattr(self, f.name) is not None
        }
