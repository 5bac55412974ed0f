"""Text normalization and shingling for dedup, over whole Arrow string arrays in one compiled pass.

Normalization (`Normalized`, `normalize_text`) decides what "the same text" means for both exact
and near dedup:
whitespace runs always become one space (trimmed at both ends), and each fold in `fold` is applied
per code point (the fields are documented in `FOLDS`). Format characters (zero-width space, soft
hyphen, BOM: Unicode category Cf) are removed. A text that normalizes to "" has no shingles and
is never a duplicate of anything (the clean stage drops empty rows).

Shingles (`shingles`) are word n-grams for space-delimited text: n consecutive words joined by one
space. For Chinese, Japanese, Thai and other unsegmented scripts they are character n-grams of the
normalized text with spaces removed. A text with fewer than n tokens has one shingle: its whole
normalized text (spaces removed in character mode), so such texts only match texts with the same
normalized form, and short texts never merge into one big cluster. The batch kernels hash each
token once (`token_hashes`, FNV-1a) and combine n token hashes into a shingle hash
(`shingle_hashes`); `ShingleHash` is the same function of a shingle's bytes, for datasketch.

Which mode a row gets: its `lang` value when it names a language (`UNSEGMENTED_LANGS` -> characters;
null, empty and `und` do not), else
its script: characters when at least 30% of its letters are Han, kana, Thai, Lao, Khmer or Myanmar.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.dedup.hashing import string_buffers
from dataclean.jit import helper

FOLDS = {
    "case": "lowercase (Unicode simple case mapping)",
    "width": "NFKC compatibility forms: full-width ASCII, half-width kana, ligature-free variants",
    "punctuation": "punctuation and symbols (Unicode P* and S*) become spaces",
    "digits": "every decimal digit becomes 0",
}
DEFAULT_FOLD = ("case", "width", "punctuation", "digits")

# Languages written without spaces between words: shingled by characters.
UNSEGMENTED_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "yue", "wuu", "lzh"})
UNSEGMENTED_SHARE = 0.3

WORDS, CHARACTERS = 0, 1

# Code point classes in the normalization table: what the (mapped) code point does.
_LETTER, _UNSEGMENTED, _OTHER, _SEPARATOR, _DROP = 0, 1, 2, 3, 4
_UNSEGMENTED_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR")


@lru_cache(maxsize=8)
def _tables(fold: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per BMP code point: the code point it becomes, and the class of what it becomes."""
    mapping = np.arange(0x10000, dtype=np.uint32)
    classes = np.full(0x10000, _OTHER, dtype=np.uint8)
    for cp in range(0x10000):
        char = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            classes[cp] = _DROP
            continue
        mapped = char
        if "width" in fold:
            mapped = unicodedata.normalize("NFKC", mapped)
        if "case" in fold:
            mapped = mapped.lower()
        if len(mapped) != 1:  # expansions (ligatures, fractions) keep the original code point
            mapped = char.lower() if "case" in fold and len(char.lower()) == 1 else char
        category = unicodedata.category(mapped)
        if mapped.isspace() or category in ("Zs", "Zl", "Zp", "Cc"):
            classes[cp] = _SEPARATOR
        elif category == "Cf":
            classes[cp] = _DROP
        elif category[0] in "PS" and "punctuation" in fold:
            classes[cp] = _SEPARATOR
        elif category == "Nd" and "digits" in fold:
            mapped = "0"
        elif category[0] == "L":
            name = unicodedata.name(mapped, "")
            classes[cp] = _UNSEGMENTED if name.startswith(_UNSEGMENTED_SCRIPTS) else _LETTER
        mapping[cp] = ord(mapped)
    return mapping, classes


@nb.njit(cache=True, nogil=True)
def _normalize_kernel(
    data: np.ndarray,
    offsets: np.ndarray,
    mapping: np.ndarray,
    classes: np.ndarray,
    fold_punctuation: bool,
    out: np.ndarray,
    out_offsets: np.ndarray,
    letters: np.ndarray,
    unsegmented: np.ndarray,
) -> int:
    """Normalizes every text into `out` (`Normalized`, which allocates the arrays: `dataclean.jit`);
    returns the bytes written."""
    rows = len(offsets) - 1
    o = 0
    for row in range(rows):
        i = offsets[row]
        end = offsets[row + 1]
        row_start = o
        pending = 0  # 1 when a separator was seen after output: emit one space before the next
        row_letters = 0
        row_unsegmented = 0
        while i < end:
            b0 = np.int64(data[i])
            if b0 < 0x80:
                # ASCII, branch-free: word boundaries are unpredictable and branches on them cost.
                cls = classes[b0]
                emit = np.int64(cls <= _OTHER)
                out[o] = 0x20
                o += pending & emit
                out[o] = mapping[b0]
                o += emit
                row_letters += cls == _LETTER
                pending = (pending | ((cls == _SEPARATOR) & (o > row_start))) & (1 - emit)
                i += 1
                continue
            if b0 >= 0xF0 and i + 3 < end:
                cp = ((b0 & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
                cp |= ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)
                i += 4
            elif b0 >= 0xE0 and i + 2 < end:
                cp = ((b0 & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6)
                cp |= np.int64(data[i + 2]) & 0x3F
                i += 3
            elif b0 >= 0xC0 and i + 1 < end:
                cp = ((b0 & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F)
                i += 2
            else:  # a stray continuation byte or a truncated sequence: drop it
                i += 1
                continue
            if cp < 0x10000:
                cls = classes[cp]
                cp = np.int64(mapping[cp])
            elif 0x1F000 <= cp <= 0x1FAFF:  # emoji and pictographs
                cls = _SEPARATOR if fold_punctuation else _OTHER
            elif 0x20000 <= cp <= 0x3FFFF:  # CJK extension ideographs
                cls = _UNSEGMENTED
            else:
                cls = _LETTER
            if cls == _DROP:
                continue
            if cls == _SEPARATOR:
                pending = np.int64(o > row_start)
                continue
            row_letters += cls <= _UNSEGMENTED
            row_unsegmented += cls == _UNSEGMENTED
            if pending:
                out[o] = 0x20
                o += 1
                pending = 0
            if cp < 0x80:
                out[o] = cp
                o += 1
            elif cp < 0x800:
                out[o] = 0xC0 | (cp >> 6)
                out[o + 1] = 0x80 | (cp & 0x3F)
                o += 2
            elif cp < 0x10000:
                out[o] = 0xE0 | (cp >> 12)
                out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
                out[o + 2] = 0x80 | (cp & 0x3F)
                o += 3
            else:
                out[o] = 0xF0 | (cp >> 18)
                out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
                out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
                out[o + 3] = 0x80 | (cp & 0x3F)
                o += 4
        out_offsets[row + 1] = o
        letters[row] = row_letters
        unsegmented[row] = row_unsegmented
    return o


def _as_string_array(texts: pa.Array | pa.ChunkedArray | Sequence[str | None]) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), type=pa.string())
    if pa.types.is_large_string(texts.type) or pa.types.is_string(texts.type):
        return texts
    raise TypeError(f"text column must be strings, got {texts.type}")


class Normalized:
    """Normalized texts of one batch: a UTF-8 buffer with row offsets, and script counts per row."""

    def __init__(
        self,
        texts: pa.Array | pa.ChunkedArray | Sequence[str | None],
        fold: Sequence[str] = DEFAULT_FOLD,
    ) -> None:
        array = _as_string_array(texts)
        data, offsets = string_buffers(array)
        mapping, classes = _tables(tuple(sorted(fold)))
        rows, total = len(offsets) - 1, int(offsets[-1] - offsets[0])
        # A mapped code point is at most 1.5x as long in UTF-8 (2 -> 3 bytes), plus two spare
        # bytes for the kernel's branch-free stores.
        out = np.empty(total + total // 2 + 8, dtype=np.uint8)
        self.offsets = np.zeros(rows + 1, dtype=np.int64)
        self.letters = np.zeros(rows, dtype=np.int64)
        self.unsegmented = np.zeros(rows, dtype=np.int64)
        used = _normalize_kernel(
            data,
            offsets,
            mapping,
            classes,
            "punctuation" in fold,
            out,
            self.offsets,
            self.letters,
            self.unsegmented,
        )
        self.data = out[:used]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def text(self, row: int) -> str:
        """Normalized text of one row (for tests and messages)."""
        return bytes(self.data[self.offsets[row] : self.offsets[row + 1]]).decode("utf-8")

    def modes(self, langs: pa.Array | pa.ChunkedArray | None = None) -> np.ndarray:
        """WORDS or CHARACTERS per row: by `langs` where it names a language, else by script share."""
        by_script = self.unsegmented >= UNSEGMENTED_SHARE * np.maximum(self.letters, 1)
        modes = np.where(by_script & (self.unsegmented > 0), CHARACTERS, WORDS).astype(np.uint8)
        if langs is None:
            return modes
        base = pc.utf8_lower(pc.cast(langs, pa.string()))
        primary = pc.list_element(pc.split_pattern_regex(base, r"[-_]"), 0)
        is_unsegmented = pc.is_in(primary, value_set=pa.array(sorted(UNSEGMENTED_LANGS)))
        # `und` (no letters) and empty labels say nothing about the script: use the script rule.
        unknown = pc.is_in(primary, value_set=pa.array(["", "und"]))
        known = pc.and_(pc.is_valid(primary), pc.invert(unknown)).to_numpy(zero_copy_only=False)
        by_lang = np.where(is_unsegmented.to_numpy(zero_copy_only=False), CHARACTERS, WORDS)
        return np.where(known, by_lang, modes).astype(np.uint8)


def unsegmented_code_points(fold: Sequence[str] = DEFAULT_FOLD) -> np.ndarray:
    """Per BMP code point of normalized text: whether it is a letter of an unsegmented script
    (Han, kana, Thai...), which tokenizers of normalized text take one character at a time."""
    return _tables(tuple(sorted(fold)))[1] == _UNSEGMENTED


def normalize_text(text: str, fold: Sequence[str] = DEFAULT_FOLD) -> str:
    """The normalized form of one text (the batch kernel on a batch of one)."""
    return Normalized([text], fold).text(0)


_GOLDEN = np.uint32(0x9E3779B1)


@nb.njit(inline="always")
def _rotl32(x: np.uint32, r: int) -> np.uint32:
    return np.uint32((x << np.uint32(r)) | (x >> np.uint32(32 - r)))


@nb.njit(inline="always")
def _avalanche32(h: np.uint32) -> np.uint32:
    h = np.uint32(h ^ (h >> np.uint32(15)))
    h = np.uint32(h * np.uint32(2246822519))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(h * np.uint32(3266489917))
    return np.uint32(h ^ (h >> np.uint32(16)))


_FNV_OFFSET = np.uint32(2166136261)
_FNV_PRIME = np.uint32(16777619)


def _token_hashes(data: np.ndarray, start: int, end: int, mode: int, out: np.ndarray) -> int:
    """FNV-1a (32-bit) of each token of the normalized text `data[start:end]`; returns the count.

    Tokens are space-separated words (WORDS) or non-space code points (CHARACTERS). The loops
    are branch-free (a store per byte, the count advanced by a comparison): word boundaries are
    unpredictable, and branching on them cost three times as much.
    """
    h = _FNV_OFFSET
    count = 0
    if mode == CHARACTERS:
        started = 0
        for i in range(start, end):
            byte = data[i]
            lead = (byte & 0xC0) != 0x80
            out[count] = h
            count += lead & started
            if lead:
                started = byte != 0x20
                h = np.uint32(np.uint32(_FNV_OFFSET ^ byte) * _FNV_PRIME)
            else:
                h = np.uint32(np.uint32(h ^ byte) * _FNV_PRIME)
        out[count] = h
        return count + started
    # Normalized text has single spaces and none at either end: every space ends a word.
    for i in range(start, end):
        byte = data[i]
        space = byte == 0x20
        out[count] = h
        count += space
        h = _FNV_OFFSET if space else np.uint32(np.uint32(h ^ byte) * _FNV_PRIME)
    if end > start:
        out[count] = h
        count += 1
    return count


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32-bit: the token hash, in Python (the reference for `token_hashes`)."""
    h = 2166136261
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


@nb.njit(inline="always")
def combine_tokens(hashes: np.ndarray, start: int, count: int) -> np.uint32:
    """The 32-bit hash of the shingle made of `count` tokens from `hashes[start]` on."""
    acc = np.uint32(count)
    for i in range(start, start + count):
        acc = np.uint32(np.uint32(_rotl32(acc, 5) ^ hashes[i]) * _GOLDEN)
    return _avalanche32(acc)


def _shingle_hashes(tokens: np.ndarray, count: int, ngram_size: int, out: np.ndarray) -> int:
    """Hashes of the shingles over `count` token hashes into `out`; returns how many.

    n-grams of `ngram_size` tokens; fewer tokens than that give one shingle of all of them.
    """
    if count == 0:
        return 0
    if count < ngram_size:
        out[0] = combine_tokens(tokens, 0, count)
        return 1
    shingles = count - ngram_size + 1
    for k in range(shingles):
        out[k] = combine_tokens(tokens, k, ngram_size)
    return shingles


# Each compiled twice (`dataclean.jit`): for Python callers, and for the signature kernel.
token_hashes = nb.njit(cache=True, nogil=True)(_token_hashes)
token_hashes_helper = helper(_token_hashes)
shingle_hashes = nb.njit(cache=True, nogil=True)(_shingle_hashes)
shingle_hashes_helper = helper(_shingle_hashes)


def tokens(normalized: str, mode: int) -> list[str]:
    """Tokens of a normalized text: words, or characters without spaces."""
    if mode == CHARACTERS:
        return [char for char in normalized if char != " "]
    return normalized.split()


def shingles(
    text: str, ngram_size: int, mode: int | None = None, fold: Sequence[str] = DEFAULT_FOLD
) -> list[bytes]:
    """The shingles of one text as UTF-8 bytes in text order (repeats included): the reference.

    Word shingles are n words joined by one space, character shingles n characters. `mode`
    defaults to the script rule (no language column). This is what the tests hand to datasketch,
    with `ShingleHash(mode)` as its hashfunc.
    """
    normalized = Normalized([text], fold)
    row_mode = int(normalized.modes()[0]) if mode is None else mode
    parts = tokens(normalized.text(0), row_mode)
    if not parts:
        return []
    glue = "" if row_mode == CHARACTERS else " "
    size = min(ngram_size, len(parts))
    return [glue.join(parts[k : k + size]).encode() for k in range(len(parts) - size + 1)]


class ShingleHash:
    """The shingle hash as a Python function of a shingle's bytes: datasketch's `hashfunc`.

    A shingle's hash combines the FNV-1a hash of each of its tokens (so every token is hashed once
    per text, not once per shingle it belongs to): acc = token count; per token hash t,
    acc = (rotl(acc, 5) ^ t) * 0x9E3779B1 mod 2**32; then the XXH32 avalanche of acc.
    """

    def __init__(self, mode: int) -> None:
        self.mode = mode

    def __call__(self, shingle: bytes) -> int:
        text = shingle.decode("utf-8")
        parts = tokens(text, self.mode)
        acc = len(parts)
        for part in parts:
            acc = ((((acc << 5) | (acc >> 27)) & 0xFFFFFFFF) ^ fnv1a32(part.encode())) * 0x9E3779B1
            acc &= 0xFFFFFFFF
        acc ^= acc >> 15
        acc = (acc * 2246822519) & 0xFFFFFFFF
        acc ^= acc >> 13
        acc = (acc * 3266489917) & 0xFFFFFFFF
        return acc ^ (acc >> 16)
