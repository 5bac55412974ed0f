"""Shingle sets for the per-component decision: sorted sets, their similarity, and prefixes.

A row's sketch is its shingle hashes (uint32). `sorted_sets` sorts and deduplicates each row's;
`jaccard` is the exact Jaccard similarity of two such sets, `agreement` the share of equal values
of two MinHash signatures (when summaries keep signatures instead of shingles).

`prefix_tokens` is what bounds the search for a row's near duplicates (prefix filtering:
Chaudhuri, Ganti, Kaushik 2006; Bayardo, Ma, Srikant 2007). Order every shingle of a component
by how many of its rows hold it, rarest first (ties by hash). Two sets x, c with Jaccard >= t
share at least ceil(t max(|x|, |c|)) shingles, so they share a shingle among the first
|x| - ceil(t |x|) + 1 of x's and among the first |c| - ceil(t |c|) + 1 of c's: looking a row up by
its prefix shingles finds every row at or over the threshold, whatever order is used. Rarest
first makes the lookups cheap: shingles a site template gives thousands of pages sit at the end
of every page's order, out of the prefix, and a page's own shingles are held by its copies only.

Frequencies are counted per component (so a row's prefix never depends on which other
components share its partition, on the partition count, or on whether the component is read
whole or in chunks: `dataclean.dedup.stream`) in a fixed table of `COUNTER_BITS` counters
indexed by hash, the same size for every component: two shingles in one counter only change
the order, never the guarantee.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numba as nb
import numpy as np

from dataclean.jit import helper

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier, 2**64 / golden ratio
COUNTER_BITS = 20  # shingle frequencies: at most 1M one-byte counters (1 MB, a core's L2 cache)
_SLACK = 1e-9  # t * n computed in floating point: 0.7 * 10 is 7.000000000000001, not over 7


def sorted_sets(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's hashes, sorted and deduplicated: (values, offsets)."""
    longest = max(1, int(np.diff(offsets).max(initial=0)))
    bits = max(1, (longest - 1).bit_length())
    out, out_offsets = np.empty_like(values), np.zeros_like(offsets)
    counts, scratch = np.empty((1 << bits) + 1, dtype=np.int64), np.empty(longest, dtype=values.dtype)
    used = _sorted_set_kernel(values, offsets, out, out_offsets, counts, scratch)
    return out[:used], out_offsets


@nb.njit(cache=True, nogil=True)
def _sorted_set_kernel(values, offsets, out, out_offsets, counts, scratch):  # type: ignore[no-untyped-def]
    """`sorted_sets` into arrays it allocates (`dataclean.jit`); returns the values written.

    Hashes are uniform, so a bucket sort on the top bits (at least as many buckets as values) then
    insertion sort inside each tiny bucket runs in expected linear time: 5x faster than numba's
    np.sort per row, which dominated `fit`."""
    position = 0
    for row in range(len(offsets) - 1):
        start, end = offsets[row], offsets[row + 1]
        size = end - start
        row_bits = 1
        while (1 << row_bits) < size:
            row_bits += 1
        buckets = 1 << row_bits
        shift = 32 - row_bits
        counts[: buckets + 1] = 0
        for k in range(start, end):
            counts[(values[k] >> shift) + 1] += 1
        for b in range(buckets):
            counts[b + 1] += counts[b]
        for k in range(start, end):
            bucket = values[k] >> shift
            scratch[counts[bucket]] = values[k]
            counts[bucket] += 1
        # counts[b] is now the end of bucket b; insertion-sort each bucket in place.
        begin = 0
        for b in range(buckets):
            finish = counts[b]
            for i in range(begin + 1, finish):
                value = scratch[i]
                j = i - 1
                while j >= begin and scratch[j] > value:
                    scratch[j + 1] = scratch[j]
                    j -= 1
                scratch[j + 1] = value
            begin = finish
        for k in range(size):
            if k == 0 or scratch[k] != scratch[k - 1]:
                out[position] = scratch[k]
                position += 1
        out_offsets[row + 1] = position
    return position


def _jaccard_of(values: np.ndarray, offsets: np.ndarray, a: int, b: int) -> float:
    """The Jaccard similarity of rows a and b of sorted, deduplicated sets."""
    i, i_end = offsets[a], offsets[a + 1]
    j, j_end = offsets[b], offsets[b + 1]
    size = (i_end - i) + (j_end - j)
    if size == 0:
        return 0.0
    common = 0
    while i < i_end and j < j_end:
        if values[i] == values[j]:
            common += 1
            i += 1
            j += 1
        elif values[i] < values[j]:
            i += 1
        else:
            j += 1
    return common / (size - common)


# For Python callers (tests, benchmarks); the kernels compare with `jaccard_at_least`.
jaccard = nb.njit(cache=True, nogil=True)(_jaccard_of)


@helper
def jaccard_at_least(values: np.ndarray, offsets: np.ndarray, a: int, b: int, floor: float) -> float:
    """`jaccard` of rows a and b, or -1.0 as soon as it cannot reach `floor`: the common shingles
    found plus the fewer left on either side bound it (c / (|a| + |b| - c) grows with c, and so
    does its floating-point value), so a center that cannot win stops being merged early."""
    i, i_end = offsets[a], offsets[a + 1]
    j, j_end = offsets[b], offsets[b + 1]
    size = (i_end - i) + (j_end - j)
    if size == 0:
        return 0.0
    common = 0
    while i < i_end and j < j_end:
        if values[i] == values[j]:
            common += 1
            i += 1
            j += 1
            continue
        if values[i] < values[j]:
            i += 1
        else:
            j += 1
        most = common + min(i_end - i, j_end - j)
        if most / (size - most) < floor:
            return -1.0
    return common / (size - common)


def set_bitmaps(sets: np.ndarray, set_offsets: np.ndarray) -> np.ndarray:
    """Each row's bitmap (`may_reach`): two 64-bit words, a bit per 128th of the hash range its
    shingles fall in, (rows, 2) uint64."""
    bitmaps = np.zeros((len(set_offsets) - 1, 2), np.uint64)
    _bitmap_kernel(sets, set_offsets, bitmaps)
    return bitmaps


@nb.njit(cache=True, nogil=True)
def _bitmap_kernel(sets, set_offsets, bitmaps):  # type: ignore[no-untyped-def]
    """`set_bitmaps` into an array it allocates (`dataclean.jit`)."""
    for row in range(len(set_offsets) - 1):
        for k in range(set_offsets[row], set_offsets[row + 1]):
            bit = _bit(sets[k])
            bitmaps[row, bit >> 6] |= np.uint64(1) << np.uint64(bit & 63)


@helper
def _bit(value: np.uint32) -> int:
    return np.int64((np.uint64(value) * GOLDEN) >> np.uint64(57))


@helper
def may_reach(  # type: ignore[no-untyped-def]
    values: np.ndarray, offsets: np.ndarray, bitmaps: np.ndarray, a: int, b: int, floor: float
):
    """Whether `jaccard` of rows a and b can reach `floor`, by b's bitmap (`set_bitmaps`): a
    shingle of a whose bit b's bitmap lacks is not in b, so at most the others are common, and
    c / (|a| + |b| - c) grows with c (so does its floating-point value). False only when
    `jaccard_at_least(values, offsets, a, b, floor)` would be below `floor` (-1.0 or a value
    under it): one 16-byte read of b's and a pass over a's set, which a member's comparisons
    share, instead of merging the two sets from b's (on short documents whose candidates share
    a sentence, most comparisons end below the threshold)."""
    start, end = offsets[a], offsets[a + 1]
    other = offsets[b + 1] - offsets[b]
    size = (end - start) + other
    if size == 0:
        return True
    low, high = bitmaps[b, 0], bitmaps[b, 1]
    outside = 0
    for k in range(start, end):
        bit = _bit(values[k])
        word = high if bit >= 64 else low
        outside += ((word >> np.uint64(bit & 63)) & np.uint64(1)) == 0
    most = min(end - start - outside, other)
    return not most / (size - most) < floor


@helper
def agreement(values: np.ndarray, offsets: np.ndarray, a: int, b: int) -> float:
    """The share of equal values of rows a and b (MinHash signatures: the estimated Jaccard)."""
    length = offsets[a + 1] - offsets[a]
    if length == 0 or length != offsets[b + 1] - offsets[b]:
        return 0.0
    same = 0
    for k in range(length):
        same += values[offsets[a] + k] == values[offsets[b] + k]
    return same / length


def prefix_lengths(sizes: np.ndarray, threshold: float) -> np.ndarray:
    """How many of a set's rarest shingles any set at Jaccard >= threshold shares one of:
    |x| - ceil(t |x|) + 1, and 0 for an empty set (similar to nothing)."""
    needed = np.ceil(threshold * sizes - _SLACK).astype(np.int64)
    return np.clip(sizes - needed + 1, 0, sizes)


def prefix_tokens(
    sets: np.ndarray,
    set_offsets: np.ndarray,
    bounds: np.ndarray,
    threshold: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's prefix shingles (module docstring) that some other row of its component has in
    its prefix too, as uint64 tokens: (values, offsets). A prefix shingle no other prefix holds
    can never bring two rows together: dropping it leaves a unique page with no tokens at all.

    `sets` are sorted, deduplicated shingle hashes (`sorted_sets`); rows of component k are
    bounds[k]:bounds[k + 1].
    """
    sizes = np.diff(set_offsets)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(prefix_lengths(sizes, threshold), out=offsets[1:])
    prefixes = np.empty(int(offsets[-1]), dtype=np.uint64)
    counters = np.zeros(1 << COUNTER_BITS, dtype=np.uint8)
    counts = np.empty(max(1, int(sizes.max(initial=0))), dtype=np.uint8)
    histogram = np.empty(256, dtype=np.int64)
    _prefix_kernel(sets, set_offsets, bounds, COUNTER_BITS, offsets, prefixes, counters, counts, histogram)
    # Exact: (component, shingle) keys held by two prefixes or more, by one sort (a 64-bit sort
    # is about 40 ns a key here; an argsort ten times that), then a hash set of those few.
    component = np.repeat(np.arange(len(bounds) - 1, dtype=np.uint64), np.diff(offsets[bounds]))
    keys = (component << np.uint64(32)) | prefixes
    ordered = np.sort(keys)
    shared_keys = repeated(ordered)
    if len(shared_keys) == 0:
        return prefixes[:0], np.zeros_like(offsets)
    keep = members(shared_keys, keys)
    kept_offsets = np.concatenate([[0], np.cumsum(keep)])[offsets]
    return prefixes[keep], kept_offsets


def table_bits(size: int) -> int:
    """At least twice as many slots as keys (and 2): a linear probe stays short."""
    return max(1, (2 * size - 1).bit_length())


@helper
def slot(keys: np.ndarray, filled: np.ndarray, key: np.uint64, bits: int) -> int:
    """Where `key` is in an open-addressing table (linear probing), or the empty slot it would go to."""
    mask = (1 << bits) - 1
    i = np.int64((key * GOLDEN) >> np.uint64(64 - bits))
    while filled[i] and keys[i] != key:
        i = (i + 1) & mask
    return i


def repeated(ordered: np.ndarray) -> np.ndarray:
    """The values that occur more than once in a sorted array, each once (np.unique hashes in
    numpy 2.4, 10x slower here than this pass over an array already sorted)."""
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(twice) == 0:
        return twice
    first = np.ones(len(twice), dtype=bool)
    first[1:] = twice[1:] != twice[:-1]
    return twice[first]


def members(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per key, whether it is one of `values` (both uint64, values distinct)."""
    return positions(values, keys) >= 0


def positions(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per key, the index of its value in `values` (both uint64, values distinct), or -1: a hash
    table, one probe per key."""
    return find_positions(position_table(values), keys)


PositionTable = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def position_table(values: np.ndarray) -> PositionTable:
    """A hash table of `values` (uint64, distinct) for `find_positions`, built once for many
    lookups."""
    bits = table_bits(len(values))
    table = np.empty(1 << bits, np.uint64), np.zeros(1 << bits, np.bool_), np.empty(1 << bits, np.int64)
    _positions_kernel(np.ascontiguousarray(values, np.uint64), _NO_KEYS, *table, bits, np.empty(0, np.int64))
    return (*table, bits)


def find_positions(table: PositionTable, keys: np.ndarray) -> np.ndarray:
    """Per key (uint64), the index of its value in the table's values, or -1."""
    found = np.empty(len(keys), dtype=np.int64)
    _positions_kernel(_NO_KEYS, np.ascontiguousarray(keys, np.uint64), *table, found)
    return found


_NO_KEYS = np.zeros(0, np.uint64)


@nb.njit(cache=True, nogil=True)
def _positions_kernel(values, keys, table_keys, table_filled, table_index, bits, out):  # type: ignore[no-untyped-def]
    """`positions` into arrays it allocates (`dataclean.jit`)."""
    for index in range(len(values)):
        found = slot(table_keys, table_filled, values[index], bits)
        table_keys[found], table_filled[found], table_index[found] = values[index], True, index
    for i in range(len(keys)):
        found = slot(table_keys, table_filled, keys[i], bits)
        out[i] = table_index[found] if table_filled[found] else -1


@helper
def _counter(value: np.uint32, bits: int) -> int:
    return np.int64((np.uint64(value) * GOLDEN) >> np.uint64(64 - bits))


@helper
def heap_sort(values: np.ndarray, count: int) -> None:
    """Sort values[:count] in place, ascending (no allocation, O(n log n) worst case)."""
    for start in range(count // 2 - 1, -1, -1):
        _sift_down(values, start, count)
    for end in range(count - 1, 0, -1):
        values[0], values[end] = values[end], values[0]
        _sift_down(values, 0, end)


@helper
def _sift_down(values: np.ndarray, root: int, end: int) -> None:
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and values[child + 1] > values[child]:
            child += 1
        if values[root] >= values[child]:
            return
        values[root], values[child] = values[child], values[root]
        root = child


@helper
def _count(sets: np.ndarray, start: int, end: int, counters: np.ndarray, bits: int, add: bool) -> None:
    """Count sets[start:end] into the counters (saturating at 255), or zero their counters."""
    for k in range(start, end):
        place = _counter(sets[k], bits)
        if not add:
            counters[place] = 0
        elif counters[place] < 255:
            counters[place] += 1


@helper
def _select(  # type: ignore[no-untyped-def]
    sets, set_offsets, first, last, offsets, out, counters, bits, counts, histogram
) -> None:
    """Rows first:last's prefixes into out[offsets[row]:offsets[row + 1]], by the counters."""
    for row in range(first, last):
        start, size = set_offsets[row], set_offsets[row + 1] - set_offsets[row]
        keep = offsets[row + 1] - offsets[row]
        if keep == 0:
            continue
        histogram[:] = 0
        for i in range(size):
            counts[i] = counters[_counter(sets[start + i], bits)]
            histogram[counts[i]] += 1
        cut = 0  # the count where the prefix ends, and how many rarer shingles come first
        rarer = 0
        while rarer + histogram[cut] < keep:
            rarer += histogram[cut]
            cut += 1
        at_cut = keep - rarer
        position = offsets[row]
        for i in range(size):
            if counts[i] < cut or (counts[i] == cut and at_cut > 0):
                if counts[i] == cut:
                    at_cut -= 1
                out[position] = sets[start + i]
                position += 1


@nb.njit(cache=True, nogil=True)
def _prefix_kernel(sets, set_offsets, bounds, bits, offsets, out, counters, counts, histogram):  # type: ignore[no-untyped-def]
    """The prefixes of `prefix_tokens`, into arrays it allocates (`dataclean.jit`).

    Counters are one byte, saturating at 255 (beyond that, frequency no longer changes which
    shingles are rare), and zero between components: a component's are set, used, then zeroed.
    A row's prefix is selected, not sorted: with a histogram of its shingles' counts, the count
    c where the prefix ends; then every shingle rarer than c and, in hash order (a row's set is
    sorted), the first of those at exactly c."""
    for component in range(len(bounds) - 1):
        first, last = bounds[component], bounds[component + 1]
        start, end = set_offsets[first], set_offsets[last]
        _count(sets, start, end, counters, bits, True)
        _select(sets, set_offsets, first, last, offsets, out, counters, bits, counts, histogram)
        _count(sets, start, end, counters, bits, False)


@nb.njit(cache=True, nogil=True)
def count_kernel(sets: np.ndarray, set_offsets: np.ndarray, counters: np.ndarray, bits: int) -> None:
    """Add a chunk of one component's rows to its counters (`dataclean.dedup.stream`)."""
    _count(sets, set_offsets[0], set_offsets[-1], counters, bits, True)


@nb.njit(cache=True, nogil=True)
def select_kernel(sets, set_offsets, offsets, out, counters, bits, counts, histogram):  # type: ignore[no-untyped-def]
    """A chunk's prefixes by its component's complete counters (`dataclean.dedup.stream`)."""
    _select(sets, set_offsets, 0, len(set_offsets) - 1, offsets, out, counters, bits, counts, histogram)
