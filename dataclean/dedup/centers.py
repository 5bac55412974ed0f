"""The kept row ("center") a member of a component is a near duplicate of, if any: the one step
the whole-component decision (`dataclean.dedup.verify`) and the chunked one
(`dataclean.dedup.stream`) share, so the two cannot decide differently.

Centers are filed under tokens (prefix shingles with `verify`, else LSH band keys) in an
open-addressing table whose slot for a token holds where its block of entries starts in
`entry_center` and how many it has (`file_center`). A token's entries are contiguous: a block
of 1, 2, 4, ... entries (int32: a component's centers are numbered below 2**31), moved to a
block twice as large at the end of `entry_center` when full (fewer than 4 slots an entry, the
old blocks left unused). A linked list of entries, as before, cost a dependent cache miss per
entry: on a 1.2M-row component where a member visits about 160 entries, most of the decision's
time. A member looks up each of its tokens and collects the centers found there once each
(`seen[c, 0]` marks those seen for this member, `seen[c, 1]` counts the tokens it shares with
them: one cache line a center), skipping, with exact Jaccard, a center too short or too long
to reach the threshold (Jaccard <= smaller / larger). Past `max_checks` centers it keeps
those sharing the most tokens with it, ties to the earliest in keep order. Of those, the most
similar at or over the threshold wins, ties to the earliest (a comparison stops once that
center can no longer win: `sets.jaccard_at_least`). No step depends on the order in which
entries are visited.
"""

# numba helpers compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.dedup.sets import agreement, heap_sort, jaccard_at_least, slot
from dataclean.jit import helper

# A ranking key: shared-token count (complemented, so more sorts first) above, center below.
_CENTER_BITS = 40
_MOST_SHARED = (1 << 22) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier, as `sets.slot`'s


@helper
def best_center(  # type: ignore[no-untyped-def]
    tokens,
    token_start,
    token_end,
    token_table,
    entries,
    marks,
    mark,
    values,
    offsets,
    x,
    threshold,
    exact_jaccard,
    max_checks,
    token_bits,
):
    """(center, similarity, comparisons) for member `x` (its set at `offsets[x]` in `values`,
    its tokens `tokens[token_start:token_end]`); center -1 when none reaches `threshold`.
    `token_table`: (keys, filled, start, length); `entries`: (entry_center,); `marks`:
    (found, ranked, local) scratch arrays: `found` and `ranked` as long as the entries a member
    may visit, `local` the centers seen (`_seen`), `mark` this member's mark (distinct per member
    of a decision)."""
    token_keys, token_filled, token_start_at, token_length = token_table
    entry_center = entries[0]
    found, ranked, local = marks
    local_mask = len(local) - 1
    local_shift = np.uint64(64 - _bits_of(len(local)))
    size = offsets[x + 1] - offsets[x]
    count = 0
    for k in range(token_start, token_end):
        place = slot(token_keys, token_filled, tokens[k], token_bits)
        if not token_filled[place]:
            continue
        begin = token_start_at[place]
        for entry in range(begin, begin + token_length[place]):
            center = entry_center[entry]
            at = np.int64((np.uint64(center) * _GOLDEN) >> local_shift)
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
            similarity = jaccard_at_least(values, offsets, x, center, max(threshold, best_similarity))
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
def file_center(token_table, entries, place, center, max_postings, used):  # type: ignore[no-untyped-def]
    """File `center` under the token in slot `place` (filled) unless its block holds
    `max_postings`; returns (filed, entries used in `entry_center`). A full block (its length a
    power of two) moves to a new one twice as large at `used`: the caller leaves room for the
    largest block (the power of two at or over `max_postings`) per token it files, or for 4
    slots per entry of the table."""
    token_length, token_start_at = token_table[3], token_table[2]
    entry_center = entries[0]
    length = token_length[place]
    if length >= max_postings:
        return False, used
    if length & (length - 1) == 0:  # 0, or a full block of 1, 2, 4, ... entries
        begin = token_start_at[place]
        for k in range(length):
            entry_center[used + k] = entry_center[begin + k]
        token_start_at[place] = used
        used += max(1, 2 * length)
    entry_center[token_start_at[place] + length] = center
    token_length[place] = length + 1
    return True, used
