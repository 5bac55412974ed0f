"""A cache of words' SentencePiece segmentations that never changes the pieces (for `compiled.py`).

SentencePiece searches a whole line, adding float32 piece scores to the score the line has
reached so far. No piece holds "▁" past its first character, so the search passes through every
word start and a line's search is its words' searches in turn, each starting from the running
score. A word's best segmentation therefore depends on that running score only through float32
rounding, which matters where two segmentations score (nearly) the same, as in a run like "0000".

So with each word we keep its margin: the smallest lead, over the word's positions, of the best
candidate over the next, computed in float64 from a zero start (exact for sums of a few float32
scores). A cached word is reused only where its margin exceeds `rounding(n, running score)`, twice
the most that float32 rounding can move a comparison there, so that SentencePiece's search would
pick the same pieces; elsewhere the word is searched again. A word whose margin is too small
already when first seen is stored with margin -1 (never reused).

Layout: each entry is one contiguous record, so that a word found in the cache costs one or two
cache lines, not one in each of seven arrays (the layout before this one). The record is in
`arena`, an int32 array that `floats` (float32) and `octets` (uint8) view as well:
- `HEADER` fields: the low 32 bits of the word's hash, its length in code points, its pieces
  (after merging unknowns), its path's length, its output's length in bytes, and its margin
  (float32, rounded down: a reuse it allows the float64 margin allows too);
- then the word's code points; each output piece's id, or, for a run of unknowns, -(1 + its
  offset in the word's output) (the ids `compiled.py` hands to the scorer); the float32 score of
  each piece on the path, to replay the running score; and the pieces' UTF-8 bytes, joined by
  spaces, from the next int32 on.
`slots` is an open-addressing table of the records' offsets, -1 where empty (at most half full),
and `state` counts the entries and the arena used. A full cache starts over.
"""

from __future__ import annotations

import numpy as np

from dataclean.jit import helper
from dataclean.lm.unigram import child

# Words longer than this (code points, with the "▁") are searched every time, never cached.
MAX_CACHED_WORD = 32
ENTRIES = 1 << 16
# int32s of arena per entry: English words take about 20 (a few hundred thousand words between
# two restarts of a full cache).
ARENA_PER_ENTRY = 32
HASH, KEY_LEN, COUNT, PATH_LEN, OUT_LEN, MARGIN = range(6)
HEADER = 6
_ENTRIES_USED, _ARENA_USED = range(2)
# A word's hash: FNV-1a over its code points, which `compiled._normalize` computes as it cuts words.
FNV_OFFSET = -3750763034362895579
FNV_PRIME = 1099511628211
# A float64 margin times this, then rounded to float32, is below the margin (see the docstring).
_ROUND_DOWN = 1.0 - 2.0**-20


def new_cache(entries: int = ENTRIES) -> tuple[np.ndarray, ...]:
    """Empty cache arrays: (slots, arena, its float32 and uint8 views, state)."""
    arena = np.zeros(entries * ARENA_PER_ENTRY, np.int32)
    return (
        np.full(2 * entries, -1, np.int32),
        arena,
        arena.view(np.float32),
        arena.view(np.uint8),
        np.zeros(2, np.int64),
    )


@helper
def rounding(n, offset, magnitude):  # type: ignore[no-untyped-def]
    """Twice the float32 rounding a search over n positions from `offset` can cause.

    Each candidate sums at most n scores onto `offset`; every partial sum is at most
    M = |offset| + (n + 1) * `magnitude` (the largest |score|) in size, and each addition rounds
    by at most M * 2**-24, so two candidates' difference moves by at most n * M * 2**-23.
    """
    return (n + 1) * (abs(np.float64(offset)) + (n + 1) * magnitude) * 2.0**-22


@helper
def find(slots, arena, h, codes, start, n):  # type: ignore[no-untyped-def]
    """(offset of the record of the word codes[start:start + n] or -1, the slot where it is or
    would go); `h` its hash (FNV-1a, see `FNV_OFFSET`)."""
    mask = len(slots) - 1
    slot = h & mask
    tag = np.int32(h & 0xFFFFFFFF)
    while True:
        entry = np.int64(slots[slot])
        if entry == -1:
            return entry, slot
        if arena[entry + HASH] == tag and arena[entry + KEY_LEN] == n:
            same = True
            for i in range(n):
                if arena[entry + HEADER + i] != codes[start + i]:
                    same = False
                    break
            if same:
                return entry, slot
        slot = (slot + 1) & mask


@helper
def insert(  # type: ignore[no-untyped-def]
    cache, slot, h, codes, start, n, out, out_start, out_stop, path_scores, length, count, margin,
    piece_ids, ids_start,
):  # fmt: skip
    """Store a word (codes[start:start + n]) whose pieces were written at out[out_start:out_stop]
    and whose `count` ids at piece_ids[ids_start:] (unknowns' offsets counted in `out`)."""
    slots, arena, floats, octets, state = cache
    size = out_stop - out_start
    record = HEADER + n + count + length + (size + 3) // 4
    if 2 * (state[_ENTRIES_USED] + 1) > len(slots) or state[_ARENA_USED] + record > len(arena):
        for i in range(len(slots)):  # full: start over (loops, not slice fills: less to compile)
            slots[i] = -1
        state[_ENTRIES_USED] = state[_ARENA_USED] = 0
        if record > len(arena):
            return  # larger than the whole cache
        _, slot = find(slots, arena, h, codes, start, n)
    entry = state[_ARENA_USED]
    arena[entry + HASH] = np.int32(h & 0xFFFFFFFF)
    arena[entry + KEY_LEN], arena[entry + COUNT], arena[entry + PATH_LEN] = n, count, length
    arena[entry + OUT_LEN] = size
    floats[entry + MARGIN] = np.float32(margin * _ROUND_DOWN)
    at = entry + HEADER
    for i in range(n):
        arena[at + i] = codes[start + i]
    at += n
    for i in range(count):
        given = piece_ids[ids_start + i]
        arena[at + i] = given if given >= 0 else given + out_start  # offset within the word
    at += count
    for i in range(length):
        floats[at + i] = path_scores[i]
    at = 4 * (at + length)
    for i in range(size):
        octets[at + i] = out[out_start + i]
    state[_ENTRIES_USED] += 1
    state[_ARENA_USED] += record
    slots[slot] = entry


@helper
def _offer(best, second, end, value):  # type: ignore[no-untyped-def]
    if value > best[end]:
        second[end] = best[end]
        best[end] = value
    elif value > second[end]:
        second[end] = value


@helper
def margin(ids, start, n, best, second, trie, scores, unknown):  # type: ignore[no-untyped-def]
    """The smallest lead of the best candidate over the next at any position of the word
    ids[start:start + n], searched in float64 from 0 (0 for a tie)."""
    root_children, edge_keys, edge_nodes, node_pieces = trie
    width = len(root_children)
    for i in range(n + 1):
        best[i] = second[i] = -np.inf
    best[0] = 0.0
    for begin in range(n):
        node = np.int64(0)  # not the literal 0: one compile of `child`, not two
        single = False
        for end in range(begin, n):
            node = child(node, ids[start + end], width, root_children, edge_keys, edge_nodes)
            if node < 0:
                break
            piece = node_pieces[node]
            if piece >= 0:
                _offer(best, second, end + 1, np.float64(scores[piece]) + best[begin])
                single = single or end == begin
        if not single:
            _offer(best, second, begin + 1, np.float64(unknown) + best[begin])
    lead = np.inf
    for i in range(1, n + 1):
        lead = min(lead, best[i] - second[i])
    return lead
