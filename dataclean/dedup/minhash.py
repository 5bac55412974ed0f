"""Batched MinHash signatures equal to datasketch's, and LSH band keys, over whole batches.

For each shingle s of a text, datasketch's `MinHash(num_perm, seed, hashfunc=ShingleHash(mode))`
(scheme "affine32", its default since 2.0) computes h = fmix32(hashfunc(s)) and keeps, per
permutation j, min over shingles of (a_j * h + b_j) mod 2**32, with (a_j, b_j) drawn from
`numpy.random.RandomState(seed)`. `signatures` computes exactly that for every row of a batch in
one compiled loop (tokens hashed in place in the normalized buffer, four permutations per pass
over the shingle hashes). The permutation parameters are drawn the way datasketch 2.0 draws them;
a test compares them with datasketch's own, and every signature with a datasketch MinHash's.
(Drawing them here keeps datasketch, and the scipy it imports, out of the worker processes: 0.2-0.4
s of start-up each.) A row without shingles keeps the all-0xFFFFFFFF signature of an empty
datasketch MinHash.

`band_keys` turns a signature into one 64-bit key per LSH band: XXH64 of the band's values
(little-endian uint32 bytes) seeded with the band number, so equal keys mean equal bands (up to a
2**-64 chance) and keys of different bands never meet.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

from dataclean.dedup.hashing import xxh64
from dataclean.dedup.shingles import WORDS, ShingleHash, shingle_hashes_helper, token_hashes_helper
from dataclean.jit import helper

if TYPE_CHECKING:
    from datasketch import LeanMinHash

_EMPTY = np.uint32(0xFFFFFFFF)


@lru_cache(maxsize=8)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's affine32 permutation parameters (a, b) for `num_perm` and `seed`: an odd
    multiplier a and an offset b per permutation, drawn in that order from RandomState(seed)."""
    generator = np.random.RandomState(seed)
    a = generator.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = generator.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


@nb.njit(inline="always")
def _fmix32(h: np.uint32) -> np.uint32:
    h = np.uint32(h ^ (h >> np.uint32(16)))
    h = np.uint32(h * np.uint32(2246822507))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(h * np.uint32(3266489909))
    return np.uint32(h ^ (h >> np.uint32(16)))


@helper
def _min_permuted(mixed: np.ndarray, count: int, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    # Four permutations per pass over the shingles: LLVM vectorizes the inner loop over shingles
    # with four running minima (about 3x faster than one permutation per pass).
    num_perm = len(a)
    j = 0
    while j + 4 <= num_perm:
        a0, a1, a2, a3 = a[j], a[j + 1], a[j + 2], a[j + 3]
        b0, b1, b2, b3 = b[j], b[j + 1], b[j + 2], b[j + 3]
        low0 = low1 = low2 = low3 = _EMPTY
        for k in range(count):
            h = mixed[k]
            low0 = min(low0, np.uint32(a0 * h + b0))
            low1 = min(low1, np.uint32(a1 * h + b1))
            low2 = min(low2, np.uint32(a2 * h + b2))
            low3 = min(low3, np.uint32(a3 * h + b3))
        out[j], out[j + 1], out[j + 2], out[j + 3] = low0, low1, low2, low3
        j += 4
    while j < num_perm:
        low = _EMPTY
        for k in range(count):
            low = min(low, np.uint32(a[j] * mixed[k] + b[j]))
        out[j] = low
        j += 1


@nb.njit(cache=True, nogil=True)
def _signature_kernel(
    data: np.ndarray,
    offsets: np.ndarray,
    modes: np.ndarray,
    ngram_size: int,
    a: np.ndarray,
    b: np.ndarray,
    keep_hashes: bool,
    signatures: np.ndarray,
    tokens: np.ndarray,
    hashed: np.ndarray,
    mixed: np.ndarray,
    hash_offsets: np.ndarray,
    kept: np.ndarray,
) -> None:
    """Every row's signature, and if `keep_hashes` its shingle hashes (`signatures`, which
    allocates the arrays: `dataclean.jit`)."""
    rows = len(offsets) - 1
    position = 0
    for row in range(rows):
        count = token_hashes_helper(data, offsets[row], offsets[row + 1], modes[row], tokens)
        count = shingle_hashes_helper(tokens, count, ngram_size, hashed)
        for k in range(count):
            mixed[k] = _fmix32(hashed[k])
        if keep_hashes:
            for k in range(count):
                kept[position + k] = hashed[k]
            position += count
            hash_offsets[row + 1] = position
        _min_permuted(mixed, count, a, b, signatures[row])


def signatures(
    data: np.ndarray,
    offsets: np.ndarray,
    modes: np.ndarray,
    ngram_size: int,
    num_perm: int,
    seed: int,
    keep_hashes: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MinHash signatures (rows x num_perm uint32) of normalized texts `data[offsets[i]:...]`.

    With `keep_hashes`, also returns every row's shingle hashes (offsets, values; repeats kept,
    text order): what exact-Jaccard verification needs later.
    """
    a, b = permutations(num_perm, seed)
    modes = np.ascontiguousarray(modes, dtype=np.uint8)
    rows = len(offsets) - 1
    lengths = np.diff(offsets)
    longest = int(lengths.max(initial=0)) + 1
    signatures = np.empty((rows, num_perm), dtype=np.uint32)
    hash_offsets = np.zeros(rows + 1, dtype=np.int64)
    # At most one shingle per byte (characters) or per two (words: a word and a space each); only
    # the pages written are ever touched.
    most = int(np.where(modes == WORDS, lengths // 2 + 1, lengths).sum()) if keep_hashes else 0
    kept = np.empty(most, dtype=np.uint32)
    tokens, hashed, mixed = (np.empty(longest, dtype=np.uint32) for _ in range(3))
    _signature_kernel(
        data,
        offsets,
        modes,
        ngram_size,
        a,
        b,
        keep_hashes,
        signatures,
        tokens,
        hashed,
        mixed,
        hash_offsets,
        kept,
    )
    return signatures, hash_offsets, kept[: hash_offsets[-1]].copy()


@nb.njit(cache=True, nogil=True)
def _band_key_kernel(raw: np.ndarray, bands: int, rows: int, keys: np.ndarray) -> None:
    """keys[i, band]: XXH64 of the band's bytes in raw[i] (each signature's uint32 values as bytes)."""
    for i in range(raw.shape[0]):
        for band in range(bands):
            keys[i, band] = xxh64(raw[i], band * rows * 4, (band + 1) * rows * 4, band)


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One uint64 key per band and row (rows x bands) from the first bands*rows permutations."""
    raw = np.ascontiguousarray(signatures, dtype="<u4").view(np.uint8)
    keys = np.empty((raw.shape[0], bands), dtype=np.uint64)
    _band_key_kernel(raw, bands, rows, keys)
    return keys


def as_datasketch(signature: np.ndarray, seed: int) -> LeanMinHash:
    """A datasketch LeanMinHash holding one of our signatures (to use datasketch's own tools)."""
    from datasketch import LeanMinHash, MinHash

    minhash = MinHash(
        num_perm=len(signature),
        seed=seed,
        hashfunc=ShingleHash(WORDS),
        hashvalues=signature,
        scheme="affine32",
    )
    return LeanMinHash(minhash)
