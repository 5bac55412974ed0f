"""Text normalization applied identically before language-model training and scoring (CCNet).

CCNet (Wenzek et al. 2020, facebookresearch/cc_net `text_normalizer.normalize`) lowercases, strips
accents, maps every digit to 0, maps unicode punctuation to ASCII and removes non-printing
characters, so that the reference model spends no capacity on spelling variants. We follow it and
also collapse runs of whitespace to one space (CCNet leaves that to SentencePiece; our SentencePiece
models are trained with whitespace handling off, see `dataclean.lm.tokenizer`).

A text is scored line by line: `normalize_lines` returns the non-empty normalized lines.
"""

from __future__ import annotations

import functools
import sys
import unicodedata

# CCNet's UNICODE_PUNCT table, minus its "１" -> '"' entry (a typo there: digits become 0 first).
UNICODE_PUNCT = {
    "，": ",",
    "。": ".",
    "、": ",",
    "„": '"',
    "”": '"',
    "“": '"',
    "«": '"',
    "»": '"',
    "」": '"',
    "「": '"',
    "《": '"',
    "》": '"',
    "´": "'",
    "∶": ":",
    "：": ":",
    "？": "?",
    "！": "!",
    "（": "(",
    "）": ")",
    "；": ";",
    "–": "-",
    "—": " - ",
    "．": ". ",
    "～": "~",
    "’": "'",
    "…": "...",
    "━": "-",
    "〈": "<",
    "〉": ">",
    "【": "[",
    "】": "]",
    "％": "%",
    "►": "-",
}

# Non-printing: C0 and C1 control characters. "\n" is kept here: it separates the scored lines.
_NON_PRINTING = [c for c in (*range(0, 32), *range(127, 160)) if c != ord("\n")]


@functools.cache
def _scan() -> tuple[dict[int, str | None], frozenset[int]]:
    """The `str.translate` table (see `_table`), and the combining characters it keeps."""
    table: dict[int, str | None] = {}
    kept_combining: set[int] = set()
    for code in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(code))
        if category == "Mn":
            table[code] = None  # accents left by NFD
        elif category == "Nd":
            table[code] = "0"
        elif category[0] == "M" and unicodedata.combining(chr(code)):
            kept_combining.add(code)
    for char, replacement in UNICODE_PUNCT.items():
        table[ord(char)] = replacement
    for code in _NON_PRINTING:
        table[code] = None
    # SentencePiece's whitespace symbol must not occur in its input (see dataclean.lm.tokenizer).
    table[ord("▁")] = " "
    return table, frozenset(kept_combining)


def _table() -> dict[int, str | None]:
    """One `str.translate` table: drop combining marks and controls, digits to 0, punctuation."""
    return _scan()[0]


def kept_combining() -> frozenset[int]:
    """Combining characters (non-zero canonical class) that normalization keeps (not Mn).

    NFD reorders runs of combining characters, so where one of these survives, normalizing a text
    is not the same as normalizing it character by character (see `dataclean.lm.charmap`).
    """
    return _scan()[1]


# ASCII text (most English) takes a bytes fast path: digits to 0, controls deleted.
_ASCII_MAP = bytes.maketrans(b"123456789", b"000000000")
_ASCII_DELETE = bytes(c for c in _NON_PRINTING if c < 128)


def normalize_text(text: str) -> str:
    """Lowercase, strip accents, digits to 0, map punctuation, drop controls; keep line breaks.

    Whitespace inside lines is not collapsed here; `normalize_lines` does that.
    """
    text = text.lower()
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_MAP, _ASCII_DELETE).decode("ascii")
    return unicodedata.normalize("NFD", text).translate(_table())


def normalize_lines(text: str) -> list[str]:
    """The normalized, whitespace-collapsed, non-empty lines of `text`: the units KenLM scores."""
    lines = []
    for line in normalize_text(text).split("\n"):
        collapsed = " ".join(line.split())
        if collapsed:
            lines.append(collapsed)
    return lines
