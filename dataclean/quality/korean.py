"""Korean words close to the morphemes datatrove counts, compiled with numba.

FineWeb-2 counts Korean words with Kiwi (kiwipiepy's `sbg` model, through datatrove's
`KiwiTokenizer`), a morphological analyzer: an eojeol (a space-separated word) is cut into its
morphemes (`한국의` -> `한국` `의`, `산업혁명` -> `산업` `혁명`), and its stop words are those
morphemes (`의`, `는`, `을`, `에서`...). Counted as spaCy's English tokenizer counts them, whole
eojeols hold almost none of those stop words, and fewer words carry a letter, so FineWeb-2's
Korean table would drop most Korean prose (`gopher_enough_stop_words`).

The `korean` word style (`dataclean.quality.tokenizer.KOREAN`) comes close without a model:
after the tokenizer's rules, a token is cut where Hangul meets other characters (`2019년` ->
`2019` `년`); a Hangul run that ends in one of the Korean table's stop words (FineWeb-2's
`kor_Hang` config; the longest that leaves something before it) is cut before it, and what is
left, from 4 syllables up, into pieces of 2 syllables (Kiwi's Korean morphemes average under
2 syllables: compounds such as `산업혁명`). Measured against datatrove with Kiwi on real pages
(docs/quality.md); not a morphological analysis.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.jit import helper
from dataclean.quality.french import SLOTS as FRENCH_SLOTS
from dataclean.quality.hashing import Packer, _find, _fnv, fnv_hash, hash_set, packed_set, packed_value

CONFIG = "kor_Hang"  # the FineWeb-2 config whose stop words end Hangul runs
LONG_STEM = 4  # syllables from which a stem is cut into pieces of 2


# Where `pack_korean` puts the Korean tables: slots of a `dataclean.quality.hashing.Packer` after
# French's (`dataclean.quality.tokenizer.language_tables` packs both in one pair of arrays).
ENDINGS, LONGEST_ENDING = FRENCH_SLOTS, FRENCH_SLOTS + 1


def pack_korean(packer: Packer) -> None:
    """The endings as a `hash_set` and the longest ending (FineWeb-2's Korean stop words) into
    `packer`'s slots `ENDINGS` and `LONGEST_ENDING`."""
    from dataclean.quality.fineweb2 import configs  # here: fineweb2 imports the tokenizer

    endings = [word for word in configs()[CONFIG]["stopwords"] if word]
    packer.set(ENDINGS, hash_set([fnv_hash(word) for word in endings]))
    packer.value(LONGEST_ENDING, max(len(word) for word in endings))


@helper
def _hangul(c):  # type: ignore[no-untyped-def]
    """Hangul syllables, jamo and compatibility jamo."""
    return (0xAC00 <= c <= 0xD7A3) or (0x1100 <= c <= 0x11FF) or (0x3130 <= c <= 0x318F)


@helper
def _emit_run(cps, s, e, out, n, tables):  # type: ignore[no-untyped-def]
    """The words of the Hangul run `cps[s:e]`: its stem (in 2-syllable pieces from `LONG_STEM`
    syllables) and the ending it ends in, if any."""
    cut = e
    endings = packed_set(tables, np.int64(ENDINGS))
    for size in range(min(packed_value(tables, np.int64(LONGEST_ENDING)), e - s - 1), 0, -1):
        if _find(endings, _fnv(cps, e - size, e)) >= 0:
            cut = e - size
            break
    if cut - s >= LONG_STEM:
        k = s
        while k < cut:
            out[n, 0] = k
            out[n, 1] = min(k + 2, cut)
            n += 1
            k += 2
    else:
        out[n, 0] = s
        out[n, 1] = cut
        n += 1
    if cut < e:
        out[n, 0] = cut
        out[n, 1] = e
        n += 1
    return n


@helper
def korean_words(cps, out, first, n, stack, tables):  # type: ignore[no-untyped-def]
    """Cut the tokens `out[first:n]` (one chunk's) as the module docstring says, in place;
    returns the new row count. `stack`: scratch rows (as many as the chunk has characters);
    `tables`: the packed pair of `dataclean.quality.tokenizer.language_tables`."""
    count = n - first
    for k in range(count):
        stack[k, 0] = out[first + k, 0]
        stack[k, 1] = out[first + k, 1]
    w = first
    for k in range(count):
        s, e = stack[k, 0], stack[k, 1]
        start = s
        while start < e:
            hangul = _hangul(cps[start])
            end = start + 1
            while end < e and _hangul(cps[end]) == hangul:
                end += 1
            if hangul:
                w = _emit_run(cps, start, end, out, w, tables)
            else:
                out[w, 0] = start
                out[w, 1] = end
                w += 1
            start = end
    return w
