"""CCNet normalization as a table over code points, for the compiled scorer (`dataclean.lm.fast`).

`normalize_text` (lowercase, NFD, drop accents and controls, digits to 0, punctuation to ASCII) acts
on each character independently, with two exceptions: Python lowercases a capital sigma by its
context (final "ς" or "σ"), and NFD reorders runs of combining characters. So one table lookup per
character gives exactly `normalize_text`, except in texts holding a character marked `UNSAFE`
(the capital sigma, and every character whose normalized form keeps a combining character): the
compiled scorer sends those texts through `normalize_text` itself.

The table also turns every whitespace character into a plain space, since `normalize_lines`
collapses any run of whitespace inside a line into one space.

Layout: `index[code]` is `IDENTITY` (the character stays), `UNSAFE`, or a position `k` in `pool`,
where `pool[k]` is the length `n` of the replacement and `pool[k + 1 : k + 1 + n]` its code points
(`n` = 0 deletes the character).

Building the table normalizes every code point, about half a second, which every worker process
paid on its first batch. So the table ships in the package (`data/lm/charmap.npz`, 60 KB) with a
fingerprint of what it was built from (`normalize.py`'s source, the Unicode database version);
when the fingerprint differs it is built here instead. Rebuild the shipped file with
`python scripts/build_charmap.py` after changing the normalization.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from dataclean.lm import normalize
from dataclean.lm.normalize import kept_combining, normalize_text

IDENTITY = 0
UNSAFE = -1
NEWLINE = ord("\n")
SPACE = ord(" ")
_CAPITAL_SIGMA = 0x3A3


@dataclass(frozen=True)
class CharTable:
    """A per-code-point rewrite (module docstring) and its largest growth in code points per byte."""

    index: np.ndarray
    pool: np.ndarray
    expansion: int


def _every_character() -> tuple[np.ndarray, str]:
    """All code points but surrogates and "\n", and a string of them each followed by "\n"."""
    codes = np.arange(sys.maxunicode + 1, dtype=np.uint32)
    surrogate = (codes >= 0xD800) & (codes <= 0xDFFF)  # never in valid UTF-8, so never looked up
    codes = codes[(codes != NEWLINE) & ~surrogate]
    interleaved = np.empty(2 * len(codes), np.uint32)
    interleaved[0::2] = codes
    interleaved[1::2] = NEWLINE
    return codes, interleaved.tobytes().decode("utf-32-le")


def fingerprint() -> str:
    """What the table depends on: the normalization's source and Python's Unicode database."""
    source = Path(normalize.__file__).read_bytes()
    basis = f"{unicodedata.unidata_version}|{sys.maxunicode}|".encode() + source
    return hashlib.sha256(basis).hexdigest()


def shipped_path() -> Path:
    return Path(str(resources.files("dataclean") / "data" / "lm" / "charmap.npz"))


@functools.cache
def _shipped() -> dict[str, np.ndarray] | None:
    """The shipped arrays, or None when missing or built from another normalization."""
    path = shipped_path()
    try:
        current = fingerprint()
    except OSError:  # no normalize.py source to compare with (a source-less install): build it
        return None
    if not path.exists():
        return None
    with np.load(path) as saved:
        if str(saved["fingerprint"]) != current:
            return None
        return {name: saved[name] for name in ("index", "pool", "expansion", "whitespace")}


@functools.cache
def whitespace_codes() -> np.ndarray:
    """The code points `str.split()` splits at, but "\n"."""
    shipped = _shipped()
    return shipped["whitespace"] if shipped is not None else _build_whitespace_codes()


def _build_whitespace_codes() -> np.ndarray:
    _, every_char = _every_character()
    return np.array(sorted(ord(c) for c in set(re.findall(r"\s", every_char)) if c != "\n"), np.int32)


def _utf8_lengths(codes: np.ndarray) -> np.ndarray:
    return 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)


@functools.cache
def whitespace_table() -> CharTable:
    """Only whitespace to spaces: for text that `normalize_text` normalized already."""
    index = np.full(sys.maxunicode + 1, IDENTITY, np.int32)
    index[whitespace_codes()] = 1
    index[0xD800:0xE000] = UNSAFE
    return CharTable(index, np.array([0, 1, SPACE], np.int32), 1)


@functools.cache
def normalization_table() -> CharTable:
    """`normalize_text` followed by whitespace collapsing, as a table (module docstring)."""
    shipped = _shipped()
    if shipped is not None:
        return CharTable(shipped["index"], shipped["pool"], int(shipped["expansion"]))
    return build_normalization_table()


def build_normalization_table() -> CharTable:
    """Compute the table from `normalize_text` (about half a second)."""
    codes, every_char = _every_character()
    # Normalize every character in one call, each followed by "\n": NFD never reorders across a
    # "\n" (combining class 0) and "\n" itself maps to itself.
    normalized = np.frombuffer(normalize_text(every_char).encode("utf-32-le"), np.uint32).copy()
    ends = np.flatnonzero(normalized == NEWLINE)
    assert len(ends) == len(codes), "normalization created or removed a line break"
    starts = np.concatenate(([0], ends[:-1] + 1))
    normalized[np.isin(normalized, whitespace_codes())] = SPACE
    single = normalized[np.minimum(starts, len(normalized) - 1)]
    identity = (ends - starts == 1) & (single == codes)
    kept = np.concatenate(([0], np.cumsum(np.isin(normalized, list(kept_combining())))))
    unsafe = (kept[ends] > kept[starts]) | (codes == _CAPITAL_SIGMA)

    index = np.full(sys.maxunicode + 1, UNSAFE, np.int32)
    index[NEWLINE] = IDENTITY
    index[codes[identity & ~unsafe]] = IDENTITY
    replaced = ~identity & ~unsafe
    lengths = ends[replaced] - starts[replaced]
    positions = 1 + np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
    index[codes[replaced]] = positions
    pool = np.zeros(1 + int(np.sum(lengths + 1)), np.int32)  # 0 is never a position: IDENTITY
    pool[positions] = lengths
    # Each replacement's code points follow its length: gather them in one go.
    segment = np.repeat(np.arange(len(lengths)), lengths)
    within = np.arange(len(segment)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    pool[positions[segment] + 1 + within] = normalized[starts[replaced][segment] + within]
    expansion = np.max(lengths / _utf8_lengths(codes[replaced]), initial=1.0)
    return CharTable(index, pool, int(np.ceil(expansion)))


def save_shipped() -> Path:
    """Build the table and write it, with its fingerprint, where the package looks for it."""
    table = build_normalization_table()
    path = shipped_path()
    np.savez_compressed(
        path,
        index=table.index,
        pool=table.pool,
        expansion=np.int64(table.expansion),
        whitespace=_build_whitespace_codes(),
        fingerprint=np.str_(fingerprint()),
    )
    return path
