"""Rows and text megabytes per language (`lang`), kept and dropped, and the mean label score.

Row counts are exact (only `lang` and `lang_score` are read, one row group at a time). Megabytes
need the text column, so on a large output they are measured on an even spread of row groups,
about `max_rows` rows, and scaled per language by its row count (`estimated` says so). Dropped
rows are those in `excluded/` and `quarantined/`; rows dropped before the `language` stage ran
(by `read` or `clean`) have no label and are counted as `(none)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.io.layout import DATA, EXCLUDED, QUARANTINED
from dataclean.report.scan import Output, sample_row_groups, tables

NONE = "(none)"


@dataclass
class LanguageRows:
    """One language's rows and megabytes, kept and dropped."""

    lang: str
    kept: int = 0
    kept_mb: float = 0.0
    dropped: int = 0
    dropped_mb: float = 0.0
    score_sum: float = 0.0
    scored: int = 0

    @property
    def mean_score(self) -> float | None:
        """Mean `lang_score` of the kept rows that have one."""
        return self.score_sum / self.scored if self.scored else None


@dataclass
class LanguageSummary:
    """Per language, largest first by kept rows; `estimated` when megabytes come from a sample."""

    languages: list[LanguageRows]
    estimated: bool


def _labels(table: pa.Table) -> pa.ChunkedArray:
    if C.LANG in table.column_names:
        return table.column(C.LANG).cast(pa.string()).fill_null(NONE)
    return pa.chunked_array([pa.array([NONE] * table.num_rows, pa.string())])


def _count(files: list[str], entries: dict[str, LanguageRows], kept: bool, max_rows: int) -> bool:
    """Add `files`' rows and megabytes to `entries`; True when megabytes were estimated."""
    rows: dict[str, int] = {}
    for table in tables(files, [C.LANG, C.LANG_SCORE, C.ID]):
        labels = _labels(table)
        scores = table.column(C.LANG_SCORE) if C.LANG_SCORE in table.column_names else None
        grouped = pa.table({"lang": labels}).group_by("lang").aggregate([("lang", "count")])
        for lang, count in zip(grouped["lang"].to_pylist(), grouped["lang_count"].to_pylist(), strict=True):
            rows[lang] = rows.get(lang, 0) + count
        if kept and scores is not None:
            by_score = pa.table({"lang": labels, "score": scores.cast(pa.float64())})
            summed = by_score.group_by("lang").aggregate([("score", "sum"), ("score", "count")])
            for lang, total, count in zip(*(summed[c].to_pylist() for c in summed.column_names), strict=True):
                entry = entries.setdefault(lang, LanguageRows(lang))
                entry.score_sum += total or 0.0
                entry.scored += count
    chosen, rows_read, rows_total = sample_row_groups(files, max_rows)
    sample_bytes: dict[str, int] = {}
    sample_rows: dict[str, int] = {}
    for table in tables(files, [C.LANG, C.TEXT], chosen):
        if C.TEXT not in table.column_names:
            continue
        sizes = pc.binary_length(table.column(C.TEXT)).fill_null(0)
        grouped = pa.table({"lang": _labels(table), "size": sizes}).group_by("lang")
        summed = grouped.aggregate([("size", "sum"), ("size", "count")])
        for lang, total, count in zip(*(summed[c].to_pylist() for c in summed.column_names), strict=True):
            sample_bytes[lang] = sample_bytes.get(lang, 0) + total
            sample_rows[lang] = sample_rows.get(lang, 0) + count
    for lang, count in rows.items():
        entry = entries.setdefault(lang, LanguageRows(lang))
        seen = sample_rows.get(lang, 0)
        megabytes = sample_bytes.get(lang, 0) * (count / seen) / 1e6 if seen else 0.0
        if kept:
            entry.kept, entry.kept_mb = entry.kept + count, entry.kept_mb + megabytes
        else:
            entry.dropped, entry.dropped_mb = entry.dropped + count, entry.dropped_mb + megabytes
    return rows_read < rows_total


def language_summary(output: Output, max_rows: int = 500_000) -> LanguageSummary | None:
    """None unless the kept rows have a `lang` column."""
    if C.LANG not in output.columns(DATA):
        return None
    entries: dict[str, LanguageRows] = {}
    estimated = _count(output.files[DATA], entries, True, max_rows)
    dropped = output.files[EXCLUDED] + output.files[QUARANTINED]
    estimated = _count(dropped, entries, False, max_rows) or estimated
    ordered = sorted(entries.values(), key=lambda e: (-e.kept, -e.dropped, e.lang))
    return LanguageSummary(ordered, estimated)
