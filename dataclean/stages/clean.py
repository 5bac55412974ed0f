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
Degenerate repetition ("hahaha...", "的的的...", the reason `clean:repetition` before) is the
`quality` stage's long n-gram run rule now (`quality:long_ngram_run`; shorter runs are cut out).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.stage import Stage, with_counts, with_drops
from dataclean.text.escapes import strip_escape_sequences
from dataclean.text.mojibake import mojibake_pair_flags, repair_lines
from dataclean.text.noise import noise_reasons
from dataclean.text.removal import char_classes, removal_pass

# Any character that the removal steps may change, or that counts as garbage: the fast-path test.
_SUSPECT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00a0\u00ad\u1680\u2000-\u200f\u2028-\u202f"
    "\u205f-\u206f\u2500-\u25ff\u3000\ue000-\uf8ff\ufeff\ufffd\U000f0000-\U0010ffff]"
)
_GARBAGE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2500-\u25ff\ue000-\uf8ff\ufffd\U000f0000-\U0010ffff]"
)
# What counts as garbage, for the report's excerpts too (`dataclean.report.evidence`).
GARBAGE_CHARACTERS = _GARBAGE
_REMOVE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufffd]"
)
_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_LINE_SEPARATORS = re.compile("\r\n?|[\u2028\u2029]")
# ZWNJ/ZWJ next to ASCII or at an edge carry no meaning; between other characters they may.
_EDGE_JOINERS = re.compile("(?:(?<=[\x00-\x7f])|^)[\u200c\u200d]+|[\u200c\u200d]+(?=[\x00-\x7f]|$)")
# Characters that send a row down the Python path: what `repair_lines` looks for besides mojibake
# pairs and HTML entities (C1 characters, Â/Ã before a lost continuation byte), ZWNJ/ZWJ and the
# ESC that starts an escape sequence (`dataclean.text.escapes`).
_PYTHON_ONLY = re.compile("[\x1b\u00c2\u00c3\u200c\u200d\x80-\x9f]")

Normalization = Literal["none", "NFC", "NFKC"]
# What the stage counts in the run's stats (`stats.json`: stages[clean].counts).
ESCAPE_SEQUENCES = "escape_sequences"


def _clean(
    text: str,
    normalization: Normalization,
    fix_mojibake: bool,
    unescape_html: bool,
    may_have_pairs: bool = True,
) -> tuple[str, int, int, int]:
    """(cleaned text, characters removed or replaced, garbage characters before removal, escape
    sequences removed); `may_have_pairs=False` when `mojibake_pair_flags` found no mojibake pair
    in `text`. Escape sequences go first, whole, before their ESC would be removed alone."""
    suspect = _SUSPECT.search(text)
    sequences = escaped = 0
    if suspect is not None and "\x1b" in text:
        text, sequences, escaped = strip_escape_sequences(text)
        suspect = _SUSPECT.search(text)
    if fix_mojibake or unescape_html:
        # Without suspect characters there is no C1 character for the repair to look for.
        repaired = repair_lines(
            text, fix_mojibake, unescape_html, may_have_c1=suspect is not None, may_have_pairs=may_have_pairs
        )
        if repaired is not text:
            text, suspect = repaired, _SUSPECT.search(repaired)
    if suspect is None:
        if normalization != "none":
            text = unicodedata.normalize(normalization, text)
        return text, escaped, 0, sequences
    # Every character the steps below count, remove or replace is a suspect one, and no step
    # adds or removes another step's characters: collect the suspects in one scan, count the
    # garbage among them, and run only the steps whose characters are there.
    found = "".join(_SUSPECT.findall(text, suspect.start()))
    garbage = len(_GARBAGE.findall(found))
    lines = removed = spaces = joiners = 0
    if "\r" in found or "\u2028" in found or "\u2029" in found:
        text, lines = _LINE_SEPARATORS.subn("\n", text)
    if _REMOVE.search(found):
        text, removed = _REMOVE.subn("", text)
    if _SPACES.search(found):
        text, spaces = _SPACES.subn(" ", text)
    if "\u200c" in found or "\u200d" in found:
        text, joiners = _EDGE_JOINERS.subn("", text)
    if normalization != "none":
        text = unicodedata.normalize(normalization, text)
    return text, escaped + lines + removed + spaces + joiners, garbage, sequences


def clean_text(
    text: str, normalization: Normalization = "none", fix_mojibake: bool = True, unescape_html: bool = True
) -> str:
    """Return `text` cleaned as the module docstring describes."""
    return _clean(text, normalization, fix_mojibake, unescape_html)[0]


@dataclass
class CleanText(Stage):
    """Clean every row's text and drop rows left empty, mostly garbage or not language.

    `max_garbage_fraction`: drop when garbage characters + undecodable bytes exceed this share
    of the row's characters.
    """

    name: ClassVar[str] = "clean"
    provides: ClassVar[tuple[str, ...]] = (C.REMOVED_CHARS,)
    compile_seconds: ClassVar[float] = 1.4  # benchmarks/bench_compile.py

    normalization: Normalization = "none"
    fix_mojibake: bool = True
    unescape_html: bool = True
    max_garbage_fraction: float = 0.3
    max_random_score: float = 1.0
    max_encoded_fraction: float = 0.5
    min_judged_chars: int = 40
    noise_sample_chars: int = 2000

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
            new, removed[row], garbage[row], sequences[row] = _clean(
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
        table = _put(table, C.REMOVED_CHARS, pa.array(removed, pa.int64()))
        return with_counts(with_drops(table, reasons), {ESCAPE_SEQUENCES: sequences})

    def compile_kernels(self) -> None:
        """The mojibake pair scan's kernel and the removal pass's, when the stage runs them."""
        if self.normalization == "none":
            removal_pass(pa.array(["a\u00a0b\r\n cafÃ© ab"], pa.string()), _classes(), self.fix_mojibake)
        elif self.fix_mojibake:
            mojibake_pair_flags(pa.array(["cafÃ© ab"], pa.string()))
        if self.max_random_score or self.max_encoded_fraction < 1.0:
            noise_reasons(pa.array(["Text 42 été 文"], pa.string()), 1.0, 0.5, 1)


def _string_column(column: pa.ChunkedArray) -> pa.Array:
    """The text column as one `string` array."""
    original = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return original if original.type == pa.string() else original.cast(pa.string())


def _classes() -> np.ndarray:
    """What the removal steps do to each code point (`dataclean.text.removal.char_classes`)."""
    return char_classes(_GARBAGE, _REMOVE, _SPACES, _LINE_SEPARATORS, _PYTHON_ONLY)


def _put(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, values) if index >= 0 else table.append_column(name, values)
