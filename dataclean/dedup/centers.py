"""The kept row ("center") a member of a component is a near duplicate of, if any: the one step
the whole-component decision (`dataclean.dedup.verify`) and the chunked one
(`dataclean.dedup.stream`) share, so the two cannot decide differently.

Centers are filed under tokens (prefix shingles with `verify`, else LSH band keys) in an
open-addressing table whose slots head linked lists of entries (`entry_center`, `entry_next`).
A member looks up each of its tokens and collects the centers found there once each (`stamp`
marks those seen for this member), skipping, with exact Jaccard, a center too short or too long
to reach the threshold (Jaccard <= smaller / larger). Past `max_checks` centers it keeps those
sharing the most tokens with it, ties to the earliest in keep order. Of those, the most similar
at or over the threshold wins, ties to the earliest.
"""

# numba helpers compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.dedup.sets import agreement, heap_sort, jaccard_helper, slot
from dataclean.jit import helper

# A ranking key: shared-token count (complemented, so more sorts first) above, center below.
_CENTER_BITS = 40
_MOST_SHARED = (1 << 22) - 1


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
    `token_table`: (keys, filled, head, length); `entries`: (entry_center, entry_next); `marks`:
    (stamp, shared, found, ranked) scratch arrays of the centers' size, `mark` this member's
    stamp."""
    token_keys, token_filled, token_head = token_table[0], token_table[1], token_table[2]
    entry_center, entry_next = entries
    stamp, shared, found, ranked = marks
    size = offsets[x + 1] - offsets[x]
    count = 0
    for k in range(token_start, token_end):
        place = slot(token_keys, token_filled, tokens[k], token_bits)
        entry = token_head[place] if token_filled[place] else -1
        while entry >= 0:
            center = entry_center[entry]
            entry = entry_next[entry]
            if stamp[center] != mark:
                stamp[center] = mark
                other = offsets[center + 1] - offsets[center]
                if exact_jaccard and min(size, other) < threshold * max(size, other) - 1e-9:
                    shared[center] = -1
                    continue
                shared[center] = 0
                found[count] = center
                count += 1
            if shared[center] >= 0:
                shared[center] += 1
    if count > max_checks:
        for j in range(count):
            most_shared = min(shared[found[j]], _MOST_SHARED)
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
            similarity = jaccard_helper(values, offsets, x, center)
        else:
            similarity = agreement(values, offsets, x, center)
        if similarity >= threshold and (
            similarity > best_similarity or (similarity == best_similarity and center < best)
        ):
            best, best_similarity = center, similarity
    return best, best_similarity, count
