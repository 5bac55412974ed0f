"""Stage `clean`: repair mojibake, strip control characters and undecodable bytes, map exotic spaces.

`clean_text` first repairs, line by line, mojibake (UTF-8 read in any single-byte encoding ftfy
repairs: Latin-1/Windows-1252, Windows-1250/1251/1253/1254/1257, ISO-8859-2, MacRoman, cp437; in
several layers; and C1 characters that are Windows-1252 punctuation read as Latin-1, such as
U+0093 for a curly quote) and HTML entities (`&amp;`, `&frac14;`, also over mojibake; only before
the first `<`, after which the text is HTML), with ftfy's own fixers on the lines its own detector
flags (see `dataclean.text.mojibake`). Repair comes before removal, so a soft hyphen or C1
character that is part of the mojibake is still there for ftfy to decode. Then it removes ANSI/VT
terminal escape sequences whole (`ESC[0m`, OSC titles and links: `dataclean.text.escapes`; counted
as `escape_sequences` in the stats), C0/C1 control characters (keeping tab and newline; CR and
CRLF become LF), U+FFFD left by undecodable bytes, zero-width and bidi control characters, soft
hyphens and byte order marks; and maps exotic spaces (NBSP, U+1680, U+2000-U+200A, U+202F, U+205F,
U+3000) to a plain space.
ZWJ/ZWNJ are kept between non-ASCII characters, where Persian, Indic scripts and emoji sequences
need them. Unicode normalization is off by default (datatrove's choice: NFKC rewrites CJK
full-width punctuation); NFC or NFKC on request.

Speed: the stage does the removal steps in one compiled pass over the batch's UTF-8 bytes
(`dataclean.text.removal`) for every row with nothing to repair, most rows; only the others become
Python strings, and there most documents hold none of the characters above: a few regex searches
send them down a fast path that returns them untouched. ftfy runs only on the lines its detector
flags, not on every document as datatrove's and NeMo Curator's formatters do. `clean_text` (one
string) is the Python path alone; the stage gives the same text row by row.

The Arrow stage `CleanText` adds `clean_removed_chars` (characters removed or replaced; the
`language` stage after it adds `lang`), and drops rows that are (a dropped row keeps its text as it
came in, so that `excluded/` and the report show the control characters, bytes or escape sequences
that made it go; `clean_text` gives what cleaning would have kept):
- `empty`: nothing but whitespace is left;
- `garbage`: control, replacement, private-use and box/block-symbol characters plus the
  undecodable bytes the reader removed make up more than `max_garbage_fraction` of the row;
- `random_bytes`: the cleaned text's characters follow each other as in random bytes read as
  text (a binary file, a wrong encoding), not as in any language: the mean log-likelihood ratio of
  a character class model, random bytes against real text, is over `max_random_score` nats per
  character (0: off);
- `encoded_data`: base64 or hex runs are over `max_encoded_fraction` of the text (1: off);
  both only for rows of at least `min_judged_chars` characters, on their first
  `noise_sample_chars` (2,000; see `dataclean.text.noise`).
Last, MediaWiki language-conversion markup left in text taken from Chinese Wikipedia is resolved
(`resolve_wiki_markup`, on by default; `dataclean.text.wiki_markup`): `-{zh-cn:克什米尔;
zh-tw:喀什米尔}-` becomes its `zh-cn` (else `zh-hans`, else first) text, `-{Gtk#}-` its text,
`-{T|...}-` title and `-{H|...}-` rule blocks go; counted as `wiki_conversion_markup` (blocks
resolved) in the stats. Only rows holding `-{` are touched.
Degenerate repetition ("hahaha...", "的的的...", the reason `clean:repetition` before) is the
`quality` stage's long n-gram run rule now (`quality:long_ngram_run`; shorter runs are cut out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.stage import Stage, with_column, with_counts, with_drops
from dataclean.text.cleaning import (
    GARBAGE,
    GARBAGE_CHARACTERS,
    LINE_SEPARATORS,
    PYTHON_ONLY,
    REMOVE,
    SPACES,
    Normalization,
    clean_parts,
    clean_text,
)
from dataclean.text.mojibake import mojibake_pair_flags
from dataclean.text.noise import noise_reasons
from dataclean.text.removal import char_classes, removal_pass
from dataclean.text.wiki_markup import resolve_conversion_markup

# The pure function of this stage, and what counts as garbage, where they have always been imported
# from (they live in dataclean.text.cleaning, which the report uses too).
__all__ = [
    "ESCAPE_SEQUENCES",
    "GARBAGE_CHARACTERS",
    "WIKI_MARKUP",
    "CleanText",
    "Normalization",
    "clean_text",
]
# What the stage counts in the run's stats (`stats.json`: stages[clean].counts).
ESCAPE_SEQUENCES = "escape_sequences"
WIKI_MARKUP = "wiki_conversion_markup"


@dataclass
class CleanText(Stage):
    """Clean every row's text and drop rows left empty, mostly garbage or not language.

    `max_garbage_fraction`: drop when garbage characters + undecodable bytes exceed this share
    of the row's characters.
    """

    name: ClassVar[str] = "clean"
    provides: ClassVar[tuple[str, ...]] = (C.REMOVED_CHARS,)
    compile_seconds: ClassVar[float] = 2.3  # benchmarks/bench_compile.py (2026-12-02, load 3)

    normalization: Normalization = "none"
    fix_mojibake: bool = True
    unescape_html: bool = True
    max_garbage_fraction: float = 0.3
    max_random_score: float = 1.0
    max_encoded_fraction: float = 0.5
    min_judged_chars: int = 40
    noise_sample_chars: int = 2000
    resolve_wiki_markup: bool = True

    def __post_init__(self) -> None:
        if self.normalization not in ("none", "NFC", "NFKC"):
            raise ConfigError(f"clean.normalization must be none, NFC or NFKC, got {self.normalization!r}")
        if not 0.0 < self.max_garbage_fraction <= 1.0:
            raise ConfigError(
                f"clean.max_garbage_fraction must be in (0, 1], got {self.max_garbage_fraction}"
            )

        if self.max_random_score < 0:
            raise ConfigError(f"clean.max_random_score must be >= 0 (0: off), got {self.max_random_score}")
        if not 0.0 < self.max_encoded_fraction <= 1.0:
            raise ConfigError(
                f"clean.max_encoded_fraction must be in (0, 1] (1: off), got {self.max_encoded_fraction}"
            )
        if self.min_judged_chars < 1:
            raise ConfigError(f"clean.min_judged_chars must be >= 1, got {self.min_judged_chars}")
        if self.noise_sample_chars < self.min_judged_chars:
            raise ConfigError(
                f"clean.noise_sample_chars must be >= clean.min_judged_chars ({self.min_judged_chars}), "
                f"got {self.noise_sample_chars}"
            )

    def __call__(self, table: pa.Table) -> pa.Table:
        original = _string_column(table.column(C.TEXT))
        n = len(original)
        bad = table.column(C.BAD_BYTES).to_pylist() if C.BAD_BYTES in table.column_names else [0] * n
        # One compiled pass over the batch's bytes does the removal steps on the rows that need no
        # repair and rules out mojibake pairs in most others: Python sees only those others.
        if self.normalization == "none":
            text_array, counts, garbages, lengths, blanks, python, pairs = removal_pass(
                original, _classes(), self.fix_mojibake
            )
            removed, garbage, chars = counts.tolist(), garbages.tolist(), lengths.tolist()
            blank = blanks.tolist()
        else:
            text_array, python = original, np.ones(n, bool)
            pairs = mojibake_pair_flags(original) if self.fix_mojibake else np.zeros(n, bool)
            removed, garbage, chars, blank = [0] * n, [0] * n, [0] * n, [False] * n
        rows = np.flatnonzero(python)
        cleaned: list[str] = []
        changed: list[bool] = []
        sequences = np.zeros(n, np.int64)
        for row, text in zip(rows.tolist(), original.take(rows).to_pylist(), strict=True):
            new, removed[row], garbage[row], sequences[row] = clean_parts(
                text, self.normalization, self.fix_mojibake, self.unescape_html, bool(pairs[row])
            )
            chars[row], blank[row] = len(text), not new or new.isspace()  # no stripped copy
            cleaned.append(new)
            changed.append(new is not text and new != text)
        if any(changed):
            mask = np.zeros(n, bool)
            mask[rows[np.array(changed, bool)]] = True
            values = pa.array(
                [new for new, change in zip(cleaned, changed, strict=True) if change], pa.string()
            )
            text_array = pc.replace_with_mask(text_array, pa.array(mask, pa.bool_()), values)
        blocks = np.zeros(n, np.int64)
        if self.resolve_wiki_markup:
            text_array, blocks = _resolve_markup(text_array)
        limit = self.max_garbage_fraction
        reasons: list[str | None] = [
            "empty" if empty else "garbage" if found + lost > limit * (size + lost) else None
            for empty, found, lost, size in zip(blank, garbage, bad, chars, strict=True)
        ]
        if self.max_random_score or self.max_encoded_fraction < 1.0:
            noise = noise_reasons(
                text_array,
                self.max_random_score,
                self.max_encoded_fraction,
                self.min_judged_chars,
                self.noise_sample_chars,
            )
            reasons = [r or found for r, found in zip(reasons, noise, strict=True)]
        dropped = pa.array([reason is not None for reason in reasons], pa.bool_())
        if any(reasons):  # a dropped row goes to excluded/ as it came in: the evidence is there
            text_array = pc.if_else(dropped, original, text_array)
        table = table.set_column(table.schema.get_field_index(C.TEXT), C.TEXT, text_array)
        table = with_column(table, C.REMOVED_CHARS, pa.array(removed, pa.int64()))
        return with_counts(with_drops(table, reasons), {ESCAPE_SEQUENCES: sequences, WIKI_MARKUP: blocks})

    def compile_kernels(self) -> None:
        """The mojibake pair scan's kernel and the removal pass's, when the stage runs them."""
        if self.normalization == "none":
            removal_pass(pa.array(["a\u00a0b\r\n cafÃ© ab"], pa.string()), _classes(), self.fix_mojibake)
        elif self.fix_mojibake:
            mojibake_pair_flags(pa.array(["cafÃ© ab"], pa.string()))
        if self.max_random_score or self.max_encoded_fraction < 1.0:
            noise_reasons(pa.array(["Text 42 été 文"], pa.string()), 1.0, 0.5, 1)


def _resolve_markup(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """`texts` with MediaWiki conversion markup resolved in the rows holding `-{`, and the blocks
    resolved per row."""
    blocks = np.zeros(len(texts), np.int64)
    holding = pc.fill_null(pc.match_substring(texts, "-{"), False)
    rows = np.flatnonzero(holding.to_numpy(zero_copy_only=False))
    if not len(rows):
        return texts, blocks
    resolved = []
    for row, text in zip(rows.tolist(), texts.take(pa.array(rows)).to_pylist(), strict=True):
        new, blocks[row] = resolve_conversion_markup(text)
        resolved.append(new)
    mask = np.zeros(len(texts), bool)
    mask[rows] = True
    return pc.replace_with_mask(texts, pa.array(mask), pa.array(resolved, pa.string())), blocks


def _string_column(column: pa.ChunkedArray) -> pa.Array:
    """The text column as one `string` array."""
    original = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return original if original.type == pa.string() else original.cast(pa.string())


def _classes() -> np.ndarray:
    """What the removal steps do to each code point (`dataclean.text.removal.char_classes`)."""
    return char_classes(GARBAGE, REMOVE, SPACES, LINE_SEPARATORS, PYTHON_ONLY)
