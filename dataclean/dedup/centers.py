"""The kept row ("center") a member of a component is a near duplicate of, if any: the one step
the whole-component decision (`dataclean.dedup.verify`) and the chunked one
(`dataclean.dedup.stream`) share, so the two cannot decide differently.

Centers are filed under tokens (prefix shingles with `verify`, else LSH band keys) in an
open-addressing token table (`token_table`): a slot is two 64-bit words, the token and where its
block of entries starts in `entry_center` with how many it has (`file_center`), so looking a
token up reads one cache line (four arrays, the key, a filled flag, the start and the length,
cost four misses a token once the table outgrew the caches). With exact Jaccard, a center whose
bitmap (`sets.may_reach`) shows it cannot win is not merged. A token's entries are contiguous: a
block of 1, 2, 4, ... entries (int32: a component's centers are numbered below 2**31), moved to
a block twice as large at the end of `entry_center` when full (fewer than 4 slots an entry, the
old blocks left unused). A linked list of entries, as before, cost a dependent cache miss per
entry. A member looks up each of its tokens and collects the centers found there once each,
counting the tokens it shares with each in a small table of its own (`seen_table`, in a core's
cache; before, a mark and a count per center of the component, 16 bytes a member held through
its decision: 86 MB at 5.4M members), skipping, with exact Jaccard, a center too short or too
long to reach the threshold (Jaccard <= smaller / larger). Past `max_checks` centers it keeps
those sharing the most tokens with it, ties to the earliest in keep order. Of those, the most
similar at or over the threshold wins, ties to the earliest (a comparison stops once that center
can no longer win: `sets.jaccard_at_least`). No step depends on the order in which entries are
visited.
"""

# numba helpers compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.dedup.sets import GOLDEN, agreement, heap_sort, jaccard_at_least, may_reach
from dataclean.jit import helper

# A ranking key: shared-token count (complemented, so more sorts first) above, center below.
_CENTER_BITS = 40
_MOST_SHARED = (1 << 22) - 1
# A token table slot's second word: the block's start above `_LENGTH_BITS` bits of its length;
# all ones when the slot is empty.
_LENGTH_BITS = 16
_LENGTH_MASK = np.uint64((1 << _LENGTH_BITS) - 1)
EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
MOST_POSTINGS = (1 << _LENGTH_BITS) - 1  # the most entries a token's block can count


def token_table(bits: int) -> np.ndarray:
    """An empty token table of 2**bits slots (module docstring)."""
    return np.full((1 << bits, 2), EMPTY, np.uint64)


@helper
def token_slot(table: np.ndarray, key: np.uint64, bits: int) -> int:
    """Where `key` is in a token table (linear probing), or the empty slot it would go to."""
    mask = (1 << bits) - 1
    i = np.int64((key * GOLDEN) >> np.uint64(64 - bits))
    while table[i, 1] != EMPTY and table[i, 0] != key:
        i = (i + 1) & mask
    return i


@helper
def claim_slot(table: np.ndarray, place: int, key: np.uint64) -> bool:
    """Put `key` in slot `place` (from `token_slot`) with no entries if the slot is empty;
    whether it was."""
    if table[place, 1] != EMPTY:
        return False
    table[place, 0], table[place, 1] = key, np.uint64(0)
    return True


@helper
def best_center(  # type: ignore[no-untyped-def]
    tokens,
    token_start,
    token_end,
    table,
    entries,
    marks,
    mark,
    values,
    offsets,
    bitmaps,
    x,
    threshold,
    exact_jaccard,
    max_checks,
    token_bits,
):
    """(center, similarity, comparisons) for member `x` (its set at `offsets[x]` in `values`,
    its tokens `tokens[token_start:token_end]`); center -1 when none reaches `threshold`.
    With exact Jaccard, `bitmaps` are the sets' (`sets.set_bitmaps`): a center they show cannot
    win is not merged (`sets.may_reach`), which changes no decision and no count.
    `table`: the token table (`token_table`); `entries`: (entry_center,); `marks`:
    (found, ranked, local) scratch arrays: `found` and `ranked` as long as the entries a member
    may visit, `local` the centers seen (`seen_table`), `mark` this member's mark (distinct per member
    of a decision)."""
    entry_center = entries[0]
    found, ranked, local = marks
    local_mask = len(local) - 1
    local_shift = np.uint64(64 - _bits_of(len(local)))
    size = offsets[x + 1] - offsets[x]
    count = 0
    for k in range(token_start, token_end):
        word = table[token_slot(table, tokens[k], token_bits), 1]
        if word == EMPTY:
            continue
        begin = np.int64(word >> np.uint64(_LENGTH_BITS))
        for entry in range(begin, begin + np.int64(word & _LENGTH_MASK)):
            center = entry_center[entry]
            at = np.int64((np.uint64(center) * GOLDEN) >> local_shift)
            while local[at, 0] == mark and local[at, 1] != center:
                at = (at + 1) & local_mask
            if local[at, 0] != mark:
                local[at, 0], local[at, 1] = mark, center
                other = offsets[center + 1] - offsets[center]
                if exact_jaccard and min(size, other) < threshold * max(size, other) - 1e-9:
                    local[at, 2] = -1
                    continue
                local[at, 2] = 1
                found[count], ranked[count] = center, at
                count += 1
            elif local[at, 2] >= 0:
                local[at, 2] += 1
    if count > max_checks:
        for j in range(count):
            most_shared = min(local[ranked[j], 2], _MOST_SHARED)
            ranked[j] = ((np.int64(_MOST_SHARED + 1) - most_shared) << _CENTER_BITS) | found[j]
        heap_sort(ranked, count)
        for j in range(max_checks):
            found[j] = ranked[j] & ((np.int64(1) << _CENTER_BITS) - 1)
        count = max_checks
    best = -1
    best_similarity = -1.0
    for j in range(count):
        center = found[j]
        if exact_jaccard:
            floor = max(threshold, best_similarity)
            similarity = -1.0
            if may_reach(values, offsets, bitmaps, x, center, floor):
                similarity = jaccard_at_least(values, offsets, x, center, floor)
        else:
            similarity = agreement(values, offsets, x, center)
        if similarity >= threshold and (
            similarity > best_similarity or (similarity == best_similarity and center < best)
        ):
            best, best_similarity = center, similarity
    return best, best_similarity, count


def seen_table(visits: int) -> np.ndarray:
    """`best_center`'s table of the centers a member has seen, for members visiting at most
    `visits` entries: a power of two of at least twice as many slots (stamp, center, count),
    stamped -1 (no member's mark)."""
    return np.full((1 << max(1, (2 * max(1, visits) - 1).bit_length()), 3), -1, np.int64)


@helper
def _bits_of(power: int) -> int:
    """log2 of a power of two."""
    bits = 0
    while (1 << bits) < power:
        bits += 1
    return bits


@helper
def file_center(table, entries, place, center, max_postings, used):  # type: ignore[no-untyped-def]
    """File `center` under the token in slot `place` (filled) unless its block holds
    `max_postings` (at most `MOST_POSTINGS`); returns (filed, entries used in `entry_center`). A
    full block (its length a power of two) moves to a new one twice as large at `used`: the
    caller leaves room for the largest block (the power of two at or over `max_postings`) per
    token it files, or for 4 slots per entry of the table."""
    entry_center = entries[0]
    word = table[place, 1]
    length = np.int64(word & _LENGTH_MASK)
    begin = np.int64(word >> np.uint64(_LENGTH_BITS))
    if length >= max_postings:
        return False, used
    if length & (length - 1) == 0:  # 0, or a full block of 1, 2, 4, ... entries
        for k in range(length):
            entry_center[used + k] = entry_center[begin + k]
        begin = used
        used += max(1, 2 * length)
    entry_center[begin + length] = center
    table[place, 1] = (np.uint64(begin) << np.uint64(_LENGTH_BITS)) | np.uint64(length + 1)
    return True, used
