"""XXH64 of byte ranges of an Arrow data buffer, equal to `xxhash.xxh64_intdigest`.

Exact-text keys and ids (`xxh64_ranges`, `xxh64_strings`) are hashed by the `xxhash` package's C
function on slices of the buffer, never a Python `bytes` object per text. LSH band keys are hashed
inside the signature code's compiled loops, by `xxh64`, a numba kernel that returns exactly what
`xxhash.xxh64_intdigest` returns (a test checks it), so any of these hashes can be recomputed
outside dataclean.

XXH64's helpers are `dataclean.jit.helper`s, not numba's `inline="always"`: LLVM inlines them all
the same (the hashing runs as fast), and numba's own inlining cost 0.2 s more to compile on a first
run.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import itertools

import numba as nb
import numpy as np
import xxhash

from dataclean.jit import helper

_P64_1 = np.uint64(11400714785074694791)
_P64_2 = np.uint64(14029467366897019727)
_P64_3 = np.uint64(1609587929392839161)
_P64_4 = np.uint64(9650029242287828579)
_P64_5 = np.uint64(2870177450012600261)

_M32 = np.uint64(0xFFFFFFFF)


@helper
def _rotl64(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@helper
def _read32(buf: np.ndarray, i: int) -> np.uint32:
    # Unsigned indices: no negative-index wraparound code, so LLVM merges the four byte loads.
    j = nb.uint64(i)
    return np.uint32(
        np.uint32(buf[j])
        | (np.uint32(buf[j + nb.uint64(1)]) << np.uint32(8))
        | (np.uint32(buf[j + nb.uint64(2)]) << np.uint32(16))
        | (np.uint32(buf[j + nb.uint64(3)]) << np.uint32(24))
    )


@helper
def _read64(buf: np.ndarray, i: int) -> np.uint64:
    return np.uint64(_read32(buf, i)) | (np.uint64(_read32(buf, i + 4)) << np.uint64(32))


@helper
def _round64(acc: np.uint64, lane: np.uint64) -> np.uint64:
    acc = acc + lane * _P64_2
    acc = _rotl64(acc, 31)
    return acc * _P64_1


@helper
def _merge64(acc: np.uint64, val: np.uint64) -> np.uint64:
    acc = acc ^ _round64(np.uint64(0), val)
    return acc * _P64_1 + _P64_4


@nb.njit(cache=True, nogil=True)
def xxh64(buf: np.ndarray, start: int, end: int, seed: int) -> np.uint64:
    """XXH64 of `buf[start:end]` (a uint8 array), equal to `xxhash.xxh64_intdigest`."""
    length = end - start
    i = start
    s = np.uint64(seed)
    if length >= 32:
        v1 = s + _P64_1 + _P64_2
        v2 = s + _P64_2
        v3 = s
        v4 = s - _P64_1
        limit = end - 32
        while i <= limit:
            v1 = _round64(v1, _read64(buf, i))
            v2 = _round64(v2, _read64(buf, i + 8))
            v3 = _round64(v3, _read64(buf, i + 16))
            v4 = _round64(v4, _read64(buf, i + 24))
            i += 32
        h = _rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)
        h = _merge64(h, v1)
        h = _merge64(h, v2)
        h = _merge64(h, v3)
        h = _merge64(h, v4)
    else:
        h = s + _P64_5
    h = h + np.uint64(length)
    while i + 8 <= end:
        h = h ^ _round64(np.uint64(0), _read64(buf, i))
        h = _rotl64(h, 27) * _P64_1 + _P64_4
        i += 8
    if i + 4 <= end:
        h = h ^ (np.uint64(_read32(buf, i)) * _P64_1)
        h = _rotl64(h, 23) * _P64_2 + _P64_3
        i += 4
    while i < end:
        h = h ^ (np.uint64(buf[i]) * _P64_5)
        h = _rotl64(h, 11) * _P64_1
        i += 1
    h = h ^ (h >> np.uint64(33))
    h = h * _P64_2
    h = h ^ (h >> np.uint64(29))
    h = h * _P64_3
    return h ^ (h >> np.uint64(32))


def xxh64_ranges(buf: np.ndarray, offsets: np.ndarray, seed: int) -> np.ndarray:
    """XXH64 of each range `buf[offsets[i]:offsets[i + 1]]`: the `xxhash` package's C function on
    memoryview slices of the buffer (no copy per range, nothing to compile)."""
    view = np.ascontiguousarray(buf, dtype=np.uint8).data
    digest = xxhash.xxh64_intdigest
    bounds = np.asarray(offsets, dtype=np.int64).tolist()
    return np.fromiter(
        (digest(view[start:end], seed) for start, end in itertools.pairwise(bounds)),
        dtype=np.uint64,
        count=len(bounds) - 1,
    )


def xxh64_strings(array: object, seed: int = 0) -> np.ndarray:
    """XXH64 of every UTF-8 value of a pyarrow string array (nulls hash like the empty string)."""
    data, offsets = string_buffers(array)
    return xxh64_ranges(data, offsets, seed)


def string_buffers(array: object) -> tuple[np.ndarray, np.ndarray]:
    """The (uint8 data, int64 offsets) of a pyarrow string/large_string array, without copying text.

    `data[offsets[i]:offsets[i + 1]]` is value i (nulls are empty); offsets index the whole data
    buffer, so a sliced array needs no copy.
    """
    import pyarrow as pa

    arr = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    if not isinstance(arr, pa.Array):
        raise TypeError(f"expected a pyarrow string array, got {type(array).__name__}")
    if pa.types.is_string(arr.type):
        offset_type = np.int32
    elif pa.types.is_large_string(arr.type):
        offset_type = np.int64
    else:
        raise TypeError(f"expected a string array, got {arr.type}")
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[arr.offset : arr.offset + len(arr) + 1]
    data_buffer = buffers[2]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, dtype=np.uint8)
    )
    return data, offsets.astype(np.int64)
