"""Script-based language detection, enough to tell Chinese from English (and "other").

Counted on the UTF-8 bytes of the first `SAMPLE_CHARS` characters, vectorized over a whole Arrow
batch: Han characters (U+4E00-U+9FFF, lead bytes E4-E9), Latin letters (ASCII letters and
Latin-1 letters, lead byte C3) and other non-ASCII characters (other lead bytes). A text is `zh`
when Han characters are at least `ZH_MIN_FRACTION` of those, `en` when Latin letters are at least
half, else `other`; `""` when it has none. A document's script is settled early, so long texts
stay cheap.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SAMPLE_CHARS = 1000
ZH_MIN_FRACTION = 0.3


def _counts(offsets: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Number of true values of `mask` in each [offsets[i], offsets[i+1]) segment."""
    if len(offsets) < 2:
        return np.zeros(0, dtype=np.int64)
    padded = np.append(mask, False).view(np.uint8)  # every start, even an empty tail, is valid
    sums = np.add.reduceat(padded, offsets[:-1], dtype=np.int64)
    return np.where(offsets[1:] > offsets[:-1], sums, 0)


def detect_langs(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Language code per text of an Arrow string array (null -> `""`)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    sample = pc.utf8_slice_codeunits(texts.cast(pa.large_string()), 0, SAMPLE_CHARS)
    sample = sample.fill_null("")
    buffers = sample.buffers()
    start, stop = sample.offset, sample.offset + len(sample) + 1
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[start:stop]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] else np.zeros(0, np.uint8)
    lower = data | 0x20
    latin = ((lower >= ord("a")) & (lower <= ord("z"))) | (data == 0xC3)
    han = (data >= 0xE4) & (data <= 0xE9)
    other = (data >= 0xC4) & ~han
    n_latin = _counts(offsets, latin)
    n_han = _counts(offsets, han)
    n_all = n_latin + n_han + _counts(offsets, other)
    codes = np.where(
        n_all == 0,
        "",
        np.where(
            n_han >= ZH_MIN_FRACTION * n_all,
            "zh",
            np.where(n_latin * 2 >= n_all, "en", "other"),
        ),
    )
    return pa.array(codes.tolist() if len(codes) else [], type=pa.string())


def detect_lang(text: str) -> str:
    """`zh`, `en`, `other`, or `""` (no letters) by the script of the text's letters."""
    return str(detect_langs(pa.array([text], pa.string()))[0].as_py())
