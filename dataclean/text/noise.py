"""Text that is not language: random bytes read as text, binary files, base64 and hex blobs.

Random bytes decoded as Latin-1 or Windows-1252 (a binary file, a wrong encoding guess, an
attachment) leave a row of letters, digits and symbols that no language model recognises, yet
lid.176 still names a language for it (`es` at 0.05 for the bundled sample's `web-garbage`), and
most of it is not a control character, so the garbage share stays low. Two checks, each its own
drop reason:

- `random_bytes`: the row's character classes follow each other the way they do in random bytes,
  not in text. A character class bigram model (`_CLASSES`: space, ASCII lower/upper, digit, ASCII
  punctuation/symbol, other Latin lower/upper, other cased lower/upper, caseless letters and marks
  (Han, kana, Arabic, Indic, Thai...; combining marks belong to the letter before them), Latin-1
  symbols, general punctuation, other punctuation and symbols (emoji), other) of real text in
  many languages and scripts, against the same model of random bytes read as Latin-1
  and Windows-1252 and then cleaned: the row's mean log-likelihood ratio per character (nats)
  above `threshold` drops it. Classes, not characters: a script the model has never seen still
  reads as letters followed by letters, which is what text does and random bytes do not. The
  table is `dataclean/data/clean/random_bytes.json`, built by `scripts/build_random_bytes_model.py`
  (its header says from what); rows under `min_chars` characters (combining marks not counted)
  are never judged.
- `encoded_data`: base64 runs (24+ characters of its alphabet with a digit and both cases) and
  hex runs (24+ hex digits with a digit and a letter) cover more than `encoded_fraction` of the
  row's characters.

Both read each text's first `sample_chars` characters (2,000, as the language stage does). One
compiled pass over the batch's UTF-8 bytes (`noise_scores`); `noise_reason` is the same for one
string, for tests and callers without Arrow.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from importlib import resources

import numba as nb
import numpy as np
import pyarrow as pa

from dataclean.jit import helper
from dataclean.text.utf8 import decode_code_point, utf8_buffers

RANDOM_BYTES = "random_bytes"
ENCODED_DATA = "encoded_data"
_CLASSES = (
    "space", "ascii_lower", "ascii_upper", "digit", "ascii_punctuation", "ascii_symbol",
    "latin_lower", "latin_upper", "cased_lower", "cased_upper", "caseless_letter",
    "latin1_symbol", "general_punctuation", "other_symbol", "other",
)  # fmt: skip
SPACE, OTHER = 0, len(_CLASSES) - 1
# Combining marks belong to the character before them (an accent, a vowel sign): skipped, so that
# "ɔ̀" reads as one Latin letter and Devanagari's vowel signs do not break a word.
MARK = 255
_LATIN = ((0xC0, 0x2B0), (0x1D00, 0x1DC0), (0x1E00, 0x1F00), (0x2C60, 0x2C80), (0xA720, 0xA800))
_TABLE_LIMIT = 0x30000  # above: CJK extensions (plane 3) are letters, the rest "other"
_MIN_RUN = 24
# Characters judged from the start of each text, as the language stage reads 2,000: random bytes
# and a blob that is most of a row show in its beginning, and a long document costs no more.
SAMPLE_CHARS = 2000


def char_class(char: str) -> int:
    """The class (index into `_CLASSES`) of one character; `MARK` for a combining mark."""
    code = ord(char)
    if char.isspace():
        return SPACE
    category = unicodedata.category(char)
    if code < 0x80:
        if "a" <= char <= "z":
            return 1
        if "A" <= char <= "Z":
            return 2
        if "0" <= char <= "9":
            return 3
        return 4 if category[0] == "P" else 5 if category[0] == "S" else OTHER
    if category[0] == "M":
        return MARK
    if category[0] == "L":
        cased = category in ("Ll", "Lu", "Lt")
        upper = category in ("Lu", "Lt")
        if cased and any(start <= code < stop for start, stop in _LATIN):
            return 7 if upper else 6
        return (9 if upper else 8) if cased else 10
    if category[0] == "N":
        return 3
    if category[0] in "PS":
        if code < 0xC0 or code in (0xD7, 0xF7):
            return 11
        # Where Windows-1252's punctuation, currency and letterlike symbols are (U+2013, U+20AC,
        # U+2122): random bytes read as Windows-1252 make these, never emoji.
        return 12 if 0x2000 <= code < 0x2150 else 13
    return OTHER


@lru_cache(maxsize=1)
def class_table() -> np.ndarray:
    """`char_class` of every code point (uint8 [0x110000])."""
    table = np.full(0x110000, OTHER, np.uint8)
    table[:_TABLE_LIMIT] = [char_class(chr(code)) for code in range(_TABLE_LIMIT)]
    table[0x30000:0x323B0] = 10  # CJK Unified Ideographs Extensions G and H
    return table


@lru_cache(maxsize=1)
def log_ratios() -> np.ndarray:
    """float64 [class, class]: log P(class | previous class) under random bytes minus under text."""
    path = resources.files("dataclean") / "data" / "clean" / "random_bytes.json"
    model = json.loads(path.read_text(encoding="utf-8"))
    if model["classes"] != list(_CLASSES):
        raise ValueError(f"{path}: classes {model['classes']} are not {list(_CLASSES)}")
    return np.asarray(model["log_ratio"], np.float64)


# Per ASCII byte, for the base64/hex run rule: in base64's alphabet, lower, upper, digit, hex digit.
_B64, _LOWER, _UPPER, _DIGIT, _HEX = 1, 2, 4, 8, 16


@lru_cache(maxsize=1)
def _ascii_flags() -> np.ndarray:
    flags = np.zeros(128, np.uint8)
    for code in range(128):
        char = chr(code)
        if char.isalnum() or char in "+/=":
            flags[code] |= _B64
        flags[code] |= _LOWER if char.islower() else _UPPER if char.isupper() else 0
        flags[code] |= _DIGIT if char.isdigit() else 0
        flags[code] |= _HEX if char in "0123456789abcdefABCDEF" else 0
    return flags


@nb.njit(cache=True, nogil=True)
def _noise_kernel(data, offsets, classes, ratios, flags, limit, scores, encoded, lengths):  # type: ignore[no-untyped-def]
    """Per text, over its first `limit` characters: mean log ratio per character, characters in
    base64/hex runs, and characters (`noise_scores`); `ratios` flattened [previous * classes + class]."""
    width = int(np.sqrt(len(ratios)))
    for t in range(len(offsets) - 1):
        i, stop = offsets[t], offsets[t + 1]
        previous = 0
        total = 0.0
        chars = run = seen = hexes = covered = 0
        while i < stop and chars < limit:
            byte = data[i]
            if byte < 128:
                cls = classes[byte]
                bits = flags[byte]
                size = 1
            else:
                code, size = decode_code_point(data, i)
                # Han and Hangul, most non-ASCII text: no look-up in the big table.
                if 0x4E00 <= code < 0xA000 or 0xAC00 <= code < 0xD7A4 or 0x3400 <= code < 0x4DC0:
                    cls = 10
                else:
                    cls = classes[code]
                bits = 0
                if cls == 255:  # MARK: part of the character before it
                    i += size
                    continue
            total += ratios[previous * width + cls]
            previous = cls
            chars += 1
            if bits & 1:  # in base64's alphabet: the run goes on
                run += 1
                seen |= bits
                hexes += (bits >> 4) & 1
            elif run:
                covered += _encoded_run(run, seen, hexes)
                run = seen = hexes = 0
            i += size
        if run:
            covered += _encoded_run(run, seen, hexes)
        scores[t] = total / chars if chars else 0.0
        encoded[t] = covered
        lengths[t] = chars


@helper
def _encoded_run(run, seen, hexes):  # type: ignore[no-untyped-def]
    """`run` if a run of base64-alphabet characters is a blob: 24+ long with a digit, and both
    cases (base64) or only hex digits (hex); else 0."""
    if run < _MIN_RUN or not seen & 8:
        return 0
    if (seen & 6) == 6 or (hexes == run and seen & 6):
        return run
    return 0


def noise_scores(
    texts: pa.Array | pa.ChunkedArray, sample_chars: int = SAMPLE_CHARS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per text, over its first `sample_chars` characters (combining marks not counted): (mean
    log-likelihood ratio random bytes : text per character, characters in base64/hex runs,
    characters)."""
    data, offsets = utf8_buffers(texts)
    n = len(offsets) - 1
    scores, encoded, lengths = np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64)
    ratios = np.ascontiguousarray(log_ratios()).ravel()
    _noise_kernel(
        data, offsets, class_table(), ratios, _ascii_flags(), sample_chars, scores, encoded, lengths
    )
    return scores, encoded, lengths


def noise_reasons(
    texts: pa.Array | pa.ChunkedArray,
    threshold: float,
    encoded_fraction: float,
    min_chars: int,
    sample_chars: int = SAMPLE_CHARS,
) -> list[str | None]:
    """Per text, `random_bytes`, `encoded_data` or None (module docstring); `threshold` <= 0 and
    `encoded_fraction` >= 1 turn a check off."""
    scores, encoded, lengths = noise_scores(texts, sample_chars)
    judged = lengths >= min_chars
    blob = (
        judged & (encoded > encoded_fraction * lengths) if encoded_fraction < 1.0 else np.zeros_like(judged)
    )
    noise = judged & ~blob & (scores > threshold) if threshold > 0 else np.zeros_like(judged)
    reasons = np.full(len(lengths), None, object)
    reasons[blob] = ENCODED_DATA
    reasons[noise] = RANDOM_BYTES
    return list(reasons)


def noise_reason(
    text: str, threshold: float = 1.0, encoded_fraction: float = 0.5, min_chars: int = 40
) -> str | None:
    """`noise_reasons` of one text."""
    return noise_reasons(pa.array([text], pa.string()), threshold, encoded_fraction, min_chars)[0]
