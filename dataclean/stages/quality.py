"""Stage `quality`: the web-text heuristics every web pipeline runs, datatrove's rules per language.

Gopher repetition, Gopher quality, C4 (filter mode: documents are dropped, lines never removed, so
FineWeb sees the text as this stage received it), FineWeb, and long n-gram runs, in that order;
the first failing rule drops the row as `quality:<datatrove's reason>` (`quality:dup_line_frac`,
`quality:top_2_gram`, `quality:gopher_enough_stop_words`, `quality:line_punct_ratio`, ...). The
rules and their statistics are datatrove 0.10's (`dataclean.quality.rules`,
`dataclean.quality.signals`), on words as spaCy's blank tokenizer for the row's language cuts
them (`dataclean.quality.tokenizer`), all computed in one compiled pass over each batch's bytes.

Thresholds come per row from its language's table (`dataclean/data/quality/thresholds.json`):
`en` datatrove's English defaults (a Han run quoted in English is jieba's words, a fenced code block
is not prose); `zh` starts from FineWeb-2's Mandarin thresholds; every other
lid.176 label its FineWeb-2 config, as FineWeb-2's pipeline applies it
(`dataclean.quality.fineweb2`); a label without a config the `unconfigured` table
(language-independent rules only, never English stop words), marked in the row's
`quality_unconfigured` column and counted as `unconfigured` in the stage's stats. Han text gets
the Han table whatever its label, where Han runs are jieba's words, a closing quote after 。！？
ends a punctuated line, and C4's words-per-line rule is off. Japanese rows count SudachiPy's
words, as FineWeb-2 does (`dataclean.quality.japanese`, the `ja` extra); without SudachiPy one
word per kana or Han character, counted as `japanese_characters_as_words` in the stage's stats.

Parameters: every threshold (`--set quality.top_2_gram=0.25`, all tables; `thresholds` takes
`LANG.NAME=VALUE` entries for one table, `none` turning a rule off), one switch per rule family,
`language` (one table for every row, e.g. `en` to run datatrove's defaults on everything), and
`mode=annotate`, which drops nothing and adds `quality_signals`, a struct of every statistic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.quality.japanese import sudachi_available
from dataclean.quality.rules import FAMILIES, UNCONFIGURED, QualityTables, build_tables, first_failures
from dataclean.quality.runs import cut_runs, spans_by_row
from dataclean.quality.settings import QualityThresholds
from dataclean.quality.signals import INDEX, SIGNALS, STYLE_PARAM, compute_signals
from dataclean.quality.tokenizer import SUDACHI
from dataclean.stage import Stage, with_column, with_counts, with_drops

Mode = Literal["filter", "annotate"]
# Statistics kept in `quality_signals` (the table index and the raw counts stay internal).
_ANNOTATED = tuple(name for name in SIGNALS if name not in ("table", "tokens"))
# Rows of the Japanese table judged with one word per character: SudachiPy is not installed.
JAPANESE_CHARACTERS = "japanese_characters_as_words"


@dataclass
class FilterQuality(Stage, QualityThresholds):
    """Drop rows failing the Gopher, C4, FineWeb or long-n-gram-run rules (module docstring)."""

    name: ClassVar[str] = "quality"
    requires: ClassVar[tuple[str, ...]] = (C.LANG,)
    compile_seconds: ClassVar[float] = 17.8  # benchmarks/bench_compile.py (2026-12-02, load 3)

    mode: Mode = "filter"
    language: str = ""
    thresholds: tuple[str, ...] = ()
    gopher_repetition: bool = True
    gopher_quality: bool = True
    c4: bool = True
    fineweb: bool = True
    long_ngram_run: bool = True
    _tables: QualityTables = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in ("filter", "annotate"):
            raise ConfigError(f"quality.mode must be filter or annotate, got {self.mode!r}")
        self._tables = build_tables(self.overrides(), self.thresholds)
        if self.language and self.language not in self._tables.by_language:
            known = ", ".join(sorted(self._tables.by_language))
            raise ConfigError(f"quality.language: no table for {self.language!r} (tables: {known})")

    def provided_columns(self) -> tuple[str, ...]:
        judged = (C.QUALITY_SIGNALS,) if self.mode == "annotate" else (C.QUALITY_RUNS_CUT,)
        return (*judged, C.QUALITY_UNCONFIGURED)

    def families(self) -> tuple[str, ...]:
        """The rule families switched on."""
        return tuple(name for name in FAMILIES if getattr(self, name))

    def signals(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Every statistic of every row (`dataclean.quality.signals.SIGNALS` columns), and the
        long n-gram runs' cuts (rows of row, start, end)."""
        tables = self._tables
        if self.language:
            rows = np.full(table.num_rows, tables.by_language[self.language], np.int64)
        elif C.LANG in table.column_names:
            codes = table.column(C.LANG).to_pylist()
            rows = np.array([tables.table_of(code) for code in codes], np.int64)
        else:
            rows = np.full(table.num_rows, -1, np.int64)
        han = -1 if self.language else tables.han_table  # a forced table applies to Han text too
        return compute_signals(
            table.column(C.TEXT), rows, han, 0, tables.params(), tables.stops(), self.c4, self.long_ngram_run
        )

    def __call__(self, table: pa.Table) -> pa.Table:
        values, cuts = self.signals(table)
        row_tables = values[:, INDEX["table"]].astype(np.int64)
        unconfigured = row_tables == self._tables.unconfigured
        counted = {UNCONFIGURED: unconfigured}
        if not sudachi_available():
            counted[JAPANESE_CHARACTERS] = (self._tables.params()[row_tables, STYLE_PARAM] & SUDACHI) != 0
        table = with_column(table, C.QUALITY_UNCONFIGURED, pa.array(unconfigured, pa.bool_()))
        if self.mode == "annotate":
            struct = pa.StructArray.from_arrays(
                [pa.array(values[:, INDEX[name]], pa.float64()) for name in _ANNOTATED], list(_ANNOTATED)
            )
            table = with_column(table, C.QUALITY_SIGNALS, struct)
            return with_counts(table, counted)
        reasons = first_failures(values, self._tables, self.families())
        table, counts = _cut_runs(table, cuts, reasons)
        table = with_column(table, C.QUALITY_RUNS_CUT, pa.array(counts, pa.int32()))
        table = with_counts(table, counted)
        return with_drops(table, pa.array(reasons.tolist(), pa.string()))

    def compile_kernels(self) -> None:
        """The statistics pass, on an English and a Chinese text."""
        compute_signals(
            pa.array(["Compiled once. Then loaded [1].\n\nIt's fine: {x}.", "编译一次。“好！”" + "哈" * 40]),
            np.array([-1, -1], np.int64), self._tables.han_table, 0, self._tables.params(),
            self._tables.stops(), True, True,
        )  # fmt: skip


def _cut_runs(table: pa.Table, cuts: np.ndarray, reasons: np.ndarray) -> tuple[pa.Table, list[int]]:
    """The table with each kept row's long n-gram runs cut back (`dataclean.quality.runs`), and
    the runs cut per row."""
    counts = [0] * table.num_rows
    spans = {row: found for row, found in spans_by_row(cuts).items() if reasons[row] is None}
    if not spans:
        return table, counts
    rows = sorted(spans)
    texts = table.column(C.TEXT).take(pa.array(rows)).to_pylist()
    mask = np.zeros(table.num_rows, bool)
    mask[rows] = True
    for row in rows:
        counts[row] = len(spans[row])
    values = pa.array(
        [cut_runs(text, spans[row]) for row, text in zip(rows, texts, strict=True)], pa.string()
    )
    column = table.column(C.TEXT).combine_chunks().cast(pa.string())
    new = pc.replace_with_mask(column, pa.array(mask), values)
    return table.set_column(table.schema.get_field_index(C.TEXT), C.TEXT, new), counts
