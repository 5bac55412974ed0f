"""Stage `clean`: strip control characters and undecodable bytes, map exotic spaces, repair mojibake.

`clean_text` removes C0/C1 control characters (keeping tab and newline; CR and CRLF become LF;
a C1 character that is Windows-1252 punctuation read as Latin-1, such as U+0093 for a curly
quote, is first turned back into that punctuation by ftfy),
U+FFFD left by undecodable bytes, zero-width and bidi control characters, soft hyphens and byte
order marks; maps exotic spaces (NBSP, U+1680, U+2000-U+200A, U+202F, U+205F, U+3000) to a plain
space; and repairs mojibake (UTF-8 read as Latin-1/Windows-1252) with ftfy's `fix_encoding`.
ZWJ/ZWNJ are kept between non-ASCII characters, where Persian, Indic scripts and emoji sequences
need them. Unicode normalization is off by default (datatrove's choice: NFKC rewrites CJK
full-width punctuation); NFC or NFKC on request.

Speed: most documents hold none of the characters above, and one regex search sends them down a
fast path that returns them untouched; ftfy runs only on documents with a mojibake-shaped pair of
characters, not on every document as datatrove's and NeMo Curator's formatters do.

The Arrow stage `CleanText` adds `clean_removed_chars` (characters removed or replaced; the
`language` stage after it adds `lang`), and drops rows that are:
- `empty`: nothing but whitespace is left;
- `garbage`: control, replacement, private-use and box/block-symbol characters plus the
  undecodable bytes the reader removed make up more than `max_garbage_fraction` of the row;
- `repetition`: a unit of 1-`max_repeat_period` characters repeats over `max_repeat_chars` or more
  characters (see `dataclean.text.repetition`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import ClassVar, Literal

import ftfy
import pyarrow as pa

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.stage import Stage, with_drops
from dataclean.text.repetition import repetition_flags

# Any character that clean_text may change, or that counts as garbage: the fast-path test.
_SUSPECT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00a0\u00ad\u00c2-\u00f4\u1680\u2000-\u200f\u2028-\u202f"
    "\u205f-\u206f\u2500-\u25ff\u3000\ue000-\uf8ff\ufeff\ufffd\U000f0000-\U0010ffff]"
)
# A UTF-8 lead byte read as Latin-1/cp1252, then a continuation byte read the same way; or a C1
# control character, which is how Windows-1252 punctuation (curly quotes, dashes) read as Latin-1
# shows up.
_MOJIBAKE = re.compile(
    "[\u0080-\u009f]|[\u00c2-\u00f4][\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc"
    "\u2013\u2014\u2018-\u201a\u201c-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122]"
)
_GARBAGE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2500-\u25ff\ue000-\uf8ff\ufffd\U000f0000-\U0010ffff]"
)
_REMOVE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufffd]"
)
_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_LINE_SEPARATORS = re.compile("\r\n?|[\u2028\u2029]")
# ZWNJ/ZWJ next to ASCII or at an edge carry no meaning; between other characters they may.
_EDGE_JOINERS = re.compile("(?:(?<=[\x00-\x7f])|^)[\u200c\u200d]+|[\u200c\u200d]+(?=[\x00-\x7f]|$)")

Normalization = Literal["none", "NFC", "NFKC"]


def _fix_mojibake(text: str) -> str:
    """ftfy's encoding fixer on the lines that show mojibake, as ftfy.fix_text segments by line."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if _MOJIBAKE.search(line):
            lines[index] = ftfy.fix_encoding(line)
    return "\n".join(lines)


def _clean(text: str, normalization: Normalization, fix_mojibake: bool) -> tuple[str, int, int]:
    """(cleaned text, characters removed or replaced, garbage characters before removal)."""
    if _SUSPECT.search(text) is None:
        if normalization != "none":
            text = unicodedata.normalize(normalization, text)
        return text, 0, 0
    if fix_mojibake and _MOJIBAKE.search(text):
        text = _fix_mojibake(text)
    garbage = len(_GARBAGE.findall(text))
    lines = joiners = 0
    if "\r" in text or "\u2028" in text or "\u2029" in text:
        text, lines = _LINE_SEPARATORS.subn("\n", text)
    text, removed = _REMOVE.subn("", text)
    text, spaces = _SPACES.subn(" ", text)
    if "\u200c" in text or "\u200d" in text:
        text, joiners = _EDGE_JOINERS.subn("", text)
    if normalization != "none":
        text = unicodedata.normalize(normalization, text)
    return text, lines + removed + spaces + joiners, garbage


def clean_text(text: str, normalization: Normalization = "none", fix_mojibake: bool = True) -> str:
    """Return `text` cleaned as the module docstring describes."""
    return _clean(text, normalization, fix_mojibake)[0]


@dataclass
class CleanText(Stage):
    """Clean every row's text and drop rows left empty, mostly garbage or degenerate repetitions.

    `max_garbage_fraction`: drop when garbage characters + undecodable bytes exceed this share
    of the row's characters. `max_repeat_chars`: drop when a repeated unit of at most
    `max_repeat_period` characters spans this many characters (0 turns the check off).
    """

    name: ClassVar[str] = "clean"

    normalization: Normalization = "none"
    fix_mojibake: bool = True
    max_garbage_fraction: float = 0.3
    max_repeat_chars: int = 100
    max_repeat_period: int = 10

    def __post_init__(self) -> None:
        if self.normalization not in ("none", "NFC", "NFKC"):
            raise ConfigError(f"clean.normalization must be none, NFC or NFKC, got {self.normalization!r}")
        if not 0.0 < self.max_garbage_fraction <= 1.0:
            raise ConfigError(
                f"clean.max_garbage_fraction must be in (0, 1], got {self.max_garbage_fraction}"
            )
        if self.max_repeat_chars < 0:
            raise ConfigError(f"clean.max_repeat_chars must be >= 0, got {self.max_repeat_chars}")
        if self.max_repeat_period < 1 or (
            self.max_repeat_chars and self.max_repeat_period >= self.max_repeat_chars
        ):
            raise ConfigError(
                "clean.max_repeat_period must be at least 1 and below clean.max_repeat_chars, "
                f"got {self.max_repeat_period}"
            )

    def __call__(self, table: pa.Table) -> pa.Table:
        texts = table.column(C.TEXT).to_pylist()
        bad = table.column(C.BAD_BYTES).to_pylist() if C.BAD_BYTES in table.column_names else [0] * len(texts)
        cleaned: list[str] = []
        removed: list[int] = []
        reasons: list[str | None] = []
        for text, bad_bytes in zip(texts, bad, strict=True):
            new, count, garbage = _clean(text, self.normalization, self.fix_mojibake)
            cleaned.append(new)
            removed.append(count)
            if not new.strip():
                reasons.append("empty")
            elif garbage + bad_bytes > self.max_garbage_fraction * (len(text) + bad_bytes):
                reasons.append("garbage")
            else:
                reasons.append(None)
        if self.max_repeat_chars:
            flags = repetition_flags(cleaned, self.max_repeat_period, self.max_repeat_chars)
            reasons = [r if r or not f else "repetition" for r, f in zip(reasons, flags, strict=True)]
        text_array = pa.array(cleaned, pa.string())
        table = table.set_column(table.schema.get_field_index(C.TEXT), C.TEXT, text_array)
        table = _put(table, C.REMOVED_CHARS, pa.array(removed, pa.int64()))
        return with_drops(table, reasons)

    def compile_kernels(self) -> None:
        """The repetition scan's kernel, when the stage runs it."""
        if self.max_repeat_chars:
            repetition_flags(["ab" * 100], self.max_repeat_period, self.max_repeat_chars)


def _put(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, values) if index >= 0 else table.append_column(name, values)
