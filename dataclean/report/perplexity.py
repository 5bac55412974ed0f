"""Perplexity per language: kept rows by bucket, dropped rows by reason, and where the cuts fell.

Reads `lang`, `ppl`, `ppl_bucket` (and `reason` for dropped rows) batch by batch. The bucket cut
points are not stored in the output, so they are shown where the data puts them: the highest
perplexity seen in `head` and in `middle`. A threshold is shown twice when it can be: as set
(`max_ppl` in the manifest) and as it fell (the lowest perplexity dropped for each reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.io.layout import DATA, EXCLUDED, FOLDERS, QUARANTINED
from dataclean.report.histogram import LogHistogram
from dataclean.report.scan import Output, reason_kinds, tables

BUCKETS = ("head", "middle", "tail")
UNBUCKETED = "no bucket"


@dataclass
class LanguagePerplexity:
    """One language's perplexity histograms and cut points (see the module docstring)."""

    lang: str
    kept: dict[str, LogHistogram] = field(default_factory=dict)
    dropped: dict[str, LogHistogram] = field(default_factory=dict)
    bucket_max: dict[str, float] = field(default_factory=dict)
    dropped_min: dict[str, float] = field(default_factory=dict)
    configured_max: float | None = None
    unscored: int = 0

    def cut_points(self) -> list[tuple[str, float]]:
        """(label, ppl) of each line to draw: bucket edges, configured and observed thresholds."""
        lines = [
            (f"{bucket} | {BUCKETS[i + 1]}", self.bucket_max[bucket])
            for i, bucket in enumerate(BUCKETS[:2])
            if bucket in self.bucket_max
        ]
        if self.configured_max is not None:
            lines.append(("max_ppl (set)", self.configured_max))
        lines.extend((f"{kind.split(':', 1)[-1]} from", value) for kind, value in self.dropped_min.items())
        return lines


def _configured_max(output: Output) -> dict[str | None, float]:
    """`max_ppl` of any stage in the manifest: {lang: value}, None for every language."""
    limits: dict[str | None, float] = {}
    for entry in output.manifest.get("config", {}).get("stages", []):
        values = (entry.get("params") or {}).get("max_ppl") if isinstance(entry, dict) else None
        if isinstance(values, (int, float, str)):
            values = [values]
        for value in values or []:
            lang, sep, number = str(value).partition("=")
            try:
                limits[lang.strip() if sep else None] = float(number if sep else lang)
            except ValueError:
                continue
    return limits


def _codes(column: pa.ChunkedArray, fill: str) -> tuple[np.ndarray, list[str]]:
    encoded = pc.dictionary_encode(column.cast(pa.string()).fill_null(fill)).combine_chunks()
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def _add(summary: dict[str, LanguagePerplexity], table: pa.Table, dropped: bool) -> None:
    if C.PPL not in table.column_names:
        return
    n = table.num_rows
    ppl = table.column(C.PPL).cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
    langs = (
        table.column(C.LANG) if C.LANG in table.column_names else pa.chunked_array([pa.nulls(n, pa.string())])
    )
    if dropped:
        groups = reason_kinds(table.column(C.REASON))
        groups = groups if isinstance(groups, pa.ChunkedArray) else pa.chunked_array([groups])
    elif C.PPL_BUCKET in table.column_names:
        groups = table.column(C.PPL_BUCKET)
    else:
        groups = pa.chunked_array([pa.nulls(n, pa.string())])
    lang_codes, lang_names = _codes(langs, "unknown")
    group_codes, group_names = _codes(groups, UNBUCKETED)
    buckets = (
        table.column(C.PPL_BUCKET).cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
        if C.PPL_BUCKET in table.column_names
        else None
    )
    scored = ~np.isnan(ppl)
    for lang_code, lang in enumerate(lang_names):
        in_lang = lang_codes == lang_code
        if not in_lang.any():
            continue
        entry = summary.setdefault(lang, LanguagePerplexity(lang))
        if not dropped:
            entry.unscored += int((in_lang & ~scored).sum())
        for group_code, group in enumerate(group_names):
            rows = in_lang & scored & (group_codes == group_code)
            if not rows.any():
                continue
            histograms = entry.dropped if dropped else entry.kept
            histograms.setdefault(group, LogHistogram()).add(ppl[rows])
            if dropped:
                low = float(ppl[rows].min())
                entry.dropped_min[group] = min(low, entry.dropped_min.get(group, low))
        if buckets is not None:
            for bucket in BUCKETS[:2]:
                rows = in_lang & scored & (buckets == bucket)
                if rows.any():
                    high = float(ppl[rows].max())
                    entry.bucket_max[bucket] = max(high, entry.bucket_max.get(bucket, high))


def perplexity_summary(output: Output) -> dict[str, LanguagePerplexity] | None:
    """Per language, or None when no output file has a `ppl` column."""
    if not any(C.PPL in output.columns(folder) for folder in FOLDERS):
        return None
    summary: dict[str, LanguagePerplexity] = {}
    for table in tables(output.files[DATA], [C.LANG, C.PPL, C.PPL_BUCKET]):
        _add(summary, table, dropped=False)
    dropped_files = output.files[EXCLUDED] + output.files[QUARANTINED]
    for table in tables(dropped_files, [C.LANG, C.PPL, C.PPL_BUCKET, C.REASON]):
        _add(summary, table, dropped=True)
    limits = _configured_max(output)
    for lang, entry in summary.items():
        entry.configured_max = limits.get(lang, limits.get(None))
    return {
        lang: summary[lang]
        for lang in sorted(summary, key=lambda lang: -sum(h.total for h in summary[lang].kept.values()))
        if summary[lang].kept or summary[lang].dropped
    }
